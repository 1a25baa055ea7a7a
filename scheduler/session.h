// A Session is one scheduling cycle: it opens on the engine's state, lets each
// configured plugin register its callbacks (in tiers), runs the configured
// actions, and closes with the cycle's Decisions.
//
// The session mutates the live State only through Statements, so every change
// it makes is either committed as a whole or undone: actions hold the mutable
// State only to hand jobs to a Statement; plugins see a const State. Nothing
// may keep a pointer into the session after it closes.
#ifndef RINGMASTER_SCHEDULER_SESSION_H_
#define RINGMASTER_SCHEDULER_SESSION_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "scheduler/clock.h"
#include "scheduler/decisions.h"
#include "scheduler/plugin.h"
#include "scheduler/state.h"

namespace ringmaster::scheduler {

// Feasible nodes scored per task when the policy does not say (its
// `nodesToScore`); the policy, the engine and a session all start from it.
inline constexpr int kDefaultNodesToScore = 16;

class Statement;

// A queue as plugins see it during a session.
struct QueueInfo {
  QueueId id;
  const queue::QueueSpec* spec = nullptr;
  const QueueUsage* usage = nullptr;
  Resources request;   // allocated + pending demand of this queue and its descendants
  Resources inqueue;   // gang minimums of admitted jobs not yet running
  Resources deserved;  // set by a fair-share plugin; the whole cluster otherwise
  const Resources& allocated() const { return usage->allocated; }
  const std::string& name() const { return spec->name; }
};

// The eviction record of task `task` of `job`, on `node` (the task's own
// node when invalid: call it before the task leaves its node).
Eviction MakeEviction(const State& state, const Job& job, uint32_t task, std::string reason,
                      NodeId node = NodeId());

// Which placements an action may make on reserved nodes.
enum class ReservationUse { kNone, kBackfill };

// What a placement verdict depends on besides the state (State::epoch):
// the policy and the queues' deserved shares. The engine keeps it across
// cycles; a session compares the shares its fair-share plugin computed with
// those of the last cycle and changes `id` when any differs (SetPolicy
// changes it too). Equal ids: the planner's callbacks answer the same on the
// same state.
struct VerdictContext {
  uint64_t id = 1;
  std::vector<Resources> deserved;  // as last seen
  // Changed by SetPolicy alone: a verdict the free-GPU count decided reads
  // no deserved share (GangPlacer::CountKey), only the policy's plugins.
  uint64_t policy = 1;
};

// The last job order SortInJobOrder computed by keys, kept by the engine
// across sorts and cycles: rows of (keys..., created, id), sorted, and where
// each job's row is. A job whose row is the same now sits where it sat: the
// order of jobs whose rows did not change is known without comparing them
// (the order is the rows' lexicographic order, whatever produced them), so a
// sort compares only the jobs whose rows changed or are new
// (SortJobsByKeys).
struct JobOrderCache {
  size_t width = 0;                  // int64s per row
  std::vector<int64_t> rows;         // row r at [r * width, (r + 1) * width)
  std::vector<uint32_t> pos;         // by JobId value: its row + 1, 0: none
  // Scratch reused by every sort (no allocation once grown).
  std::vector<int64_t> in_rows, next_rows;
  std::vector<uint32_t> hit_at;  // by row: 1 + the input index of the job whose row it is, 0: none
  std::vector<uint32_t> hits;    // input indices of the hits, in row order
  std::vector<uint64_t> packed;  // (row << 32 | input index): few hits are sorted, not walked to
  std::vector<uint32_t> misses, order;
  std::vector<uint8_t> drop;
  std::vector<Job*> out;
  // A job's keys while nothing can have changed them: the same session
  // (the same clock), no commit since, the same state epoch. Rows by
  // JobId value (key_rows[id * width ..]), valid when key_ctx[id] is ctx.
  // Or, when every key is fixed for a job that holds nothing
  // (Session::job_order_static), a row computed while the job held
  // nothing holds in later sessions too, while the policy (key_policy[id],
  // Session::VerdictPolicyId, never 0 here) and its tasks
  // (key_tasks[id], Job::task_changes) are the same.
  std::vector<int64_t> key_rows;
  std::vector<uint32_t> key_ctx;
  std::vector<uint64_t> key_policy, key_tasks;
  size_t key_width = 0;
  uint32_t ctx = 0;
  uint64_t ctx_session = 0, ctx_epoch = 0;
  int ctx_commits = -1;
};

class Session {
 public:
  // The session's lists (the plugins' registrations, its job list, its
  // reason records), kept by the engine from one session to the next: a
  // session takes them empty and gives them back cleared, so that a cycle
  // reuses their capacity instead of allocating each anew. Opaque.
  struct Buffers;
  // `tiers` are the plugin instances (owned by the engine), in tier order.
  // `buffers` (may be null; must outlive the session) lends the lists.
  Session(State& state, const Clock& clock, int64_t cycle,
          const std::vector<std::vector<Plugin*>>& tiers, Buffers* buffers = nullptr);
  ~Session();
  Session(const Session&) = delete;
  Session& operator=(const Session&) = delete;

