#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
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
    if (auto s = args.Finish(); !s.ok()) return s;
    if (name == "enqueue") return NewEnqueueAction();
    if (name == "allocate") return NewAllocateAction();
    return NewBackfillAction();
  }
  if (name == "preempt" || name == "reclaim") {
    auto a = ReadEvictionArgs(args);
    if (!a.ok()) return a.status();
    return name == "preempt" ? NewPreemptAction(*a) : NewReclaimAction(*a);
  }
  if (name == "elastic") {
    auto a = ReadElasticArgs(args);
    if (!a.ok()) return a.status();
    return NewElasticAction(*a);
  }
  return absl::NotFoundError(absl::StrCat("unknown action '", std::string(name), "' (known: ",
                                          absl::StrJoin(KnownActions(), ", "), ")"));
}

}  // namespace ringmaster::scheduler
