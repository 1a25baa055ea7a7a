#include "scheduler/actions/placement.h"

#include <algorithm>
#include <limits>

#include "absl/container/flat_hash_set.h"
#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace ringmaster::scheduler {
namespace {

constexpr size_t kSmallDomain = 512;

int64_t WholeGpus(const Job& job, uint32_t i) {
  const GpuRequest& g = job.gpu(i);
  return g.whole() ? g.count : 0;
}

}  // namespace

Timestamp GangPlacer::ReservationStart() const {
  const State& st = s_.state();
  const Timestamp now = s_.now();
  Timestamp start = 0;
  for (NodeId n : st.reservation()->nodes) {
    for (const auto& [jid, ti] : st.TasksOn(n)) {
      const Job& j = st.job(jid);
      const int64_t walltime = Walltime(j);
      if (walltime <= 0) return std::numeric_limits<Timestamp>::max();
      // Placed this cycle: starts now.
      const Timestamp began = j.started() < 0 ? now : j.started();
      start = std::max(start, began + walltime);
    }
  }
  return start;
}

bool GangPlacer::Usable(const Job& job, uint32_t i, NodeId n) {
  const State& st = s_.state();
  if (!st.node(n).schedulable) return false;
  if (!st.IsReserved(n) || st.reservation()->job == job.id()) return true;
  if (use_ == ReservationUse::kNone) {
    Reject("reserved for a waiting gang");
    return false;
  }
  // Backfill: fine if the job ends before the reservation could start, or if
  // the node keeps the GPUs the reserved gang needs there. A running job
  // that outran its learned walltime has an estimated end in the past: the
  // start is the other tasks' latest end (past when all outran theirs, and
  // then no job ends before it); the real start is no earlier.
  const auto& r = *st.reservation();
  if (const int64_t walltime = Walltime(job); walltime > 0 && s_.now() + walltime <= ReservationStart()) {
    return true;
  }
  auto it = std::find(r.nodes.begin(), r.nodes.end(), n);
  const int64_t needed = r.gpus_needed[it - r.nodes.begin()];
  if (st.FreeWholeGpus(n) - WholeGpus(job, i) >= needed && WholeGpus(job, i) > 0) return true;
  Reject("reserved for a waiting gang");
  return false;
}

bool GangPlacer::FitsByCount(const Job& job, std::span<const uint32_t> tasks, int need, int tier,
                             topology::DomainId d) const {
  // Exact for the common gang of equal whole-GPU tasks: the domain holds k
  // tasks of g GPUs iff the sum over its nodes of floor(free / g) >= k.
  int64_t g = 0;
  int64_t k = 0;
  for (int i = 0; i < need; ++i) {
    const int64_t w = WholeGpus(job, tasks[i]);
    if (w == 0) continue;
    if (g != 0 && w != g) return true;  // mixed sizes: let the planner try
    g = w;
    ++k;
  }
  if (k == 0) return true;
  const State& st = s_.state();
  auto holds = [&](NodeId n) { return st.node(n).schedulable ? st.FreeWholeGpus(n) / g : 0; };
  if (tier == 0) return holds(NodeId(d.value())) >= k;
  const std::vector<NodeId>& nodes = st.cluster().domain(tier, d).nodes;
  if (nodes.size() > kSmallDomain) return true;
  int64_t fit = 0;
  for (NodeId n : nodes) {
    if ((fit += holds(n)) >= k) return true;
  }
  return false;
}

