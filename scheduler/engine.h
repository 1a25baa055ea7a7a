// The Engine is what every driver calls: the daemon, the simulator, the demo
// and the tests. Build it from a cluster, a policy and a clock; feed it
// events; RunCycle() returns the cycle's Decisions. It reads no wall clock
// and no global.
#ifndef RINGMASTER_SCHEDULER_ENGINE_H_
#define RINGMASTER_SCHEDULER_ENGINE_H_

#include <limits>
#include <map>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <string>
#include <string_view>
#include <tuple>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/actions/action.h"
#include "scheduler/clock.h"
#include "scheduler/decisions.h"
#include "scheduler/plugin.h"
#include "scheduler/session.h"
#include "scheduler/policy.h"
#include "scheduler/state.h"

namespace ringmaster::scheduler {

struct EngineOptions {
  // Binds count as done at once (demo, simulator, tests). A daemon sets false
  // and calls ConfirmBind when the bind really happened.
  bool auto_confirm_binds = true;
  // Check every invariant after each cycle (slow; tests and --check).
#ifdef NDEBUG
  bool check_invariants = false;
#else
  bool check_invariants = true;  // debug builds (and the sanitizer tests) check every cycle
#endif
  // The survivors of a gang that a failure (a lost node, a failed task, a
  // failed bind) took below its minimum are still running: with a positive
  // value they become Releasing with a deadline this far ahead (an Eviction
  // tells the driver to stop them), their GPUs count as free only once the
  // driver reports them gone (TaskReleased) or the deadline passes, and the
  // gang restarts whole after that. 0: released at once (a driver whose
  // tasks are not real processes: the simulator, `schedule`, most tests).
  int64_t restart_grace_ms = 0;
  // A job cancelled while some of its tasks run (Bound, Running): with a
  // positive value those become Releasing with a deadline this far ahead
  // (a kCancel Eviction carrying it tells the driver to stop them), the job
  // is Cancelling, their GPUs count as free only once the driver reports
  // them gone (TaskReleased) or the deadline passes, and then the job is
  // Aborted. 0: everything is released at once and the job is Aborted at
  // once (the simulator, `schedule`, most tests).
  int64_t cancel_grace_ms = 0;
  // The ended-job records the state holds at least (State::set_ended_kept:
  // the oldest go once twice as many are held). 0: every one (a replay,
  // which ends). A daemon sets it (serve: its --ended-jobs-kept, at least
  // 10,000), so that its memory does not grow with every job ever run.
  size_t ended_jobs_kept = 0;
  // The shortcuts that make a cycle cost what changed, with the same
  // decisions: the planner skips a gang that cannot fit by free GPU count
  // (State::TasksFitByCount), and NextWakeup names the first time-based
  // change after a cycle that changed nothing. false: neither (every gang
  // tried, NextWakeup now whenever the policy reads the clock), for tests
  // that compare the two.
  bool fast_paths = true;
  // Enqueue's groups of alike pending jobs (Session::admission_grouped,
  // scheduler/actions/enqueue.cc) where the policy allows them; false: the
  // per-job admission memo only (tests of that memo, and the property test
  // that compares the two).
  bool admission_groups = true;
};

class Engine {
 public:
  // Fails when the policy names an unknown action or plugin, a plugin rejects
  // its arguments, or the queues are inconsistent.
  static absl::StatusOr<std::unique_ptr<Engine>> Create(topology::Cluster cluster,
                                                        const Policy& policy,
                                                        const PluginRegistry& registry,
                                                        const Clock& clock,
                                                        EngineOptions options = {});

