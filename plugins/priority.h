// priority: higher-priority jobs and queues go first; a task may preempt only
// tasks of lower-priority jobs.
#ifndef RINGMASTER_PLUGINS_PRIORITY_H_
#define RINGMASTER_PLUGINS_PRIORITY_H_

#include "scheduler/session.h"

namespace ringmaster::plugins {

class PriorityPlugin : public scheduler::Plugin {
 public:
  static constexpr const char* kName = "priority";
  static absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Create(const scheduler::PluginArgs& args);
  std::string_view name() const override { return kName; }
  void OnSessionOpen(scheduler::Session& s) override;

  static int JobOrder(const scheduler::Job& l, const scheduler::Job& r);
  static int QueueOrder(const scheduler::QueueInfo& l, const scheduler::QueueInfo& r);
  static std::vector<scheduler::TaskRef> Preemptable(const scheduler::TaskRef& preemptor,
                                                     const std::vector<scheduler::TaskRef>& candidates);
};

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_PRIORITY_H_
