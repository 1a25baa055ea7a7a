#include "plugins/gpu_affinity.h"

#include "common/status_macros.h"
#include "topology/gpu_select.h"

namespace ringmaster::plugins {
namespace {

std::vector<topology::Quantity> UsedMilli(const scheduler::State& state, scheduler::NodeId node) {
  const auto& used = state.node(node).gpu_used;
  return std::vector<topology::Quantity>(used.begin(), used.end());
}

}  // namespace

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> GpuAffinityPlugin::Create(const scheduler::PluginArgs& args) {
  RM_ASSIGN_OR_RETURN(auto w, args.Int("weight", 1));
  if (w < 0) return args.Error("weight", "must be >= 0");
  RM_RETURN_IF_ERROR(args.Finish());
  return std::make_unique<GpuAffinityPlugin>(w);
}

void GpuAffinityPlugin::OnSessionOpen(scheduler::Session& s) {
  const scheduler::State* state = &s.state();
  s.AddGpuSelectFn(kName, [state](const scheduler::TaskRef& t, scheduler::NodeId n, std::vector<int16_t>* gpus) {
    return Select(*state, t, n, gpus);
  });
  if (weight_ > 0) {
    const int64_t w = weight_;
    s.AddNodeOrderFn(kName, [state, w](const scheduler::TaskRef& t, scheduler::NodeId n) {
      return Score(w, *state, t, n);
    });
  }
}

bool GpuAffinityPlugin::Select(const scheduler::State& state, const scheduler::TaskRef& task,
                               scheduler::NodeId node, std::vector<int16_t>* gpus) {
  const scheduler::GpuRequest& req = task.job->gpu(task.index);
  gpus->clear();
  if (req.count == 0) return true;
  const std::vector<topology::Quantity> used = UsedMilli(state, node);
  if (req.whole()) {
    auto got = topology::SelectWholeGpus(state.cluster().node(node).gpus, used, req.count);
    if (!got) return false;
    gpus->assign(got->begin(), got->end());
    return true;
  }
  auto g = topology::SelectSharedGpu(used, req.milli);
  if (!g) return false;
  gpus->push_back(static_cast<int16_t>(*g));
  return true;
}

int64_t GpuAffinityPlugin::Score(int64_t weight, const scheduler::State& state, const scheduler::TaskRef& task,
                                 scheduler::NodeId node) {
  std::vector<int16_t> gpus;
  if (task.job->gpu(task.index).count == 0 || !Select(state, task, node, &gpus) || gpus.empty()) return 0;
  const auto& devs = state.cluster().node(node).gpus;
  auto same = [&](int topology::Gpu::*m) {
    for (int16_t g : gpus) {
      if (devs[g].*m != devs[gpus[0]].*m) return false;
    }
    return true;
  };
  const int64_t level = same(&topology::Gpu::nvlink_island) ? 100
                        : same(&topology::Gpu::pcie_switch) ? 75
                        : same(&topology::Gpu::numa)        ? 50
                                                            : 25;
  return weight * level;
}

}  // namespace ringmaster::plugins
