// drf: dominant resource fairness among jobs. A job's dominant share is the
// largest fraction of any cluster resource it holds; within a queue the job
// with the lower dominant share goes first, so no job hogs one resource.
//   e.g. total 64 GPUs, 1024 cores; j1 holds 16 GPUs, 64 cores -> max(.25,
//   .0625) = .25; j2 holds 4 GPUs, 512 cores -> .5; j1 goes first.
#ifndef RINGMASTER_PLUGINS_DRF_H_
#define RINGMASTER_PLUGINS_DRF_H_

#include "scheduler/session.h"

namespace ringmaster::plugins {

class DrfPlugin : public scheduler::Plugin {
 public:
  static constexpr const char* kName = "drf";
  static absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Create(const scheduler::PluginArgs& args);
  std::string_view name() const override { return kName; }
  void OnSessionOpen(scheduler::Session& s) override;
  // The key of a job that holds nothing is 0.
  bool PendingOrderReadsOnlySpec() const override { return true; }

  // -1 when l's dominant share is lower, +1 when higher, 0 when equal.
  static int Compare(const topology::Resources& total, const scheduler::Job& l, const scheduler::Job& r);
};

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_DRF_H_
