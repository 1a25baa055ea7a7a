// The job model: a Job is a gang of Tasks grouped by role, scheduled whole.
//
// A job asks for `replicas` tasks per role; its GangSize says how many of
// them must run at once or none may (the gang minimum) and, for an elastic
// job, how far it may grow. Phases:
//   Pending -> Inqueue -> Running -> Completed | Failed | Aborted
// and a Running job that falls below its minimum goes back to Pending.
#ifndef RINGMASTER_SCHEDULER_JOB_H_
#define RINGMASTER_SCHEDULER_JOB_H_

#include <array>
#include <map>
#include <memory>
#include <set>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "scheduler/clock.h"
#include "scheduler/speed_model.h"
#include "topology/resources.h"
#include "topology/strong_id.h"

namespace ringmaster::scheduler {

using topology::NodeId;
using topology::Quantity;
using topology::Resources;

struct JobIdTag {};
using JobId = topology::StrongId<JobIdTag>;
struct QueueIdTag {};
using QueueId = topology::StrongId<QueueIdTag>;

// kCancelling: cancelled while some of its tasks ran; they are Releasing
// (stopping within the engine's cancel grace period) and the job ends
// Aborted once the last is gone. Last, so the journal's phase numbers of
// the others stay.
enum class JobPhase { kPending, kInqueue, kRunning, kCompleted, kFailed, kAborted, kCancelling };
// Every phase, in the order users read them (the one list: CLI checks, API filters).
inline constexpr JobPhase kAllPhases[] = {JobPhase::kPending,   JobPhase::kInqueue, JobPhase::kRunning,
                                          JobPhase::kCancelling, JobPhase::kCompleted, JobPhase::kFailed,
                                          JobPhase::kAborted};
enum class TaskState {
  kPending,
  kAllocated,
  kPipelined,
  kBinding,
  kBound,
  kRunning,
  kReleasing,
  kSucceeded,
  kFailed,
};
inline constexpr int kNumTaskStates = 9;

std::string_view PhaseName(JobPhase p);
std::string_view TaskStateName(TaskState s);
// True for states that hold resources on a node now.
bool HoldsNode(TaskState s);
// True for states that count toward a gang being ready.
bool CountsReady(TaskState s);

// GPUs of one task: `count` devices, each used `milli` out of 1000. A task
// that shares a GPU has count 1 and milli < 1000; a multi-GPU task uses whole
// devices.
struct GpuRequest {
  int count = 0;
  Quantity milli = topology::kMilliPerGpu;
  Quantity total_milli() const { return count * milli; }
  bool whole() const { return milli == topology::kMilliPerGpu; }
};

enum class TolerationOp { kEqual, kExists };
struct Toleration {
  std::string key;  // empty with kExists tolerates every taint
  TolerationOp op = TolerationOp::kEqual;
  std::string value;
  std::string effect;  // empty matches every effect
};

struct RoleSpec {
  std::string name = "worker";
  int replicas = 1;
  Resources request;  // cpu, memory, scalars; GPUs are in `gpu`
  GpuRequest gpu;
};

enum class TopologyMode { kNone, kHard, kSoft };

// The most tasks one job may have, and an elastic job grow to: far above any
// real gang, and low enough that a typo (or a hostile request) cannot make
// the engine allocate billions of tasks.
inline constexpr int kMaxTasksPerJob = 100'000;

// How many tasks a job runs, beside the count it asks for (its desired
// count: a JobSpec's roles' replicas, total_replicas(), which stay the one
// source of it, a trace job's too): `min` at once or none (the gang
// minimum), `max` at most. A job with a max is elastic: it starts with its
// desired count and grows and shrinks inside [min, max] (the elastic
// action); one without is rigid. 0 leaves either to the desired count, so {}
// is a rigid gang of every task.
//
// Elastic means "a max is given", not "max > min": an elastic range of one
// count ({4, 4}) is elastic (allocate leaves its missing members to the
// elastic action) as it always was.
struct GangSize {
  int min = 0;  // 0: the desired count
  int max = 0;  // 0: the desired count, and the job is rigid

