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
    std::vector<Job*> waiting;
    for (JobId id : s.admitted_jobs()) {
      Job& j = st.job(id);
      if (j.id() == st.reservation()->job) continue;
      if ((j.phase() == JobPhase::kInqueue || j.phase() == JobPhase::kRunning) &&
          j.Count(TaskState::kPending) > 0 && !j.GangReady() && !j.nominated() &&
          j.Count(TaskState::kReleasing) == 0) {
        waiting.push_back(&j);
      }
    }
    SortInJobOrder(s, waiting.begin(), waiting.end());
    const WalltimeEstimator* walltimes = walltimes_ ? &*walltimes_ : nullptr;
    GangPlacer placer(s, ReservationUse::kBackfill, nullptr, walltimes);
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
  std::optional<WalltimeEstimator> walltimes_;  // with learnedWalltimePercentile
};

}  // namespace

std::unique_ptr<Action> NewBackfillAction(const BackfillArgs& args) { return std::make_unique<BackfillAction>(args); }

}  // namespace ringmaster::scheduler
