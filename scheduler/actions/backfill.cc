// backfill: fills holes with jobs that fit now without taking what the
// head-of-line gang (the reservation's job) is waiting for.
//
// After allocate, a job that is still pending may use a reserved node when
//   (a) its walltime estimate ends before the reservation could start (every
//       task on the reserved nodes has a walltime and ends by then), or
//   (b) the node keeps, after the job is placed, at least the free GPUs the
//       reserved gang needs there.
// Jobs go in job order and as whole gangs, like allocate.
#include <algorithm>

#include "scheduler/actions/action.h"
#include "scheduler/actions/placement.h"

namespace ringmaster::scheduler {
namespace {

class BackfillAction : public Action {
 public:
  std::string_view name() const override { return "backfill"; }
  // A job that does not end before the reservation could start now will
  // not later either (now + walltime only grows).
  bool UsesTime() const override { return false; }

  void Execute(Session& s) override {
    State& st = s.mutable_state();
    if (!st.reservation()) return;
    std::vector<Job*> waiting;
    for (JobId id : s.jobs()) {
      Job& j = st.job(id);
      if (j.id() == st.reservation()->job) continue;
      if ((j.phase() == JobPhase::kInqueue || j.phase() == JobPhase::kRunning) &&
          j.Count(TaskState::kPending) > 0 && !j.GangReady() && !j.nominated() &&
          j.Count(TaskState::kReleasing) == 0) {
        waiting.push_back(&j);
      }
    }
    SortInJobOrder(s, waiting.begin(), waiting.end());
    GangPlacer placer(s, ReservationUse::kBackfill);
    for (Job* j : waiting) {
      if (!st.reservation()) break;
      if (s.Overused(s.queue(j->queue()))) continue;
      if (const std::string* kept = placer.Recall(*j)) {  // would fail again
        s.KeepPendingReason(*j, *kept);
        continue;
      }
      PlaceOutcome out = StartIsJudged(s, *j) ? PlaceJudged(s, *j, ReservationUse::kBackfill) : placer.Place(*j);
      if (out.kind != PlaceOutcome::Kind::kPlaced) s.SetPendingReason(*j, out.reason);
    }
  }
};

}  // namespace

std::unique_ptr<Action> NewBackfillAction() { return std::make_unique<BackfillAction>(); }

}  // namespace ringmaster::scheduler