  bool elastic() const { return max > 0; }
  // The gang minimum and the most tasks for a job that asks for `desired`.
  int Min(int desired) const { return min > 0 ? min : desired; }
  int Max(int desired) const { return elastic() ? max : desired; }

  // What errors call the bounds: a rigid gang's minimum and an elastic
  // range's bounds (a JobSpec's `min_member` and `elastic` range; a trace's
  // `min_tasks` and `max_tasks` columns).
  struct Fields {
    std::string_view min = "min_member";
    std::string_view range_min = "elastic";
    std::string_view range_max = "elastic";
  };
  // Checks the size of a job that asks for `desired` tasks: a rigid minimum
  // in [0, desired]; an elastic range non-empty, from 1, at most
  // kMaxTasksPerJob and holding `desired`. The message is "field: what".
  absl::Status Validate(int desired, const Fields& fields) const;
  absl::Status Validate(int desired) const { return Validate(desired, Fields{}); }

  // The size as the API and the jobs file spell it (admin.proto's
  // min_member, elastic_min, elastic_max; the CLI's --min-member and
  // --elastic): the elastic range, when given (either bound non-zero), sets
  // the minimum and min_member may only repeat it; else min_member is the
  // minimum (0: every task). The error ("min_member: ..." or "elastic: ...")
  // names the field.
  static absl::StatusOr<GangSize> FromMinMember(int min_member, int elastic_min, int elastic_max);
  // A trace row's bounds (min_tasks, max_tasks) around its `desired` tasks:
  // both the desired count is a rigid gang of every task; anything else is
  // the elastic range [min, max], which Validate then checks.
  static GangSize FromBounds(int min, int max, int desired);
  // "MIN:MAX" (the CLI's --elastic) as an elastic range; the error quotes the
  // text. The range is not checked here (Validate does).
  static absl::StatusOr<GangSize> ParseRange(std::string_view text);

  bool operator==(const GangSize&) const = default;
};

struct JobSpec {
  std::string name;
  std::string queue = "default";
  int32_t priority = 0;
  std::vector<RoleSpec> roles;
  GangSize size;  // {}: every replica, rigid
  TopologyMode topology_mode = TopologyMode::kNone;
  int highest_tier = 0;  // with kHard: the gang stays inside one domain at tier <= this
  // GPU models the job may run on (any of them; every GPU of a chosen node
  // must be one of them). Empty: any model.
  std::vector<std::string> gpu_models;
  bool AllowsModel(std::string_view m) const {
    if (gpu_models.empty()) return true;
    for (const std::string& a : gpu_models) {
      if (a == m) return true;
    }
    return false;
  }
  std::map<std::string, std::string> node_selector;
  std::vector<Toleration> tolerations;
  int64_t walltime_ms = 0;  // 0: unknown
  // How often the job checkpoints (0: unknown). Preemption prefers victims
  // that lose the least work since their last checkpoint.
  int64_t checkpoint_interval_ms = 0;
  // The program each task runs (argv; `serve --local-executor` starts it
  // under `ringmaster shim run`). The engine never reads it. Empty: none.
  std::vector<std::string> command;
  // How fast the job runs at each size (scheduler/speed_model.h): the
  // simulator's application models; null: unknown (sized as before).
  std::shared_ptr<const SpeedModel> speed;

