// sjf: shortest job first. Jobs with the shorter walltime (JobSpec::
// walltime_ms, what the user or the trace says the job needs) go first; jobs
// without a walltime go after every job with one. Equal walltimes tie, and
// the next plugin or the session's FIFO tie-break decides.
//   e.g. a (walltime 2 h), b (30 min), c (none): b, a, c.
// Non-preemptive: it only orders; running jobs are never stopped for it.
#ifndef RINGMASTER_PLUGINS_SJF_H_
#define RINGMASTER_PLUGINS_SJF_H_

#include "scheduler/session.h"

namespace ringmaster::plugins {

class SjfPlugin : public scheduler::Plugin {
 public:
  static constexpr const char* kName = "sjf";
  static absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Create(const scheduler::PluginArgs& args);
  std::string_view name() const override { return kName; }
  void OnSessionOpen(scheduler::Session& s) override;
  // The key is the spec's walltime.
  bool PendingOrderReadsOnlySpec() const override { return true; }

  static int JobOrder(const scheduler::Job& l, const scheduler::Job& r);
};

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_SJF_H_
