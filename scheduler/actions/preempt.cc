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
#include "scheduler/actions/victims.h"

namespace ringmaster::scheduler {

std::vector<Job*> WaitingGangs(Session& s) {
  std::vector<Job*> out;
  for (JobId id : s.jobs()) {
    Job& j = s.mutable_state().job(id);
    if (j.phase() != JobPhase::kInqueue || j.nominated()) continue;
    if (j.ReadyCount() >= j.min_member()) continue;
    if (j.Count(TaskState::kReleasing) > 0 || j.PipelinedCount() > 0) continue;
    out.push_back(&j);
  }
  SortInJobOrder(s, out.begin(), out.end());
  return out;
}

namespace {

class PreemptAction : public Action {
 public:
  explicit PreemptAction(EvictionArgs args) : args_(args) {}
  std::string_view name() const override { return "preempt"; }
  void Execute(Session& s) override {
    VictimPicker picker(s, EvictMode::kPreempt, args_);
    for (Job* p : WaitingGangs(s)) picker.TryFor(*p);
  }

 private:
  EvictionArgs args_;
};

class ReclaimAction : public Action {
 public:
  explicit ReclaimAction(EvictionArgs args) : args_(args) {}
  std::string_view name() const override { return "reclaim"; }
  void Execute(Session& s) override {
    VictimPicker picker(s, EvictMode::kReclaim, args_);
    for (Job* p : WaitingGangs(s)) {
      if (s.Overused(s.queue(p->queue()))) continue;
      picker.TryFor(*p);
    }
  }

 private:
  EvictionArgs args_;
};

}  // namespace

std::unique_ptr<Action> NewPreemptAction(EvictionArgs args) { return std::make_unique<PreemptAction>(args); }
std::unique_ptr<Action> NewReclaimAction(EvictionArgs args) { return std::make_unique<ReclaimAction>(args); }

}  // namespace ringmaster::scheduler