  // Checks the spec on its own (counts, ranges, GPU shapes). The message names
  // the job and the field.
  absl::Status Validate() const;
  // The sum of the roles' replicas (saturating at INT_MAX; Validate rejects
  // more than kMaxTasksPerJob).
  int total_replicas() const;
};

// What a job accumulated over its life that the policy reads, as it stood
// at one moment (Job::History): Tiresias' attained service (las, gittins),
// the start, stop and resize stamps (las' levels and levelCooldown, the
// preemption and elastic cooldowns, gittins, victims' work at risk) and
// the jobs it yielded to (preemption rule 4). A daemon journals it for its
// active jobs and gives it back after a restart (Engine::RestoreJobHistory;
// server/daemon/job_history.h).
struct JobHistory {
  // Attained service (GPU milli x ms) settled up to `attained_at`; from
  // then on it grows by the GPU milli the job holds (`held_gpu_milli` when
  // it was taken) each millisecond.
  int64_t attained_milli_ms = 0;
  Timestamp attained_at = 0;
  int64_t held_gpu_milli = 0;
  bool running = false;  // the job was Running
  Timestamp started = -1;
  Timestamp last_stopped = -1;
  Timestamp last_resize = -1;
  std::vector<JobId> yielded_to;  // ascending
  bool operator==(const JobHistory&) const = default;
};

struct Task {
  uint32_t index = 0;  // position in Job::tasks
  int role = 0;        // index into JobSpec::roles
  TaskState state = TaskState::kPending;
  NodeId node;                  // valid while the task holds (or is pipelined to) a node
  std::vector<int16_t> gpus;    // device indices on `node`
  std::string name;             // "<job>-<role>-<i>"
  // While Releasing: when the task must be gone (the grace period's end).
  Timestamp release_deadline = -1;
};

class Job {
 public:
  Job(JobId id, JobSpec spec, QueueId queue, Timestamp created);

  JobId id() const { return id_; }
  const JobSpec& spec() const { return spec_; }
  const std::string& name() const { return spec_.name; }
  QueueId queue() const { return queue_; }
  // Only State::ReplaceQueues moves a job (same queue name, new tree).
  void set_queue(QueueId q) { queue_ = q; }
  Timestamp created() const { return created_; }
  int32_t priority() const { return priority_; }
  JobPhase phase() const { return phase_; }
  // Only State::SetJobSpeed replaces the speed model (a daemon's model
  // learned from the workers' reports).
  void set_speed(std::shared_ptr<const SpeedModel> m) { spec_.speed = std::move(m); }
  // GPUs of one member: the last role's (the members an elastic job grows
  // and shrinks by); 0 for a job without GPUs.
  int GpusPerMember() const { return spec_.roles.empty() ? 0 : static_cast<int>(spec_.roles.back().gpu.count); }

  // The gang minimum (tasks that must run together): spec().size.Min of the
  // replicas it was made with.
  int min_member() const { return min_member_; }
  bool elastic() const { return spec_.size.elastic(); }

  const std::vector<Task>& tasks() const { return tasks_; }
  const Task& task(uint32_t i) const { return tasks_[i]; }
  // Resource request of task i (gpu_milli filled in) and its GPU shape.
  const Resources& request(uint32_t i) const { return role_requests_[tasks_[i].role]; }
  const GpuRequest& gpu(uint32_t i) const { return spec_.roles[tasks_[i].role].gpu; }

  int Count(TaskState s) const { return counts_[static_cast<int>(s)]; }
  // Allocated + Binding + Bound + Running (+ Succeeded): tasks that count toward the gang.
  int ReadyCount() const;
  // The gang rule, in one place: the job holds at least its minimum of ready
  // tasks (the gang plugin's JobReady, the engine, the actions and the
  // replay all ask this).
  bool GangReady() const { return ReadyCount() >= min_member(); }
  // Ready tasks the gang still lacks for its minimum (<= 0 once ready).
  int GangShortfall() const { return min_member() - ReadyCount(); }
  // Ready tasks above the gang minimum: the members it may lose (a shrink)
  // and stay a gang (> 0 only for a job above its minimum).
  int GangSpare() const { return -GangShortfall(); }
  int PipelinedCount() const { return Count(TaskState::kPipelined); }
  // Resources held on nodes by this job's tasks.
  const Resources& allocated() const { return allocated_; }
  // Request of the gang minimum: the first min_member tasks.
  const Resources& min_request() const { return min_request_; }
  // What its pending tasks ask, summed in task order; computed again only
  // after task_changes() moved (each cycle's session sums every waiting
  // job's: a backlog's jobs mostly did not change).
  const Resources& PendingRequest() const;

