// The engine's live state: the cluster with what is used on every node, the
// jobs, and the queues' usage. Every change to task placement goes through
// State so that all counters move together.
//
// Invariants (checked by CheckInvariants):
//   1. NodeState::used == foreign + sum of requests of tasks in a HoldsNode()
//      state on the node; gpu_used[i] == gpu_foreign[i] + sum of milli of
//      those tasks on GPU i.
//   2. 0 <= gpu_used[i] <= 1000 for every GPU: no GPU (or share) given twice.
//   3. used <= allocatable on every node: every bind fits its node.
//   4. The free index counts, per node, the GPUs with gpu_used == 0 and the
//      free milli (sum of 1000 - gpu_used), and
//      NodeState::max_gpu_free is 1000 - the smallest gpu_used (0 without GPUs),
//      and NodeState::usage_hash is UsageHash of the node's usage.
//   5. QueueUsage::allocated == sum of allocated() of the queue's jobs and
//      its descendants'.
//   6. A Running job has GangReady().
//   7. waiting_jobs() holds exactly the active jobs with a Pending task.
//   8. elastic_below_max() holds exactly the active elastic jobs with
//      ReadyCount() < max_member().
#ifndef RINGMASTER_SCHEDULER_STATE_H_
#define RINGMASTER_SCHEDULER_STATE_H_

#include <algorithm>
#include <deque>
#include <memory>
#include <optional>
#include <set>
#include <span>
#include <vector>

#include "absl/container/btree_set.h"
#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "queue/queue.h"
#include "scheduler/clock.h"
#include "scheduler/ended_job.h"
#include "scheduler/job.h"
#include "topology/cluster.h"
#include "topology/free_index.h"

namespace ringmaster::scheduler {

struct NodeState {
  Resources used;       // held by tasks on the node (includes releasing)
  Resources releasing;  // part of `used` that is being released
  Resources pipelined;  // promised to pipelined tasks out of future idle
  std::vector<int16_t> gpu_used;       // milli per GPU, held
  std::vector<int16_t> gpu_pipelined;  // milli per GPU, promised
  std::vector<int16_t> gpu_releasing;  // milli per GPU, held by releasing tasks
  // Held by what ringmaster does not schedule (State::SetForeignUsage):
  // part of `used`; gpu_foreign[i] is 0 or a whole GPU.
  Resources foreign;
  std::vector<int16_t> gpu_foreign;
  int32_t tasks = 0;
  int16_t max_gpu_free = 0;  // most free milli on any one GPU (held, not future)
  // Hash of what is used on the node (cpu, memory, each GPU's milli), kept
  // with the counters: nodes of one shape with equal usage_hash are
  // interchangeable to the scoring plugins (the planner's window).
  uint64_t usage_hash = 0;
  bool schedulable = true;  // false once removed, failed or cordoned
};

struct QueueUsage {
  Resources allocated;  // this queue and its descendants
  // Of what its tasks hold or are promised, the GPUs (milli) on their way:
  // out (tasks Releasing: counted in `allocated` until they are gone) and
  // in (tasks Pipelined onto GPUs that others release: not yet counted).
  // Reclaim reads both (victims.cc), so a queue already giving back is not
  // taken from again, nor a taker already promised its share given more.
  int64_t releasing_gpu_milli = 0;
  int64_t pipelined_gpu_milli = 0;
};

// Nodes held for a head-of-line gang so that smaller jobs do not keep taking
// what it waits for (see actions/backfill.h).
struct Reservation {
  JobId job;
  std::vector<NodeId> nodes;
  std::vector<int64_t> gpus_needed;  // per entry of `nodes`: whole GPUs the job needs there
};

// The hash NodeState::usage_hash keeps (cpu, memory, per-GPU milli used).
uint64_t UsageHash(const NodeState& ns);

class State {
 public:
  // `clock` (may be null: time stands at 0) dates the changes of what jobs
  // hold, for their attained service (Job::AttainedMilliMs).
  State(topology::Cluster cluster, queue::QueueTree queues, const Clock* clock = nullptr);
  State(const State&) = delete;
  State& operator=(const State&) = delete;

