// The gang placement planner, shared by allocate and backfill.
//
// Algorithm for one job:
//   1. Take the job's pending tasks in task order; the first `need` of them
//      bring the job to its gang minimum.
//   2. Choose scopes to try, from the job's topology constraint and the free
//      GPU counters per domain (a lookup, not a scan):
//        hard, tier t: tier by tier from 0 (one node) to t, the domains with
//                      enough free GPUs, fewest free first (best fit),
//                      skipping those whose nodes cannot hold the tasks by
//                      GPU count, at most kMaxDomainTries per tier;
//        soft:         the same up to the top tier, then the whole cluster;
//        none:         the whole cluster.
//   3. In a scope, place task by task: candidate nodes in best-fit order of
//      free GPUs, each passing the predicates and the reservation rule, the
//      best NodeOrder score of the first nodesToScore feasible ones wins
//      (ties to the earlier candidate). All inside one Statement.
//   4. The job ready (JobReady) -> commit, then place the remaining pending
//      tasks best-effort. Otherwise discard and try the next scope.
//   5. No scope works -> try the minimum on future idle (pipelining) for the
//      reason only, discard, and leave the job pending with a reason that
//      names what it needs and what the best candidate domain offers.
#ifndef RINGMASTER_SCHEDULER_ACTIONS_PLACEMENT_H_
#define RINGMASTER_SCHEDULER_ACTIONS_PLACEMENT_H_

#include <array>
#include <map>
#include <span>
#include <string>
#include <utility>
#include <vector>

#include "scheduler/actions/learned_walltime.h"
#include "scheduler/session.h"
#include "scheduler/statement.h"

namespace ringmaster::scheduler {

inline constexpr int kMaxDomainTries = 4;  // per tier

struct PlaceOutcome {
  enum class Kind { kPlaced, kPipelined, kFailed };
  Kind kind = Kind::kFailed;
  int tasks_placed = 0;  // committed (kPlaced) or most reached in an attempt
  int gpus_needed = 0;   // whole GPUs of the minimum still to place
  std::string reason;    // for kPipelined / kFailed
};

// Walks of the waiting jobs (a backlog of thousands) wait mostly on cache
// misses, one `Job` record after another: these ask for the lines a walk
// will read of a job a few steps ahead of reaching it. They change nothing
// but timing. The hot fields and the job's tasks count and state.
inline void PrefetchJob(const Job& job) {
  const char* p = reinterpret_cast<const char*>(&job);
  __builtin_prefetch(p);
  __builtin_prefetch(p + 64);
}
// What GangPlacer::Recall and Session::KeepPendingReason read besides: the
// memo of `use` (0 allocate, 1 backfill), the reason's generation and the
// session stamps beside it, the spec's topology fields, the tasks.
inline void PrefetchForRecall(const Job& job, int use) {
  const char* m = reinterpret_cast<const char*>(&job.place_memo(use));
  __builtin_prefetch(m);
  __builtin_prefetch(m + 64);
  __builtin_prefetch(m + 128);
  __builtin_prefetch(&job.pending_reason());
  __builtin_prefetch(&job.spec().topology_mode);
  __builtin_prefetch(job.tasks().data());
}
// What KeepPendingReason and the gang test read of a recalled job.
inline void PrefetchForKeep(const Job& job) {
  __builtin_prefetch(&job);
  __builtin_prefetch(&job.pending_reason());
}
// How many jobs ahead a walk asks (far enough to cover a miss to memory,
// near enough that the lines are still there when it arrives).
inline constexpr size_t kPrefetchAhead = 8;

class GangPlacer {
 public:
  // With `parent`, placements commit into that statement (preemption's
  // trial) instead of becoming decisions. With `walltimes` (backfill's
  // learned walltimes), the reservation rule reads a job's estimate where it
  // gave no walltime (WalltimeEstimator::Walltime); borrowed for the
  // placer's life.
  GangPlacer(Session& session, ReservationUse use, Statement* parent = nullptr,
             const WalltimeEstimator* walltimes = nullptr)
      : s_(session), use_(use), parent_(parent), walltimes_(walltimes) {}

  // Places as much of `job` as the gang rules allow and commits it. With
  // `limit` >= 0, at most max(limit, what the minimum still needs) tasks.
  // With the verdict memo (Session::memo), no parent and no limit, a verdict
  // that placed nothing is remembered on the job (Job::PlaceMemo).
  PlaceOutcome Place(Job& job, int limit = -1);
  // The reason of the verdict Place last gave `job` (for this placer's
  // ReservationUse) if it placed nothing and nothing it reads has changed
  // since: the state (State::epoch: free GPUs, tasks, nodes, the
  // reservation, the queues' usage), the policy and the deserved shares
  // (Session::VerdictContextId). Place would fail again with that reason;
  // null: it has to be tried.
  // A verdict the free-GPU count decided (no attempt could hold the minimum)
  // is recalled also after the epoch moved, while what it read is the same
  // (CountKey): a release that frees no room for the gang's tasks.
  // The memo it recalled (its reason is the verdict's), else null.
  const Job::PlaceMemo* Recall(Job& job);
  // For a walk that needs no order while nothing is placed (allocate's and
  // backfill's pre-pass): Recall for each of `jobs`, its memo appended to
  // `kept`. True when every one was recalled; false at the first that was
  // not, with every recall in `kept` uncounted (the walk in order recalls
  // them again).
  using Kept = std::vector<std::pair<Job*, const Job::PlaceMemo*>>;
  bool RecallAll(std::span<Job* const> jobs, Kept& kept);

