// predicates: may this task run on this node at all, and does it fit?
//   1. node selector: every selector label matches the node's labels;
//   2. taints: every NoSchedule/NoExecute taint is tolerated;
//   3. GPU model: the node's GPUs are of the requested model;
//   4. resources: cpu, memory and scalars fit the node's future idle, and the
//      GPUs fit per device (whole devices free, or one device with enough
//      milli left for a share).
// 1-3 are Unresolvable (waiting will not help), 4 is Unschedulable.
#ifndef RINGMASTER_PLUGINS_PREDICATES_H_
#define RINGMASTER_PLUGINS_PREDICATES_H_

#include "scheduler/session.h"

namespace ringmaster::plugins {

class PredicatesPlugin : public scheduler::Plugin {
 public:
  static constexpr const char* kName = "predicates";
  static absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Create(const scheduler::PluginArgs& args);
  std::string_view name() const override { return kName; }
  void OnSessionOpen(scheduler::Session& s) override;

  static scheduler::Verdict Check(const scheduler::State& state, const scheduler::TaskRef& task,
                                  scheduler::NodeId node);
};

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_PREDICATES_H_
