#include "scheduler/actions/victims.h"

#include <algorithm>
#include <functional>
#include <queue>
#include <set>
#include <unordered_map>
#include <unordered_set>

#include "absl/strings/str_cat.h"
#include "scheduler/actions/placement.h"
#include "scheduler/statement.h"

namespace ringmaster::scheduler {
namespace {

int64_t WholeGpusOf(const Job& job, uint32_t i) {
  const GpuRequest& g = job.gpu(i);
  return g.whole() ? g.count : 0;
}

// A member that counts toward its gang and can be stopped: bound or running
// (a task placed in this very cycle has no process to stop yet).
bool Stoppable(TaskState s) { return s == TaskState::kBinding || s == TaskState::kBound || s == TaskState::kRunning; }

absl::StatusOr<Timestamp> SecondsArg(const PluginArgs& args, std::string_view key, Timestamp def_ms) {
  auto v = args.Double(key, static_cast<double>(def_ms) / 1000.0);
  if (!v.ok()) return v.status();
  if (!(*v >= 0) || *v > 1e9) return args.Error(key, "must be a number of seconds >= 0");
  return static_cast<Timestamp>(*v * 1000.0);
}

}  // namespace

absl::StatusOr<EvictionArgs> ReadEvictionArgs(const PluginArgs& args) {
  EvictionArgs out;
  auto grace = SecondsArg(args, "gracePeriod", out.grace_ms);
  if (!grace.ok()) return grace.status();
  auto cooldown = SecondsArg(args, "cooldown", out.cooldown_ms);
  if (!cooldown.ok()) return cooldown.status();
  auto cap = args.Int("maxEvictionsPerCycle", out.max_evictions);
  if (!cap.ok()) return cap.status();
  if (*cap < 0 || *cap > 1'000'000) {
    return args.Error("maxEvictionsPerCycle", "must be an integer in [0, 1000000] (0: no limit)");
  }
  if (auto s = args.Finish(); !s.ok()) return s;
  out.grace_ms = *grace;
  out.cooldown_ms = *cooldown;
  out.max_evictions = static_cast<int>(*cap);
  return out;
}

VictimPicker::VictimPicker(Session& session, EvictMode mode, const EvictionArgs& args)
    : s_(session), mode_(mode), args_(args) {}

bool VictimPicker::Eligible(const Job& p, const Job& v) const {
  if (v.id() == p.id() || v.phase() != JobPhase::kRunning) return false;
  if (v.Count(TaskState::kAllocated) > 0) return false;  // placed this cycle: not yet started
  if (p.YieldedTo(v.id())) return false;  // rule 4: never take back from whom it yielded to
  if (v.last_resize() >= 0 && s_.now() - v.last_resize() < args_.cooldown_ms) return false;
  if (mode_ == EvictMode::kPreempt) {
    return v.queue() == p.queue() && s_.JobPriority(v) < s_.JobPriority(p);
  }
  return v.queue() != p.queue();
}

bool VictimPicker::ReclaimKeepsShares(const Job& p, const Job& v, const Resources& take) const {
  const auto& tree = s_.state().queues();
  // The two queues' ancestors just below their lowest common ancestor.
  std::vector<int> pv, vv;
  for (int q = static_cast<int>(p.queue().value()); q >= 0; q = tree.parent(q)) pv.push_back(q);
  for (int q = static_cast<int>(v.queue().value()); q >= 0; q = tree.parent(q)) vv.push_back(q);
  while (!pv.empty() && !vv.empty() && pv.back() == vv.back()) {
    pv.pop_back();
    vv.pop_back();
  }
  if (pv.empty() || vv.empty()) return false;  // one contains the other
  const QueueInfo& giver = s_.queues()[vv.back()];
  // The giver borrows: above its deserved share (GPUs) before this take.
  if (giver.allocated().gpu_milli() <= giver.deserved.gpu_milli()) return false;
  // No queue on the giver's side goes below its guarantee.
  for (int q : vv) {
    const QueueInfo& info = s_.queues()[q];
    if (info.allocated().gpu_milli() - take.gpu_milli() < info.spec->guarantee.gpu_milli()) return false;
  }
  return true;
}

// The taker ends no higher than its deserved share (every level up to the
// common ancestor with a giver: checked on the taker's own chain).
static bool TakerStaysWithinShare(const Session& s, const Job& p) {
  const auto& tree = s.state().queues();
  for (int q = static_cast<int>(p.queue().value()); q >= 0; q = tree.parent(q)) {
    const QueueInfo& info = s.queues()[q];
    if (info.allocated().gpu_milli() + p.min_request().gpu_milli() > info.deserved.gpu_milli()) return false;
  }
  return true;
}

void VictimPicker::BuildUnits(Offer& offer, const Job& cv, const std::vector<uint32_t>& allowed) const {
  Job& v = s_.mutable_state().job(cv.id());
  std::vector<uint32_t> held;
  for (const Task& t : v.tasks()) {
    if (Stoppable(t.state) && t.state != TaskState::kSucceeded) held.push_back(t.index);
  }
  // Shrink units: the highest-indexed surplus members first.
  const int spare = v.ReadyCount() - v.min_member();
  int made = 0;
  for (auto t = held.rbegin(); t != held.rend() && made < spare; ++t) {
    if (!std::binary_search(allowed.begin(), allowed.end(), *t)) continue;
    Unit u;
    u.job = &v;
    u.tasks = {*t};
    u.shrink = true;
    u.cost = {0, s_.JobPriority(v), 0, -v.started(), -v.created(), -static_cast<int64_t>(v.id().value()),
              -static_cast<int64_t>(*t)};
    offer.units.push_back(std::move(u));
    ++made;
  }
  if (allowed.size() >= held.size()) {
    Unit u;
    u.job = &v;
    u.tasks.assign(held.begin(), held.end());
    u.cost = {1, s_.JobPriority(v), v.WorkAtRisk(s_.now()), -v.started(), -v.created(),
              -static_cast<int64_t>(v.id().value()), 0};
    offer.units.push_back(std::move(u));
  }
}

VictimPicker::Offer& VictimPicker::OfferFor(const Job& p) {
  const auto key = std::make_pair(p.queue().value(), s_.JobPriority(p));
  auto it = offers_.find(key);
  if (it != offers_.end()) return it->second;
  Offer& offer = offers_[key];
  const State& st = s_.state();
  std::vector<TaskRef> candidates;
  for (JobId id : st.active_jobs()) {
    const Job& v = st.job(id);
    if (!Eligible(p, v)) continue;
    for (const Task& t : v.tasks()) {
      if (Stoppable(t.state)) candidates.push_back({&v, t.index});
    }
  }
  uint32_t first = 0;
  while (first < p.tasks().size() && p.task(first).state != TaskState::kPending) ++first;
  const TaskRef who{&p, first};
  std::vector<TaskRef> allowed =
      mode_ == EvictMode::kPreempt ? s_.Preemptable(who, candidates) : s_.Reclaimable(who, candidates);
  // Group the plugins' answer by job. Candidates come job by job and the
  // plugins keep their order, so the answer is normally grouped already;
  // otherwise sort it (units are fully ordered by cost below either way).
  bool grouped = true;
  {
    std::unordered_set<uint32_t> seen;
    for (size_t k = 0; k < allowed.size() && grouped; ++k) {
      if (k > 0 && allowed[k].job == allowed[k - 1].job) continue;
      grouped = seen.insert(allowed[k].job->id().value()).second;
    }
  }
  if (!grouped) {
    std::stable_sort(allowed.begin(), allowed.end(),
                     [](const TaskRef& a, const TaskRef& b) { return a.job->id().value() < b.job->id().value(); });
  }
  offer.units.reserve(allowed.size() + allowed.size() / 2);
  std::vector<uint32_t> tasks;
  for (size_t k = 0; k < allowed.size();) {
    const Job* job = allowed[k].job;
    tasks.clear();
    for (; k < allowed.size() && allowed[k].job == job; ++k) tasks.push_back(allowed[k].index);
    std::sort(tasks.begin(), tasks.end());
    BuildUnits(offer, *job, tasks);
  }
  // Per-node lists (CSR): count, fill, then order each node's list
  // cheapest first (a handful of units per node: no global sort needed).
  const size_t n_nodes = st.num_nodes();
  std::vector<int> last(n_nodes, -1);
  offer.node_start.assign(n_nodes + 1, 0);
  for (int u = 0; u < static_cast<int>(offer.units.size()); ++u) {
    const Unit& unit = offer.units[u];
    offer.by_job[unit.job->id().value()].push_back(u);
    for (uint32_t t : unit.tasks) {
      const uint32_t n = unit.job->task(t).node.value();
      if (last[n] == u) continue;
      last[n] = u;
      ++offer.node_start[n + 1];
    }
  }
  for (size_t n = 0; n < n_nodes; ++n) {
    if (offer.node_start[n + 1] > 0) offer.nodes.push_back(static_cast<uint32_t>(n));
    offer.node_start[n + 1] += offer.node_start[n];
  }
  offer.node_units.resize(offer.node_start[n_nodes]);
  std::vector<int> fill(offer.node_start.begin(), offer.node_start.end() - 1);
  std::fill(last.begin(), last.end(), -1);
  for (int u = 0; u < static_cast<int>(offer.units.size()); ++u) {
    for (uint32_t t : offer.units[u].tasks) {
      const uint32_t n = offer.units[u].job->task(t).node.value();
      if (last[n] == u) continue;
      last[n] = u;
      offer.node_units[fill[n]++] = u;
    }
  }
  const auto cheaper = [&](int a, int b) { return offer.units[a].cost < offer.units[b].cost; };
  for (uint32_t n : offer.nodes) {
    std::sort(offer.node_units.begin() + offer.node_start[n], offer.node_units.begin() + offer.node_start[n + 1],
              cheaper);
  }
  return offer;
}

bool VictimPicker::Usable(const Job* p, const Unit& u) const {
  if (u.dead) return false;
  if (!p) return true;  // the generic part only (the global step order)
  if (p->YieldedTo(u.job->id())) return false;
  if (mode_ == EvictMode::kReclaim) {
    Resources take;
    for (uint32_t t : u.tasks) take += u.job->request(t);
    return ReclaimKeepsShares(*p, *u.job, take);
  }
  return true;
}

struct VictimPicker::Draft {
  std::unordered_map<uint32_t, int64_t> free;  // nodes touched: free whole GPUs once the taken units are gone
  std::set<int> taken;
  std::set<JobId> whole_taken;
  int64_t FreeOf(const State& st, uint32_t n) const {
    auto it = free.find(n);
    return it == free.end() ? st.FreeWholeGpus(NodeId(n)) : it->second;
  }
};

bool VictimPicker::StepAt(const Offer& offer, const Job* p, int64_t per_task, uint32_t node, const Draft* draft,
                          Cost* cost) const {
  const std::span<const int> list = offer.AtNode(node);
  if (list.empty()) return false;
  const int64_t base = draft ? draft->FreeOf(s_.state(), node) : s_.state().FreeWholeGpus(NodeId(node));
  int64_t acc = 0;
  for (int u : list) {
    const Unit& unit = offer.units[u];
    if (!Usable(p, unit)) continue;
    if (draft && (draft->taken.count(u) || draft->whole_taken.count(unit.job->id()))) continue;
    for (uint32_t t : unit.tasks) {
      if (unit.job->task(t).node.value() == node) acc += WholeGpusOf(*unit.job, t);
    }
    if ((base + acc) / per_task > base / per_task) {
      *cost = unit.cost;
      return true;
    }
  }
  return false;
}

VictimPicker::Offer::Steps& VictimPicker::StepsFor(Offer& offer, int64_t per_task) {
  auto [it, inserted] = offer.steps.try_emplace(per_task);
  if (inserted) {
    for (uint32_t node : offer.nodes) {
      if (!s_.state().node(NodeId(node)).schedulable) continue;
      Cost c;
      if (StepAt(offer, nullptr, per_task, node, nullptr, &c)) {
        it->second.order.insert({c, node});
        it->second.of[node] = c;
      }
    }
  }
  return it->second;
}

void VictimPicker::RefreshSteps(Offer& offer, const std::vector<uint32_t>& nodes) {
  for (auto& [per_task, steps] : offer.steps) {
    for (uint32_t n : nodes) {
      if (auto old = steps.of.find(n); old != steps.of.end()) {
        steps.order.erase({old->second, n});
        steps.of.erase(old);
      }
      Cost c;
      if (s_.state().node(NodeId(n)).schedulable && StepAt(offer, nullptr, per_task, n, nullptr, &c)) {
        steps.order.insert({c, n});
        steps.of[n] = c;
      }
    }
  }
}

// Tasks of `per_task` whole GPUs that fit in the scope as it is, counting
// only up to `need`.
static int64_t FitNow(const State& st, int64_t per_task, int need, int tier, topology::DomainId domain,
               const std::function<bool(uint32_t)>& in_scope) {
  const topology::Cluster& c = st.cluster();
  int64_t cap = 0;
  auto count_free = [&](NodeId n) {
    if (in_scope(n.value())) cap += st.FreeWholeGpus(n) / per_task;
    return cap < need;
  };
  if (tier == 0) {
    count_free(NodeId(domain.value()));
  } else if (tier > 0 && c.domain(tier, domain).nodes.size() <= 512) {
    for (NodeId n : c.domain(tier, domain).nodes) count_free(n);
  } else {
    st.free_index().ForEachNodeWithFree(per_task, count_free);
  }
  return cap;
}

VictimPicker::Choice VictimPicker::ChooseIn(Offer& offer, const Job& p, int64_t per_task, int need, int tier,
                                            topology::DomainId domain) {
  const State& st = s_.state();
  const topology::Cluster& c = st.cluster();
  auto in_scope = [&](uint32_t n) {
    if (!st.node(NodeId(n)).schedulable) return false;
    if (tier < 0) return true;
    if (tier == 0) return n == domain.value();
    return c.DomainOf(NodeId(n), tier) == domain;
  };
  int64_t cap = FitNow(st, per_task, need, tier, domain, in_scope);
  Choice out;
  if (cap >= need) return out;  // GPUs are not what it waits for

  // Steps come from the offer's global order (whole cluster, preempt, no
  // yielded-to jobs: nothing preemptor-specific) merged with a local heap of
  // the nodes this choice has changed; otherwise from the local heap alone.
  const bool global = tier < 0 && mode_ == EvictMode::kPreempt && p.yielded_to().empty();
  Draft draft;
  std::unordered_map<uint32_t, uint64_t> version;
  struct Step {
    Cost cost;
    uint32_t node;
    uint64_t version;
    bool operator>(const Step& o) const { return std::tie(cost, node) > std::tie(o.cost, o.node); }
  };
  std::priority_queue<Step, std::vector<Step>, std::greater<Step>> heap;
  auto push = [&](uint32_t n) {
    Cost cost;
    if (in_scope(n) && StepAt(offer, &p, per_task, n, &draft, &cost)) heap.push({cost, n, version[n]});
  };
  Offer::Steps* steps = global ? &StepsFor(offer, per_task) : nullptr;
  auto it = steps ? steps->order.begin() : std::set<std::pair<Cost, uint32_t>>::iterator();
  if (!global) {
    for (uint32_t n : offer.nodes) push(n);
  }
  auto take = [&](int u) {
    const Unit& unit = offer.units[u];
    draft.taken.insert(u);
    out.units.push_back(u);
    out.worst = std::max(out.worst, unit.cost);
    if (!unit.shrink) {
      draft.whole_taken.insert(unit.job->id());
      ++out.whole;
    }
    for (uint32_t t : unit.tasks) {
      const uint32_t n = unit.job->task(t).node.value();
      const int64_t before = draft.FreeOf(st, n);
      const int64_t after = before + WholeGpusOf(*unit.job, t);
      draft.free[n] = after;
      if (in_scope(n)) cap += after / per_task - before / per_task;
      ++version[n];
    }
  };
  while (cap < need) {
    while (!heap.empty() && heap.top().version != version[heap.top().node]) heap.pop();
    if (global) {
      while (it != steps->order.end() && version.count(it->second)) ++it;
    }
    const bool from_heap = !heap.empty() && (!global || it == steps->order.end() ||
                                             std::tie(heap.top().cost, heap.top().node) < std::tie(it->first, it->second));
    if (!from_heap && (!global || it == steps->order.end())) break;
    const uint32_t node = from_heap ? heap.top().node : it->second;
    const Cost cost = from_heap ? heap.top().cost : it->first;
    if (from_heap) heap.pop();
    // Take the node's usable units up to and including the step's last one.
    std::vector<uint32_t> touched;
    for (int u : offer.AtNode(node)) {
      const Unit& unit = offer.units[u];
      if (!Usable(&p, unit) || draft.taken.count(u) || draft.whole_taken.count(unit.job->id())) continue;
      take(u);
      for (uint32_t t : unit.tasks) touched.push_back(unit.job->task(t).node.value());
      if (unit.cost == cost) break;
    }
    version.try_emplace(node, 0);  // the node's global entry is stale from now on
    std::sort(touched.begin(), touched.end());
    touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
    for (uint32_t n : touched) push(n);
    push(node);
  }
  out.ok = cap >= need;
  return out;
}

std::string VictimPicker::Reason(const Job& p, const Unit& u) const {
  const char* what = u.shrink ? "shrunk" : "evicted";
  if (mode_ == EvictMode::kPreempt) {
    return absl::StrCat(what, " for ", p.name(), " (preempt: priority ", s_.JobPriority(p), " > ",
                        s_.JobPriority(*u.job), ")");
  }
  return absl::StrCat(what, " for ", p.name(), " (reclaim: queue '", s_.queue(u.job->queue()).name(),
                      "' above its deserved share, '", s_.queue(p.queue()).name(), "' below)");
}

bool VictimPicker::Apply(Job& p, Offer& offer, std::vector<int> chosen, bool minimize) {
  const std::vector<Unit>& units = offer.units;
  // A whole-job unit covers that job's shrink units.
  std::set<JobId> whole;
  for (int u : chosen) {
    if (!units[u].shrink) whole.insert(units[u].job->id());
  }
  std::erase_if(chosen, [&](int u) { return units[u].shrink && whole.count(units[u].job->id()); });
  int tasks = 0;
  for (int u : chosen) tasks += static_cast<int>(units[u].tasks.size());
  if (args_.max_evictions > 0 && evicted_ + tasks > args_.max_evictions) {
    s_.SetPendingReason(p, absl::StrCat("needs ", tasks, " tasks stopped; the per-cycle eviction cap (",
                                        args_.max_evictions, ") is reached"));
    return false;
  }
  const Timestamp deadline = s_.now() + args_.grace_ms;
  std::vector<std::vector<NodeId>> were_on(chosen.size());
  std::vector<std::pair<JobId, uint32_t>> vacated;
  Statement stmt(s_);
  for (size_t k = 0; k < chosen.size(); ++k) {
    const Unit& u = units[chosen[k]];
    if (!u.shrink && u.job->phase() == JobPhase::kRunning) stmt.SetPhase(*u.job, JobPhase::kInqueue);
    const std::string why = Reason(p, u);
    for (uint32_t t : u.tasks) {
      were_on[k].push_back(u.job->task(t).node);
      vacated.push_back({u.job->id(), t});
      stmt.Vacate(*u.job, t, p.id(), why, deadline);
    }
  }
  GangPlacer placer(s_, ReservationUse::kNone, &stmt);
  if (placer.Place(p).kind != PlaceOutcome::Kind::kPlaced) return false;  // stmt discards
  // Least sufficient: drop units with no task where P landed, and retry.
  std::set<NodeId> landed;
  for (const Task& t : p.tasks()) {
    if (t.state == TaskState::kAllocated) landed.insert(t.node);
  }
  std::vector<int> needed;
  for (size_t k = 0; k < chosen.size(); ++k) {
    if (std::any_of(were_on[k].begin(), were_on[k].end(), [&](NodeId n) { return landed.count(n); })) {
      needed.push_back(chosen[k]);
    }
  }
  if (minimize && needed.size() < chosen.size()) {
    stmt.Discard();
    if (!needed.empty() && Apply(p, offer, needed, /*minimize=*/false)) return true;
    return Apply(p, offer, chosen, /*minimize=*/false);
  }
  if (!stmt.Commit().ok()) return false;
  evicted_ += tasks;
  std::vector<uint32_t> nodes;
  for (const auto& list : were_on) {
    for (NodeId n : list) nodes.push_back(n.value());
  }
  for (NodeId n : landed) nodes.push_back(n.value());
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  Taken(vacated, nodes);
  return true;
}

void VictimPicker::Taken(const std::vector<std::pair<JobId, uint32_t>>& tasks, const std::vector<uint32_t>& nodes) {
  for (auto& [key, offer] : offers_) {
    for (const auto& [job, task] : tasks) {
      auto it = offer.by_job.find(job.value());
      if (it == offer.by_job.end()) continue;
      const bool stopped = offer.units[it->second.front()].job->phase() != JobPhase::kRunning;
      for (int u : it->second) {
        Unit& unit = offer.units[u];
        if (stopped || (unit.shrink && unit.tasks.front() == task)) {
          unit.dead = true;
        } else if (!unit.shrink) {
          unit.tasks.erase(std::remove(unit.tasks.begin(), unit.tasks.end(), task), unit.tasks.end());
        }
      }
    }
    RefreshSteps(offer, nodes);
  }
}

bool VictimPicker::TryFor(Job& p) {
  const State& st = s_.state();
  const topology::Cluster& c = st.cluster();
  std::vector<uint32_t> pending;
  for (const Task& t : p.tasks()) {
    if (t.state == TaskState::kPending) pending.push_back(t.index);
  }
  std::stable_sort(pending.begin(), pending.end(), [&](uint32_t a, uint32_t b) {
    return s_.TaskOrder(TaskRef{&p, a}, TaskRef{&p, b});
  });
  const int need = std::min<int>(p.min_member() - p.ReadyCount(), static_cast<int>(pending.size()));
  if (need <= 0) return false;
  // Whole GPUs per task decide where a task fits (the largest of the gang's
  // minimum when sizes differ; the placement below is exact).
  int64_t per_task = 0;
  for (int k = 0; k < need; ++k) per_task = std::max(per_task, WholeGpusOf(p, pending[k]));
  if (per_task == 0) return false;  // CPU-only and GPU-share gangs do not preempt
  if (mode_ == EvictMode::kReclaim && !TakerStaysWithinShare(s_, p)) return false;
  Offer& offer = OfferFor(p);
  if (offer.units.empty()) return false;

  struct Scope {
    int tier;
    topology::DomainId domain;
  };
  std::vector<Scope> scopes;
  const JobSpec& spec = p.spec();
  if (spec.topology_mode == TopologyMode::kHard && spec.highest_tier <= c.num_tiers()) {
    // The domains at the allowed tier with the most GPUs free or held by
    // usable units, enough for the minimum.
    const int t = spec.highest_tier;
    std::map<uint32_t, int64_t> gpus;
    for (const Unit& u : offer.units) {
      if (!Usable(&p, u)) continue;
      for (uint32_t i : u.tasks) {
        const NodeId n = u.job->task(i).node;
        gpus[t == 0 ? n.value() : c.DomainOf(n, t).value()] += WholeGpusOf(*u.job, i);
      }
    }
    std::vector<std::pair<int64_t, uint32_t>> order;
    for (const auto& [d, g] : gpus) {
      const int64_t free = t == 0 ? st.FreeWholeGpus(NodeId(d)) : st.free_index().DomainFree(t, topology::DomainId(d));
      if (free + g >= per_task * need) order.push_back({-(free + g), d});
    }
    std::sort(order.begin(), order.end());
    for (size_t k = 0; k < order.size() && k < static_cast<size_t>(kMaxDomainTries); ++k) {
      scopes.push_back({t, topology::DomainId(order[k].second)});
    }
  } else {
    scopes.push_back({-1, {}});
  }
  Choice best;
  for (const Scope& sc : scopes) {
    Choice ch = ChooseIn(offer, p, per_task, need, sc.tier, sc.domain);
    if (!ch.ok) continue;
    if (!best.ok || std::make_tuple(ch.whole, ch.worst, ch.units.size()) <
                        std::make_tuple(best.whole, best.worst, best.units.size())) {
      best = std::move(ch);
    }
  }
  if (!best.ok) return false;
  return Apply(p, offer, best.units, /*minimize=*/true);
}

}  // namespace ringmaster::scheduler
