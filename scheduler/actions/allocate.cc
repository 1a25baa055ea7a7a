// allocate: places admitted gangs as a whole.
//
// 1. Drop a reservation whose job no longer waits, or that a starving gang
//    now ahead of its job in job order has overtaken.
// 2. Group jobs with pending tasks (Inqueue, or Running below their desired
//    size) by queue, each queue's jobs in job order.
// 3. Repeatedly take the first queue in queue order (shares change as jobs
//    are placed), skip it if overused, and place its next job with the
//    GangPlacer (all of the minimum or nothing). Reserved nodes are off
//    limits to everyone but the reservation's job.
// 4. The first job in order that fails while starving, and could run on an
//    empty part of the cluster, gets the reservation: the nodes with the most
//    free GPUs that together hold its minimum. Smaller jobs keep running
//    elsewhere; backfill may use reserved nodes only without delaying it.
#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "scheduler/actions/action.h"
#include "scheduler/actions/placement.h"
#include "scheduler/statement.h"

namespace ringmaster::scheduler {
namespace {

// Gangs below their minimum, and the extra members of a running job that is
// not elastic (an elastic job grows only through the elastic action). A job
// held for its releasing victims, or whose own tasks are still releasing,
// waits.
bool WaitsForPlacement(const Job& j) {
  if (j.Count(TaskState::kPending) == 0 || j.nominated()) return false;
  if (j.phase() == JobPhase::kInqueue) return j.Count(TaskState::kReleasing) == 0;
  return j.phase() == JobPhase::kRunning && !j.elastic();
}

// Builds a reservation for `job`: nodes in order of most free GPUs (ties by
// id) inside the job's allowed scope, until they can hold its minimum once
// drained. None when the job could not fit even an empty scope.
std::optional<Reservation> ReservationFor(const Session& s, const Job& job) {
  const State& st = s.state();
  const topology::Cluster& c = st.cluster();
  int64_t per_task = 0;
  int need = job.GangShortfall();
  for (const Task& t : job.tasks()) {
    if (t.state != TaskState::kPending) continue;
    const GpuRequest& g = job.gpu(t.index);
    if (g.whole()) per_task = std::max<int64_t>(per_task, g.count);
  }
  if (per_task == 0 || need <= 0) return std::nullopt;
  std::vector<NodeId> pool;
  const JobSpec& spec = job.spec();
  const bool in_domain = spec.topology_mode == TopologyMode::kHard && spec.highest_tier >= 1 &&
                         spec.highest_tier <= c.num_tiers();
  if (in_domain) {
    // The domain at the allowed tier with the most free GPUs that is big enough.
    const int t = spec.highest_tier;
    int64_t best_free = -1;
    topology::DomainId best;
    for (uint32_t d = 0; d < c.domains(t).size(); ++d) {
      const topology::DomainId id(d);
      if (c.domain(t, id).total_gpus < per_task * need) continue;
      if (st.free_index().DomainFree(t, id) > best_free) {
        best_free = st.free_index().DomainFree(t, id);
        best = id;
      }
    }
    if (!best.valid()) return std::nullopt;
    pool = c.domain(t, best).nodes;
    std::stable_sort(pool.begin(), pool.end(), [&](NodeId a, NodeId b) {
      return st.FreeWholeGpus(a) > st.FreeWholeGpus(b);
    });
  }
  Reservation r;
  r.job = job.id();
  auto take = [&](NodeId n) {
    if (!st.node(n).schedulable) return true;
    const int64_t fits = static_cast<int64_t>(c.node(n).gpus.size()) / per_task;
    if (fits == 0) return true;
    const int64_t k = std::min<int64_t>(fits, need);
    r.nodes.push_back(n);
    r.gpus_needed.push_back(k * per_task);
    need -= static_cast<int>(k);
    return need > 0;
  };
  if (in_domain) {
    for (NodeId n : pool) {
      if (!take(n)) break;
    }
  } else {
    // The whole cluster: the free index walks nodes most free first, no sort.
    st.free_index().ForEachNodeMostFreeFirst(take);
  }
  if (need > 0) return std::nullopt;
  return r;
}

// Sets the reservation through a Statement (every change a session makes
// goes through one).
void Reserve(Session& s, std::optional<Reservation> r) {
  Statement stmt(s);
  stmt.SetReservation(std::move(r));
  RM_CHECK_OK(stmt.Commit());  // a reservation alone cannot fail: a bug
}

// The reservation belongs to the first starving gang in its queue's job
// order: when a job order that changes as time goes on (sjf, las) or a
// higher-priority arrival puts a starving gang ahead of the holder, the
// reservation is dropped, and this cycle gives it to whoever now fails first.
void DropIfOvertaken(Session& s, const std::vector<std::vector<Job*>>& by_queue) {
  const auto& r = s.state().reservation();
  if (!r) return;
  const Job& holder = s.state().job(r->job);
  for (const Job* j : by_queue[holder.queue().value()]) {
    if (j == &holder) return;
    if (!j->GangReady() && s.JobStarving(*j)) {
      Reserve(s, std::nullopt);
      return;
    }
  }
}

class AllocateAction : public Action {
 public:
  std::string_view name() const override { return "allocate"; }
  bool UsesTime() const override { return false; }  // the job order may (Plugin::UsesTime)

