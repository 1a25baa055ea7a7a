// An action is one step of a scheduling cycle, run on the Session in the
// order the policy lists: enqueue, allocate, preempt, reclaim, elastic,
// backfill. Actions live as long as the engine (one may keep state across
// cycles, such as elastic's idle timer); their arguments come from the
// policy's `configurations:` section.
#ifndef RINGMASTER_SCHEDULER_ACTIONS_ACTION_H_
#define RINGMASTER_SCHEDULER_ACTIONS_ACTION_H_

#include <algorithm>
#include <functional>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/session.h"

namespace ringmaster::scheduler {

class Action {
 public:
  virtual ~Action() = default;
  virtual std::string_view name() const = 0;
  virtual void Execute(Session& session) = 0;
  // Whether a cycle with nothing new (no arrival, finish, release or node
  // change) may decide differently only because time went on: cooldowns,
  // growIdle. Engine::NextWakeup reads it; true unless the action says not.
  virtual bool UsesTime() const { return true; }
  // For an action that UsesTime, asked after a cycle that changed nothing
  // (Engine::NextWakeup): the earliest time >= now at which it could decide
  // differently on the same state (growIdle or a cooldown ends), from what
  // its last Execute saw; kNoChange when only an event can change its
  // decisions. Being early is safe (a cycle that decides nothing); being
  // late is a bug. Default: now.
  virtual Timestamp NextChange(const State& /*state*/, Timestamp now) const { return now; }
};

// The names MakeAction knows, in the order a policy usually lists them.
const std::vector<std::string>& KnownActions();
// Builds a built-in action with its arguments (InvalidArgument naming
// file:line:column and the argument when one is wrong or unknown); NotFound
// for an unknown name.
absl::StatusOr<std::unique_ptr<Action>> MakeAction(std::string_view name, const PluginArgs& args = {});

// elastic's arguments.
struct ElasticArgs {
  Timestamp grow_idle_ms = 60'000;  // growIdle (s): GPUs idle this long before anyone grows
  Timestamp cooldown_ms = 60'000;   // cooldown (s): since a job last started or resized
  int max_grow = 0;                 // maxGrowPerCycle: tasks added per cycle (0: no limit)
  // returnLoans: members grown above a job's desired size go back to a
  // waiting gang of at least its priority (victims.h, EvictMode::kLoan),
  // within loanGracePeriod (s).
  bool return_loans = true;
  Timestamp loan_grace_ms = 30'000;
};
absl::StatusOr<ElasticArgs> ReadElasticArgs(const PluginArgs& args);
struct EvictionArgs;
struct BackfillArgs;  // learned_walltime.h

std::unique_ptr<Action> NewEnqueueAction();
std::unique_ptr<Action> NewAllocateAction();
std::unique_ptr<Action> NewBackfillAction(const BackfillArgs& args);
std::unique_ptr<Action> NewPreemptAction(EvictionArgs args);
std::unique_ptr<Action> NewReclaimAction(EvictionArgs args);
std::unique_ptr<Action> NewElasticAction(ElasticArgs args);
// Sorts jobs by Session::JobOrder (a total order: ties go by creation, then
// id, so the result does not depend on the input's order). Jobs mostly come
// in that order already (the session's jobs go by id, and ids follow
// submission), so one pass checks first and the sort runs only when needed.
// With the fast paths and every job order a key (Session::job_order_keyed),
// each job's keys are computed once and the sort compares them
// (SortJobsByKeys): the same order (a total order has one sorted
// permutation) for n key calls per plugin instead of O(n log n) comparator
// calls. Both ways ask every job's keys exactly when n >= 2 (las' starvation
// promotions happen as its level is read). With the engine's JobOrderCache
// only the jobs whose rows changed since the last keyed sort are compared
// (the others keep their order there) and merged in.
void SortJobsByKeys(const Session& s, Job** jobs, size_t n);
template <typename It>
void SortInJobOrder(const Session& s, It first, It last) {
  if (last - first < 2) return;
  if (s.fast_paths() && s.job_order_keyed()) {
    SortJobsByKeys(s, &*first, static_cast<size_t>(last - first));
    return;
  }
  auto before = [&s](const Job* a, const Job* b) { return s.JobOrder(*a, *b); };
  if (!std::is_sorted(first, last, before)) std::sort(first, last, before);
}

// Admitted gangs below their minimum that hold nothing and wait on no
// victim, in job order (the preemptors of preempt and reclaim).
std::vector<Job*> WaitingGangs(Session& s);
// The same, only those `keep` says yes to (asked before the sort, which then
// orders fewer jobs; the order among them is the same).
std::vector<Job*> WaitingGangs(Session& s, const std::function<bool(const Job&)>& keep);
// The same, in no particular order.
std::vector<Job*> UnsortedWaitingGangs(Session& s, const std::function<bool(const Job&)>& keep);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_ACTIONS_ACTION_H_