  const topology::Cluster& cluster() const { return *cluster_; }
  const topology::FreeGpuIndex& free_index() const { return free_; }
  const NodeState& node(NodeId n) const { return nodes_[n.value()]; }
  size_t num_nodes() const { return nodes_.size(); }
  const queue::QueueTree& queues() const { return queues_; }
  const QueueUsage& queue_usage(QueueId q) const { return queue_usage_[q.value()]; }
  // Sum of allocatable over schedulable nodes.
  const Resources& total() const { return total_; }

  Job& job(JobId id) { return *jobs_[id.value()]; }
  const Job& job(JobId id) const { return *jobs_[id.value()]; }
  bool has_job(JobId id) const { return id.valid() && id.value() < jobs_.size(); }
  size_t num_jobs() const { return jobs_.size(); }
  // The job sets below, by id: a B-tree (many ids to a node), so that a walk
  // over thousands of jobs reads memory in order instead of chasing a
  // pointer per job (a std::set's walk was a quarter of a backlog cycle).
  // Its iterators do not survive an insertion or erasure anywhere: a walk
  // must not change the set (no walk does; collect first, then act).
  using JobSet = absl::btree_set<JobId>;
  // Jobs not yet Completed / Failed / Aborted, by id.
  const JobSet& active_jobs() const { return active_; }
  // Those of them Running, kept with the phase (SetPhase): a walk over the
  // running jobs (victims, cooldowns, expected ends) costs the running jobs,
  // not a backlog of waiting ones.
  const JobSet& running_jobs() const { return running_; }
  // Records of the jobs that ended (Completed, Failed or Aborted), in the
  // order they ended, after those restored (RestoreEndedJobs): what a
  // learner of the jobs seen to end reads (gittins, backfill's learned
  // walltimes, the daemon's journal), from where it read last. Record i
  // counts from the first ever, so a reader's place survives the oldest
  // being dropped: [ended_begin(), ended_end()) are held.
  uint64_t ended_begin() const { return ended_base_; }
  uint64_t ended_end() const { return ended_base_ + ended_.size(); }
  const EndedJob& ended_job(uint64_t i) const { return ended_[i - ended_base_]; }
  // Holds at least the `n` newest records (0, the default: every one, as a
  // replay does): once 2n are held, the oldest n go (amortized O(1) a job).
  // A long-running daemon sets it, so that its memory does not grow with
  // every job ever run (serve --ended-jobs-kept).
  void set_ended_kept(size_t n);
  // Appends records of jobs that ended before this process started (the
  // daemon's journal, at start, in their end order), with no job of this
  // state behind them (id invalid): a learner reads them like any other.
  // Meant before the first cycle: a learner that read past the end already
  // reads them after the jobs it saw end.
  void RestoreEndedJobs(std::span<const EndedJob> ended);
  // Active jobs with at least one Pending task: what a cycle has to look at.
  // Kept incrementally, so a cycle's cost follows the backlog, not the
  // number of running jobs.
  const JobSet& waiting_jobs() const { return waiting_; }
  // Those of them admitted (any phase but Pending), kept the same way.
  const JobSet& admitted_waiting_jobs() const { return admitted_waiting_; }
  // How many of them choose where they may land beyond the cluster as a
  // whole: a hard topology tier, or a speed model (JobSpec::speed). Victim
  // searches for the others need only GPU counts (VictimPicker).
  size_t admitted_waiting_scoped() const { return admitted_waiting_scoped_; }
  // Per queue (by QueueId value; a job's own queue, not rolled up the
  // tree): what its waiting jobs add to a session's queue figures, their
  // pending requests and, of those admitted and not running (Inqueue),
  // their minimums. Kept incrementally with waiting_jobs(), so a session
  // opens without reading every waiting job.
  struct WaitingSums {
    Resources pending;
    Resources inqueue;
  };
  const std::vector<WaitingSums>& waiting_sums() const { return waiting_sums_; }
  // Changes a job's phase (Job::set_phase is the state's alone).
  void SetPhase(Job& job, JobPhase phase);
  // The waiting jobs not yet admitted (phase Pending) that were added, or
  // whose tasks, phase or waiting changed, since the last call (in no
  // particular order, maybe twice), moved into `out`. False when more
  // changed than the state keeps (kMaxAdmissionChanges): then any may have.
  // For enqueue's admission memo: every other not-admitted job is as it
  // was (one reader: the cycle's enqueue).
  bool TakeAdmissionChanges(std::vector<JobId>& out);
  static constexpr size_t kMaxAdmissionChanges = 4096;
  // Active elastic jobs below their maximum (what the elastic action may
  // grow), kept like waiting_jobs().
  const JobSet& elastic_below_max() const { return elastic_room_; }
  // Active elastic jobs (whatever their size): a walk over them (the
  // elastic action's loans) costs the elastic jobs, not every job.
  const JobSet& elastic_jobs() const { return elastic_; }

