#include "plugins/binpack.h"

#include "common/status_macros.h"

namespace ringmaster::plugins {

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> BinpackPlugin::Create(const scheduler::PluginArgs& args) {
  BinpackWeights w;
  for (auto [key, field] : {std::pair<const char*, int64_t*>{"weight", &w.weight},
                            {"cpu", &w.cpu}, {"memory", &w.memory}, {"gpu", &w.gpu}}) {
    RM_ASSIGN_OR_RETURN(auto v, args.Int(key, *field));
    if (v < 0) return args.Error(key, "must be >= 0");
    *field = v;
  }
  // Any other argument is the weight of a named scalar resource.
  for (const auto& [key, value] : args.values()) {
    if (key == "weight" || key == "cpu" || key == "memory" || key == "gpu") continue;
    if (key.find('/') == std::string::npos && key.find('.') == std::string::npos) continue;
    RM_ASSIGN_OR_RETURN(auto v, args.Int(key, 0));
    if (v < 0) return args.Error(key, "must be >= 0");
    w.scalars[key] = v;
  }
  RM_RETURN_IF_ERROR(args.Finish());
  return std::make_unique<BinpackPlugin>(std::move(w));
}

void BinpackPlugin::OnSessionOpen(scheduler::Session& s) {
  const scheduler::State* state = &s.state();
  const BinpackWeights* w = &w_;
  s.AddNodeOrderFn(kName, [state, w](const scheduler::TaskRef& t, scheduler::NodeId n) {
    return Score(*w, *state, t, n);
  });
}

int64_t BinpackPlugin::Score(const BinpackWeights& w, const scheduler::State& state,
                             const scheduler::TaskRef& task, scheduler::NodeId node) {
  const topology::Resources& req = task.job->request(task.index);
  const topology::Resources& alloc = state.cluster().node(node).allocatable;
  const topology::Resources& used = state.node(node).used;
  // Fixed point: fractions in parts per 10^6.
  int64_t sum = 0, weights = 0;
  auto dim = [&](int64_t weight, int64_t r, int64_t u, int64_t a) {
    if (weight == 0 || r == 0 || a <= 0) return;
    sum += weight * static_cast<int64_t>((static_cast<__int128>(u + r) * 1'000'000) / a);
    weights += weight;
  };
  dim(w.cpu, req.cpu_milli(), used.cpu_milli(), alloc.cpu_milli());
  dim(w.memory, req.memory(), used.memory(), alloc.memory());
  dim(w.gpu, req.gpu_milli(), used.gpu_milli(), alloc.gpu_milli());
  for (const auto& [name, weight] : w.scalars) {
    dim(weight, req.scalar(name), used.scalar(name), alloc.scalar(name));
  }
  if (weights == 0) return 0;
  return w.weight * (sum * 100 / weights) / 1'000'000;
}

}  // namespace ringmaster::plugins