NodeId GangPlacer::PickNode(const Job& job, uint32_t i, const Scope& scope,
                            std::vector<int16_t>* gpus) {
  const State& st = s_.state();
  const topology::Cluster& c = st.cluster();
  const TaskRef ref{&job, i};
  const Resources& req = job.request(i);
  const int64_t whole = WholeGpus(job, i);
  const int limit = !s_.has_node_order()        ? 1
                    : s_.nodes_to_score() <= 0 ? std::numeric_limits<int>::max()
                                               : s_.nodes_to_score();
  NodeId best;
  int64_t best_score = std::numeric_limits<int64_t>::min();
  std::vector<int16_t> best_gpus;
  std::vector<int16_t> cand_gpus;
  int feasible = 0;
  // StateHash of the nodes scored so far: a window of nodesToScore keeps a
  // few (a linear search), scoring every node a set (O(1) per node).
  // (The window is the thread's scratch: PickNode runs for every task a
  // placement tries, and calls nothing that picks a node.)
  thread_local std::vector<uint64_t> scored;
  scored.clear();
  absl::flat_hash_set<uint64_t> scored_all;
  if (limit == std::numeric_limits<int>::max()) scored_all.reserve(256);

  const GpuRequest& share = job.gpu(i);
  const int16_t share_milli = share.count > 0 && !share.whole() ? static_cast<int16_t>(share.milli) : 0;
  const bool window = limit > 1 && limit < std::numeric_limits<int>::max();
  const bool every = limit == std::numeric_limits<int>::max();
  // Skipping a node in the state of one scored is exact only when scores
  // depend on the node's state alone.
  const bool dedup = !s_.node_order_reads_job();
  const bool defer_gpus = !s_.has_gpu_select() && share_milli == 0;
  // The two most common rejections, counted here and added once (the
  // reason's counts do not depend on the order they were added in).
  int short_whole = 0;
  int short_share = 0;
  auto consider = [&](NodeId n) -> bool {
    const NodeState& ns = st.node(n);
    if (!ns.schedulable) return true;
    if (st.FreeWholeGpus(n) < whole) {
      ++short_whole;
      return true;
    }
    // A GPU share needs one GPU with that much free now (cheaper than the
    // predicates; the GPU choice below would refuse the node anyway).
    if (ns.max_gpu_free < share_milli) {
      ++short_share;
      return true;
    }
    // A node in the same state as one already scored would score the same
    // and lose the tie (the walk meets nodes of one state in id order, so
    // the one scored is also the lowest index): it does not take a place in
    // the window, and when every node is scored it is not scored again.
    uint64_t state = 0;
    if (window && dedup) {
      state = st.NodeStateHash(n);
      if (std::find(scored.begin(), scored.end(), state) != scored.end()) return true;
    } else if (every && dedup) {
      state = st.NodeStateHash(n);
      if (scored_all.contains(state)) return true;
    }
    Verdict v = s_.Predicate(ref, n);
    if (!v.ok()) {
      Reject(v.reason());
      return true;
    }
    if (!Usable(job, i, n)) return true;
    if (!st.FitsIdle(n, req)) {
      Reject("insufficient cpu/memory now (releasing)");
      return true;
    }
    // The built-in choice cannot refuse whole GPUs the node has free: it is
    // made once, for the node that wins.
    if (!defer_gpus && !s_.SelectGpus(ref, n, &cand_gpus)) {
      Reject("no fitting GPU set");
      return true;
    }
    ++feasible;
    if (window) scored.push_back(state);
    if (every) scored_all.insert(state);
    // Every state the walk can still meet scored already: each node left
    // would be skipped above, and (no share asked) none would be counted as
    // a rejection first, so stopping here changes nothing.
    const bool all_seen = dedup && (window || every) && share_milli == 0 &&
                          static_cast<int64_t>(window ? scored.size() : scored_all.size()) >=
                              st.DistinctStatesWithFree(whole);
    const int64_t score = limit > 1 ? s_.NodeOrder(ref, n) : 0;
    if (!best.valid() || score > best_score) {
      best = n;
      best_score = score;
      if (!defer_gpus) best_gpus = cand_gpus;
    }
    return feasible < limit && !all_seen;
  };

  if (scope.tier == 0) {
    consider(NodeId(scope.domain.value()));
  } else if (scope.tier >= 1 && c.domain(scope.tier, scope.domain).nodes.size() <= kSmallDomain) {
    // Small domain: walk its nodes in best-fit order of free GPUs.
    std::vector<NodeId> nodes = c.domain(scope.tier, scope.domain).nodes;
    std::stable_sort(nodes.begin(), nodes.end(), [&](NodeId a, NodeId b) {
      return st.FreeWholeGpus(a) < st.FreeWholeGpus(b);
    });
    for (NodeId n : nodes) {
      if (st.FreeWholeGpus(n) < whole) continue;
      if (!consider(n)) break;
    }
  } else if (whole > 0) {
    st.free_index().ForEachNodeWithFree(whole, [&](NodeId n) {
      if (scope.tier >= 1 && c.DomainOf(n, scope.tier) != scope.domain) return true;
      return consider(n);
    });
  } else {
    // No whole GPUs: every node is a candidate, fewest free GPUs first so
    // CPU-only and GPU-sharing tasks do not break whole GPUs needlessly.
    st.free_index().ForEachNodeWithFree(0, [&](NodeId n) {
      if (scope.tier >= 1 && c.DomainOf(n, scope.tier) != scope.domain) return true;
      return consider(n);
    });
  }
  Reject("insufficient GPU", short_whole);
  Reject("insufficient GPU share", short_share);
  if (best.valid() && defer_gpus && !s_.SelectGpus(ref, best, &best_gpus)) return NodeId();  // cannot happen
  if (best.valid()) *gpus = std::move(best_gpus);
  return best;
}

