// backfill: fills holes with jobs that fit now without taking what the
// head-of-line gang (the reservation's job) is waiting for.
//
// After allocate, a job that is still pending may use a reserved node when
//   (a) its walltime ends before the reservation could start (every task on
//       the reserved nodes has a walltime and ends by then), or
//   (b) the node keeps, after the job is placed, at least the free GPUs the
//       reserved gang needs there.
// Jobs go in job order and as whole gangs, like allocate. A walltime is the
// user's (JobSpec::walltime_ms), or with learnedWalltimePercentile one
// learned from the jobs seen to end (learned_walltime.h), read by (a) only.
#include <algorithm>
#include <optional>

#include "scheduler/actions/action.h"
#include "scheduler/actions/learned_walltime.h"
#include "scheduler/actions/placement.h"

namespace ringmaster::scheduler {
namespace {

class BackfillAction : public Action {
 public:
  explicit BackfillAction(const BackfillArgs& args) {
    if (args.learned_percentile > 0) walltimes_.emplace(args.learned_percentile, args.learned_min_samples);
  }
  std::string_view name() const override { return "backfill"; }
  // A job that does not end before the reservation could start now will
  // not later either (now + walltime only grows; learned walltimes change
  // only when a job ends, an event).
  bool UsesTime() const override { return false; }

  void Execute(Session& s) override {
    State& st = s.mutable_state();
    if (walltimes_) walltimes_->Learn(st);
    if (!st.reservation()) return;
    // (The list is the action's, kept across cycles with its capacity.)
    std::vector<Job*>& waiting = waiting_;
    waiting.clear();
    const std::vector<JobId>& admitted = s.admitted_jobs();
    for (size_t k = 0; k < admitted.size(); ++k) {
      if (k + kPrefetchAhead < admitted.size()) PrefetchJob(st.job(admitted[k + kPrefetchAhead]));
      Job& j = st.job(admitted[k]);
      if (j.id() == st.reservation()->job) continue;
      if ((j.phase() == JobPhase::kInqueue || j.phase() == JobPhase::kRunning) &&
          j.Count(TaskState::kPending) > 0 && !j.GangReady() && !j.nominated() &&
          j.Count(TaskState::kReleasing) == 0) {
        waiting.push_back(&j);
      }
    }
    const WalltimeEstimator* walltimes = walltimes_ ? &*walltimes_ : nullptr;
    GangPlacer placer(s, ReservationUse::kBackfill, nullptr, walltimes);
    // Until a job is placed the state is as allocate left it, and each
    // job's answer (over its queue's share, or its remembered failure)
    // reads only it and that state: when every job would be passed so, the
    // order does not matter and none is sorted.
    if (s.fast_paths() && AllPassed(s, placer, waiting)) return;
    SortInJobOrder(s, waiting.begin(), waiting.end());
    for (Job* j : waiting) {
      if (!st.reservation()) break;
      if (s.Overused(s.queue(j->queue()))) continue;
      if (const Job::PlaceMemo* kept = placer.Recall(*j)) {  // would fail again
        s.KeepPendingReason(*j, *kept);
        continue;
      }
      PlaceOutcome out =
          StartIsJudged(s, *j) ? PlaceJudged(s, *j, ReservationUse::kBackfill, walltimes) : placer.Place(*j);
      if (out.kind != PlaceOutcome::Kind::kPlaced) s.SetPendingReason(*j, out.reason);
    }
  }

 private:
  // Each of `waiting` is in a queue over its share, or recalled as failing
  // again (GangPlacer::Recall): then each recalled one keeps its reason,
  // and true. False, having kept no reason, at the first that is neither.
  bool AllPassed(Session& s, GangPlacer& placer, const std::vector<Job*>& waiting) {
    asked_.clear();
    for (Job* j : waiting) {
      if (!s.Overused(s.queue(j->queue()))) asked_.push_back(j);
    }
    kept_.clear();
    if (!placer.RecallAll(asked_, kept_)) return false;
    for (size_t k = 0; k < kept_.size(); ++k) {
      if (k + kPrefetchAhead < kept_.size()) PrefetchForKeep(*kept_[k + kPrefetchAhead].first);
      s.KeepPendingReason(*kept_[k].first, *kept_[k].second);
    }
    return true;
  }

  std::vector<Job*> waiting_;  // Execute's: the jobs that may be backfilled (reused)
  std::vector<Job*> asked_;    // AllPassed's: the jobs of queues within their share (reused)
  GangPlacer::Kept kept_;    // AllPassed's (reused)
  std::optional<WalltimeEstimator> walltimes_;  // with learnedWalltimePercentile
};

}  // namespace

std::unique_ptr<Action> NewBackfillAction(const BackfillArgs& args) { return std::make_unique<BackfillAction>(args); }

}  // namespace ringmaster::scheduler