  JobId AddJob(JobSpec spec, QueueId queue, Timestamp now);
  // Marks a job terminal and takes it off the active set; its record goes
  // onto ended_jobs. Every task must have released its node first.
  void FinishJob(JobId id, JobPhase terminal);

  // Replaces the queue tree (policy hot reload). Every job keeps its queue by
  // name (JobSpec::queue); usage is recounted. Fails, changing nothing, when
  // an active job's queue is missing from `queues` or is not a leaf there.
  // An ended job whose queue is gone keeps no queue (an invalid QueueId).
  absl::Status ReplaceQueues(queue::QueueTree queues);

  // What pods ringmaster does not schedule hold on node `n` (the
  // extender's count of kube-scheduler's other pods): cpu and memory of
  // `req` and `gpus` whole GPUs, counted as used from now on. Replaces the
  // node's previous foreign usage. The GPUs are taken from those no task
  // holds (highest index first, those promised to pipelined tasks last),
  // cpu and memory up to what is idle. Returns the whole GPUs that could not
  // be counted because tasks of ringmaster's hold them (the two schedulers
  // disagree; the caller reports it).
  int64_t SetForeignUsage(NodeId n, const Resources& req, int64_t gpus);

  // Idle now: allocatable - used.
  Resources Idle(NodeId n) const;
  // True when `req` fits in Idle(n) for cpu, memory and scalars (GPUs are
  // checked per device elsewhere). No allocation.
  bool FitsIdle(NodeId n, const Resources& req) const;
  // Idle once releasing tasks are gone, less what pipelined tasks were promised.
  Resources FutureIdle(NodeId n) const;
  int64_t FreeWholeGpus(NodeId n) const { return free_.NodeFree(n); }
  // The node's hardware (Cluster::shape_hash) and what is used on it, per
  // GPU: nodes with equal hashes are interchangeable to the scoring plugins.
  uint64_t NodeStateHash(NodeId n) const {
    return cluster_->shape_hash(n) * 0x9e3779b97f4a7c15ULL ^ nodes_[n.value()].usage_hash;
  }
  // An upper bound on the number of distinct NodeStateHash values among the
  // nodes with at least `k` whole GPUs free (exact but for hash collisions
  // and nodes taken out, which only make it larger). The planner stops a
  // walk once it has scored that many distinct states: every node left
  // would repeat one.
  int64_t DistinctStatesWithFree(int64_t k) const {
    int64_t n = 0;
    for (size_t f = static_cast<size_t>(std::max<int64_t>(k, 0)); f < distinct_by_free_.size(); ++f) {
      n += distinct_by_free_[f];
    }
    return n;
  }
  // An upper bound on the tasks of `g` whole GPUs each (g >= 1) that the
  // nodes can hold by free GPU count: the sum over nodes of floor(free / g),
  // from a histogram of nodes by free GPUs (O(GPUs per node), no walk). A
  // gang needing more such tasks cannot be placed now, whatever the
  // placement order, the scores and the predicates.
  int64_t TasksFitByCount(int64_t g) const {
    int64_t k = 0;
    for (size_t f = static_cast<size_t>(g); f < nodes_by_free_.size(); ++f) k += nodes_by_free_[f] * (static_cast<int64_t>(f) / g);
    return k;
  }
  // Tasks now Releasing anywhere; pipelining is pointless while this is 0.
  int64_t releasing_tasks() const { return releasing_tasks_; }
  // Milli of GPU d on node n free now, or (future) once releasing tasks are
  // gone and pipelined tasks have taken their promise.
  int64_t GpuFree(NodeId n, int d, bool future) const {
    const NodeState& s = nodes_[n.value()];
    if (!future) return topology::kMilliPerGpu - s.gpu_used[d];
    return topology::kMilliPerGpu - s.gpu_used[d] + s.gpu_releasing[d] - s.gpu_pipelined[d];
  }