bool GangPlacer::TryScope(Job& job, std::span<const uint32_t> tasks, int need,
                          const Scope& scope, int* placed) {
  Statement stmt(s_, parent_);
  QueueInfo& q = s_.queue(job.queue());
  int n = 0;
  for (uint32_t i : tasks) {
    const bool required = n < need;
    if (!s_.Allocatable(q, TaskRef{&job, i})) {
      queue_limited_ = true;
      if (required) break;
      continue;
    }
    std::vector<int16_t> gpus;
    NodeId node = PickNode(job, i, scope, &gpus);
    if (!node.valid()) {
      if (required) break;
      continue;
    }
    stmt.Allocate(job, i, node, std::move(gpus));
    ++n;
    if (n == need && !s_.JobReady(job)) break;
  }
  *placed = std::max(*placed, std::min(n, need));
  if (n >= need && s_.JobReady(job)) {
    if (stmt.Commit().ok()) return true;
  }
  stmt.Discard();
  return false;
}

std::string GangPlacer::Describe(const Job& job, std::span<const uint32_t> tasks,
                                 int need) const {
  // "8 × 8 GPUs" per role among the first `need` tasks.
  auto one = [](int count, const RoleSpec& r) {
    if (r.gpu.count > 0 && r.gpu.whole()) return absl::StrCat(count, " × ", r.gpu.count, " GPU", r.gpu.count > 1 ? "s" : "");
    if (r.gpu.count > 0) return absl::StrCat(count, " × ", topology::FormatGpus(r.gpu.milli), " GPU share");
    return absl::StrCat(count, " × ", r.request.ToString());
  };
  if (job.spec().roles.size() == 1) {  // the common case, without the map
    const int count = std::min<int>(need, static_cast<int>(tasks.size()));
    return count > 0 ? one(count, job.spec().roles[0]) : std::string();
  }
  std::map<int, int> per_role;
  for (int k = 0; k < need && k < static_cast<int>(tasks.size()); ++k) {
    per_role[job.task(tasks[k]).role]++;
  }
  std::vector<std::string> parts;
  for (const auto& [role, count] : per_role) parts.push_back(one(count, job.spec().roles[role]));
  return absl::StrJoin(parts, " + ");
}

GangPlacer::CountView GangPlacer::Count(const Job& job, int64_t g) const {
  const State& st = s_.state();
  // The same answer for every job of the same (g, kept off reserved nodes,
  // walltime) on the same state: remembered for the last such question (a
  // backlog asks it of each gang in a row, on one epoch).
  const bool other = ReservedByOther(job);
  const bool timed = Walltime(job) > 0;  // its own or learned
  if (count_cache_.valid && count_cache_.epoch == st.epoch() && count_cache_.g == g && count_cache_.other == other &&
      count_cache_.timed == timed) {
    return count_cache_.view;
  }
  CountView v;
  v.fit = st.TasksFitByCount(g);
  v.off_reserved = v.fit;
  int64_t beside = 0;  // what reserved nodes hold beyond the reserved gang's GPUs
  if (st.reservation() && st.reservation()->job != job.id()) {
    const Reservation& r = *st.reservation();
    for (size_t k = 0; k < r.nodes.size(); ++k) {
      const int64_t f = st.FreeWholeGpus(r.nodes[k]);
      v.off_reserved -= f / g;
      if (st.node(r.nodes[k]).schedulable) beside += std::max<int64_t>(f - r.gpus_needed[k], 0) / g;
    }
  }
  // Backfill (Usable): a reserved node takes a task only if it keeps the
  // reserved gang's GPUs free after it, unless the job has a walltime, its
  // own or learned (it may end before the reservation starts: any node).
  v.usable = use_ == ReservationUse::kNone ? v.off_reserved
             : timed                       ? v.fit
                                           : v.off_reserved + beside;
  count_cache_ = {true, st.epoch(), g, other, timed, v};
  return v;
}

