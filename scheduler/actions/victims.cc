#include "scheduler/actions/victims.h"

#include <algorithm>
#include <queue>
#include <set>
#include <unordered_map>

#include "absl/strings/str_cat.h"
#include "scheduler/actions/placement.h"
#include "scheduler/statement.h"

namespace ringmaster::scheduler {
namespace {

int64_t WholeGpusOf(const Job& job, uint32_t i) {
  const GpuRequest& g = job.gpu(i);
  return g.whole() ? g.count : 0;
}

// A member that counts toward its gang and can be stopped.
bool Stoppable(TaskState s) { return CountsReady(s) && HoldsNode(s); }

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
  if (p.YieldedTo(v.id())) return false;  // rule 4: never take back from whom it yielded to
  if (v.last_resize() >= 0 && s_.now() - v.last_resize() < args_.cooldown_ms) return false;
  if (mode_ == EvictMode::kPreempt) {
    return v.queue() == p.queue() && v.priority() < p.priority();
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
  const QueueInfo& taker = s_.queues()[pv.back()];
  const QueueInfo& giver = s_.queues()[vv.back()];
  // The giver borrows: above its deserved share (GPUs) before this take.
  if (giver.allocated().gpu_milli() - take.gpu_milli() < 0) return false;
  if (giver.allocated().gpu_milli() <= giver.deserved.gpu_milli()) return false;
  // The taker ends no higher than its deserved share.
  if (taker.allocated().gpu_milli() + p.min_request().gpu_milli() > taker.deserved.gpu_milli()) return false;
  // No queue on the giver's side goes below its guarantee.
  for (int q : vv) {
    const QueueInfo& info = s_.queues()[q];
    if (info.allocated().gpu_milli() - take.gpu_milli() < info.spec->guarantee.gpu_milli()) return false;
  }
  return true;
}

std::vector<VictimPicker::Unit> VictimPicker::UnitsFor(const Job& p) {
  const State& st = s_.state();
  const auto key = std::make_pair(p.queue().value(), p.priority());
  auto it = allowed_.find(key);
  if (it == allowed_.end()) {
    std::vector<TaskRef> candidates;
    for (JobId id : st.active_jobs()) {
      const Job& v = st.job(id);
      if (v.phase() != JobPhase::kRunning) continue;
      for (const Task& t : v.tasks()) {
        if (Stoppable(t.state)) candidates.push_back({&v, t.index});
      }
    }
    uint32_t first = 0;
    while (first < p.tasks().size() && p.task(first).state != TaskState::kPending) ++first;
    const TaskRef who{&p, first};
    it = allowed_
             .emplace(key, mode_ == EvictMode::kPreempt ? s_.Preemptable(who, candidates)
                                                        : s_.Reclaimable(who, candidates))
             .first;
  }
  // Group the plugins' answer by job (ids ascending: deterministic).
  std::map<JobId, std::vector<uint32_t>> by_job;
  for (const TaskRef& t : it->second) by_job[t.job->id()].push_back(t.index);
  std::vector<Unit> units;
  const Timestamp now = s_.now();
  for (auto& [id, allowed] : by_job) {
    Job& v = s_.state().job(id);
    if (!Eligible(p, v)) continue;
    std::vector<uint32_t> held;
    for (const Task& t : v.tasks()) {
      if (Stoppable(t.state)) held.push_back(t.index);
    }
    std::sort(allowed.begin(), allowed.end());
    // Shrink units: the highest-indexed surplus members first.
    const int spare = v.ReadyCount() - v.min_member();
    int made = 0;
    for (auto t = held.rbegin(); t != held.rend() && made < spare; ++t) {
      if (!std::binary_search(allowed.begin(), allowed.end(), *t)) continue;
      if (v.task(*t).state == TaskState::kSucceeded) continue;
      Unit u;
      u.job = &v;
      u.tasks = {*t};
      u.shrink = true;
      u.cost = {0, v.priority(), 0, -v.started(), -v.created(), -static_cast<int64_t>(v.id().value()),
                -static_cast<int64_t>(*t)};
      units.push_back(std::move(u));
      ++made;
    }
    if (allowed.size() >= held.size()) {
      Unit u;
      u.job = &v;
      u.tasks = held;
      u.cost = {1, v.priority(), v.WorkAtRisk(now), -v.started(), -v.created(),
                -static_cast<int64_t>(v.id().value()), 0};
      units.push_back(std::move(u));
    }
  }
  std::sort(units.begin(), units.end(), [](const Unit& a, const Unit& b) { return a.cost < b.cost; });
  return units;
}

VictimPicker::Choice VictimPicker::ChooseIn(const Job& /*p*/, int64_t per_task, int need, int tier,
                                            topology::DomainId domain, const std::vector<Unit>& units) {
  const State& st = s_.state();
  const topology::Cluster& c = st.cluster();
  auto in_scope = [&](NodeId n) {
    if (!st.node(n).schedulable) return false;
    if (tier < 0) return true;
    if (tier == 0) return n.value() == domain.value();
    return c.DomainOf(n, tier) == domain;
  };
  // Units with a task in scope, per node, cheapest first (units are sorted).
  std::unordered_map<uint32_t, std::vector<int>> on_node;
  for (int u = 0; u < static_cast<int>(units.size()); ++u) {
    for (uint32_t t : units[u].tasks) {
      const NodeId n = units[u].job->task(t).node;
      if (!in_scope(n)) continue;
      auto& list = on_node[n.value()];
      if (list.empty() || list.back() != u) list.push_back(u);
    }
  }
  std::unordered_map<uint32_t, int64_t> free;  // free whole GPUs once the taken units are gone
  auto free_of = [&](uint32_t n) -> int64_t& {
    auto [f, inserted] = free.try_emplace(n, 0);
    if (inserted) f->second = st.FreeWholeGpus(NodeId(n));
    return f->second;
  };
  int64_t cap = 0;
  auto count_free = [&](NodeId n) {
    if (in_scope(n)) cap += free_of(n.value()) / per_task;
    return cap < need;
  };
  if (tier == 0) {
    count_free(NodeId(domain.value()));
  } else if (tier > 0 && c.domain(tier, domain).nodes.size() <= 512) {
    for (NodeId n : c.domain(tier, domain).nodes) count_free(n);
  } else {
    st.free_index().ForEachNodeWithFree(per_task, count_free);
  }
  Choice out;
  if (cap >= need) return out;  // GPUs are not what it waits for

  std::vector<char> taken(units.size(), 0);
  std::set<JobId> whole_taken;
  std::unordered_map<uint32_t, size_t> pos;        // next unit to look at on a node
  std::unordered_map<uint32_t, uint64_t> version;  // bumps when a node's free changes
  struct Step {
    Cost cost;
    uint32_t node;
    uint64_t version;
    bool operator>(const Step& o) const { return std::tie(cost, node) > std::tie(o.cost, o.node); }
  };
  std::priority_queue<Step, std::vector<Step>, std::greater<Step>> heap;
  auto usable = [&](int u) {
    return !taken[u] && !whole_taken.count(units[u].job->id());
  };
  // The cheapest prefix of the node's units that fits one more task there.
  auto push_step = [&](uint32_t n) {
    const auto& list = on_node[n];
    size_t k = pos[n];
    const int64_t base = free_of(n);
    int64_t acc = 0;
    for (; k < list.size(); ++k) {
      const int u = list[k];
      if (!usable(u)) continue;
      for (uint32_t t : units[u].tasks) {
        if (units[u].job->task(t).node.value() == n) acc += WholeGpusOf(*units[u].job, t);
      }
      if ((base + acc) / per_task > base / per_task) {
        heap.push({units[u].cost, n, version[n]});
        return;
      }
    }
  };
  for (const auto& [n, list] : on_node) push_step(n);
  auto take = [&](int u) {
    taken[u] = 1;
    out.units.push_back(u);
    out.worst = std::max(out.worst, units[u].cost);
    if (!units[u].shrink) {
      whole_taken.insert(units[u].job->id());
      ++out.whole;
    }
    for (uint32_t t : units[u].tasks) {
      const NodeId n = units[u].job->task(t).node;
      int64_t& f = free_of(n.value());
      const int64_t before = f / per_task;
      f += WholeGpusOf(*units[u].job, t);
      if (in_scope(n)) {
        cap += f / per_task - before;
        ++version[n.value()];
      }
    }
  };
  while (cap < need && !heap.empty()) {
    const Step step = heap.top();
    heap.pop();
    if (step.version != version[step.node]) {
      push_step(step.node);
      continue;
    }
    // Take the node's usable units up to and including the step's last one.
    const auto& list = on_node[step.node];
    for (size_t& k = pos[step.node]; k < list.size(); ++k) {
      const int u = list[k];
      if (!usable(u)) continue;
      take(u);
      if (units[u].cost == step.cost) {
        ++k;
        break;
      }
    }
    push_step(step.node);
  }
  out.ok = cap >= need;
  return out;
}

std::string VictimPicker::Reason(const Job& p, const Unit& u) const {
  const char* what = u.shrink ? "shrunk" : "evicted";
  if (mode_ == EvictMode::kPreempt) {
    return absl::StrCat(what, " for ", p.name(), " (preempt: priority ", p.priority(), " > ",
                        u.job->priority(), ")");
  }
  return absl::StrCat(what, " for ", p.name(), " (reclaim: queue '", s_.queue(u.job->queue()).name(),
                      "' above its deserved share, '", s_.queue(p.queue()).name(), "' below)");
}

bool VictimPicker::Apply(Job& p, const std::vector<Unit>& units, std::vector<int> chosen, bool minimize) {
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
  Statement stmt(s_);
  for (size_t k = 0; k < chosen.size(); ++k) {
    const Unit& u = units[chosen[k]];
    if (!u.shrink && u.job->phase() == JobPhase::kRunning) stmt.SetPhase(*u.job, JobPhase::kInqueue);
    const std::string why = Reason(p, u);
    for (uint32_t t : u.tasks) {
      were_on[k].push_back(u.job->task(t).node);
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
    if (!needed.empty() && Apply(p, units, needed, /*minimize=*/false)) return true;
    return Apply(p, units, chosen, /*minimize=*/false);
  }
  if (!stmt.Commit().ok()) return false;
  evicted_ += tasks;
  allowed_.clear();  // the running set changed
  return true;
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
  if (mode_ == EvictMode::kReclaim) {
    const QueueInfo& q = s_.queue(p.queue());
    if (q.allocated().gpu_milli() + p.min_request().gpu_milli() > q.deserved.gpu_milli()) return false;
  }
  std::vector<Unit> units = UnitsFor(p);
  if (mode_ == EvictMode::kReclaim) {
    std::erase_if(units, [&](const Unit& u) {
      Resources take;
      for (uint32_t t : u.tasks) take += u.job->request(t);
      return !ReclaimKeepsShares(p, *u.job, take);
    });
  }
  if (units.empty()) return false;

  struct Scope {
    int tier;
    topology::DomainId domain;
  };
  std::vector<Scope> scopes;
  const JobSpec& spec = p.spec();
  if (spec.topology_mode == TopologyMode::kHard && spec.highest_tier <= c.num_tiers()) {
    // The domains at the allowed tier with the most GPUs free or held by
    // units, enough for the minimum.
    const int t = spec.highest_tier;
    std::map<uint32_t, int64_t> gpus;
    for (const Unit& u : units) {
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
    Choice ch = ChooseIn(p, per_task, need, sc.tier, sc.domain, units);
    if (!ch.ok) continue;
    if (!best.ok || std::make_tuple(ch.whole, ch.worst, ch.units.size()) <
                        std::make_tuple(best.whole, best.worst, best.units.size())) {
      best = std::move(ch);
    }
  }
  if (!best.ok) return false;
  return Apply(p, units, best.units, /*minimize=*/true);
}

}  // namespace ringmaster::scheduler
