#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "scheduler/actions/action.h"

namespace ringmaster::scheduler {

const std::vector<std::string>& KnownActions() {
  static const std::vector<std::string> kNames = {"enqueue", "allocate", "backfill"};
  return kNames;
}

absl::StatusOr<std::unique_ptr<Action>> MakeAction(std::string_view name) {
  if (name == "enqueue") return NewEnqueueAction();
  if (name == "allocate") return NewAllocateAction();
  if (name == "backfill") return NewBackfillAction();
  return absl::NotFoundError(absl::StrCat("unknown action '", std::string(name), "' (known: ",
                                          absl::StrJoin(KnownActions(), ", "), ")"));
}

}  // namespace ringmaster::scheduler