bool GangPlacer::ReservedByOther(const Job& job) const {
  const auto& r = s_.state().reservation();
  return r && r->job != job.id();
}

int GangPlacer::HardTier(const Job& job) const {
  const JobSpec& spec = job.spec();
  return spec.topology_mode == TopologyMode::kHard && spec.highest_tier <= s_.state().cluster().num_tiers()
             ? spec.highest_tier
             : -1;
}

std::array<int64_t, 9> GangPlacer::CountKey(const Job& job, int64_t g, const CountView& v,
                                            bool queue_limited) const {
  const State& st = s_.state();
  const int hard = HardTier(job);
  return {static_cast<int64_t>(job.task_changes()),
          g,
          ReservedByOther(job) ? 1 : 0,
          v.off_reserved,
          v.usable,
          queue_limited ? 1 : 0,
          hard >= 0 ? st.free_index().LargestFree(hard) : -1,
          static_cast<int64_t>(st.node_changes()),
          st.releasing_tasks()};
}

const Job::PlaceMemo* GangPlacer::Recall(Job& job) {
  if (!s_.memo() || parent_) return nullptr;
  Job::PlaceMemo& m = job.place_memo(use_ == ReservationUse::kNone ? 0 : 1);
  const State& st = s_.state();
  if (m.epoch != st.epoch() || m.context != s_.VerdictContextId()) {
    // The count decided it: it holds while what the count read is the same
    // (the policy, not the deserved shares: allocate and backfill ask
    // Overused before they recall).
    if (!m.by_count || m.policy != s_.VerdictPolicyId() || st.releasing_tasks() > 0) return nullptr;
    const CountView v = Count(job, m.count_g);
    const bool queue_limited = !s_.Allocatable(s_.queue(job.queue()), TaskRef{&job, m.count_task});
    if (CountKey(job, m.count_g, v, queue_limited) != m.count) return nullptr;
    m.epoch = st.epoch();
    m.context = s_.VerdictContextId();
    m.at = s_.now();
    s_.NoteRecalled();
    return &m;
  }
  // Backfill lets a job with a walltime onto a reserved node when it ends
  // before the reservation could start (Usable): that reads the clock, so
  // such a verdict holds only at the time it was given; a learned one also
  // reads the estimates, which change as jobs end (version).
  if (use_ == ReservationUse::kBackfill && Walltime(job) > 0 && !m.by_count &&
      (m.at != s_.now() || (walltimes_ && m.learned != walltimes_->version()))) {
    return nullptr;
  }
  s_.NoteRecalled();
  return &m;
}

bool GangPlacer::RecallAll(std::span<Job* const> jobs, Kept& kept) {
  const int use = use_ == ReservationUse::kNone ? 0 : 1;
  for (size_t k = 0; k < jobs.size(); ++k) {
    if (k + 2 * kPrefetchAhead < jobs.size()) PrefetchJob(*jobs[k + 2 * kPrefetchAhead]);
    if (k + kPrefetchAhead < jobs.size()) PrefetchForRecall(*jobs[k + kPrefetchAhead], use);
    Job* j = jobs[k];
    const Job::PlaceMemo* m = Recall(*j);
    if (!m) {
      s_.NoteRecalled(-static_cast<int>(kept.size()));
      return false;
    }
    kept.emplace_back(j, m);
  }
  return true;
}