  // --- Registration (plugins call these from OnSessionOpen) -----------------
  void AddQueueOrderFn(std::string_view plugin, QueueOrderFn fn);
  void AddJobOrderFn(std::string_view plugin, JobOrderFn fn);
  // The same order given as a key (plugin.h, JobOrderKeyFn): JobOrder
  // compares the keys; when every job order is a key, SortInJobOrder sorts
  // by keys computed once per job (the same total order).
  void AddJobOrderKeyFn(std::string_view plugin, JobOrderKeyFn fn);
  void AddTaskOrderFn(std::string_view plugin, TaskOrderFn fn);
  void AddJobValidFn(std::string_view plugin, JobValidFn fn);
  void AddJobEnqueueableFn(std::string_view plugin, JobEnqueueableFn fn);
  void AddJobReadyFn(std::string_view plugin, JobReadyFn fn);
  void AddJobPipelinedFn(std::string_view plugin, JobPipelinedFn fn);
  void AddJobStarvingFn(std::string_view plugin, JobStarvingFn fn);
  void AddPredicateFn(std::string_view plugin, PredicateFn fn);
  void AddNodeOrderFn(std::string_view plugin, NodeOrderFn fn);
  void AddPreemptableFn(std::string_view plugin, PreemptableFn fn);
  void AddReclaimableFn(std::string_view plugin, ReclaimableFn fn);
  void AddOverusedFn(std::string_view plugin, OverusedFn fn);
  void AddAllocatableFn(std::string_view plugin, AllocatableFn fn);
  void AddVictimTasksFn(std::string_view plugin, VictimTasksFn fn);
  void AddGpuSelectFn(std::string_view plugin, GpuSelectFn fn);
  void AddJobPriorityFn(std::string_view plugin, JobPriorityFn fn);
  void AddJobSpeedupFn(std::string_view plugin, JobSpeedupFn fn);
  void AddResizePaysFn(std::string_view plugin, ResizePaysFn fn);
  void AddPlacedSpeedupFn(std::string_view plugin, PlacedSpeedupFn fn);
  void AddStartPaysFn(std::string_view plugin, StartPaysFn fn);

