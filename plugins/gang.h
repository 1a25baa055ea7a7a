// gang: a job runs with at least its minimum number of tasks or not at all.
// Valid: the job has at least min_member tasks. Ready: min_member tasks are
// placed. Pipelined: placed + pipelined reach the minimum. Starving: below
// the minimum (argument `reserve`, default true; false: no job is starving,
// so allocate never reserves nodes for a waiting gang and every job that
// fits runs, as in schedulers that re-pack greedily each interval). Job
// order: jobs not yet ready go before ready ones. Victims: a running gang
// gives up tasks only above its minimum, or all of them.
#ifndef RINGMASTER_PLUGINS_GANG_H_
#define RINGMASTER_PLUGINS_GANG_H_

#include "scheduler/session.h"

namespace ringmaster::plugins {

class GangPlugin : public scheduler::Plugin {
 public:
  static constexpr const char* kName = "gang";
  static absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Create(const scheduler::PluginArgs& args);
  explicit GangPlugin(bool reserve = true) : reserve_(reserve) {}
  std::string_view name() const override { return kName; }
  // Valid reads the job's tasks and minimum only.
  bool AdmissionReadsOnlyJobAndQueues() const override { return true; }
  // Valid reads the number of tasks and min_member; the order key (ready or
  // not) is 0 for a job that holds nothing.
  bool AdmissionReadsOnlyMinimum() const override { return true; }
  bool PendingOrderReadsOnlySpec() const override { return true; }
  void OnSessionOpen(scheduler::Session& s) override;

  static scheduler::Verdict Valid(const scheduler::Job& job);
  static bool Ready(const scheduler::Job& job);
  static scheduler::Verdict Pipelined(const scheduler::Job& job);
  static bool Starving(const scheduler::Job& job);
  static int Order(const scheduler::Job& l, const scheduler::Job& r);
  // Of `candidates`, the tasks whose eviction keeps their gang whole: tasks
  // above each job's minimum, or every task of a job when all are candidates.
  static std::vector<scheduler::TaskRef> Victims(const std::vector<scheduler::TaskRef>& candidates);

 private:
  bool reserve_ = true;
};

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_GANG_H_
