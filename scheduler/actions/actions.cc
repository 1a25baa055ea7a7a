#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"
#include "scheduler/actions/action.h"
#include "scheduler/actions/victims.h"

namespace ringmaster::scheduler {

const std::vector<std::string>& KnownActions() {
  static const std::vector<std::string> kNames = {"enqueue", "allocate", "preempt", "reclaim", "elastic",
                                                  "backfill"};
  return kNames;
}

absl::StatusOr<std::unique_ptr<Action>> MakeAction(std::string_view name, const PluginArgs& args) {
  if (name == "enqueue" || name == "allocate" || name == "backfill") {
    RM_RETURN_IF_ERROR(args.Finish());
    if (name == "enqueue") return NewEnqueueAction();
    if (name == "allocate") return NewAllocateAction();
    return NewBackfillAction();
  }
  if (name == "preempt" || name == "reclaim") {
    RM_ASSIGN_OR_RETURN(auto a, ReadEvictionArgs(args));
    return name == "preempt" ? NewPreemptAction(a) : NewReclaimAction(a);
  }
  if (name == "elastic") {
    RM_ASSIGN_OR_RETURN(auto a, ReadElasticArgs(args));
    return NewElasticAction(a);
  }
  return absl::NotFoundError(absl::StrCat("unknown action '", std::string(name), "' (known: ",
                                          absl::StrJoin(KnownActions(), ", "), ")"));
}

}  // namespace ringmaster::scheduler