  // --- Combined extension points (actions call these) -----------------------
  // Strict weak orders: plugins first, then the stable tie-breaks
  // (creation time, then id).
  bool QueueOrder(const QueueInfo& l, const QueueInfo& r) const;
  bool JobOrder(const Job& l, const Job& r) const;
  // Whether every registered job order is a key (AddJobOrderKeyFn), and
  // their number; JobOrderKeys writes a job's keys, in tier order, to
  // out[0 .. job_order_keys()). Lexicographic order on (keys, created, id)
  // is JobOrder.
  bool job_order_keyed() const { return job_order_keyed_; }
  size_t job_order_keys() const { return job_order_key_.size(); }
  void JobOrderKeys(const Job& job, int64_t* out) const {
    for (size_t k = 0; k < job_order_key_.size(); ++k) out[k] = job_order_key_[k](job);
  }
  bool TaskOrder(const TaskRef& l, const TaskRef& r) const;
  // Fit, or the first failing plugin's verdict.
  Verdict JobValid(const Job& job) const;
  // Votes (plugin.h): Fit, or the rejecting verdict with its reason.
  Verdict JobEnqueueable(const Job& job) const;
  bool JobReady(const Job& job) const;
  bool JobPipelined(const Job& job) const;
  bool JobStarving(const Job& job) const;
  // Fit, or the first failing plugin's verdict.
  Verdict Predicate(const TaskRef& task, NodeId node) const;
  int64_t NodeOrder(const TaskRef& task, NodeId node) const;
  std::vector<TaskRef> Preemptable(const TaskRef& preemptor, const std::vector<TaskRef>& candidates) const;
  std::vector<TaskRef> Reclaimable(const TaskRef& reclaimer, const std::vector<TaskRef>& candidates) const;
  bool Overused(const QueueInfo& queue) const;
  bool Allocatable(const QueueInfo& queue, const TaskRef& task) const;
  std::vector<TaskRef> VictimTasks() const;
  // The first registered JobPriority, else the job's own priority.
  int64_t JobPriority(const Job& job) const {
    return job_priority_.empty() ? job.priority() : job_priority_.front().fn(job);
  }
  // The first registered JobSpeedup that knows the job; nullopt when none
  // does (or none is registered: then sizes are chosen as without one).
  std::optional<double> JobSpeedup(const Job& job, int members) const;
  bool has_job_speedup() const { return !job_speedup_.empty(); }
  // Every registered ResizePays agrees (true with none).
  bool ResizePays(const Job& job, int from, double from_speedup, int to, double to_speedup) const;
  // The first registered PlacedSpeedup that knows the job.
  std::optional<double> PlacedSpeedup(const Job& job) const;
  // Every registered StartPays agrees (true with none).
  bool StartPays(const Job& job) const;
  bool has_start_pays() const { return !start_pays_.empty(); }
  // GPU choice: the registered selector, or the built-in best fit.
  bool SelectGpus(const TaskRef& task, NodeId node, std::vector<int16_t>* gpus) const;
  // The built-in choice over future free GPUs (for pipelining).
  bool SelectFutureGpus(const TaskRef& task, NodeId node, std::vector<int16_t>* gpus) const;
  bool has_node_order() const { return !node_order_.empty(); }
  // A node order plugin whose score depends on the job's own placement so
  // far (not only on the node's state) says so: the planner then scores
  // every node, without skipping those in the same state as one scored.
  void MarkNodeOrderReadsJob() { node_order_reads_job_ = true; }
  bool node_order_reads_job() const { return node_order_reads_job_; }
  // True when a plugin chooses GPUs (else the built-in best fit, which never
  // refuses a whole-GPU task on a node with that many whole GPUs free).
  bool has_gpu_select() const { return !gpu_select_.empty(); }
  // Feasible nodes scored per task (the policy's nodesToScore; 0 = all).
  int nodes_to_score() const { return nodes_to_score_; }
  void set_nodes_to_score(int n) { nodes_to_score_ = n; }
  // EngineOptions::fast_paths (the planner's count bound).
  bool fast_paths() const { return fast_paths_; }
  void set_fast_paths(bool on) { fast_paths_ = on; }
  // The verdict memo (GangPlacer::Recall): on with a context, which the
  // engine gives only with its fast paths, when no hook the planner reads
  // reads the clock (verdict_reads_clock) and without a driver predicate.
  // VerdictContextId: the context's id for this session (0 when the memo is
  // off), computed once, after the plugins opened.
  void set_verdict_context(VerdictContext* c) { verdict_context_ = c; }
  // The engine's JobOrderCache (null: every keyed sort sorts all its jobs).
  void set_job_order_cache(JobOrderCache* c) { job_order_cache_ = c; }
  JobOrderCache* job_order_cache() const { return job_order_cache_; }
  // Whether a plugin that reads the clock (Plugin::UsesTime) and says its
  // verdict hooks do (Plugin::VerdictHooksReadTime) registered a hook that
  // GangPlacer's verdict reads: task order, job ready, job pipelined,
  // predicate, node order, allocatable or GPU select. A plugin
  // whose time-based answers are only job order or preemption ranks (las)
  // changes which gang goes first, never whether one fits, so it leaves the
  // memo on; actions that read the clock (preempt's grace periods, elastic's
  // cooldowns) change the state when they act, which the memo's epoch sees.
  bool verdict_reads_clock() const { return verdict_reads_clock_; }
  bool memo() const { return verdict_context_ != nullptr; }
  uint64_t VerdictContextId();
  // The policy part of the context alone (0 when the memo is off).
  uint64_t VerdictPolicyId() const { return verdict_context_ ? verdict_context_->policy : 0; }

