#include "scheduler/actions/victims.h"

#include <algorithm>
#include <cmath>
#include <functional>
#include <queue>
#include <set>

#include "absl/container/flat_hash_map.h"
#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "scheduler/actions/placement.h"
#include "scheduler/statement.h"

namespace ringmaster::scheduler {
namespace {

int64_t WholeGpusOf(const Job& job, uint32_t i) {
  const GpuRequest& g = job.gpu(i);
  return g.whole() ? g.count : 0;
}

// Tasks of `need` that fit in `room`.
template <typename Room, typename Need>
int64_t Fits(const Room& r, const Need& n) {
  int64_t k = r.gpus / n.gpus;
  if (n.cpu > 0) k = std::min<int64_t>(k, r.cpu / n.cpu);
  if (n.mem > 0) k = std::min<int64_t>(k, r.mem / n.mem);
  return std::max<int64_t>(k, 0);
}

// A member that counts toward its gang and can be stopped: bound or running
// (a task placed in this very cycle has no process to stop yet).
bool Stoppable(TaskState s) { return s == TaskState::kBinding || s == TaskState::kBound || s == TaskState::kRunning; }

absl::StatusOr<Timestamp> SecondsArg(const PluginArgs& args, std::string_view key, Timestamp def_ms) {
  RM_ASSIGN_OR_RETURN(auto v, args.Double(key, static_cast<double>(def_ms) / 1000.0));
  if (!(v >= 0) || v > 1e9) return args.Error(key, "must be a number of seconds >= 0");
  return static_cast<Timestamp>(v * 1000.0);
}

}  // namespace

absl::StatusOr<EvictionArgs> ReadEvictionArgs(const PluginArgs& args) {
  EvictionArgs out;
  RM_ASSIGN_OR_RETURN(auto grace, SecondsArg(args, "gracePeriod", out.grace_ms));
  RM_ASSIGN_OR_RETURN(auto cooldown, SecondsArg(args, "cooldown", out.cooldown_ms));
  RM_ASSIGN_OR_RETURN(auto cap, args.Int("maxEvictionsPerCycle", out.max_evictions));
  if (cap < 0 || cap > 1'000'000) {
    return args.Error("maxEvictionsPerCycle", "must be an integer in [0, 1000000] (0: no limit)");
  }
  RM_RETURN_IF_ERROR(args.Finish());
  out.grace_ms = grace;
  out.cooldown_ms = cooldown;
  out.max_evictions = static_cast<int>(cap);
  return out;
}

VictimPicker::PriorityMemo& VictimPicker::Priorities() {
  thread_local PriorityMemo memo;
  return memo;
}

VictimPicker::VictimPicker(Session& session, EvictMode mode, const EvictionArgs& args)
    : s_(session), mode_(mode), args_(args) {
  PriorityMemo& m = Priorities();
  if (++m.last == 0) {  // wrapped: no old stamp may match
    std::fill(m.stamp.begin(), m.stamp.end(), 0);
    m.last = 1;
  }
  priority_stamp_ = m.last;
}

int64_t VictimPicker::PriorityOf(const Job& j) {
  const uint32_t id = j.id().value();
  PriorityMemo& m = Priorities();
  if (id >= m.stamp.size()) {
    const size_t n = std::max<size_t>(id + 1, s_.state().num_jobs()) * 3 / 2;
    m.stamp.resize(n, 0);
    m.value.resize(n, 0);
  }
  if (m.stamp[id] != priority_stamp_) {
    m.value[id] = s_.JobPriority(j);
    m.stamp[id] = priority_stamp_;
  }
  return m.value[id];
}

VictimPicker::Room VictimPicker::RoomAt(uint32_t node) const {
  const State& st = s_.state();
  const NodeId n(node);
  const Resources& a = st.cluster().node(n).allocatable;
  const Resources& u = st.node(n).used;
  return {st.FreeWholeGpus(n), a.cpu_milli() - u.cpu_milli(), a.memory() - u.memory()};
}

bool VictimPicker::Eligible(const Job& p, int64_t p_priority, const Job& v, int64_t v_priority) const {
  if (v.id() == p.id() || v.phase() != JobPhase::kRunning) return false;
  if (v.Count(TaskState::kAllocated) > 0) return false;  // placed this cycle: not yet started
  if (p.YieldedTo(v.id())) return false;  // rule 4: never take back from whom it yielded to
  // Loans: what an elastic job grew into above its desired size goes back to
  // any waiting gang of at least its priority (the jobs' own priorities: a
  // plugin's ranking, such as las's levels, does not keep a loan), its
  // cooldown notwithstanding.
  if (mode_ == EvictMode::kLoan) return v.elastic() && v.ReadyCount() > LoanFloor(v) && v.priority() <= p.priority();
  const bool by_rule = mode_ == EvictMode::kPreempt ? v.queue() == p.queue() && v_priority < p_priority
                                                    : v.queue() != p.queue();
  if (!by_rule) return false;
  if (v.last_resize() >= 0 && s_.now() - v.last_resize() < args_.cooldown_ms) {
    // Only its cooldown keeps it: when that ends, the answer may change.
    cooldown_end_ = std::min(cooldown_end_, v.last_resize() + args_.cooldown_ms);
    return false;
  }
  return true;
}

namespace {

// The queue chain of a job in `v_queue` below the lowest common ancestor
// with `p_queue`: v's queue first, the giver (the ancestor just below it)
// last; empty when one queue contains the other. Read from a per-thread
// buffer (asked per unit: no allocation), valid until the next call.
const std::vector<int>& GiverChain(const Session& s, uint32_t p_queue, uint32_t v_queue) {
  const auto& tree = s.state().queues();
  thread_local std::vector<int> pv, vv;
  pv.clear();
  vv.clear();
  for (int q = static_cast<int>(p_queue); q >= 0; q = tree.parent(q)) pv.push_back(q);
  for (int q = static_cast<int>(v_queue); q >= 0; q = tree.parent(q)) vv.push_back(q);
  while (!pv.empty() && !vv.empty() && pv.back() == vv.back()) {
    pv.pop_back();
    vv.pop_back();
  }
  if (pv.empty()) vv.clear();
  return vv;
}

// The giver borrows: above its deserved share (GPUs), what it is already
// releasing not counted (a queue giving back is not taken from again for
// the same excess while its victims stop).
bool Borrows(const QueueInfo& giver) {
  return giver.allocated().gpu_milli() - giver.usage->releasing_gpu_milli > giver.deserved.gpu_milli();
}

}  // namespace

bool VictimPicker::AnyQueueBorrows(const Session& s) {
  // A giver is any queue but a common ancestor of both sides; a root is one
  // when the queues have several (GiverChain).
  for (const QueueInfo& q : s.queues()) {
    if (Borrows(q)) return true;
  }
  return false;
}

bool VictimPicker::ReclaimKeepsShares(uint32_t p_queue, const Job& v, const Resources& take) const {
  const std::vector<int>& vv = GiverChain(s_, p_queue, v.queue().value());
  if (vv.empty() || !Borrows(s_.queues()[vv.back()])) return false;
  // No queue on the giver's side goes below its guarantee.
  for (int q : vv) {
    const QueueInfo& info = s_.queues()[q];
    if (info.allocated().gpu_milli() - info.usage->releasing_gpu_milli - take.gpu_milli() <
        info.spec->guarantee.gpu_milli()) {
      return false;
    }
  }
  return true;
}

// The taker ends no higher than its deserved share (every level up to the
// common ancestor with a giver: checked on the taker's own chain), what its
// queue was already promised (tasks pipelined onto releasing GPUs) counted.
static bool TakerStaysWithinShare(const Session& s, const Job& p) {
  const auto& tree = s.state().queues();
  for (int q = static_cast<int>(p.queue().value()); q >= 0; q = tree.parent(q)) {
    const QueueInfo& info = s.queues()[q];
    if (info.allocated().gpu_milli() + info.usage->pipelined_gpu_milli + p.min_request().gpu_milli() >
        info.deserved.gpu_milli()) {
      return false;
    }
  }
  return true;
}

void VictimPicker::BuildUnits(Offer& offer, const Job& cv, int64_t priority, std::span<const Member> held,
                              const std::vector<int>& allowed) const {
  Job& v = s_.mutable_state().job(cv.id());
  const uint32_t id = v.id().value();
  // Shrink units: the highest-indexed surplus members first (loans: only
  // those above the desired size, and never the whole job).
  const int spare = mode_ == EvictMode::kLoan ? v.ReadyCount() - LoanFloor(v) : v.GangSpare();
  int made = 0;
  // With a speed model (the speedup plugin), the speed-up per GPU each
  // member takes with it, in millionths: the member whose job loses least
  // goes first among shrinks of one priority. A job without a model counts
  // as scaling linearly (one member's speed per member).
  const bool by_speed = s_.has_job_speedup();
  const int member_gpus = std::max(1, v.GpusPerMember());
  auto loss = [&](int members) -> int64_t {
    if (!by_speed) return 0;
    const std::optional<double> a = s_.JobSpeedup(v, members);
    const std::optional<double> b = s_.JobSpeedup(v, members - 1);
    if (!a || !b) return 1'000'000;
    return static_cast<int64_t>(std::llround((*a - *b) / member_gpus * 1e6));
  };
  for (auto k = allowed.rbegin(); k != allowed.rend() && made < spare; ++k) {
    const Member& m = held[*k];
    Unit u;
    u.job = &v;
    u.job_id = id;
    u.first = static_cast<uint32_t>(offer.members.size());
    u.count = 1;
    offer.members.push_back(m);
    u.shrink = true;
    offer.costs.push_back(
        {0, priority, loss(v.ReadyCount() - made), -v.started(), -v.created(), -static_cast<int64_t>(id),
         -static_cast<int64_t>(m.task)});
    offer.units.push_back(u);
    ++made;
  }
  if (mode_ != EvictMode::kLoan && allowed.size() >= held.size()) {
    Unit u;
    u.job = &v;
    u.job_id = id;
    u.first = static_cast<uint32_t>(offer.members.size());
    u.count = static_cast<uint32_t>(held.size());
    offer.members.insert(offer.members.end(), held.begin(), held.end());
    offer.costs.push_back({1, priority, v.WorkAtRisk(s_.now()), -v.started(), -v.created(), -static_cast<int64_t>(id), 0});
    offer.units.push_back(u);
  }
}

void VictimPicker::IndexRunning() {
  const State& st = s_.state();
  const size_t queues = st.queues().size();
  running_.clear();
  running_.reserve(st.running_jobs().size());
  lowest_.assign(queues, kNoPriority);
  // Counting sort by queue: queue_start_[q + 1] counts q's jobs first.
  queue_start_.assign(queues + 1, 0);
  for (JobId id : st.running_jobs()) {
    const Job& v = st.job(id);
    running_.push_back(&v);
    ++queue_start_[v.queue().value() + 1];
  }
  for (size_t q = 0; q < queues; ++q) queue_start_[q + 1] += queue_start_[q];
  by_queue_.resize(running_.size());
  queue_at_.assign(queue_start_.begin(), queue_start_.end() - 1);
  for (const Job* v : running_) by_queue_[queue_at_[v->queue().value()]++] = v;
  running_indexed_ = true;
}

int64_t VictimPicker::LowestRunningPriority(uint32_t queue) {
  if (!running_indexed_) IndexRunning();
  if (lowest_[queue] == kNoPriority) {
    int64_t low = INT64_MAX;
    for (const Job* v : RunningIn(queue)) {
      if (v->phase() == JobPhase::kRunning) low = std::min(low, PriorityOf(*v));
    }
    lowest_[queue] = low;
  }
  return lowest_[queue];
}

VictimPicker::Offer& VictimPicker::OfferFor(const Job& p) {
  const int64_t p_priority = PriorityOf(p);
  const OfferKey key(p.queue().value(), p_priority);
  auto it = offers_.find(key);
  if (it != offers_.end()) return it->second;
  Offer& offer = offers_[key];
  const Job* builder = &p;
  if (auto d = deferred_.find(key); d != deferred_.end()) {
    builder = d->second;
    deferred_.erase(d);
  }
  BuildOffer(offer, *builder, p_priority);
  return offer;
}

Timestamp VictimPicker::NextChange(Timestamp now) {
  if (chose_) return now;
  if (!had_victims_ && deferred_.empty() && !screened_defer_) {
    return cooldown_end_ == kNoChange ? kNoChange : std::max(cooldown_end_, now);
  }
  return FirstCooldownEnd(s_.state(), args_.cooldown_ms, now);
}

Timestamp VictimPicker::FirstCooldownEnd(const State& state, Timestamp cooldown_ms, Timestamp now) {
  Timestamp end = kNoChange;
  for (JobId id : state.running_jobs()) {
    const Job& v = state.job(id);
    if (v.last_resize() >= 0 && now - v.last_resize() < cooldown_ms) {
      end = std::min(end, v.last_resize() + cooldown_ms);
    }
  }
  return end == kNoChange ? kNoChange : std::max(end, now);
}

void VictimPicker::BuildDeferred() {
  for (const auto& [key, p] : deferred_) BuildOffer(offers_[key], *p, key.second);
  deferred_.clear();
}

bool VictimPicker::FitsWithoutVictims(const Need& need, int count) const {
  const State& st = s_.state();
  int64_t cap = 0;
  st.free_index().ForEachNodeWithFree(need.gpus, [&](NodeId n) {
    if (st.node(n).schedulable) cap += Fits(RoomAt(n.value()), need);
    return cap < count;
  });
  return cap >= count;
}

void VictimPicker::BuildOffer(Offer& offer, const Job& p, int64_t p_priority) {
  offer.queue = p.queue().value();
  const State& st = s_.state();
  // The build's working lists are the thread's, kept across offers and
  // cycles (cleared here; nothing BuildOffer calls builds an offer).
  thread_local BuildScratch scratch;
  scratch.Clear();
  // Eligible jobs first, then their tasks into a vector of the right size
  // (growing it by doubling copied it over and over).
  std::vector<const Job*>& eligible = scratch.eligible;
  size_t task_count = 0;
  if (!running_indexed_) IndexRunning();
  // Preempt takes only from the preemptor's queue (Eligible): its running
  // jobs; reclaim from the others: every running job.
  const std::span<const Job* const> scan =
      mode_ == EvictMode::kPreempt ? RunningIn(p.queue().value()) : std::span<const Job* const>(running_);
  eligible.reserve(scan.size());
  for (const Job* vp : scan) {
    const Job& v = *vp;
    if (v.phase() != JobPhase::kRunning) continue;  // before asking its priority
    if (!Eligible(p, p_priority, v, PriorityOf(v))) continue;
    eligible.push_back(&v);
    task_count += v.tasks().size();
  }
  // Candidates come job by job, by task index; each one's member record
  // (node, what it frees) is read here, in the same pass.
  std::vector<TaskRef>& candidates = scratch.candidates;
  std::vector<Member>& members = scratch.members;
  std::vector<std::pair<int, int>>& range = scratch.range;  // per eligible job: its candidates [first, last)
  std::vector<int>& slot = scratch.slot;                    // per candidate: its job's index in `range`
  candidates.reserve(task_count);
  members.reserve(task_count);
  slot.reserve(task_count);
  range.reserve(eligible.size());
  for (const Job* v : eligible) {
    const int first = static_cast<int>(candidates.size());
    for (const Task& t : v->tasks()) {
      if (!Stoppable(t.state)) continue;
      candidates.push_back({v, t.index});
      const Resources& r = v->request(t.index);
      members.push_back({t.index, t.node.value(), WholeGpusOf(*v, t.index), r.cpu_milli(), r.memory()});
      slot.push_back(static_cast<int>(range.size()));
    }
    range.push_back({first, static_cast<int>(candidates.size())});
  }
  uint32_t first = 0;
  while (first < p.tasks().size() && p.task(first).state != TaskState::kPending) ++first;
  const TaskRef who{&p, first};
  // Loans are not the plugins' to keep: they were lent by the elastic
  // action while nobody waited (BuildUnits offers only members above the
  // desired size).
  const std::vector<TaskRef> allowed = mode_ == EvictMode::kPreempt  ? s_.Preemptable(who, candidates)
                                       : mode_ == EvictMode::kReclaim ? s_.Reclaimable(who, candidates)
                                                                      : candidates;
  // The plugins' answer as candidate indices. They keep the candidates'
  // order, so one forward walk finds them; otherwise a lookup table does.
  std::vector<int>& picked = scratch.picked;
  picked.reserve(allowed.size());
  {
    size_t c = 0;
    for (const TaskRef& a : allowed) {
      while (c < candidates.size() && (candidates[c].job != a.job || candidates[c].index != a.index)) ++c;
      if (c == candidates.size()) break;
      picked.push_back(static_cast<int>(c++));
    }
    if (picked.size() != allowed.size()) {
      absl::flat_hash_map<std::pair<const Job*, uint32_t>, int> where;
      for (size_t k = 0; k < candidates.size(); ++k) where[{candidates[k].job, candidates[k].index}] = static_cast<int>(k);
      picked.clear();
      for (const TaskRef& a : allowed) {
        if (auto f = where.find({a.job, a.index}); f != where.end()) picked.push_back(f->second);
      }
      std::sort(picked.begin(), picked.end());
      picked.erase(std::unique(picked.begin(), picked.end()), picked.end());
    }
  }
  // Grouped by job (candidate indices ascending are), each job's units,
  // and, while they are at hand, each (node, unit) pair once, counted per
  // node for the per-node lists (CSR) below.
  offer.units.reserve(picked.size() + picked.size() / 2);
  offer.costs.reserve(picked.size() + picked.size() / 2);
  offer.members.reserve(picked.size() * 2);
  const size_t n_nodes = st.num_nodes();
  std::vector<int>& last = scratch.last;
  last.assign(n_nodes, -1);
  offer.node_start.assign(n_nodes + 1, 0);
  std::vector<std::pair<uint32_t, int>>& at = scratch.at;  // (node, unit)
  at.reserve(picked.size() + picked.size() / 2);
  std::vector<int>& in_job = scratch.in_job;
  in_job.reserve(64);
  offer.by_job.reserve(eligible.size());
  for (size_t k = 0; k < picked.size();) {
    const int job_slot = slot[picked[k]];
    const auto [lo, hi] = range[job_slot];
    in_job.clear();
    for (; k < picked.size() && slot[picked[k]] == job_slot; ++k) in_job.push_back(picked[k] - lo);
    const Job* job = candidates[lo].job;
    const int before = static_cast<int>(offer.units.size());
    BuildUnits(offer, *job, PriorityOf(*job), std::span<const Member>(members.data() + lo, hi - lo), in_job);
    const int after = static_cast<int>(offer.units.size());
    if (after > before) offer.by_job[job->id().value()] = {before, after};
    for (int u = before; u < after; ++u) {
      for (const Member& m : offer.MembersOf(offer.units[u])) {
        if (last[m.node] == u) continue;
        last[m.node] = u;
        at.push_back({m.node, u});
        ++offer.node_start[m.node + 1];
      }
    }
  }
  // Per-node lists (CSR): fill by node, then order each node's list
  // cheapest first (a handful of units per node: no global sort needed).
  offer.nodes.reserve(std::min(n_nodes, at.size()));
  for (size_t n = 0; n < n_nodes; ++n) {
    if (offer.node_start[n + 1] > 0) offer.nodes.push_back(static_cast<uint32_t>(n));
    offer.node_start[n + 1] += offer.node_start[n];
  }
  offer.node_units.resize(offer.node_start[n_nodes]);
  std::vector<int>& fill = scratch.fill;
  fill.assign(offer.node_start.begin(), offer.node_start.end() - 1);
  for (const auto& [node, u] : at) offer.node_units[fill[node]++] = u;
  const auto cheaper = [&](int a, int b) { return offer.costs[a] < offer.costs[b]; };
  for (uint32_t n : offer.nodes) {
    std::sort(offer.node_units.begin() + offer.node_start[n], offer.node_units.begin() + offer.node_start[n + 1],
              cheaper);
  }
}

bool VictimPicker::Usable(const Offer& offer, const Job* p, const Unit& u) const {
  if (u.dead) return false;
  if (!p) return true;  // the generic part only (the global step order)
  if (p->YieldedTo(JobId(u.job_id))) return false;
  if (mode_ == EvictMode::kReclaim) return KeepsShares(offer, u);
  return true;
}

bool VictimPicker::KeepsShares(const Offer& offer, const Unit& u) const {
  if (offer.keeps_gen != commits_) {
    offer.keeps.assign(offer.units.size(), -1);
    offer.keeps_gen = commits_;
  }
  int8_t& known = offer.keeps[static_cast<size_t>(&u - offer.units.data())];
  if (known < 0) {
    // The preemptor counts only by its queue, which is the offer's.
    Resources take;
    for (const Member& m : offer.MembersOf(u)) take += u.job->request(m.task);
    known = ReclaimKeepsShares(offer.queue, *u.job, take) ? 1 : 0;
  }
  return known > 0;
}

VictimPicker::Room VictimPicker::BoundRoom(const Offer& offer, uint32_t n) const {
  if (!s_.state().node(NodeId(n)).schedulable) return Room{};
  Room room = RoomAt(n);
  for (int k : offer.AtNode(n)) {
    const Unit& unit = offer.units[k];
    if (unit.dead || (mode_ == EvictMode::kReclaim && !KeepsShares(offer, unit))) continue;
    for (const Member& m : offer.MembersOf(unit)) {
      if (m.node != n) continue;
      room.gpus += m.gpus;
      room.cpu += m.cpu;
      room.mem += m.mem;
    }
  }
  return room;
}

int64_t VictimPicker::ReclaimBound(uint32_t q, const Need& need) {
  LooseRoom& lr = loose_[q];
  const State& st = s_.state();
  if (lr.gen != commits_) {
    if (!running_indexed_) IndexRunning();
    const size_t queues = st.queues().size();
    lr.room.assign(st.num_nodes(), Room{});
    for (uint32_t n = 0; n < st.num_nodes(); ++n) {
      if (st.node(NodeId(n)).schedulable) lr.room[n] = RoomAt(n);
    }
    for (uint32_t vq = 0; vq < queues; ++vq) {
      if (vq == q || RunningIn(vq).empty()) continue;
      const std::vector<int>& chain = GiverChain(s_, q, vq);
      if (chain.empty() || !Borrows(s_.queues()[chain.back()])) continue;
      for (const Job* v : RunningIn(vq)) {
        if (v->phase() != JobPhase::kRunning) continue;
        const int64_t times = v->GangSpare() > 0 ? 2 : 1;
        for (const Task& t : v->tasks()) {
          if (!Stoppable(t.state) || !st.node(t.node).schedulable) continue;
          const Resources& r = v->request(t.index);
          Room& room = lr.room[t.node.value()];
          room.gpus += times * WholeGpusOf(*v, t.index);
          room.cpu += times * r.cpu_milli();
          room.mem += times * r.memory();
        }
      }
    }
    lr.tasks.clear();
    lr.gen = commits_;
  }
  auto [it, fresh] = lr.tasks.try_emplace(need, 0);
  if (fresh) {
    for (const Room& room : lr.room) it->second += Fits(room, need);
  }
  return it->second;
}

int64_t VictimPicker::MaxTasks(Offer& offer, const Job& p, const Need& need) const {
  Offer::Bound& b = offer.bound[need];
  const State& st = s_.state();
  auto usable = [&](const Unit& unit) { return !unit.dead && (mode_ != EvictMode::kReclaim || KeepsShares(offer, unit)); };
  if (b.gen != commits_) {
    b.tasks = 0;
    b.room.assign(st.num_nodes(), Room{});
    for (uint32_t n = 0; n < st.num_nodes(); ++n) {
      b.room[n] = BoundRoom(offer, n);
      b.tasks += Fits(b.room[n], need);
    }
    b.gen = commits_;
  }
  if (p.yielded_to().empty()) return b.tasks;
  // Without the units of the jobs it yielded to, on the nodes they touch.
  thread_local std::vector<std::pair<uint32_t, Room>> less;
  less.clear();
  for (JobId y : p.yielded_to()) {
    auto it = offer.by_job.find(y.value());
    if (it == offer.by_job.end()) continue;
    for (int k = it->second.first; k < it->second.second; ++k) {
      const Unit& unit = offer.units[k];
      if (!usable(unit)) continue;
      for (const Member& m : offer.MembersOf(unit)) {
        if (!st.node(NodeId(m.node)).schedulable) continue;
        less.push_back({m.node, Room{m.gpus, m.cpu, m.mem}});
      }
    }
  }
  if (less.empty()) return b.tasks;
  std::sort(less.begin(), less.end(), [](const auto& x, const auto& y) { return x.first < y.first; });
  int64_t tasks = b.tasks;
  for (size_t k = 0; k < less.size();) {
    const uint32_t n = less[k].first;
    Room room = b.room[n];
    tasks -= Fits(room, need);
    for (; k < less.size() && less[k].first == n; ++k) {
      room.gpus -= less[k].second.gpus;
      room.cpu -= less[k].second.cpu;
      room.mem -= less[k].second.mem;
    }
    tasks += Fits(room, need);
  }
  return tasks;
}

struct VictimPicker::Draft {
  absl::flat_hash_map<uint32_t, Room> free;  // nodes touched: room once the taken units are gone
  absl::flat_hash_set<int> taken;
  absl::flat_hash_set<uint32_t> whole_taken;  // by JobId value
};

bool VictimPicker::StepAt(const Offer& offer, const Job* p, const Need& need, uint32_t node, const Draft* draft,
                          Cost* cost, std::vector<int>* units) const {
  const std::span<const int> list = offer.AtNode(node);
  if (list.empty()) return false;
  Room room = RoomAt(node);
  if (draft) {
    if (auto it = draft->free.find(node); it != draft->free.end()) room = it->second;
  }
  // One more task than fits now: what it still lacks, per dimension.
  const int64_t want = Fits(room, need) + 1;
  if (units) units->clear();
  for (int u : list) {
    const Unit& unit = offer.units[u];
    if (!Usable(offer, p, unit)) continue;
    if (draft && (draft->taken.count(u) || draft->whole_taken.count(unit.job_id))) continue;
    Room freed;
    for (const Member& m : offer.MembersOf(unit)) {
      if (m.node != node) continue;
      freed.gpus += m.gpus;
      freed.cpu += m.cpu;
      freed.mem += m.mem;
    }
    // A unit that frees nothing the task lacks here does not help: never
    // taken for it (a CPU-only job beside the real victim, say).
    const bool helps = (freed.gpus > 0 && room.gpus < want * need.gpus) ||
                       (need.cpu > 0 && freed.cpu > 0 && room.cpu < want * need.cpu) ||
                       (need.mem > 0 && freed.mem > 0 && room.mem < want * need.mem);
    if (!helps) continue;
    room.gpus += freed.gpus;
    room.cpu += freed.cpu;
    room.mem += freed.mem;
    if (units) units->push_back(u);
    if (Fits(room, need) >= want) {
      *cost = offer.costs[u];
      return true;
    }
  }
  return false;
}

VictimPicker::Offer::Steps& VictimPicker::StepsFor(Offer& offer, const Need& need) {
  auto [it, inserted] = offer.steps.try_emplace(need);
  if (inserted) {
    Offer::Steps& steps = it->second;
    steps.heap.reserve(offer.nodes.size());
    steps.live.assign(s_.state().num_nodes(), Offer::Steps::kNone);
    for (uint32_t node : offer.nodes) {
      if (!s_.state().node(NodeId(node)).schedulable) continue;
      Cost c;
      if (StepAt(offer, nullptr, need, node, nullptr, &c, nullptr)) {
        steps.heap.push_back({c, node, steps.next_stamp});
        steps.live[node] = steps.next_stamp++;
      }
    }
    std::make_heap(steps.heap.begin(), steps.heap.end());
  }
  return it->second;
}

void VictimPicker::RefreshSteps(Offer& offer, std::span<const uint32_t> nodes) {
  for (auto& [need, steps] : offer.steps) {
    for (uint32_t n : nodes) {
      steps.live[n] = Offer::Steps::kNone;  // its entry, if any, is stale from now on
      Cost c;
      if (s_.state().node(NodeId(n)).schedulable && StepAt(offer, nullptr, need, n, nullptr, &c, nullptr)) {
        steps.heap.push_back({c, n, steps.next_stamp});
        std::push_heap(steps.heap.begin(), steps.heap.end());
        steps.live[n] = steps.next_stamp++;
      }
    }
  }
}

VictimPicker::Choice VictimPicker::ChooseIn(Offer& offer, const Job& p, const Need& need, int count, int tier,
                                            topology::DomainId domain) {
  const State& st = s_.state();
  const topology::Cluster& c = st.cluster();
  auto in_scope = [&](uint32_t n) {
    if (!st.node(NodeId(n)).schedulable) return false;
    if (tier < 0) return true;
    if (tier == 0) return n == domain.value();
    return c.DomainOf(NodeId(n), tier) == domain;
  };
  // Tasks that fit in the scope as it is, counting only up to `count`.
  int64_t cap = 0;
  auto count_free = [&](NodeId n) {
    if (in_scope(n.value())) cap += Fits(RoomAt(n.value()), need);
    return cap < count;
  };
  if (tier == 0) {
    count_free(NodeId(domain.value()));
  } else if (tier > 0 && c.domain(tier, domain).nodes.size() <= 512) {
    for (NodeId n : c.domain(tier, domain).nodes) count_free(n);
  } else {
    st.free_index().ForEachNodeWithFree(need.gpus, count_free);
  }
  Choice out;
  if (cap >= count) return out;  // GPUs are not what it waits for

  // Steps come from the offer's global order (whole cluster, preempt, no
  // yielded-to jobs: nothing preemptor-specific) merged with a local heap of
  // the nodes this choice has changed; otherwise from the local heap alone.
  const bool global = tier < 0 && mode_ == EvictMode::kPreempt && p.yielded_to().empty();
  Draft draft;
  absl::flat_hash_map<uint32_t, uint64_t> version;
  struct Step {
    Cost cost;
    uint32_t node;
    uint64_t version;
    bool operator>(const Step& o) const { return std::tie(cost, node) > std::tie(o.cost, o.node); }
  };
  std::priority_queue<Step, std::vector<Step>, std::greater<Step>> heap;
  auto push = [&](uint32_t n) {
    Cost cost;
    if (in_scope(n) && StepAt(offer, &p, need, n, &draft, &cost, nullptr)) heap.push({cost, n, version[n]});
  };
  Offer::Steps* steps = global ? &StepsFor(offer, need) : nullptr;
  // The global order's cheapest entry for a node this choice has not
  // touched; live entries taken off the heap on the way are put back when
  // the choice is made (it changes nothing shared), stale ones are dropped.
  // (This list, `step` and `touched` are the thread's scratch: a choice
  // calls nothing that makes another.)
  thread_local std::vector<Offer::Steps::Entry> set_aside;
  set_aside.clear();
  auto global_top = [&]() -> const Offer::Steps::Entry* {
    while (!steps->heap.empty()) {
      const Offer::Steps::Entry& e = steps->heap.front();
      const bool stale = steps->live[e.node] != e.stamp;
      if (!stale && !version.count(e.node)) return &e;
      if (!stale) set_aside.push_back(e);
      std::pop_heap(steps->heap.begin(), steps->heap.end());
      steps->heap.pop_back();
    }
    return nullptr;
  };
  if (!global) {
    for (uint32_t n : offer.nodes) push(n);
  }
  auto take = [&](int u) {
    const Unit& unit = offer.units[u];
    draft.taken.insert(u);
    out.units.push_back(u);
    out.worst = std::max(out.worst, offer.costs[u]);
    if (!unit.shrink) {
      draft.whole_taken.insert(unit.job_id);
      ++out.whole;
    }
    for (const Member& m : offer.MembersOf(unit)) {
      const uint32_t n = m.node;
      auto [room, fresh] = draft.free.try_emplace(n);
      if (fresh) room->second = RoomAt(n);
      const int64_t before = Fits(room->second, need);
      room->second.gpus += m.gpus;
      room->second.cpu += m.cpu;
      room->second.mem += m.mem;
      if (in_scope(n)) cap += Fits(room->second, need) - before;
      ++version[n];
    }
  };
  thread_local std::vector<int> step;
  thread_local std::vector<uint32_t> touched;
  step.clear();
  touched.clear();
  while (cap < count) {
    while (!heap.empty() && heap.top().version != version[heap.top().node]) heap.pop();
    const Offer::Steps::Entry* top = global ? global_top() : nullptr;
    const bool from_heap =
        !heap.empty() && (!top || std::tie(heap.top().cost, heap.top().node) < std::tie(top->cost, top->node));
    if (!from_heap && !top) break;
    const uint32_t node = from_heap ? heap.top().node : top->node;
    if (from_heap) heap.pop();
    // The step's units, as the preemptor sees them now (for a global entry:
    // the same as the generic answer, the node being untouched so far).
    Cost cost;
    const bool found = StepAt(offer, &p, need, node, &draft, &cost, &step);
    version.try_emplace(node, 0);  // the node's global entry is stale from now on
    if (!found) continue;
    touched.clear();
    for (int u : step) {
      take(u);
      const Unit& unit = offer.units[u];
      for (const Member& m : offer.MembersOf(unit)) touched.push_back(m.node);
    }
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (uint32_t n : touched) push(n);
    push(node);
  }
  if (steps) {
    for (const Offer::Steps::Entry& e : set_aside) {
      steps->heap.push_back(e);
      std::push_heap(steps->heap.begin(), steps->heap.end());
    }
  }
  out.ok = cap >= count;
  return out;
}

std::string VictimPicker::Reason(const Job& p, const Unit& u, const Cost& cost) {
  const char* what = u.shrink ? "shrunk" : "evicted";
  if (mode_ == EvictMode::kPreempt) {
    return absl::StrCat(what, " for ", p.name(), " (preempt: priority ", PriorityOf(p), " > ", std::get<1>(cost),
                        ")");
  }
  if (mode_ == EvictMode::kLoan) {
    return absl::StrCat(what, " for ", p.name(), " (elastic: GPUs it grew into while they were idle, above its ",
                        LoanFloor(*u.job), " desired workers, go back to a waiting job)");
  }
  return absl::StrCat(what, " for ", p.name(), " (reclaim: queue '", s_.queue(u.job->queue()).name(),
                      "' above its deserved share, '", s_.queue(p.queue()).name(), "' below)");
}

std::vector<int> VictimPicker::Needed(const Job& p, const Offer& offer, const std::vector<int>& chosen) const {
  const State& st = s_.state();
  // What the landing nodes have to spare with P placed: GPUs wholly free,
  // and the rest of their allocatable.
  struct Slack {
    int64_t gpus = 0;
    Resources idle;
  };
  std::map<uint32_t, Slack> slack;
  for (const Task& t : p.tasks()) {
    if (t.state != TaskState::kAllocated) continue;
    auto [it, fresh] = slack.try_emplace(t.node.value());
    if (fresh) it->second = {st.FreeWholeGpus(t.node), st.Idle(t.node)};
  }
  // Dearest first: each unit the slack covers on every landing node it is
  // on goes back to running, and uses up that slack.
  absl::InlinedVector<size_t, 16> order(chosen.size());
  for (size_t k = 0; k < order.size(); ++k) order[k] = k;
  std::sort(order.begin(), order.end(),
            [&](size_t a, size_t b) { return offer.costs[chosen[b]] < offer.costs[chosen[a]]; });
  absl::InlinedVector<bool, 16> keep(chosen.size(), false);
  std::map<uint32_t, Slack> freed;
  for (size_t k : order) {
    const Unit& unit = offer.units[chosen[k]];
    freed.clear();
    const std::span<const Member> members = offer.MembersOf(unit);
    for (size_t i = 0; i < members.size(); ++i) {
      const uint32_t n = members[i].node;
      if (!slack.count(n)) continue;
      Slack& f = freed[n];
      // Every device a task touches (a shared GPU taken back is no longer
      // wholly free).
      f.gpus += unit.job->gpu(members[i].task).count;
      f.idle += unit.job->request(members[i].task);
    }
    bool spare = true;
    for (const auto& [n, f] : freed) {
      const Slack& have = slack[n];
      spare = spare && f.gpus <= have.gpus && f.idle.LessEqual(have.idle);
    }
    if (freed.empty() || spare) {
      for (const auto& [n, f] : freed) {
        slack[n].gpus -= f.gpus;
        slack[n].idle -= f.idle;
      }
      continue;
    }
    keep[k] = true;
  }
  std::vector<int> out;
  for (size_t k = 0; k < chosen.size(); ++k) {
    if (keep[k]) out.push_back(chosen[k]);
  }
  return out;
}

bool VictimPicker::Apply(Job& p, Offer& offer, std::vector<int> chosen, bool minimize) {
  const std::vector<Unit>& units = offer.units;
  // A whole-job unit covers that job's shrink units.
  absl::InlinedVector<JobId, 8> whole;
  for (int u : chosen) {
    if (!units[u].shrink) whole.push_back(units[u].job->id());
  }
  std::erase_if(chosen, [&](int u) {
    return units[u].shrink && std::find(whole.begin(), whole.end(), units[u].job->id()) != whole.end();
  });
  int tasks = 0;
  for (int u : chosen) tasks += static_cast<int>(units[u].count);
  auto over_cap = [&] {
    if (args_.max_evictions <= 0 || evicted_ + tasks <= args_.max_evictions) return false;
    s_.SetPendingReason(p, absl::StrCat("needs ", tasks, " tasks stopped; the per-cycle eviction cap (",
                                        args_.max_evictions, ") is reached"));
    return true;
  };
  // Without minimizing, this very set is what would be committed.
  if (!minimize && over_cap()) return false;
  const Timestamp deadline = s_.now() + args_.grace_ms;
  absl::InlinedVector<std::pair<JobId, uint32_t>, 16> vacated;
  Statement stmt(s_);
  // The reason depends on the unit's kind and on its job's priority
  // (preempt) or queue (reclaim): made once per distinct pair.
  absl::InlinedVector<std::tuple<bool, int64_t, std::string>, 4> reasons;
  auto reason_for = [&](int unit) -> const std::string& {
    const Unit& u = units[unit];
    const Cost& cost = offer.costs[unit];
    const int64_t key = mode_ == EvictMode::kPreempt ? std::get<1>(cost)
                        : mode_ == EvictMode::kLoan  ? u.job->id().value()
                                                     : u.job->queue().value();
    for (const auto& [shrink, k, why] : reasons) {
      if (shrink == u.shrink && k == key) return why;
    }
    reasons.emplace_back(u.shrink, key, Reason(p, u, cost));
    return std::get<2>(reasons.back());
  };
  for (size_t k = 0; k < chosen.size(); ++k) {
    const Unit& u = units[chosen[k]];
    if (!u.shrink && u.job->phase() == JobPhase::kRunning) stmt.SetPhase(*u.job, JobPhase::kInqueue);
    const std::string& why = reason_for(chosen[k]);
    for (const Member& m : offer.MembersOf(u)) {
      vacated.push_back({u.job->id(), m.task});
      stmt.Vacate(*u.job, m.task, p.id(), why, deadline);
    }
  }
  GangPlacer placer(s_, ReservationUse::kNone, &stmt);
  if (placer.Place(p).kind != PlaceOutcome::Kind::kPlaced) return false;  // stmt discards
  // Least sufficient: keep only the units the landing needs, and retry
  // without the others (the placer may land elsewhere: minimize again); if
  // that fails, this set, which placed P, is the answer.
  if (minimize) {
    std::vector<int> needed = Needed(p, offer, chosen);
    // None needed: P landed where it fits without victims (outside the
    // scope they were chosen in, or on nodes `allocate` kept for a
    // reservation): evicting would free nothing it uses, so nothing is.
    if (needed.empty()) return false;  // stmt discards
    if (needed.size() < chosen.size()) {
      stmt.Discard();
      if (Apply(p, offer, needed, /*minimize=*/true)) return true;
      return Apply(p, offer, chosen, /*minimize=*/false);
    }
    if (over_cap()) return false;
  }
  if (!stmt.Commit().ok()) return false;
  ++commits_;
  evicted_ += tasks;
  absl::InlinedVector<uint32_t, 32> nodes;
  for (int u : chosen) {
    for (const Member& m : offer.MembersOf(units[u])) nodes.push_back(m.node);
  }
  for (const Task& t : p.tasks()) {
    if (HoldsNode(t.state) || t.state == TaskState::kPipelined) nodes.push_back(t.node.value());
  }
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  Taken(vacated, nodes);
  running_indexed_ = false;  // victims stopped, P may run: index again when next asked
  return true;
}

void VictimPicker::Taken(std::span<const std::pair<JobId, uint32_t>> tasks, std::span<const uint32_t> nodes) {
  for (auto& [key, offer] : offers_) {
    for (const auto& [job, task] : tasks) {
      auto it = offer.by_job.find(job.value());
      if (it == offer.by_job.end()) continue;
      const auto [first, last] = it->second;
      const bool stopped = offer.units[first].job->phase() != JobPhase::kRunning;
      for (int u = first; u < last; ++u) {
        Unit& unit = offer.units[u];
        if (stopped || (unit.shrink && offer.members[unit.first].task == task)) {
          unit.dead = true;
        } else if (!unit.shrink) {
          const uint32_t gone = task;  // (clang 14 cannot capture a structured binding)
          const auto begin = offer.members.begin() + unit.first;
          const auto end = std::remove_if(begin, begin + unit.count, [gone](const Member& m) { return m.task == gone; });
          unit.count = static_cast<uint32_t>(end - begin);
        }
      }
    }
    RefreshSteps(offer, nodes);
    // Preempt and loans: only the nodes the commit touched changed (their
    // room, the units there); reclaim's share rule may change anywhere, so
    // its bounds are computed again when next asked.
    if (mode_ == EvictMode::kReclaim) continue;
    for (auto& [need, b] : offer.bound) {
      if (b.gen != commits_ - 1) continue;
      for (uint32_t n : nodes) {
        b.tasks -= Fits(b.room[n], need);
        b.room[n] = BoundRoom(offer, n);
        b.tasks += Fits(b.room[n], need);
      }
      b.gen = commits_;
    }
  }
}

bool VictimPicker::Pending(const Job& p) {
  // A member's scratch: TryForCount does not call TryFor.
  pending_.clear();
  for (const Task& t : p.tasks()) {
    if (t.state == TaskState::kPending) pending_.push_back(t.index);
  }
  if (pending_.empty() || p.GangShortfall() <= 0) return false;
  modelled_ = s_.has_job_speedup() && s_.JobSpeedup(p, 1).has_value();
  return true;
}

bool VictimPicker::TryFor(Job& p) {
  if (!Pending(p)) return false;
  std::vector<uint32_t>& pending = pending_;
  // One like a preemptor that already failed since the last commit, short
  // of Apply, fails alike and leaves nothing behind (FailKey).
  std::optional<FailKey> key;
  if (s_.fast_paths() && !modelled_ && p.yielded_to().empty() && p.spec().roles.size() == 1) {
    const Resources& r = p.request(pending.front());
    key = FailKey{p.queue().value(),
                  PriorityOf(p),
                  static_cast<int>(pending.size()),
                  p.GangShortfall(),
                  WholeGpusOf(p, pending.front()),
                  r.cpu_milli(),
                  r.memory(),
                  p.min_request().gpu_milli(),
                  static_cast<int>(p.spec().topology_mode),
                  p.spec().highest_tier};
    if (auto it = failed_.find(*key); it != failed_.end() && it->second == commits_) return false;
  }
  applied_ = false;
  const bool ok = TryForPending(p, pending);
  if (!ok && key && !applied_) failed_[*key] = commits_;
  return ok;
}

bool VictimPicker::Prepare(Job& p, std::vector<uint32_t>& pending, int& min_need, bool& whole_first) {
  // Mostly in order already (by index, no task order plugin): checked first,
  // as a stable sort takes a buffer from the heap even then.
  auto before = [&](uint32_t a, uint32_t b) { return s_.TaskOrder(TaskRef{&p, a}, TaskRef{&p, b}); };
  if (!std::is_sorted(pending.begin(), pending.end(), before)) std::stable_sort(pending.begin(), pending.end(), before);
  min_need = std::min<int>(p.GangShortfall(), static_cast<int>(pending.size()));
  if (min_need <= 0) return false;
  // Loans go back up to the whole desired size when they cover it, else
  // the minimum (the rest of P's tasks are placed best-effort either way).
  // A job with a speed model (the speedup plugin) is sized by it: started
  // at its minimum it would run there until GPUs stay idle, so its victims
  // are sought for its whole desired size first, as loans are.
  whole_first = mode_ == EvictMode::kLoan || modelled_;
  return true;
}

bool VictimPicker::TryForPending(Job& p, std::vector<uint32_t>& pending) {
  int min_need = 0;
  bool whole_first = false;
  if (!Prepare(p, pending, min_need, whole_first)) return false;
  if (whole_first && static_cast<int>(pending.size()) > min_need &&
      TryForCount(p, pending, static_cast<int>(pending.size()))) {
    return true;
  }
  return TryForCount(p, pending, min_need);
}

VictimPicker::Screened VictimPicker::Screen(const Job& p, const std::vector<uint32_t>& pending, int need,
                                            Need& per_task) {
  const topology::Cluster& c = s_.state().cluster();
  const JobSpec& spec = p.spec();
  // Whole GPUs per task decide where a task fits (the largest of the gang's
  // minimum when sizes differ; the placement below is exact).
  per_task = Need{};
  // Tasks of one role all ask the same: the first says it.
  for (int k = 0; k < (spec.roles.size() == 1 ? std::min(need, 1) : need); ++k) {
    const Resources& r = p.request(pending[k]);
    per_task.gpus = std::max(per_task.gpus, WholeGpusOf(p, pending[k]));
    per_task.cpu = std::max(per_task.cpu, r.cpu_milli());
    per_task.mem = std::max(per_task.mem, r.memory());
  }
  if (per_task.gpus == 0) return Screened::kNo;  // CPU-only and GPU-share gangs do not preempt
  if (mode_ == EvictMode::kReclaim && !TakerStaysWithinShare(s_, p)) return Screened::kNo;
  // No running job of its queue ranks below it: no victim, no offer to build.
  if (mode_ == EvictMode::kPreempt && LowestRunningPriority(p.queue().value()) >= PriorityOf(p)) {
    return Screened::kNo;
  }
  // Only the whole cluster as the scope (no hard topology tier, no node
  // scopes of a job with a speed model), which holds the tasks already:
  // ChooseIn would choose nothing. The offer is deferred, not skipped
  // (with the fast paths: the property test compares both ways).
  const bool cluster_only = !(spec.topology_mode == TopologyMode::kHard && spec.highest_tier <= c.num_tiers()) &&
                            !(s_.has_job_speedup() && spec.speed != nullptr);
  if (s_.fast_paths() && cluster_only && FitsWithoutVictims(per_task, need)) return Screened::kDefer;
  // Reclaim: no offer of this queue could give it enough (ReclaimBound >=
  // MaxTasks' bound for any offer of it): the build is deferred as above.
  if (s_.fast_paths() && mode_ == EvictMode::kReclaim && ReclaimBound(p.queue().value(), per_task) < need) {
    return Screened::kDefer;
  }
  return Screened::kOffer;
}

bool VictimPicker::Unordered(Job& p) {
  if (!Pending(p)) return true;
  std::vector<uint32_t>& pending = pending_;
  int min_need = 0;
  bool whole_first = false;
  if (!Prepare(p, pending, min_need, whole_first)) return true;
  Need per_task;
  for (const int need : {whole_first && static_cast<int>(pending.size()) > min_need ? static_cast<int>(pending.size()) : 0,
                         min_need}) {
    if (need == 0) continue;
    const Screened v = Screen(p, pending, need, per_task);
    if (v == Screened::kOffer) return false;
    screened_defer_ = screened_defer_ || v == Screened::kDefer;
  }
  return true;
}

bool VictimPicker::TryForCount(Job& p, const std::vector<uint32_t>& pending, int need) {
  const State& st = s_.state();
  const topology::Cluster& c = st.cluster();
  const JobSpec& spec = p.spec();
  Need per_task;
  switch (Screen(p, pending, need, per_task)) {
    case Screened::kNo:
      return false;
    case Screened::kDefer: {
      const OfferKey key(p.queue().value(), PriorityOf(p));
      if (!offers_.count(key)) deferred_.try_emplace(key, &p);
      return false;
    }
    case Screened::kOffer:
      break;
  }
  Offer& offer = OfferFor(p);
  const bool modelled = modelled_;
  if (offer.units.empty()) return false;
  had_victims_ = true;
  if (s_.fast_paths() && MaxTasks(offer, p, per_task) < need) {
    return false;
  }

  struct Scope {
    int tier;
    topology::DomainId domain;
  };
  std::vector<Scope> scopes;
  // The domains at tier t (0: single nodes) with the most GPUs free or held
  // by usable units, enough for the need.
  auto add_scopes_at = [&](int t) {
    std::map<uint32_t, int64_t> gpus;
    for (const Unit& u : offer.units) {
      if (!Usable(offer, &p, u)) continue;
      for (const Member& m : offer.MembersOf(u)) {
        const NodeId n(m.node);
        gpus[t == 0 ? n.value() : c.DomainOf(n, t).value()] += m.gpus;
      }
    }
    std::vector<std::pair<int64_t, uint32_t>> order;
    for (const auto& [d, g] : gpus) {
      const int64_t free = t == 0 ? st.FreeWholeGpus(NodeId(d)) : st.free_index().DomainFree(t, topology::DomainId(d));
      if (free + g >= per_task.gpus * need) order.push_back({-(free + g), d});
    }
    std::sort(order.begin(), order.end());
    for (size_t k = 0; k < order.size() && k < static_cast<size_t>(kMaxDomainTries); ++k) {
      scopes.push_back({t, topology::DomainId(order[k].second)});
    }
  };
  if (spec.topology_mode == TopologyMode::kHard && spec.highest_tier <= c.num_tiers()) {
    add_scopes_at(spec.highest_tier);
  } else {
    // A job with a speed model: the single nodes that could hold all of its
    // need once units are taken are tried first (the models say a job spread
    // over nodes runs slower, up to 2.5 x for 4 GPUs over two); the whole
    // cluster only when none can.
    if (modelled) add_scopes_at(0);
    scopes.push_back({-1, {}});
  }
  chose_ = true;
  Choice best;
  for (const Scope& sc : scopes) {
    if (sc.tier < 0 && best.ok) break;  // a node scope that works wins over the whole cluster
    Choice ch = ChooseIn(offer, p, per_task, need, sc.tier, sc.domain);
    if (!ch.ok) continue;
    if (!best.ok || std::make_tuple(ch.whole, ch.worst, ch.units.size()) <
                        std::make_tuple(best.whole, best.worst, best.units.size())) {
      best = std::move(ch);
    }
  }
  if (!best.ok) return false;
  BuildDeferred();  // on the state they were asked on, before Apply may commit
  applied_ = true;  // Apply may set P's pending reason: not one to repeat for others
  return Apply(p, offer, best.units, /*minimize=*/true);
}

}  // namespace ringmaster::scheduler