  void Execute(Session& s) override {
    State& st = s.mutable_state();
    if (auto& r = st.reservation(); r) {
      const Job& holder = st.job(r->job);
      if (!WaitsForPlacement(holder) || holder.GangReady()) Reserve(s, std::nullopt);
    }
    // Per queue, its waiting jobs in job order; next[q] is the first not yet
    // tried (a vector and an index: a deque allocates even when empty).
    // Sized before any reason is kept: the session holds pointers into it.
    // The lists are the action's, kept across cycles (cleared, capacity
    // kept: a backlog's lists are not allocated and grown again each cycle).
    if (overused_.size() < s.queues().size()) overused_.resize(s.queues().size());
    std::vector<std::vector<Job*>>& by_queue = by_queue_;
    by_queue.resize(s.queues().size());
    for (auto& jobs : by_queue) jobs.clear();
    std::vector<size_t>& next = next_;
    next.assign(by_queue.size(), 0);
    const std::vector<JobId>& admitted = s.admitted_jobs();
    for (size_t k = 0; k < admitted.size(); ++k) {
      if (k + kPrefetchAhead < admitted.size()) PrefetchJob(st.job(admitted[k + kPrefetchAhead]));
      Job& j = st.job(admitted[k]);
      if (WaitsForPlacement(j)) by_queue[j.queue().value()].push_back(&j);
    }
    std::vector<uint32_t>& live = live_;
    live.clear();
    for (uint32_t q = 0; q < by_queue.size(); ++q) {
      if (!by_queue[q].empty()) live.push_back(q);
    }
    GangPlacer placer(s, ReservationUse::kNone);
    // With a reservation that stands, until a job is placed each job's
    // answer (its queue over its share, or its remembered failure) reads
    // only it and the state as found, and no reservation is made: when
    // every job would be passed so, the order does not matter and only the
    // holder's queue is sorted (DropIfOvertaken reads it in order).
    const bool prepass = s.fast_paths() && st.reservation();
    if (prepass) {
      auto& held = by_queue[st.job(st.reservation()->job).queue().value()];
      SortInJobOrder(s, held.begin(), held.end());
      DropIfOvertaken(s, by_queue);
      if (st.reservation() && AllPassed(s, placer, by_queue, live)) return;
    }
    for (uint32_t q : live) SortInJobOrder(s, by_queue[q].begin(), by_queue[q].end());
    if (!prepass) DropIfOvertaken(s, by_queue);  // (the pre-pass asked it already)
    // The queue order reads the queues' figures, which only a commit moves:
    // the first queue is looked for again after a commit or when a queue
    // leaves `live`, not for every job (most are recalled and change
    // nothing).
    auto it = live.end();
    int order_commits = -1;
    while (!live.empty()) {
      if (it == live.end() || order_commits != s.commits()) {
        it = std::min_element(live.begin(), live.end(), [&](uint32_t a, uint32_t b) {
          return s.QueueOrder(s.queues()[a], s.queues()[b]);
        });
        order_commits = s.commits();
      }
      const uint32_t q = *it;
      QueueInfo& queue = s.queues()[q];
      auto& jobs = by_queue[q];
      if (s.Overused(queue)) {
        KeepOverused(s, q, jobs, next[q]);
        live.erase(it);
        it = live.end();
        continue;
      }
      Job* job = jobs[next[q]++];
      if (next[q] == jobs.size()) {
        live.erase(it);
        it = live.end();
      }
      // Nothing it depends on changed since it last failed: it would fail
      // again, with the same reason (GangPlacer::Recall).
      if (const Job::PlaceMemo* kept = placer.Recall(*job)) {
        if (job->GangReady()) continue;
        s.KeepPendingReason(*job, *kept);
        if (!st.reservation() && s.JobStarving(*job)) {
          if (auto r = ReservationFor(s, *job); r) Reserve(s, std::move(r));
        }
        continue;
      }
      // An elastic job with a speed model starts only where that pays
      // (PlaceJudged); otherwise it waits, and preempt and the loans look
      // for its desired size.
      PlaceOutcome out = StartIsJudged(s, *job) ? PlaceJudged(s, *job, ReservationUse::kNone) : placer.Place(*job);
      if (out.kind == PlaceOutcome::Kind::kPlaced) {
        if (st.reservation() && st.reservation()->job == job->id()) Reserve(s, std::nullopt);
        continue;
      }
      if (job->GangReady()) continue;  // running; extras wait quietly
      s.SetPendingReason(*job, out.reason);
      if (!st.reservation() && s.JobStarving(*job)) {
        if (auto r = ReservationFor(s, *job); r) Reserve(s, std::move(r));
      }
    }
  }