  // --- State ----------------------------------------------------------------
  // What plugins and actions read.
  const State& state() const { return state_; }
  // For actions and Statements only: jobs to hand to a Statement, which is
  // what changes the state.
  State& mutable_state() { return state_; }
  const topology::Cluster& cluster() const { return state_.cluster(); }
  Timestamp now() const { return clock_.Now(); }
  int64_t cycle() const { return cycle_; }
  std::vector<QueueInfo>& queues() { return queues_; }
  const std::vector<QueueInfo>& queues() const { return queues_; }
  QueueInfo& queue(QueueId q) { return queues_[q.value()]; }
  const QueueInfo& queue(QueueId q) const { return queues_[q.value()]; }

  // Jobs this session looks at: active jobs with a Pending task, by id.
  const std::vector<JobId>& jobs() const { return jobs_; }
  // Those of them admitted (any phase but Pending), by id: what actions
  // after enqueue walk, so that a backlog its queues refuse costs them
  // nothing. Enqueue's admissions join it (AddAdmitted).
  const std::vector<JobId>& admitted_jobs() const { return admitted_; }
  // Merges jobs of jobs() just admitted (enqueue; any order) into
  // admitted_jobs(), in id order, without reading the jobs.
  void AddAdmitted(std::vector<JobId>& ids);

  // Records why a job is still pending after this cycle (last writer wins).
  void SetPendingReason(const Job& job, std::string reason);
  // The same with a reason that outlives the session (a remembered verdict:
  // Job::PlaceMemo): no copy unless the job's reason changes.
  void KeepPendingReason(const Job& job, const Job::PlaceMemo& memo) {
    KeepPendingReason(job, memo.reason, memo.reason_gen);
  }
  // `gen` identifies `reason`'s text (Job::NextReasonGen; 0: none); both
  // must outlive the session and change together.
  void KeepPendingReason(const Job& job, const std::string& reason, const uint64_t& gen);
  // Whether every registered admission hook's plugin reads only the job and
  // the queues (Plugin::AdmissionReadsOnlyJobAndQueues): enqueue may
  // remember a refusal.
  bool admission_reads_only_job_and_queues() const { return admission_pure_; }
  // Whether every job order is a key and each key's plugin says
  // Plugin::PendingOrderReadsOnlySpec: a job that holds nothing has the
  // same keys in every session while its tasks and the policy are the same
  // (SortJobsByKeys keeps its row).
  bool job_order_static() const { return job_order_keyed_ && order_static_; }
  // Whether every registered admission hook's plugin says
  // Plugin::AdmissionReadsOnlyMinimum and every job order key's plugin says
  // Plugin::PendingOrderReadsOnlySpec (and every job order is a key):
  // enqueue may group the pending jobs (scheduler/actions/enqueue.cc).
  bool admission_grouped() const {
    return admission_groups_ && admission_pure_ && admission_keyed_ && job_order_static();
  }
  // EngineOptions::admission_groups.
  void set_admission_groups(bool on) { admission_groups_ = on; }
  // Records a committed placement or eviction (Statement::Commit calls these).
  void RecordBind(const Job& job, uint32_t task);
  // An eviction of a job still Running is a shrink; otherwise the job stops.
  void RecordEviction(const Job& job, uint32_t task, std::string reason, Timestamp deadline,
                      std::string preemptor, NodeId node);
  // Tasks evicted so far in this cycle (the actions' per-cycle cap).
  int evictions() const { return static_cast<int>(evictions_.size()); }
  // Statements that changed the state this cycle (Statement::Commit of a
  // top-level statement with at least one operation counts them): none
  // means the cycle left the state as it found it.
  void NoteCommit(bool admissions_only = false) {
    ++commits_;
    if (!admissions_only) ++placement_commits_;
  }
  int commits() const { return commits_; }
  // Unique to this session among the state's sessions.
  uint64_t stamp() const { return record_stamp_; }
  // Gangs the planner tried this cycle (allocate, backfill) and those whose
  // remembered verdict it gave back instead (GangPlacer::Recall).
  void NoteTried() { ++tried_; }
  void NoteRecalled(int n = 1) { recalled_ += n; }
  int tried() const { return tried_; }
  int recalled() const { return recalled_; }
  // Commits that did more than admit jobs (Pending -> Inqueue).
  int placement_commits() const { return placement_commits_; }