  // --- Events -----------------------------------------------------------------
  // Validates and accepts a job (Pending). Errors name the field.
  absl::StatusOr<JobId> SubmitJob(JobSpec spec);
  // Cancels the job. Tasks not started yet are released at once. Without
  // EngineOptions::cancel_grace_ms, or when no task has started, everything
  // is released and the job ends Aborted now. Otherwise its started tasks
  // are Releasing until the grace deadline (those already Releasing keep
  // theirs), the job is Cancelling (no action touches it), and it ends
  // Aborted when the last of them is released (TaskReleased, the deadline,
  // its node lost). Cancelling a Cancelling job changes nothing (OK).
  absl::Status CancelJob(JobId id);
  // The job's program ended: every task released; Completed or Failed.
  absl::Status FinishJob(JobId id, bool succeeded);
  // The driver bound (or failed to bind) a task the engine placed: Binding ->
  // Bound, or, on failure, the whole gang is released and waits again.
  absl::Status ConfirmBind(JobId id, uint32_t task, bool ok);
  // The task's process started on its node: Bound -> Running.
  absl::Status TaskStarted(JobId id, uint32_t task);
  // An evicted (Releasing) task's process is gone: its resources are free
  // and the task waits again (a shrunk member may come back by growth; an
  // evicted gang restarts whole). Tasks still Releasing at their deadline
  // are released by the next cycle without this call.
  absl::Status TaskReleased(JobId id, uint32_t task);
  // A Bound or Running task's process failed (a local executor saw it exit
  // non-zero): the task waits again; a gang still at its minimum runs on
  // smaller (a kFailure membership change with the next cycle), one below
  // it stops whole and waits again (restart), as for a lost node: its
  // survivors are evicted (Releasing for EngineOptions::restart_grace_ms).
  absl::Status TaskFailed(JobId id, uint32_t task, std::string_view why);
  // The earliest release deadline still pending (a virtual-clock driver runs
  // a cycle then); -1 when none.
  Timestamp NextDeadline() const;
  // When the next cycle could decide something, assuming no event comes
  // before (no submission, finish, release, node or policy change). Now
  // after an event or a cycle that changed the state (a bind, an eviction,
  // a reservation, an admission: the next cycle starts from another state).
  // After a cycle that changed nothing: for a policy that reads no clock
  // (ReadsClock false), the earliest release deadline, else kNever (only an
  // event can change a decision); for one that reads it, the earliest time
  // at which one of its time-based conditions turns (Action /
  // Plugin::NextChange: growIdle and cooldown ends, a LAS threshold or
  // starvation promotion, a victim's cooldown) or the deadline, and now
  // without the fast paths. A cycle before then would decide nothing, so a
  // driver may skip its wake-ups until then (docs/ARCHITECTURE.md, "What
  // the engine retries").
  static constexpr Timestamp kNever = std::numeric_limits<Timestamp>::max();
  Timestamp NextWakeup() const;
  // Whether an action or plugin of the policy reads the clock (UsesTime).
  bool ReadsClock() const;
  // When the job may start, from what the engine knows: now if it runs; for
  // a gang held for releasing victims, their deadline; for a waiting gang,
  // the time at which enough running tasks with a walltime will have ended
  // on the nodes it may use (GPU model, node selector) for its minimum to fit
  // by GPU count (Slurm's `squeue --start`). -1 when unknown: a holder
  // without walltime, it can never fit, or it waits for something other than
  // GPUs.
  Timestamp ExpectedStart(JobId id) const;
  absl::StatusOr<NodeId> AddNode(topology::NodeSpec spec);
  // What others hold on a node (State::SetForeignUsage): pods that
  // kube-scheduler placed without ringmaster. Returns the whole GPUs that
  // could not be counted because ringmaster's tasks hold them; NotFound for
  // a node the engine does not have.
  absl::StatusOr<int64_t> SetForeignUsage(std::string_view node, const Resources& req, int64_t gpus);
  // Replaces a job's speed model (null: none), e.g. with one learned from
  // its workers' step times; the speedup plugin reads it from the next
  // cycle on. NotFound for an unknown or ended job.
  absl::Status SetJobSpeed(JobId id, std::shared_ptr<const SpeedModel> model);
  // Removes a node (drained by the admin) or marks it failed. Tasks on it
  // fail; a gang left below its minimum is released whole and waits again;
  // an elastic gang still at or above its minimum keeps running smaller.
  absl::Status RemoveNode(std::string_view name);
  absl::Status FailNode(std::string_view name);

  // Runs one cycle: snapshot, session, actions, close.
  Decisions RunCycle();

  // A driver's own predicate, checked in every cycle after the policy's
  // (the Kubernetes extender's: only the nodes kube-scheduler offered for a
  // pod are candidates for its task). Empty: none. It is called during
  // RunCycle, on RunCycle's thread.
  void SetDriverPredicate(PredicateFn fn) { driver_predicate_ = std::move(fn); }

