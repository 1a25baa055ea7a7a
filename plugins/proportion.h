// proportion: queues share the cluster by weight, within guarantee and
// capability (water-filling in queue/proportion.h).
//   QueueOrder: lower allocated/deserved share first.
//   Overused:   allocated has reached deserved in every dimension it asks for.
//   Allocatable: allocated + task stays within capability (up the tree).
//   JobEnqueueable: allocated + admitted minimums + this job's minimum stays
//                   within capability (up the tree); otherwise the job waits
//                   Pending with the numbers.
//   Reclaimable: tasks of reclaimable queues that are above their deserved share.
#ifndef RINGMASTER_PLUGINS_PROPORTION_H_
#define RINGMASTER_PLUGINS_PROPORTION_H_

#include "scheduler/session.h"

namespace ringmaster::plugins {

class ProportionPlugin : public scheduler::Plugin {
 public:
  static constexpr const char* kName = "proportion";
  static absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Create(const scheduler::PluginArgs& args);
  std::string_view name() const override { return kName; }
  void OnSessionOpen(scheduler::Session& s) override;

  // Share of a queue: max over dimensions of allocated/deserved.
  static double Share(const scheduler::QueueInfo& q);
  static bool Overused(const scheduler::QueueInfo& q);
};

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_PROPORTION_H_
