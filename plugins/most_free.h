// most-free: the node with the most free GPUs first, then fill it. A gang's
// first task goes to the node with the most whole GPUs free; each next task
// stays on the nodes the job already uses while they have room, and then
// goes to the node with the most free GPUs left. This is the placement of
// the Tiresias baseline in the Pollux authors' simulator (OSDI'21 artifact,
// examples/policies/tiresias-tuned.yaml): it spreads jobs over the emptiest
// nodes without splitting a job more than needed.
//   score = weight * (free whole GPUs of the node + whole GPUs the job
//           already holds there), i.e. the node's free GPUs before this job
//   e.g. nodes a (4 free), b (3 free): a 6-GPU gang of 1-GPU tasks takes
//   4 on a (a scores 4 throughout), then 2 on b: placement 4+2.
// Ties go to the planner's earlier candidate (fewest free GPUs first, then
// node order): the job's own partly filled node before an untouched equal.
// Argument: weight (integer >= 1, default 1).
#ifndef RINGMASTER_PLUGINS_MOST_FREE_H_
#define RINGMASTER_PLUGINS_MOST_FREE_H_

#include "scheduler/session.h"

namespace ringmaster::plugins {

class MostFreePlugin : public scheduler::Plugin {
 public:
  static constexpr const char* kName = "most-free";
  static absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Create(const scheduler::PluginArgs& args);
  explicit MostFreePlugin(int64_t weight) : weight_(weight) {}
  std::string_view name() const override { return kName; }
  void OnSessionOpen(scheduler::Session& s) override;

  static int64_t Score(const scheduler::State& state, const scheduler::TaskRef& task, scheduler::NodeId node);

 private:
  int64_t weight_ = 1;
};

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_MOST_FREE_H_