  const std::string& pending_reason() const { return pending_reason_; }
  void set_pending_reason(std::string r) {
    pending_reason_ = std::move(r);
    pending_from_ = 0;
  }
  // The pending reason as a copy of a kept verdict's (PlaceMemo::reason of
  // generation `gen`): while the memo keeps that generation, the two texts
  // are equal without comparing them (Session::KeepPendingReason, Close).
  void set_pending_reason_from(const std::string& r, uint64_t gen) {
    pending_reason_ = r;
    pending_from_ = gen;
  }
  uint64_t pending_from() const { return pending_from_; }
  // The pending reason is (already) the text of generation `gen`.
  void mark_pending_from(uint64_t gen) { pending_from_ = gen; }
  // A new PlaceMemo::reason_gen (process-wide, never 0).
  static uint64_t NextReasonGen();
  Timestamp started() const { return started_; }
  void set_started(Timestamp t) { started_ = t; }
  int64_t generation() const { return generation_; }
  void set_generation(int64_t g) { generation_ = g; }
  // When the job last started, grew or shrank (the preemption cooldown
  // counts from here); -1 before it first runs.
  Timestamp last_resize() const { return last_resize_; }
  void set_last_resize(Timestamp t) { last_resize_ = t; }
  // Work lost if the job were stopped now: the time since its last
  // checkpoint where the interval is known, else everything since it started.
  Timestamp WorkAtRisk(Timestamp now) const;
  // Jobs this job was shrunk or evicted for. It never takes from them
  // (docs/PREEMPTION.md, rule 4).
  const std::set<JobId>& yielded_to() const { return yielded_to_; }
  void AddYieldedTo(JobId j) { yielded_to_.insert(j); }
  bool YieldedTo(JobId j) const { return yielded_to_.count(j) > 0; }
  // True while the job's Pipelined tasks are held across cycles: it
  // preempted, and waits for its victims to finish releasing.
  bool nominated() const { return nominated_; }
  void set_nominated(bool n) { nominated_ = n; }
  // Largest task count the job may grow to (elastic max, else its replicas).
  int max_member() const;
  // Attained service up to `now`: GPU milli x milliseconds held by the job's
  // tasks while they hold a node (Tiresias' two-dimensional attained service,
  // GPUs x time run). It is kept across evictions (a restarted job keeps what
  // it attained) and costs O(1): State settles it whenever the held GPUs
  // change, on the engine's clock.
  int64_t AttainedMilliMs(Timestamp now) const;
  // When a started task (Binding, Bound, Running or Releasing) last let go
  // of its node: for a job that runs no more, when it stopped; -1 never.
  // (A placement tried and undone inside a cycle does not count.)
  Timestamp last_stopped() const { return last_stopped_; }
  double AttainedGpuSeconds(Timestamp now) const { return static_cast<double>(AttainedMilliMs(now)) / 1e6; }
  // What the job accumulated, as it stands (JobHistory). Changes only when
  // the held GPUs or a stamp change, not with the clock.
  JobHistory History() const;
  // Only Engine::RestoreJobHistory sets it (a restart's record).
  void RestoreHistory(const JobHistory& h);