  // --- Daemon support (server/daemon/daemon.h) ----------------------------------------
  // A task that held a node when the daemon's journal last recorded it.
  struct RestoredTask {
    uint32_t index = 0;  // position in the job's tasks (grown members past the submitted size)
    int role = 0;
    std::string node;
    std::vector<int16_t> gpus;
  };
  // Re-adopts a job recovered from the journal after a restart: accepted at
  // `created`, with the tasks in `placed` Running where they were. When at
  // least the gang minimum is placed the job is Running at membership
  // `generation`; otherwise (or when a node is gone, a GPU index is out of
  // range, or a task no longer fits) nothing is placed and the job waits
  // again, Pending. Errors are SubmitJob's.
  absl::StatusOr<JobId> RestoreJob(JobSpec spec, Timestamp created, std::span<const RestoredTask> placed,
                                   int64_t generation);
  // Gives a job restored by RestoreJob what it accumulated before the
  // restart (`h`, recorded by a daemon from Job::History; its yielded_to
  // are ids of this engine), so that the policy reads the job as it would
  // have without the restart. `seen`: the last moment the recorder is known
  // to have run (>= the record's attained_at). Time across the restart:
  //  1. Re-adopted Running, and running at the record: all as recorded, and
  //     the service grows from the record's attained_at on the GPUs it holds
  //     now: its tasks kept running, and holding their GPUs, while no
  //     daemon ran, so the downtime counts as time run.
  //  2. Re-adopted Running, not running at the record (it started after the
  //     last record): its start and resize stay RestoreJob's (now); the
  //     service and last stop as recorded.
  //  3. Waiting (not re-adopted), running at the record: its service up to
  //     `seen` on the GPUs recorded, and it stopped at `seen` (unless a
  //     later stop is recorded); its tasks are not known to have run after.
  //  4. Waiting, not running at the record: all as recorded.
  // Call before the first cycle. InvalidArgument naming the field when a
  // value is out of range (a service or GPU milli below 0, a stamp below
  // -1, a job recorded running that never started, a service that
  // overflows); FailedPrecondition for a job not active.
  // Either way nothing changes and the job keeps what RestoreJob gave it.
  absl::Status RestoreJobHistory(JobId id, const JobHistory& h, Timestamp seen);
  // Hot reload: the policy's actions, plugin tiers, nodesToScore and queues
  // replace the current ones from the next cycle on. All or nothing: when a
  // plugin or action rejects its arguments, the queues do not build, or an
  // active job's queue would vanish (or stop being a leaf), the status says
  // why and the old policy stays. Jobs keep their queue by name, and so does
  // the queues' decayed past use: the old plugins' DecayedUsages, valued
  // now, go to every new plugin (RestoreDecayedUsages; proportion keeps
  // them when it has a half-life too).
  absl::Status SetPolicy(const Policy& policy, const PluginRegistry& registry);
  // Each queue's decayed past use valued now, as the first plugin that keeps
  // any gives it (proportion with usageHalfLife); empty when none does.
  std::vector<DecayedUsage> DecayedUsages() const;
  // Past use valued earlier (the daemon's journal, at start) to every
  // plugin (Plugin::RestoreDecayedUsages): the starting point of the queues
  // of those names from the next cycle on.
  void RestoreDecayedUsages(std::span<const DecayedUsage> usages);
  // The level of queue q's weight as the first plugin whose deserved shares
  // read past use gives it (Plugin::UsageWeightLevel: proportion's
  // usageWeight); nullopt when none does.
  std::optional<int> UsageWeightLevel(QueueId q) const;
  // Jobs that ended before this process started (the daemon's journal, at
  // start, in their end order) onto State::ended_jobs, where the learners
  // read them from the next cycle on as if they had ended here
  // (State::RestoreEndedJobs). An event: the next cycle runs.
  void RestoreEndedJobs(std::span<const EndedJob> ended);
  // Each queue's deserved share (by queue index) as the last cycle's
  // fair-share plugin computed it, the whole cluster where none did; empty
  // before the first cycle and right after SetPolicy changed the queues.
  const std::vector<Resources>& deserved() const { return deserved_; }

  const State& state() const { return *state_; }
  JobId FindJob(std::string_view name) const;
  // The job's members (tasks that hold their node) in the ring order its
  // MembershipChange decisions list them in (rank 0 first); empty when none.
  std::vector<Member> RingOrder(JobId id) const;
  int64_t cycles() const { return cycle_; }
  // What the last cycle did (for tests and benchmarks): whether it ran at
  // all (a quiet cycle is skipped whole), the gangs allocate and backfill
  // tried, and those whose remembered verdict stood instead of a try.
  struct CycleWork {
    bool ran = false;
    int tried = 0;
    int recalled = 0;
  };
  const CycleWork& last_cycle_work() const { return work_; }
  // Invariant check of the whole state (see state.h).
  absl::Status CheckInvariants() const { return state_->CheckInvariants(); }
  // The first configured plugin with this name (nullptr if none), for
  // inspection by tools and tests.
  const Plugin* plugin(std::string_view name) const {
    for (const auto& p : plugins_) {
      if (p->name() == name) return p.get();
    }
    return nullptr;
  }