PlaceOutcome GangPlacer::Place(Job& job, int limit) {
  if (!parent_ && limit < 0) s_.NoteTried();
  PlaceOutcome out = Plan(job, limit);
  if (out.kind != PlaceOutcome::Kind::kPlaced && s_.memo() && !parent_ && limit < 0) {
    Job::PlaceMemo& m = job.place_memo(use_ == ReservationUse::kNone ? 0 : 1);
    m.epoch = s_.state().epoch();
    m.context = s_.VerdictContextId();
    m.at = s_.now();
    m.learned = walltimes_ ? walltimes_->version() : 0;
    m.reason = out.reason;
    m.reason_gen = Job::NextReasonGen();
    m.by_count = count_decided_;
    m.policy = s_.VerdictPolicyId();
    if (count_decided_) {
      m.count_g = count_g_;
      m.count_task = count_task_;
      m.count = count_key_;
    }
  }
  return out;
}

PlaceOutcome GangPlacer::Plan(Job& job, int limit) {
  PlaceOutcome out;
  rejections_.clear();
  queue_limited_ = false;
  count_decided_ = false;
  absl::InlinedVector<uint32_t, 16> tasks;
  for (const Task& t : job.tasks()) {
    if (t.state == TaskState::kPending) tasks.push_back(t.index);
  }
  if (tasks.empty()) return out;
  // Mostly in order already (by index, no task order plugin): checked first,
  // as a stable sort takes a buffer from the heap even then.
  auto before = [&](uint32_t a, uint32_t b) { return s_.TaskOrder(TaskRef{&job, a}, TaskRef{&job, b}); };
  if (!std::is_sorted(tasks.begin(), tasks.end(), before)) std::stable_sort(tasks.begin(), tasks.end(), before);
  const int need = std::max(0, std::min<int>(job.GangShortfall(),
                                             static_cast<int>(tasks.size())));
  if (limit >= 0 && static_cast<int>(tasks.size()) > std::max(need, limit)) tasks.resize(std::max(need, limit));
  int64_t gpus_needed = 0;
  int64_t share_needed = 0;  // milli of the GPU-share tasks of the minimum
  for (int k = 0; k < need; ++k) {
    gpus_needed += WholeGpus(job, tasks[k]);
    const GpuRequest& g = job.gpu(tasks[k]);
    if (g.count > 0 && !g.whole()) share_needed += g.milli;
  }
  out.gpus_needed = static_cast<int>(gpus_needed);

  const State& st = s_.state();
  const topology::Cluster& c = st.cluster();
  const JobSpec& spec = job.spec();
  const int tiers = c.num_tiers();
  auto try_scope = [&](const Scope& scope) {
    int placed = 0;
    const bool ok = TryScope(job, tasks, need, scope, &placed);
    out.tasks_placed = std::max(out.tasks_placed, placed);
    return ok;
  };
  // A constrained gang tries domains tier by tier from single nodes up, each
  // tier in best-fit order (fewest free GPUs first, a lookup in the free
  // index), skipping domains whose nodes cannot hold the tasks by GPU count,
  // at most kMaxDomainTries attempts per tier. Hard mode stops at its tier;
  // soft mode falls back to the whole cluster.
  // Hard mode holds every gang to one domain, GPUs or not.
  const bool constrained = (gpus_needed > 0 || share_needed > 0 || HardTier(job) >= 0) &&
                           spec.topology_mode != TopologyMode::kNone;
  const bool hard_limited = constrained && HardTier(job) >= 0;
  const int hard_tier = hard_limited ? HardTier(job) : 0;
  const int top = !constrained ? -1 : hard_limited ? hard_tier : tiers;
  // A hard gang that holds a node already (at its minimum and growing, or
  // short of it after a member left) stays in that node's domain at its
  // tier, whatever it still needs.
  topology::DomainId home;
  if (hard_limited) {
    for (const Task& t : job.tasks()) {
      if (!HoldsNode(t.state) && t.state != TaskState::kPipelined) continue;
      home = hard_tier == 0 ? topology::DomainId(t.node.value()) : c.DomainOf(t.node, hard_tier);
      break;
    }
  }
  // Every task of the minimum needs at least g whole GPUs free on one node,
  // and takes them: when the nodes it may use cannot hold `need` such tasks
  // by free GPU count (a lookup: State::TasksFitByCount, less the reserved
  // nodes it must stay off), no scope, order or score can place it. With
  // the fast paths its attempts are not made (a standing backlog of gangs
  // that cannot fit costs a lookup each); without them they are, and fail.
  // Either way its reason is the count's (below), so that both say the same.
  bool hopeless = false;
  int64_t count_g = 0;
  CountView count;
  if (need > 0) {
    int64_t g = std::numeric_limits<int64_t>::max();
    for (int k = 0; k < need; ++k) g = std::min(g, WholeGpus(job, tasks[k]));
    if (g > 0) {
      count_g = g;
      count = Count(job, g);
      hopeless = count.usable < need;
    }
  }
  const bool skip = hopeless && s_.fast_paths();
  bool ok = false;
  if (home.valid() && !skip) ok = try_scope({hard_tier, home});
  for (int t = 0; t <= top && !ok && !skip && !home.valid(); ++t) {
    // Collect the domains first: an attempt changes the free index (and
    // undoes it), which would invalidate a walk in progress.
    absl::InlinedVector<topology::DomainId, kMaxDomainTries> domains;
    auto visit = [&](topology::DomainId d) {
      if (FitsByCount(job, tasks, need, t, d)) domains.push_back(d);
      return domains.size() < static_cast<size_t>(kMaxDomainTries);
    };
    // Whole GPUs decide the order when the gang has any, else GPU milli.
    if (gpus_needed > 0) {
      st.free_index().ForEachDomainWithFree(t, gpus_needed, visit);
    } else {
      st.free_index().ForEachDomainWithFreeMilli(t, share_needed, visit);
    }
    for (topology::DomainId d : domains) {
      if ((ok = try_scope({t, d}))) break;
    }
  }
  if (!ok && !hard_limited && !skip) ok = try_scope({-1, {}});
  if (ok) {
    out.kind = PlaceOutcome::Kind::kPlaced;
    out.tasks_placed = need;
    return out;
  }
  if (hopeless) {
    // The count's reason: "k of N members placeable" with k the tasks that free GPU counts
    // would hold off the nodes reserved for another gang (an attempt reaches
    // at most that), no node checks, and the queue's capability when it
    // stops the first task.
    rejections_.clear();
    queue_limited_ = !s_.Allocatable(s_.queue(job.queue()), TaskRef{&job, tasks[0]});
    out.tasks_placed = queue_limited_ ? 0 : static_cast<int>(std::max<int64_t>(count.off_reserved, 0));
    // Remembered as the count's (GangPlacer::Recall) when nothing else can
    // change it: no releasing task (the pipelining check below), and the
    // first `need` tasks the same whatever the task order (one role, or
    // every pending task needed).
    if (st.releasing_tasks() == 0 && (spec.roles.size() == 1 || static_cast<size_t>(need) == tasks.size())) {
      count_decided_ = true;
      count_g_ = count_g;
      count_task_ = tasks[0];
      count_key_ = CountKey(job, count_g, count, queue_limited_);
    }
  }

  // Could the minimum run once releasing tasks are gone? (reason only; skipped
  // without a releasing task, so a failed job does not walk every node)
  if (st.releasing_tasks() > 0) {
    Statement stmt(s_, parent_);
    int n = 0;
    for (int k = 0; k < need; ++k) {
      const uint32_t i = tasks[k];
      NodeId found;
      std::vector<int16_t> gpus;
      for (uint32_t nid = 0; nid < st.num_nodes() && !found.valid(); ++nid) {
        NodeId node(nid);
        if (!st.node(node).schedulable || st.node(node).releasing.IsZero()) continue;
        if (s_.Predicate(TaskRef{&job, i}, node).ok() &&
            s_.SelectFutureGpus(TaskRef{&job, i}, node, &gpus)) {
          found = node;
        }
      }
      if (!found.valid()) break;
      stmt.Pipeline(job, i, found, std::move(gpus));
      ++n;
    }
    const bool pipelined = need > 0 && n == need && s_.JobPipelined(job);
    stmt.Discard();
    if (pipelined) {
      out.kind = PlaceOutcome::Kind::kPipelined;
      out.reason = absl::StrCat(job.ReadyCount(), " of ", job.min_member(),
                                " members placeable: pipelined, waits for releasing tasks to free ",
                                Describe(job, tasks, need));
      return out;
    }
  }

  // The reason a user can act on.
  std::string why = absl::StrCat(job.ReadyCount() + out.tasks_placed, " of ", job.min_member(),
                                 " members placeable: needs ", Describe(job, tasks, need));
  // What the largest domain at a tier has free: whole GPUs, or GPU milli for
  // a gang of shares.
  auto largest = [&](int t) {
    return gpus_needed > 0 ? absl::StrCat(st.free_index().LargestFree(t), " GPUs")
                           : absl::StrCat(topology::FormatGpus(st.free_index().LargestFreeMilli(t)), " GPU free in shares");
  };
  if (hard_limited) {
    if (hard_tier == 0) {
      absl::StrAppend(&why, " on one node; the largest free node has ", largest(0));
    } else {
      absl::StrAppend(&why, " within one tier-", hard_tier, " domain (", c.tier(hard_tier).name,
                      "); the largest free has ", largest(hard_tier));
      int64_t biggest = 0;
      for (const auto& d : c.domains(hard_tier)) biggest = std::max(biggest, d.total_gpus);
      if (biggest < gpus_needed) {
        absl::StrAppend(&why, "; it can never fit: the biggest such domain has ", biggest, " GPUs in all");
      }
    }
  } else if (hopeless) {
    // Only what the count read, so that the reason of a gang the count rules
    // out changes only when a release makes room for its tasks
    // (GangPlacer::Recall).
    const char* off = ReservedByOther(job) ? " off the nodes reserved for a waiting gang" : "";
    const int64_t k = std::max<int64_t>(count.off_reserved, 0);
    if (k == 0) {
      absl::StrAppend(&why, "; no node has ", count_g, count_g == 1 ? " GPU" : " GPUs", " free", off);
    } else {
      absl::StrAppend(&why, "; the free GPUs hold ", k, " such task", k == 1 ? "" : "s", off);
    }
  } else if (gpus_needed > 0) {
    absl::StrAppend(&why, "; the cluster has ", st.free_index().TotalFree(),
                    " free GPUs, the largest free node ", st.free_index().LargestFree(0));
  }
  if (queue_limited_) {
    absl::StrAppend(&why, "; queue '", s_.queue(job.queue()).name(), "' is at its capability");
  }
  if (!rejections_.empty()) {
    std::vector<std::pair<int, std::string_view>> top;
    for (const auto& [r, n] : rejections_) top.push_back({-n, r});
    std::sort(top.begin(), top.end());
    std::vector<std::string> parts;
    for (size_t k = 0; k < top.size() && k < 4; ++k) {
      parts.push_back(absl::StrCat(-top[k].first, " ", std::string(top[k].second)));
    }
    absl::StrAppend(&why, " [node checks: ", absl::StrJoin(parts, ", "), "]");
  }
  out.reason = std::move(why);
  return out;
}

bool StartIsJudged(const Session& s, const Job& job) {
  return s.has_start_pays() && job.elastic() && job.phase() == JobPhase::kInqueue && s.JobSpeedup(job, 1).has_value();
}

PlaceOutcome PlaceJudged(Session& s, Job& job, ReservationUse use, const WalltimeEstimator* walltimes) {
  Statement stmt(s);
  GangPlacer tentative(s, use, &stmt, walltimes);
  PlaceOutcome out = tentative.Place(job);
  if (out.kind == PlaceOutcome::Kind::kPlaced && s.StartPays(job) && stmt.Commit().ok()) return out;
  stmt.Discard();
  if (out.kind == PlaceOutcome::Kind::kPlaced) {
    out.kind = PlaceOutcome::Kind::kFailed;
    out.reason = "waits for more of its desired size: its speed model says a start this small or this spread would "
                 "not pay";
  }
  return out;
}

}  // namespace ringmaster::scheduler