  // The planner's last verdict on this job that placed nothing, one per
  // ReservationUse (allocate, backfill), with what it was computed from:
  // the state's epoch and the engine's verdict context (policy, deserved
  // shares). GangPlacer::Recall hands it back while both are unchanged, so
  // a gang whose inputs did not change is not tried again and its reason is
  // not composed again (docs/ARCHITECTURE.md §7). epoch 0: none.
  struct PlaceMemo {
    uint64_t epoch = 0;
    uint64_t context = 0;
    // The clock when it was given; read only where the verdict depends on it
    // (backfill's walltime rule: GangPlacer::Recall).
    Timestamp at = -1;
    // WalltimeEstimator::version when it was given (backfill's learned
    // walltimes: GangPlacer::Recall).
    uint64_t learned = 0;
    std::string reason;
    // Unique to this text of `reason` among all memos (a new one each time
    // it is written: NextReasonGen); 0: none.
    uint64_t reason_gen = 0;
    // Set when the free-GPU count decided the verdict (no attempt could hold
    // the minimum: GangPlacer::Plan's count bound). Such a verdict and its
    // reason read only `count` (GangPlacer::CountKey), so it holds again
    // while that is unchanged, though the epoch moved: a release that frees
    // no room for this gang's tasks does not wake it.
    bool by_count = false;
    uint64_t policy = 0;          // Session::VerdictPolicyId when it was given
    int64_t count_g = 0;          // the fewest whole GPUs of a task of the minimum
    uint32_t count_task = 0;      // its first task (the queue's capability check)
    std::array<int64_t, 9> count{};
  };
  // Enqueue's last refusal of this job (the admission memo): it holds
  // while the policy, the job's tasks, its queue and the use (allocated +
  // admitted) of that queue and each ancestor are the same, when the
  // policy's admission hooks read nothing else
  // (Plugin::AdmissionReadsOnlyJobAndQueues). Its minimum is fixed when the
  // job is made.
  struct AdmitMemo {
    uint64_t policy = 0;  // Session::VerdictPolicyId; 0: no memo
    uint64_t task_changes = 0;
    uint32_t queue = 0;
    uint64_t chain_use = 0;  // the id of the use of the queue and each ancestor (enqueue)
    std::string reason;
    uint64_t reason_gen = 0;  // as PlaceMemo::reason_gen
  };
  AdmitMemo& admit_memo() { return admit_memo_; }
  const AdmitMemo& admit_memo() const { return admit_memo_; }
  PlaceMemo& place_memo(int use) { return place_memo_[use]; }
  const PlaceMemo& place_memo(int use) const { return place_memo_[use]; }
  // The session that last gave the job a pending reason (Session::Close:
  // the last writer wins without sorting the records; State::NewSession).
  uint64_t reason_session() const { return reason_session_; }
  // Changes with every change of a task's state, and with tasks added or
  // removed (the count memo's view of the job: PlaceMemo::count).
  uint64_t task_changes() const { return task_changes_; }
  void set_reason_session(uint64_t c) { reason_session_ = c; }
  // The session that last recorded a pending reason for the job
  // (Session::KeepPendingReason skips a first record that would change
  // nothing).
  uint64_t record_session() const { return record_session_; }
  void set_record_session(uint64_t c) { record_session_ = c; }

  // Only State changes task state and placement (it keeps every counter in
  // step).
  Task& mutable_task(uint32_t i) { return tasks_[i]; }
  // `now` settles the attained service before the held GPUs change.
  void NoteState(TaskState from, TaskState to, uint32_t i, Timestamp now);
  // Appends one more task of `role` (elastic growth); returns its index.
  uint32_t AddTask(int role);
  // Removes the last task, which must be Pending (undo of AddTask).
  void PopPendingTask();

 private:
  // Only State::SetPhase changes it (the state keeps what waiting jobs add
  // to their queues by phase).
  friend class State;
  void set_phase(JobPhase p) { phase_ = p; }
  // Hot fields first, together (the engine reads them for every job in a
  // pass over thousands: a few cache lines each, not one per field), the
  // spec, which holds strings, maps and vectors, last.
  JobId id_;
  QueueId queue_;
  JobPhase phase_ = JobPhase::kPending;
  int min_member_ = 0;
  int32_t priority_ = 0;  // spec_.priority
  bool nominated_ = false;
  Timestamp created_;
  Timestamp started_ = -1;
  Timestamp last_resize_ = -1;
  Timestamp last_stopped_ = -1;
  int64_t checkpoint_interval_ms_ = 0;  // spec_.checkpoint_interval_ms
  std::array<int, kNumTaskStates> counts_{};
  std::vector<Task> tasks_;
  std::vector<int> role_tasks_;  // tasks of each role (AddTask names the next one)
  std::vector<Resources> role_requests_;
  int64_t generation_ = 0;
  int64_t attained_milli_ms_ = 0;  // up to attained_at_
  Timestamp attained_at_ = 0;
  Resources allocated_;
  Resources min_request_;
  std::set<JobId> yielded_to_;
  AdmitMemo admit_memo_;
  std::string pending_reason_;
  uint64_t pending_from_ = 0;  // set_pending_reason_from's generation; 0: none
  uint64_t reason_session_ = 0;
  uint64_t record_session_ = 0;
  uint64_t task_changes_ = 0;
  mutable Resources pending_request_;            // PendingRequest's cache
  mutable uint64_t pending_stamp_ = UINT64_MAX;  // the task_changes_ it is for
  std::array<PlaceMemo, 2> place_memo_;
  JobSpec spec_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_JOB_H_
