// priority: higher-priority jobs and queues go first; a task may preempt only
// tasks of lower-priority jobs. With `victims: false` the plugin orders jobs
// and queues only and leaves who may be a victim to the session's
// JobPriority (e.g. `las`, which ranks by priority first, then by level, so
// a lower priority is still always a victim first): in one tier with `las`
// the default answer would forbid every preemption between jobs of one
// priority, which is what LAS needs.
#ifndef RINGMASTER_PLUGINS_PRIORITY_H_
#define RINGMASTER_PLUGINS_PRIORITY_H_

#include "scheduler/session.h"

namespace ringmaster::plugins {

class PriorityPlugin : public scheduler::Plugin {
 public:
  static constexpr const char* kName = "priority";
  static absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Create(const scheduler::PluginArgs& args);
  explicit PriorityPlugin(bool victims = true) : victims_(victims) {}
  std::string_view name() const override { return kName; }
  void OnSessionOpen(scheduler::Session& s) override;
  // The key is the job's priority (its spec's).
  bool PendingOrderReadsOnlySpec() const override { return true; }

  static int JobOrder(const scheduler::Job& l, const scheduler::Job& r);
  static int QueueOrder(const scheduler::QueueInfo& l, const scheduler::QueueInfo& r);
  static std::vector<scheduler::TaskRef> Preemptable(const scheduler::TaskRef& preemptor,
                                                     const std::vector<scheduler::TaskRef>& candidates);

 private:
  bool victims_ = true;
};

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_PRIORITY_H_