  // Moves task (job, i) from Pending to `to` (Allocated or Pipelined) on
  // `node` using `gpus`. Preconditions: the task is Pending and it fits.
  void Place(Job& job, uint32_t i, NodeId node, std::span<const int16_t> gpus, TaskState to);
  void Place(Job& job, uint32_t i, NodeId node, std::vector<int16_t>&& gpus, TaskState to);
  // Undoes Place: the task goes back to Pending.
  void Unplace(Job& job, uint32_t i);
  // Changes state without moving the task (e.g. Allocated -> Binding,
  // Running -> Releasing, Releasing -> Running). Keeps node counters right.
  void SetState(Job& job, uint32_t i, TaskState to);
  // Frees the node a task holds and moves it to `to` (Pending, Succeeded or
  // Failed).
  void Release(Job& job, uint32_t i, TaskState to);
  // When a Releasing task must be gone (-1: none).
  void SetReleaseDeadline(Job& job, uint32_t i, Timestamp deadline) {
    job.mutable_task(i).release_deadline = deadline;
  }
  // Appends one more Pending task of `role` to an elastic job (growth beyond
  // its submitted size, up to its maximum).
  uint32_t AddTask(Job& job, int role);
  // Undoes AddTask: the job's last task, which must be Pending, goes away.
  void RemoveLastTask(Job& job);

  // Node lifecycle.
  absl::StatusOr<NodeId> AddNode(topology::NodeSpec spec);
  // Takes a node out of scheduling; tasks on it must be released by the caller.
  void DisableNode(NodeId n);
  std::vector<std::pair<JobId, uint32_t>> TasksOn(NodeId n) const;

  std::optional<Reservation>& reservation() { return reservation_; }
  const std::optional<Reservation>& reservation() const { return reservation_; }
  bool IsReserved(NodeId n) const { return n.value() < reserved_.size() && reserved_[n.value()]; }
  void SetReservation(std::optional<Reservation> r);

  // Recounts everything and returns the first broken invariant (numbered as
  // in the file comment).
  absl::Status CheckInvariants() const;

  // Names what a placement verdict reads of the state: every change of what
  // a node holds, is promised or has free, of a task's state, of the nodes,
  // the reservation or the queues gives a new value, never one used before
  // (submitting or ending a job without tasks on nodes does not). Two equal
  // epochs: the same state, for the planner (the verdict memo, actions/
  // placement.h). A Statement that undid every change it made restores the
  // epoch it found (RestoreEpoch), so a trial placement costs nothing.
  uint64_t epoch() const { return epoch_; }
  // Changes when a node is added or disabled (the count memo's key).
  uint64_t node_changes() const { return node_changes_; }
  void RestoreEpoch(uint64_t e) { epoch_ = e; }
  // A number no session closed on this state had before (Session::Close).
  uint64_t NewSession() { return ++sessions_; }

  // Replaces a job's speed model (null: none). A new epoch (what a start is
  // judged by changed) and a new speed_changes(): a plugin that keeps the
  // jobs with a model across sessions looks at all of them again.
  void SetJobSpeed(JobId id, std::shared_ptr<const SpeedModel> model);
  uint64_t speed_changes() const { return speed_changes_; }

