#include "plugins/most_free.h"

#include "common/status_macros.h"

namespace ringmaster::plugins {

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> MostFreePlugin::Create(const scheduler::PluginArgs& args) {
  RM_ASSIGN_OR_RETURN(auto w, args.Int("weight", 1));
  if (w < 1) return args.Error("weight", "must be >= 1");
  RM_RETURN_IF_ERROR(args.Finish());
  return std::make_unique<MostFreePlugin>(w);
}

void MostFreePlugin::OnSessionOpen(scheduler::Session& s) {
  const scheduler::State* state = &s.state();
  const int64_t w = weight_;
  s.AddNodeOrderFn(kName, [state, w](const scheduler::TaskRef& t, scheduler::NodeId n) {
    return w * Score(*state, t, n);
  });
  s.MarkNodeOrderReadsJob();
}

int64_t MostFreePlugin::Score(const scheduler::State& state, const scheduler::TaskRef& task, scheduler::NodeId node) {
  int64_t held = 0;
  for (const scheduler::Task& t : task.job->tasks()) {
    if (t.node == node && scheduler::HoldsNode(t.state) && t.state != scheduler::TaskState::kPipelined) {
      held += static_cast<int64_t>(t.gpus.size());
    }
  }
  return state.FreeWholeGpus(node) + held;
}

}  // namespace ringmaster::plugins