 private:
  // Queue q is over its share: its waiting jobs from `from` on that are
  // not ready keep one text, composed once a cycle and kept by generation
  // while it reads the same (a job that has it already is passed without a
  // copy or a comparison: Session::KeepPendingReason).
  void KeepOverused(Session& s, uint32_t q, const std::vector<Job*>& jobs, size_t from) {
    const QueueInfo& queue = s.queues()[q];
    Kept& why = overused_[q];
    bool composed = false;
    for (size_t k = from; k < jobs.size(); ++k) {
      Job* j = jobs[k];
      if (j->GangReady()) continue;
      if (!composed) {
        std::string text = absl::StrCat("queue '", queue.name(), "' is using its deserved share (",
                                        queue.deserved.ToString(), ")");
        if (text != why.text || why.gen == 0) {
          why.text = std::move(text);
          why.gen = Job::NextReasonGen();
        }
        composed = true;
      }
      s.KeepPendingReason(*j, why.text, why.gen);
    }
  }

  // Every job of the live queues is in a queue over its share or recalled
  // as failing again (GangPlacer::Recall): then each keeps its reason as
  // the walk in order would have given it, and true. False, having kept no
  // reason, at the first that is neither.
  bool AllPassed(Session& s, GangPlacer& placer, const std::vector<std::vector<Job*>>& by_queue,
                 const std::vector<uint32_t>& live) {
    kept_.clear();
    over_.clear();
    for (uint32_t q : live) {
      if (s.Overused(s.queues()[q])) {
        over_.push_back(q);
      } else if (!placer.RecallAll(by_queue[q], kept_)) {
        return false;
      }
    }
    for (uint32_t q : over_) KeepOverused(s, q, by_queue[q], 0);
    for (size_t k = 0; k < kept_.size(); ++k) {
      if (k + kPrefetchAhead < kept_.size()) PrefetchForKeep(*kept_[k + kPrefetchAhead].first);
      const auto& [j, kept] = kept_[k];
      if (!j->GangReady()) s.KeepPendingReason(*j, *kept);  // a ready one's extras wait quietly
    }
    return true;
  }

  // Execute's per-queue lists (by_queue, next, live), reused.
  std::vector<std::vector<Job*>> by_queue_;
  std::vector<size_t> next_;
  std::vector<uint32_t> live_;
  GangPlacer::Kept kept_;       // AllPassed's (reused)
  std::vector<uint32_t> over_;  // AllPassed's (reused)
  // Per queue: the last "using its deserved share" text and its generation
  // (Job::NextReasonGen), kept across cycles.
  struct Kept {
    std::string text;
    uint64_t gen = 0;
  };
  std::vector<Kept> overused_;
};

}  // namespace

std::unique_ptr<Action> NewAllocateAction() { return std::make_unique<AllocateAction>(); }

}  // namespace ringmaster::scheduler
