#include "plugins/priority.h"

#include "common/status_macros.h"

namespace ringmaster::plugins {

using scheduler::Job;
using scheduler::TaskRef;

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> PriorityPlugin::Create(const scheduler::PluginArgs& args) {
  RM_ASSIGN_OR_RETURN(auto victims, args.Bool("victims", true));
  RM_RETURN_IF_ERROR(args.Finish());
  return std::make_unique<PriorityPlugin>(victims);
}

void PriorityPlugin::OnSessionOpen(scheduler::Session& s) {
  // Higher priority first: the key is its negation (JobOrder's order).
  s.AddJobOrderKeyFn(kName, [](const Job& j) { return -static_cast<int64_t>(j.priority()); });
  s.AddQueueOrderFn(kName, &QueueOrder);
  if (victims_) s.AddPreemptableFn(kName, &Preemptable);
}

int PriorityPlugin::JobOrder(const Job& l, const Job& r) {
  if (l.priority() == r.priority()) return 0;
  return l.priority() > r.priority() ? -1 : 1;
}

int PriorityPlugin::QueueOrder(const scheduler::QueueInfo& l, const scheduler::QueueInfo& r) {
  if (l.spec->priority == r.spec->priority) return 0;
  return l.spec->priority > r.spec->priority ? -1 : 1;
}

std::vector<TaskRef> PriorityPlugin::Preemptable(const TaskRef& preemptor,
                                                 const std::vector<TaskRef>& candidates) {
  std::vector<TaskRef> out;
  out.reserve(candidates.size());
  for (const TaskRef& t : candidates) {
    if (t.job->priority() < preemptor.job->priority()) out.push_back(t);
  }
  return out;
}

}  // namespace ringmaster::plugins