  // Closes the session: plugins' OnSessionClose, pipelined tasks released,
  // committed allocations turned into binds. Returns the decisions.
  Decisions Close();

 private:
  template <typename Fn>
  struct Registered {
    int tier;
    std::string plugin;
    Fn fn;
  };
  template <typename Fn>
  void Add(std::vector<Registered<Fn>>& list, std::string_view plugin, Fn fn) {
    if (opening_uses_time_ && IsVerdictHook(list)) verdict_reads_clock_ = true;
    const void* l = &list;
    if (!opening_admission_pure_ && (l == &job_valid_ || l == &job_enqueueable_)) admission_pure_ = false;
    if (!opening_admission_keyed_ && (l == &job_valid_ || l == &job_enqueueable_)) admission_keyed_ = false;
    list.push_back({current_tier_, std::string(plugin), std::move(fn)});
  }

  State& state_;
  const Clock& clock_;
  int64_t cycle_;
  const std::vector<std::vector<Plugin*>>& tiers_;
  int current_tier_ = 0;
  // While a plugin that UsesTime opens (verdict_reads_clock).
  bool opening_uses_time_ = false;
  // While a plugin that says AdmissionReadsOnlyJobAndQueues opens.
  bool opening_admission_pure_ = false;
  bool admission_pure_ = true;
  // The same for AdmissionReadsOnlyMinimum and PendingOrderReadsOnlySpec.
  bool opening_admission_keyed_ = false;
  bool opening_order_static_ = false;
  bool admission_keyed_ = true;
  bool order_static_ = true;
  bool admission_groups_ = true;
  bool verdict_reads_clock_ = false;
  template <typename List>
  bool IsVerdictHook(const List& list) const {
    const void* l = &list;
    return l == &task_order_ || l == &job_ready_ || l == &job_pipelined_ || l == &predicate_ ||
           l == &node_order_ || l == &allocatable_ || l == &gpu_select_;
  }
  std::vector<QueueInfo> queues_;
  std::vector<JobId> jobs_;
  std::vector<JobId> admitted_;
  int nodes_to_score_ = kDefaultNodesToScore;
  bool fast_paths_ = true;
  struct ReasonRecord {
    JobId job;
    std::string own;
    const std::string* kept = nullptr;  // KeepPendingReason: outlives the session
    const uint64_t* kept_gen = nullptr;  // its PlaceMemo::reason_gen (read with it, at Close)
  };
  std::vector<ReasonRecord> reasons_;
  uint64_t record_stamp_;  // Job::record_session of the jobs this session recorded a reason for
  VerdictContext* verdict_context_ = nullptr;
  JobOrderCache* job_order_cache_ = nullptr;
  uint64_t verdict_context_id_ = 0;  // 0: not computed yet
  std::vector<std::pair<JobId, uint32_t>> bound_;
  std::vector<Eviction> evictions_;
  bool closed_ = false;
  int commits_ = 0;
  int placement_commits_ = 0;
  int tried_ = 0;
  int recalled_ = 0;

