// preempt: inside a queue, a waiting gang of higher priority takes from
// running jobs of strictly lower priority (victims.h chooses whom).
//
// 1. Preemptors: admitted gangs below their minimum that hold nothing and are
//    not already waiting on victims, in job order.
// 2. For each, VictimPicker tries the cheapest sufficient victim set: surplus
//    elastic members first, whole jobs only when shrinking is not enough.
// 3. The per-cycle eviction cap and each victim's cooldown bound the churn.
#include <algorithm>

#include "scheduler/actions/action.h"
#include "scheduler/actions/placement.h"
#include "scheduler/actions/victims.h"

namespace ringmaster::scheduler {

std::vector<Job*> WaitingGangs(Session& s) { return WaitingGangs(s, nullptr); }

std::vector<Job*> WaitingGangs(Session& s, const std::function<bool(const Job&)>& keep) {
  std::vector<Job*> out = UnsortedWaitingGangs(s, keep);
  SortInJobOrder(s, out.begin(), out.end());
  return out;
}

std::vector<Job*> UnsortedWaitingGangs(Session& s, const std::function<bool(const Job&)>& keep) {
  std::vector<Job*> out;
  State& st = s.mutable_state();
  const std::vector<JobId>& admitted = s.admitted_jobs();
  for (size_t k = 0; k < admitted.size(); ++k) {
    if (k + kPrefetchAhead < admitted.size()) PrefetchJob(st.job(admitted[k + kPrefetchAhead]));
    Job& j = st.job(admitted[k]);
    if (j.phase() != JobPhase::kInqueue || j.nominated()) continue;
    if (j.GangReady()) continue;
    if (j.Count(TaskState::kReleasing) > 0 || j.PipelinedCount() > 0) continue;
    if (keep && !keep(j)) continue;
    out.push_back(&j);
  }
  return out;
}

namespace {

// After a cycle that changed nothing: VictimPicker::NextChange.
Timestamp NextChangeOf(VictimPicker& picker, Timestamp now) { return picker.NextChange(now); }

class PreemptAction : public Action {
 public:
  explicit PreemptAction(EvictionArgs args) : args_(args) {}
  std::string_view name() const override { return "preempt"; }
  Timestamp NextChange(const State& /*state*/, Timestamp now) const override {
    return next_change_ == kNoChange ? kNoChange : std::max(next_change_, now);
  }
  void Execute(Session& s) override {
    VictimPicker picker(s, EvictMode::kPreempt, args_);
    // Only gangs that outrank a running job of their queue can have a
    // victim; a commit never gives one to another gang (what it starts is
    // not yet a victim), so they are picked before the sort, which is
    // needed only when one of them may get as far as an offer
    // (VictimPicker::Unordered).
    std::vector<Job*> gangs = UnsortedWaitingGangs(s, [&](const Job& j) { return picker.MayHaveVictims(j); });
    if (!(s.fast_paths() && std::all_of(gangs.begin(), gangs.end(), [&](Job* p) { return picker.Unordered(*p); }))) {
      SortInJobOrder(s, gangs.begin(), gangs.end());
      for (Job* p : gangs) picker.TryFor(*p);
    }
    next_change_ = NextChangeOf(picker, s.now());
  }

 private:
  EvictionArgs args_;
  Timestamp next_change_ = 0;
};

class ReclaimAction : public Action {
 public:
  explicit ReclaimAction(EvictionArgs args) : args_(args) {}
  std::string_view name() const override { return "reclaim"; }
  Timestamp NextChange(const State& state, Timestamp now) const override {
    if (skipped_) {
      return CouldHaveAsked(state) ? VictimPicker::FirstCooldownEnd(state, args_.cooldown_ms, now) : kNoChange;
    }
    return next_change_ == kNoChange ? kNoChange : std::max(next_change_, now);
  }
  void Execute(Session& s) override {
    // No queue above its deserved share: no reclaim unit is usable, so
    // every preemptor would stop before choosing, deferring its offer or
    // earlier (one of a hard topology tier or with a speed model may get as
    // far as choosing among none: then the action runs). Nothing to
    // decide, and nothing to walk. The wake-up after a quiet cycle is the
    // run's (VictimPicker::NextChange) or earlier: the first end of a
    // running job's cooldown when some waiting gang could have been asked
    // (a running job in another queue than its own), else none.
    skipped_ = s.fast_paths() && s.state().admitted_waiting_scoped() == 0 && !VictimPicker::AnyQueueBorrows(s);
    if (skipped_) return;
    VictimPicker picker(s, EvictMode::kReclaim, args_);
    // Only gangs with a running job in another queue can have a victim
    // (asked before the sort; with the fast paths, so the property test
    // compares both ways).
    auto may = [&](const Job& j) { return !s.fast_paths() || picker.MayHaveVictims(j); };
    std::vector<Job*> gangs = UnsortedWaitingGangs(s, may);
    // As preempt: sorted only when one may get as far as an offer.
    auto unordered = [&](Job* p) { return s.Overused(s.queue(p->queue())) || picker.Unordered(*p); };
    if (!(s.fast_paths() && std::all_of(gangs.begin(), gangs.end(), unordered))) {
      SortInJobOrder(s, gangs.begin(), gangs.end());
      for (Job* p : gangs) {
        if (s.Overused(s.queue(p->queue()))) continue;
        picker.TryFor(*p);
      }
    }
    next_change_ = NextChangeOf(picker, s.now());
  }

 private:
  // Some admitted gang waits below its minimum and a running job sits in
  // another queue than its own (what lets WaitingGangs ask it).
  static bool CouldHaveAsked(const State& state) {
    constexpr uint32_t kNone = UINT32_MAX;
    uint32_t first = kNone;
    bool several = false;
    for (JobId id : state.running_jobs()) {
      const Job& v = state.job(id);
      if (first == kNone) first = v.queue().value();
      several = several || v.queue().value() != first;
    }
    if (first == kNone) return false;
    for (JobId id : state.admitted_waiting_jobs()) {
      const Job& j = state.job(id);
      if (j.phase() == JobPhase::kInqueue && !j.GangReady() && (several || j.queue().value() != first)) return true;
    }
    return false;
  }
  EvictionArgs args_;
  Timestamp next_change_ = 0;
  bool skipped_ = false;
};

}  // namespace

std::unique_ptr<Action> NewPreemptAction(EvictionArgs args) { return std::make_unique<PreemptAction>(args); }
std::unique_ptr<Action> NewReclaimAction(EvictionArgs args) { return std::make_unique<ReclaimAction>(args); }

}  // namespace ringmaster::scheduler
