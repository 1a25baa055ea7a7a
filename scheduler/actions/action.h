// An action is one step of a scheduling cycle, run on the Session in the
// order the policy lists: enqueue, allocate, backfill (preempt, reclaim and
// elastic come next).
#ifndef RINGMASTER_SCHEDULER_ACTIONS_ACTION_H_
#define RINGMASTER_SCHEDULER_ACTIONS_ACTION_H_

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
};

// The names MakeAction knows, in the order a policy usually lists them.
const std::vector<std::string>& KnownActions();
// Builds a built-in action; NotFound for an unknown name.
absl::StatusOr<std::unique_ptr<Action>> MakeAction(std::string_view name);

std::unique_ptr<Action> NewEnqueueAction();
std::unique_ptr<Action> NewAllocateAction();
std::unique_ptr<Action> NewBackfillAction();

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_ACTIONS_ACTION_H_