 private:
  Engine(const Clock& clock, EngineOptions options) : clock_(clock), options_(options) {}
  // What a policy configures besides queues, built (and validated) before
  // anything is replaced.
  struct Configured {
    std::vector<std::unique_ptr<Plugin>> plugins;
    std::vector<std::vector<Plugin*>> tiers;
    std::vector<std::unique_ptr<Action>> actions;
  };
  static absl::StatusOr<Configured> Configure(const Policy& policy, const PluginRegistry& registry);
  absl::StatusOr<JobId> Admit(JobSpec spec, Timestamp created);
  absl::Status LoseNode(std::string_view name, std::string_view why);
  // The jobs in `hit` lost tasks (`what`: "node failed n3"): each runs on
  // smaller or is released whole.
  void AfterTasksLost(std::vector<JobId> hit, const std::string& what);
  // A gang below its minimum stops whole: every started task (Bound,
  // Running) gets an Eviction with `reason` and is Releasing until
  // restart_grace_ms (released at once without one); tasks not started yet
  // are released at once; those already Releasing keep their deadline.
  void StopBrokenGang(Job& job, const std::string& reason);
  // The job, if it exists and has not ended.
  absl::StatusOr<Job*> ActiveJob(JobId id);
  void AfterClose(Decisions& d);
  // Whether the next cycle can be skipped whole: see RunCycle.
  bool Quiet() const;
  // The invariant check after a cycle (EngineOptions::check_invariants).
  void CheckAfterCycle() const;
  // Releases tasks whose release deadline has passed; true when any was.
  bool ExpireReleases();
  // A Releasing task is gone: it waits again (Pending), or, in a
  // Cancelling job, it ended (Failed) and the job is Aborted when none is
  // left Releasing.
  void ReleaseStopped(Job& job, uint32_t task);
  // Binds the gangs held for releasing victims once what all their held
  // members need together is free (GPUs, cpu, memory) and their queue
  // allows them; gives the promise up when it cannot be (a node lost, the
  // queue full) and nobody is leaving.
  void PromoteHeld(Session& session);
  // Drops a held gang's promises (its victims' node was lost).
  void Unhold(Job& job);
  void RecordEvictionOf(const Job& job, uint32_t task, std::string reason);
  MembershipChange Membership(const Job& job, MembershipChange::Kind kind, std::string reason = {},
                              Timestamp deadline = -1) const;

  const Clock& clock_;
  EngineOptions options_;
  std::unique_ptr<State> state_;
  std::vector<std::unique_ptr<Plugin>> plugins_;
  std::vector<std::vector<Plugin*>> tiers_;
  int nodes_to_score_ = kDefaultNodesToScore;
  std::vector<std::unique_ptr<Action>> actions_;
  PredicateFn driver_predicate_;
  int64_t cycle_ = 0;
  // An event since the last cycle (NextWakeup), and whether the last cycle
  // changed the state.
  bool touched_ = true;
  bool last_cycle_changed_ = true;
  // The last cycle ran and changed nothing but admissions, leaving no job
  // to admit: the next, with no event between, would decide the same.
  bool last_cycle_quiet_ = false;
  // For a policy that reads the clock: the last quiet cycle's NextWakeup,
  // the first time one of its time-based conditions turns; until then the
  // next cycle, with no event between, would decide the same.
  Timestamp quiet_until_ = 0;
  // What remembered placement verdicts depend on besides the state
  // (session.h, VerdictContext).
  VerdictContext verdict_context_;
  // The last keyed job order (session.h), reused across cycles.
  JobOrderCache job_order_cache_;
  Session::Buffers session_buffers_;  // lent to each cycle's session
  CycleWork work_;
  std::vector<Resources> deserved_;
  // Decisions made between cycles (evictions after a node loss, membership
  // changes), handed out with the next cycle's.
  Decisions carry_;
  std::map<std::string, JobId, std::less<>> by_name_;
  // Jobs that may be held for releasing victims (Job::nominated), so a cycle
  // looks at them without walking every active job. Entries whose job is no
  // longer held are dropped when seen.
  std::set<JobId> held_;
  // Releasing tasks by deadline: (deadline, job, task).
  std::set<std::tuple<Timestamp, JobId, uint32_t>> releasing_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_ENGINE_H_
