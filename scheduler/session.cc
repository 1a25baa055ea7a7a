// How the plugins' callbacks combine across tiers is written here, once.
#include "scheduler/session.h"

#include <algorithm>
#include <map>
#include <set>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"

namespace ringmaster::scheduler {

Session::Session(State& state, const Clock& clock, int64_t cycle,
                 const std::vector<std::vector<Plugin*>>& tiers, Buffers* buffers)
    : state_(state), clock_(clock), cycle_(cycle), tiers_(tiers), record_stamp_(state.NewSession()),
      buffers_(buffers) {
  if (buffers_) SwapLists(*buffers_);
  const auto& tree = state_.queues();
  queues_.resize(tree.size());
  for (uint32_t q = 0; q < tree.size(); ++q) {
    queues_[q].id = QueueId(q);
    queues_[q].spec = &tree.spec(q);
    queues_[q].usage = &state_.queue_usage(QueueId(q));
    queues_[q].deserved = state_.total();
    queues_[q].request = queues_[q].allocated();  // descendants included
  }
  // One walk of each set (assign would walk it twice: once to count).
  jobs_.reserve(state_.waiting_jobs().size());
  for (JobId id : state_.waiting_jobs()) jobs_.push_back(id);
  admitted_.reserve(state_.admitted_waiting_jobs().size());
  for (JobId id : state_.admitted_waiting_jobs()) admitted_.push_back(id);
  // Pending demand and admitted minimums, rolled up the queue tree from
  // what the state keeps per queue (State::waiting_sums), not job by job.
  const auto& sums = state_.waiting_sums();
  for (uint32_t leaf = 0; leaf < sums.size() && leaf < tree.size(); ++leaf) {
    const State::WaitingSums& w = sums[leaf];
    if (w.pending.IsZero() && w.inqueue.IsZero()) continue;
    for (int q = static_cast<int>(leaf); q >= 0; q = tree.parent(static_cast<uint32_t>(q))) {
      queues_[q].request += w.pending;
      queues_[q].inqueue += w.inqueue;
    }
  }
  for (size_t t = 0; t < tiers_.size(); ++t) {
    current_tier_ = static_cast<int>(t);
    for (Plugin* p : tiers_[t]) {
      opening_uses_time_ = p->UsesTime() && p->VerdictHooksReadTime();
      opening_admission_pure_ = p->AdmissionReadsOnlyJobAndQueues();
      opening_admission_keyed_ = p->AdmissionReadsOnlyMinimum();
      opening_order_static_ = p->PendingOrderReadsOnlySpec();
      p->OnSessionOpen(*this);
    }
    opening_uses_time_ = false;
    opening_admission_pure_ = false;
    opening_admission_keyed_ = false;
    opening_order_static_ = false;
  }
}

Session::~Session() {
  if (!buffers_) return;
  SwapLists(*buffers_);
  // Cleared, capacity kept: the next session fills them again.
  auto clear = [](auto&... lists) { (lists.clear(), ...); };
  Buffers& b = *buffers_;
  clear(b.jobs, b.admitted, b.reasons, b.bound, b.evictions, b.queue_order, b.job_order, b.job_order_key, b.task_order,
        b.job_valid, b.job_enqueueable, b.job_ready, b.job_pipelined, b.job_starving, b.predicate, b.node_order,
        b.preemptable, b.reclaimable, b.overused, b.allocatable, b.victim_tasks, b.gpu_select, b.job_priority,
        b.job_speedup, b.resize_pays, b.placed_speedup, b.start_pays);
}

void Session::AddAdmitted(std::vector<JobId>& ids) {
  if (ids.empty()) return;
  std::sort(ids.begin(), ids.end());
  // Merged from the back into the grown list (std::inplace_merge would
  // allocate a buffer each cycle).
  size_t a = admitted_.size(), b = ids.size();
  admitted_.resize(a + b);
  for (size_t out = a + b; b > 0;) {
    if (a > 0 && ids[b - 1] < admitted_[a - 1]) {
      admitted_[--out] = admitted_[--a];
    } else {
      admitted_[--out] = ids[--b];
    }
  }
}

void Session::SwapLists(Buffers& b) {
  jobs_.swap(b.jobs);
  admitted_.swap(b.admitted);
  reasons_.swap(b.reasons);
  bound_.swap(b.bound);
  evictions_.swap(b.evictions);
  queue_order_.swap(b.queue_order);
  job_order_.swap(b.job_order);
  job_order_key_.swap(b.job_order_key);
  task_order_.swap(b.task_order);
  job_valid_.swap(b.job_valid);
  job_enqueueable_.swap(b.job_enqueueable);
  job_ready_.swap(b.job_ready);
  job_pipelined_.swap(b.job_pipelined);
  job_starving_.swap(b.job_starving);
  predicate_.swap(b.predicate);
  node_order_.swap(b.node_order);
  preemptable_.swap(b.preemptable);
  reclaimable_.swap(b.reclaimable);
  overused_.swap(b.overused);
  allocatable_.swap(b.allocatable);
  victim_tasks_.swap(b.victim_tasks);
  gpu_select_.swap(b.gpu_select);
  job_priority_.swap(b.job_priority);
  job_speedup_.swap(b.job_speedup);
  resize_pays_.swap(b.resize_pays);
  placed_speedup_.swap(b.placed_speedup);
  start_pays_.swap(b.start_pays);
}

void Session::AddQueueOrderFn(std::string_view p, QueueOrderFn fn) { Add(queue_order_, p, std::move(fn)); }
void Session::AddJobOrderFn(std::string_view p, JobOrderFn fn) {
  Add(job_order_, p, std::move(fn));
  job_order_key_.emplace_back();
  job_order_keyed_ = false;
}
void Session::AddJobOrderKeyFn(std::string_view p, JobOrderKeyFn key) {
  // No comparator: JobOrder compares the key (job_order_key_) itself.
  Add(job_order_, p, JobOrderFn());
  if (!opening_order_static_) order_static_ = false;
  job_order_key_.push_back(std::move(key));
}
void Session::AddTaskOrderFn(std::string_view p, TaskOrderFn fn) { Add(task_order_, p, std::move(fn)); }
void Session::AddJobValidFn(std::string_view p, JobValidFn fn) { Add(job_valid_, p, std::move(fn)); }
void Session::AddJobEnqueueableFn(std::string_view p, JobEnqueueableFn fn) { Add(job_enqueueable_, p, std::move(fn)); }
void Session::AddJobReadyFn(std::string_view p, JobReadyFn fn) { Add(job_ready_, p, std::move(fn)); }
void Session::AddJobPipelinedFn(std::string_view p, JobPipelinedFn fn) { Add(job_pipelined_, p, std::move(fn)); }
void Session::AddJobStarvingFn(std::string_view p, JobStarvingFn fn) { Add(job_starving_, p, std::move(fn)); }
void Session::AddPredicateFn(std::string_view p, PredicateFn fn) { Add(predicate_, p, std::move(fn)); }
void Session::AddNodeOrderFn(std::string_view p, NodeOrderFn fn) { Add(node_order_, p, std::move(fn)); }
void Session::AddPreemptableFn(std::string_view p, PreemptableFn fn) { Add(preemptable_, p, std::move(fn)); }
void Session::AddReclaimableFn(std::string_view p, ReclaimableFn fn) { Add(reclaimable_, p, std::move(fn)); }
void Session::AddOverusedFn(std::string_view p, OverusedFn fn) { Add(overused_, p, std::move(fn)); }
void Session::AddAllocatableFn(std::string_view p, AllocatableFn fn) { Add(allocatable_, p, std::move(fn)); }
void Session::AddVictimTasksFn(std::string_view p, VictimTasksFn fn) { Add(victim_tasks_, p, std::move(fn)); }
void Session::AddGpuSelectFn(std::string_view p, GpuSelectFn fn) { Add(gpu_select_, p, std::move(fn)); }
void Session::AddJobPriorityFn(std::string_view p, JobPriorityFn fn) { Add(job_priority_, p, std::move(fn)); }
void Session::AddJobSpeedupFn(std::string_view p, JobSpeedupFn fn) { Add(job_speedup_, p, std::move(fn)); }
void Session::AddResizePaysFn(std::string_view p, ResizePaysFn fn) { Add(resize_pays_, p, std::move(fn)); }
void Session::AddPlacedSpeedupFn(std::string_view p, PlacedSpeedupFn fn) { Add(placed_speedup_, p, std::move(fn)); }
void Session::AddStartPaysFn(std::string_view p, StartPaysFn fn) { Add(start_pays_, p, std::move(fn)); }

bool Session::StartPays(const Job& job) const {
  for (const auto& e : start_pays_) {
    if (!e.fn(job)) return false;
  }
  return true;
}

std::optional<double> Session::JobSpeedup(const Job& job, int members) const {
  for (const auto& e : job_speedup_) {
    if (std::optional<double> v = e.fn(job, members)) return v;
  }
  return std::nullopt;
}

bool Session::ResizePays(const Job& job, int from, double from_speedup, int to, double to_speedup) const {
  for (const auto& e : resize_pays_) {
    if (!e.fn(job, from, from_speedup, to, to_speedup)) return false;
  }
  return true;
}

std::optional<double> Session::PlacedSpeedup(const Job& job) const {
  for (const auto& e : placed_speedup_) {
    if (std::optional<double> v = e.fn(job)) return v;
  }
  return std::nullopt;
}

// Orders: the first decisive comparison, in tier order, wins.
bool Session::QueueOrder(const QueueInfo& l, const QueueInfo& r) const {
  for (const auto& e : queue_order_) {
    if (int c = e.fn(l, r); c != 0) return c < 0;
  }
  return l.id < r.id;
}

bool Session::JobOrder(const Job& l, const Job& r) const {
  for (size_t i = 0; i < job_order_.size(); ++i) {
    if (const JobOrderKeyFn& key = job_order_key_[i]) {
      const int64_t a = key(l), b = key(r);
      if (a != b) return a < b;
    } else if (int c = job_order_[i].fn(l, r); c != 0) {
      return c < 0;
    }
  }
  if (l.created() != r.created()) return l.created() < r.created();
  return l.id() < r.id();
}

bool Session::TaskOrder(const TaskRef& l, const TaskRef& r) const {
  for (const auto& e : task_order_) {
    if (int c = e.fn(l, r); c != 0) return c < 0;
  }
  return l.index < r.index;
}

// Checks: every plugin must pass; the first failure is the reason.
Verdict Session::JobValid(const Job& job) const {
  for (const auto& e : job_valid_) {
    Verdict v = e.fn(job);
    if (!v.ok() && !v.abstains()) return v;
  }
  return Verdict::Fit();
}

namespace {

// Votes: inside a tier any rejecting verdict rejects and any Fit permits; a
// tier of Abstains hands over to the next tier; nobody voting permits.
template <typename List>
Verdict Vote(const List& fns, const Job& job) {
  size_t i = 0;
  while (i < fns.size()) {
    const int tier = fns[i].tier;
    bool permit = false;
    for (; i < fns.size() && fns[i].tier == tier; ++i) {
      Verdict v = fns[i].fn(job);
      if (v.ok()) {
        permit = true;
      } else if (!v.abstains()) {
        return v;
      }
    }
    if (permit) return Verdict::Fit();
  }
  return Verdict::Fit();
}

}  // namespace

Verdict Session::JobEnqueueable(const Job& job) const { return Vote(job_enqueueable_, job); }

bool Session::JobPipelined(const Job& job) const { return Vote(job_pipelined_, job).ok(); }

bool Session::JobReady(const Job& job) const {
  for (const auto& e : job_ready_) {
    if (!e.fn(job)) return false;
  }
  return true;
}

bool Session::JobStarving(const Job& job) const {
  if (job_starving_.empty()) return false;
  for (const auto& e : job_starving_) {
    if (!e.fn(job)) return false;
  }
  return true;
}

Verdict Session::Predicate(const TaskRef& task, NodeId node) const {
  for (const auto& e : predicate_) {
    Verdict v = e.fn(task, node);
    if (!v.ok()) return v;
  }
  return Verdict::Fit();
}

int64_t Session::NodeOrder(const TaskRef& task, NodeId node) const {
  int64_t score = 0;
  for (const auto& e : node_order_) score += e.fn(task, node);
  return score;
}

namespace {

// `a` and `b` are answers of two plugins to `candidates`. When both keep the
// candidates' order (every built-in plugin does), one forward walk over the
// candidates intersects them: no table, no look at the jobs. Otherwise a
// hash set does. Keeps `a`'s order either way.
std::vector<TaskRef> Intersect(const std::vector<TaskRef>& candidates, std::vector<TaskRef> a,
                               const std::vector<TaskRef>& b) {
  const auto same = [](const TaskRef& x, const TaskRef& y) { return x.job == y.job && x.index == y.index; };
  {
    std::vector<TaskRef> both;  // apart: `a` stays whole for the table below
    both.reserve(std::min(a.size(), b.size()));
    size_t i = 0, j = 0;
    for (const TaskRef& c : candidates) {
      const bool in_a = i < a.size() && same(a[i], c);
      const bool in_b = j < b.size() && same(b[j], c);
      if (in_a && in_b) both.push_back(c);
      i += in_a;
      j += in_b;
    }
    if (i == a.size() && j == b.size()) return both;
  }
  auto key = [](const TaskRef& t) { return (uint64_t{t.job->id().value()} << 32) | t.index; };
  absl::flat_hash_set<uint64_t> keep;  // open addressing: no allocation per task
  keep.reserve(b.size());
  for (const TaskRef& t : b) keep.insert(key(t));
  std::erase_if(a, [&](const TaskRef& t) { return !keep.count(key(t)); });
  return a;
}

// Victims: the first tier with an opinion decides, by intersection of its
// plugins' answers.
template <typename List>
std::vector<TaskRef> IntersectVictims(const List& fns, const TaskRef& who,
                                      const std::vector<TaskRef>& candidates) {
  size_t i = 0;
  while (i < fns.size()) {
    const int tier = fns[i].tier;
    bool first = true;
    std::vector<TaskRef> result;
    for (; i < fns.size() && fns[i].tier == tier; ++i) {
      std::vector<TaskRef> v = fns[i].fn(who, candidates);
      if (first) {
        result = std::move(v);
        first = false;
        continue;
      }
      result = Intersect(candidates, std::move(result), v);
    }
    if (!result.empty()) return result;
  }
  return {};
}

}  // namespace

std::vector<TaskRef> Session::Preemptable(const TaskRef& preemptor,
                                          const std::vector<TaskRef>& candidates) const {
  return IntersectVictims(preemptable_, preemptor, candidates);
}

std::vector<TaskRef> Session::Reclaimable(const TaskRef& reclaimer,
                                          const std::vector<TaskRef>& candidates) const {
  return IntersectVictims(reclaimable_, reclaimer, candidates);
}

bool Session::Overused(const QueueInfo& queue) const {
  for (const auto& e : overused_) {
    if (e.fn(queue)) return true;
  }
  return false;
}

bool Session::Allocatable(const QueueInfo& queue, const TaskRef& task) const {
  for (const auto& e : allocatable_) {
    if (!e.fn(queue, task)) return false;
  }
  return true;
}

std::vector<TaskRef> Session::VictimTasks() const {
  std::vector<TaskRef> out;
  std::set<std::pair<uint32_t, uint32_t>> seen;
  for (const auto& e : victim_tasks_) {
    for (const TaskRef& t : e.fn()) {
      if (seen.insert({t.job->id().value(), t.index}).second) out.push_back(t);
    }
  }
  return out;
}

namespace {

// A stable insertion sort: the ranges it sorts are a node's GPUs or islands
// (a few), and std::stable_sort would allocate a buffer for them.
template <typename It, typename Less>
void SmallStableSort(It first, It last, Less less) {
  for (It i = first; i != last; ++i) {
    for (It j = i; j != first && less(*j, *(j - 1)); --j) std::iter_swap(j, j - 1);
  }
}

// Built-in GPU choice. Whole GPUs: the NVLink island with the fewest free
// devices that still holds the task (so larger islands stay whole), lowest
// indices first; else the lowest free indices. Shares: the device with the
// least free share that still fits (best fit), lowest index on ties.
bool DefaultSelectGpus(const State& state, const TaskRef& task, NodeId node, bool future,
                       std::vector<int16_t>* gpus) {
  const GpuRequest& req = task.job->gpu(task.index);
  gpus->clear();
  if (req.count == 0) return true;
  const auto& devs = state.cluster().node(node).gpus;
  if (req.whole()) {
    // The free GPUs as (island, index), grouped by island ascending, each
    // island's in device order (a stable sort; inline storage: this runs
    // for every node a placement looks at).
    absl::InlinedVector<std::pair<int, int16_t>, 16> free;
    for (const auto& g : devs) {
      if (state.GpuFree(node, g.index, future) == topology::kMilliPerGpu) {
        free.push_back({g.nvlink_island, static_cast<int16_t>(g.index)});
      }
    }
    if (static_cast<int>(free.size()) < req.count) return false;
    gpus->reserve(static_cast<size_t>(req.count));
    SmallStableSort(free.begin(), free.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
    // Islands as [first, last) ranges of `free`, ascending.
    absl::InlinedVector<std::pair<uint32_t, uint32_t>, 8> islands;
    for (uint32_t i = 0; i < free.size(); ++i) {
      if (i == 0 || free[i].first != free[i - 1].first) islands.push_back({i, i});
      islands.back().second = i + 1;
    }
    auto size = [](const std::pair<uint32_t, uint32_t>& r) { return r.second - r.first; };
    const std::pair<uint32_t, uint32_t>* best = nullptr;
    for (const auto& r : islands) {
      if (static_cast<int>(size(r)) >= req.count && (!best || size(r) < size(*best))) best = &r;
    }
    if (best) {
      for (uint32_t i = best->first; i < best->first + static_cast<uint32_t>(req.count); ++i) {
        gpus->push_back(free[i].second);
      }
      return true;
    }
    // Spans islands: take the fullest islands first to leave whole ones.
    SmallStableSort(islands.begin(), islands.end(), [&](const auto& a, const auto& b) { return size(a) > size(b); });
    for (const auto& r : islands) {
      for (uint32_t i = r.first; i < r.second; ++i) {
        if (static_cast<int>(gpus->size()) == req.count) break;
        gpus->push_back(free[i].second);
      }
    }
    std::sort(gpus->begin(), gpus->end());
    return true;
  }
  int best = -1;
  int64_t best_free = 0;
  for (const auto& g : devs) {
    const int64_t free = state.GpuFree(node, g.index, future);
    if (free >= req.milli && (best < 0 || free < best_free)) {
      best = g.index;
      best_free = free;
    }
  }
  if (best < 0) return false;
  gpus->push_back(static_cast<int16_t>(best));
  return true;
}

}  // namespace

bool Session::SelectGpus(const TaskRef& task, NodeId node, std::vector<int16_t>* gpus) const {
  if (!gpu_select_.empty()) return gpu_select_.front().fn(task, node, gpus);
  return DefaultSelectGpus(state_, task, node, /*future=*/false, gpus);
}

bool Session::SelectFutureGpus(const TaskRef& task, NodeId node, std::vector<int16_t>* gpus) const {
  return DefaultSelectGpus(state_, task, node, /*future=*/true, gpus);
}

void Session::SetPendingReason(const Job& job, std::string reason) {
  state_.job(job.id()).set_record_session(record_stamp_);
  reasons_.push_back({job.id(), std::move(reason), nullptr});
}

void Session::KeepPendingReason(const Job& job, const std::string& reason, const uint64_t& gen) {
  // The job's first record this session, and its reason already: Close
  // would change nothing (a later record still wins over none). The same
  // generation is the same text, known without comparing.
  if (job.record_session() != record_stamp_) {
    if (gen != 0 && job.pending_from() == gen) return;
    if (job.pending_reason() == reason) {
      // The same text under another generation: named by this one from
      // now on, so the next recall of it compares no text.
      if (gen != 0) state_.job(job.id()).mark_pending_from(gen);
      return;
    }
  }
  state_.job(job.id()).set_record_session(record_stamp_);
  reasons_.push_back({job.id(), std::string(), &reason, &gen});
}

uint64_t Session::VerdictContextId() {
  if (!verdict_context_) return 0;
  if (verdict_context_id_ != 0) return verdict_context_id_;
  VerdictContext& c = *verdict_context_;
  bool same = c.deserved.size() == queues_.size();
  for (size_t q = 0; same && q < queues_.size(); ++q) same = c.deserved[q] == queues_[q].deserved;
  if (!same) {
    ++c.id;
    c.deserved.resize(queues_.size());
    for (size_t q = 0; q < queues_.size(); ++q) c.deserved[q] = queues_[q].deserved;
  }
  verdict_context_id_ = c.id;
  return c.id;
}

void Session::RecordBind(const Job& job, uint32_t task) { bound_.emplace_back(job.id(), task); }

std::string_view EvictionKindName(Eviction::Kind k) {
  switch (k) {
    case Eviction::Kind::kEvict: return "evict";
    case Eviction::Kind::kShrink: return "shrink";
    case Eviction::Kind::kCancel: return "cancel";
  }
  return "?";
}

std::string_view MembershipKindName(MembershipChange::Kind k) {
  switch (k) {
    case MembershipChange::Kind::kStart: return "start";
    case MembershipChange::Kind::kShrink: return "shrink";
    case MembershipChange::Kind::kGrow: return "grow";
    case MembershipChange::Kind::kFailure: return "failure";
  }
  return "?";
}

Eviction MakeEviction(const State& state, const Job& job, uint32_t task, std::string reason,
                      NodeId node) {
  const Task& t = job.task(task);
  Eviction e;
  e.job = job.id();
  e.task = task;
  e.task_name = t.name;
  e.node = node.valid() ? node : t.node;
  e.node_name = e.node.valid() ? state.cluster().node(e.node).name : "";
  e.reason = std::move(reason);
  return e;
}

void Session::RecordEviction(const Job& job, uint32_t task, std::string reason, Timestamp deadline,
                             std::string preemptor, NodeId node) {
  Eviction e = MakeEviction(state_, job, task, std::move(reason), node);
  e.kind = job.phase() == JobPhase::kRunning ? Eviction::Kind::kShrink : Eviction::Kind::kEvict;
  e.deadline = deadline;
  e.preemptor = std::move(preemptor);
  evictions_.push_back(std::move(e));
}

Decisions Session::Close() {
  Decisions d;
  if (closed_) return d;
  closed_ = true;
  d.cycle = cycle_;
  for (const auto& tier : tiers_) {
    for (Plugin* p : tier) p->OnSessionClose(*this);
  }
  // Pipelined tasks were promises for this cycle only (only an admitted
  // job is placed).
  for (JobId id : admitted_) {
    Job& job = state_.job(id);
    if (job.PipelinedCount() == 0 || job.nominated()) continue;
    for (uint32_t i = 0; i < job.tasks().size(); ++i) {
      if (job.task(i).state == TaskState::kPipelined) state_.Unplace(job, i);
    }
  }
  for (const auto& [id, task] : bound_) {
    Job& job = state_.job(id);
    const Task& t = job.task(task);
    if (t.state != TaskState::kAllocated) continue;
    state_.SetState(job, task, TaskState::kBinding);
    Bind b;
    b.job = id;
    b.task = task;
    b.task_name = t.name;
    b.node = t.node;
    b.node_name = state_.cluster().node(t.node).name;
    b.gpus = t.gpus;
    d.binds.push_back(std::move(b));
  }
  d.evictions = std::move(evictions_);
  // Last reason per job wins (the records walked from the last, each job's
  // first one taken: Job::reason_session marks it); jobs that got placed have
  // none. Only reasons that changed are decisions (by job id); every
  // waiting job's current one is Job::pending_reason.
  const uint64_t stamp = state_.NewSession();
  for (size_t k = reasons_.size(); k-- > 0;) {
    ReasonRecord& rec = reasons_[k];
    Job& job = state_.job(rec.job);
    if (job.reason_session() == stamp) continue;  // a later one won
    job.set_reason_session(stamp);
    if (job.GangReady()) continue;
    const std::string& r = rec.kept ? *rec.kept : rec.own;
    const uint64_t gen = rec.kept ? *rec.kept_gen : 0;
    if (gen != 0 && job.pending_from() == gen) continue;  // the same text
    if (job.pending_reason() == r) {
      if (gen != 0) job.mark_pending_from(gen);
      continue;
    }
    if (rec.kept) {
      job.set_pending_reason_from(r, gen);
    } else {
      job.set_pending_reason(std::move(rec.own));
    }
    d.pending.push_back({rec.job, job.name(), job.pending_reason()});
  }
  std::sort(d.pending.begin(), d.pending.end(), [](const auto& a, const auto& b) { return a.job < b.job; });
  return d;
}

}  // namespace ringmaster::scheduler