  std::vector<Registered<QueueOrderFn>> queue_order_;
  std::vector<Registered<JobOrderFn>> job_order_;
  // Parallel to job_order_: each entry's key, or empty for a comparator.
  std::vector<JobOrderKeyFn> job_order_key_;
  bool job_order_keyed_ = true;
  std::vector<Registered<TaskOrderFn>> task_order_;
  std::vector<Registered<JobValidFn>> job_valid_;
  std::vector<Registered<JobEnqueueableFn>> job_enqueueable_;
  std::vector<Registered<JobReadyFn>> job_ready_;
  std::vector<Registered<JobPipelinedFn>> job_pipelined_;
  std::vector<Registered<JobStarvingFn>> job_starving_;
  std::vector<Registered<PredicateFn>> predicate_;
  std::vector<Registered<NodeOrderFn>> node_order_;
  bool node_order_reads_job_ = false;
  std::vector<Registered<PreemptableFn>> preemptable_;
  std::vector<Registered<ReclaimableFn>> reclaimable_;
  std::vector<Registered<OverusedFn>> overused_;
  std::vector<Registered<AllocatableFn>> allocatable_;
  std::vector<Registered<VictimTasksFn>> victim_tasks_;
  std::vector<Registered<GpuSelectFn>> gpu_select_;
  std::vector<Registered<JobPriorityFn>> job_priority_;
  std::vector<Registered<JobSpeedupFn>> job_speedup_;
  std::vector<Registered<ResizePaysFn>> resize_pays_;
  std::vector<Registered<PlacedSpeedupFn>> placed_speedup_;
  std::vector<Registered<StartPaysFn>> start_pays_;

  Buffers* buffers_ = nullptr;
  // Swaps every list with `b`'s (the same members, ListsOf).
  void SwapLists(Buffers& b);
};

struct Session::Buffers {
  std::vector<JobId> jobs;
  std::vector<JobId> admitted;
  std::vector<ReasonRecord> reasons;
  std::vector<std::pair<JobId, uint32_t>> bound;
  std::vector<Eviction> evictions;
  std::vector<Registered<QueueOrderFn>> queue_order;
  std::vector<Registered<JobOrderFn>> job_order;
  std::vector<JobOrderKeyFn> job_order_key;
  std::vector<Registered<TaskOrderFn>> task_order;
  std::vector<Registered<JobValidFn>> job_valid;
  std::vector<Registered<JobEnqueueableFn>> job_enqueueable;
  std::vector<Registered<JobReadyFn>> job_ready;
  std::vector<Registered<JobPipelinedFn>> job_pipelined;
  std::vector<Registered<JobStarvingFn>> job_starving;
  std::vector<Registered<PredicateFn>> predicate;
  std::vector<Registered<NodeOrderFn>> node_order;
  std::vector<Registered<PreemptableFn>> preemptable;
  std::vector<Registered<ReclaimableFn>> reclaimable;
  std::vector<Registered<OverusedFn>> overused;
  std::vector<Registered<AllocatableFn>> allocatable;
  std::vector<Registered<VictimTasksFn>> victim_tasks;
  std::vector<Registered<GpuSelectFn>> gpu_select;
  std::vector<Registered<JobPriorityFn>> job_priority;
  std::vector<Registered<JobSpeedupFn>> job_speedup;
  std::vector<Registered<ResizePaysFn>> resize_pays;
  std::vector<Registered<PlacedSpeedupFn>> placed_speedup;
  std::vector<Registered<StartPaysFn>> start_pays;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_SESSION_H_