 private:
  // Place's work once the task's `gpus` hold its choice.
  void PlaceOnGpusSet(Job& job, uint32_t i, NodeId node, TaskState to);
  void AddUsage(Job& job, uint32_t i, int sign);
  // Adds `delta` GPU milli to the queue chain's releasing or pipelined count.
  void AddMoving(const Job& job, int64_t QueueUsage::*count, int64_t delta);
  void UpdateWaiting(const Job& job);
  void Refresh(NodeId n);
  // Keeps state_count_ and distinct_by_free_ in step with node n's free
  // whole GPUs and NodeStateHash.
  void TrackState(NodeId n);
  void Touch() { epoch_ = ++last_epoch_; }

  std::unique_ptr<topology::Cluster> cluster_;  // heap: free_ points into it
  std::vector<NodeState> nodes_;
  topology::FreeGpuIndex free_;
  struct StateCount {
    int64_t free = -1;  // -1: not counted yet
    uint64_t hash = 0;
  };
  std::vector<StateCount> node_state_;  // [node]: as counted
  // Nodes per (free whole GPUs, NodeStateHash), and per free count the
  // number of distinct hashes among them.
  absl::flat_hash_map<std::pair<int64_t, uint64_t>, int32_t> state_count_;
  std::vector<int64_t> distinct_by_free_;
  // Nodes per free whole GPUs, as counted in node_state_ (TasksFitByCount).
  std::vector<int64_t> nodes_by_free_;
  queue::QueueTree queues_;
  std::vector<QueueUsage> queue_usage_;
  std::vector<std::unique_ptr<Job>> jobs_;
  JobSet active_;
  JobSet running_;  // active_ in phase Running
  std::vector<EndedJob> ended_;  // in the order they ended, from ended_base_
  uint64_t ended_base_ = 0;      // records dropped before ended_'s first
  size_t ended_kept_ = 0;        // set_ended_kept (0: all)
  void AddEnded(EndedJob e);
  JobSet waiting_;
  JobSet admitted_waiting_;
  size_t admitted_waiting_scoped_ = 0;
  std::vector<WaitingSums> waiting_sums_;
  // TakeAdmissionChanges' log, and whether more changed than it kept.
  std::vector<JobId> admission_changes_;
  bool admission_overflow_ = true;  // nobody has read the changes yet
  // Per job id: what it adds to waiting_sums_ now (RecountWaiting takes
  // the old figures off and puts the new ones on).
  struct Counted {
    bool in = false;       // waiting: counted at all
    bool unadmitted = false;  // waiting in phase Pending
    bool inqueue = false;  // its minimum counted in `inqueue`
    bool scoped = false;   // counted in admitted_waiting_scoped_
    uint32_t queue = 0;
    Resources pending;
  };
  std::vector<Counted> counted_;
  void RecountWaiting(const Job& job);
  void RebuildWaitingSums();
  JobSet elastic_room_;
  JobSet elastic_;
  // Per job id: whether it is in active_, waiting_ and elastic_room_ (kept
  // with them).
  static constexpr uint8_t kActive = 1, kWaiting = 2, kRoom = 4;
  std::vector<uint8_t> flags_;
  // Per node: (job, task) pairs holding or pipelined to it.
  std::vector<std::vector<std::pair<JobId, uint32_t>>> node_tasks_;
  Resources total_;
  std::optional<Reservation> reservation_;
  std::vector<bool> reserved_;
  int64_t releasing_tasks_ = 0;
  const Clock* clock_ = nullptr;
  uint64_t epoch_ = 1;
  uint64_t last_epoch_ = 1;
  uint64_t speed_changes_ = 0;
  uint64_t node_changes_ = 0;
  uint64_t sessions_ = 0;
  Timestamp Now() const { return clock_ ? clock_->Now() : 0; }
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_STATE_H_