 private:
  PlaceOutcome Plan(Job& job, int limit);
  // What the free-GPU count says of tasks of at least g whole GPUs each: how
  // many the free GPUs hold (fit), how many off the nodes reserved for
  // another gang (off_reserved), and how many this placer could use
  // (usable: allocate off_reserved; backfill also what a reserved node holds
  // beyond the reserved gang's GPUs there, or fit for a job with a walltime,
  // which may end before the reservation starts). Each is an upper bound of
  // what any attempt could place.
  struct CountView {
    int64_t fit = 0;
    int64_t off_reserved = 0;
    int64_t usable = 0;
  };
  CountView Count(const Job& job, int64_t g) const;
  // Everything a verdict the count decided reads besides the job's spec and
  // the policy: the job's tasks, whether another gang's reservation keeps it
  // off nodes, the count off them and what it could use, the queue's
  // capability, the largest free domain a hard-limited gang's reason names,
  // the nodes, the releasing tasks.
  std::array<int64_t, 9> CountKey(const Job& job, int64_t g, const CountView& v, bool queue_limited) const;
  // Whether a reservation for another gang keeps `job` off some nodes.
  bool ReservedByOther(const Job& job) const;
  // The tier a hard topology constraint limits `job` to; -1 when none does.
  int HardTier(const Job& job) const;
  struct Scope {
    int tier = -1;  // -1: whole cluster; 0: one node (domain = node index)
    topology::DomainId domain;
  };
  // False when the domain's nodes cannot hold the first `need` tasks by
  // whole-GPU count (exact for equal task sizes, true when sizes differ).
  bool FitsByCount(const Job& job, std::span<const uint32_t> tasks, int need, int tier,
                   topology::DomainId d) const;
  // Picks the best node for task i of job inside scope; invalid if none.
  NodeId PickNode(const Job& job, uint32_t i, const Scope& scope, std::vector<int16_t>* gpus);
  bool Usable(const Job& job, uint32_t i, NodeId n);
  // The job's walltime as backfill reads it (ms, 0: unknown): its own, else
  // the learned estimate when the placer has them.
  int64_t Walltime(const Job& job) const {
    return walltimes_ ? walltimes_->Walltime(job) : job.spec().walltime_ms;
  }
  // When the reservation's nodes may all be free again: the latest end
  // (start + Walltime) among the tasks holding them; +inf when one has none.
  Timestamp ReservationStart() const;
  bool TryScope(Job& job, std::span<const uint32_t> tasks, int need, const Scope& scope,
                int* placed);
  std::string Describe(const Job& job, std::span<const uint32_t> tasks, int need) const;
  // Count's last answer (Count).
  struct CountCache {
    bool valid = false;
    uint64_t epoch = 0;
    int64_t g = 0;
    bool other = false;
    bool timed = false;
    CountView view;
  };
  mutable CountCache count_cache_;
  // Set by Plan when its failure is the count's and may be remembered as such.
  bool count_decided_ = false;
  int64_t count_g_ = 0;
  uint32_t count_task_ = 0;
  std::array<int64_t, 9> count_key_{};

  Session& s_;
  ReservationUse use_;
  Statement* parent_;
  const WalltimeEstimator* walltimes_;
  // Counts a node check's failure by reason (a handful of distinct reasons:
  // a list, compared by address first).
  void Reject(std::string_view reason, int count = 1) {
    if (count == 0) return;
    // Reasons are mostly literals: one pass by address, then by text.
    for (auto& [r, n] : rejections_) {
      if (r.data() == reason.data() && r.size() == reason.size()) {
        n += count;
        return;
      }
    }
    for (auto& [r, n] : rejections_) {
      if (r == reason) {
        n += count;
        return;
      }
    }
    rejections_.emplace_back(reason, count);
  }

  std::vector<std::pair<std::string_view, int>> rejections_;
  bool queue_limited_ = false;
};

// A waiting elastic job with a speed model, in a policy whose plugins judge
// starts (Session::StartPays: the speedup plugin): started small or spread,
// it would stay so until GPUs stay idle, so allocate and backfill place it
// in a statement and keep the placement only where the start pays.
bool StartIsJudged(const Session& s, const Job& job);
// That placement: kPlaced when the job started; otherwise nothing changed
// and the outcome's reason says why it waits (for the caller to set).
// `walltimes` as GangPlacer's.
PlaceOutcome PlaceJudged(Session& s, Job& job, ReservationUse use, const WalltimeEstimator* walltimes = nullptr);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_ACTIONS_PLACEMENT_H_
