#include "plugins/network_topology.h"

#include "common/status_macros.h"

#include <algorithm>

namespace ringmaster::plugins {

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> NetworkTopologyPlugin::Create(
    const scheduler::PluginArgs& args) {
  NetworkTopologyWeights w;
  RM_ASSIGN_OR_RETURN(auto weight, args.Int("weight", 1));
  if (weight < 0) return args.Error("weight", "must be >= 0");
  w.weight = weight;
  for (int t = 0; t < 3; ++t) {
    const std::string key = "tier" + std::to_string(t + 1);
    RM_ASSIGN_OR_RETURN(auto v, args.Double(key, 1));
    if (!(v >= 0)) return args.Error(key, "must be >= 0");
    w.tier[t] = v;
  }
  RM_RETURN_IF_ERROR(args.Finish());
  return std::make_unique<NetworkTopologyPlugin>(w);
}

void NetworkTopologyPlugin::OnSessionOpen(scheduler::Session& s) {
  if (w_.weight == 0 || s.cluster().num_tiers() == 0) return;
  const scheduler::State* state = &s.state();
  const NetworkTopologyWeights* w = &w_;
  s.AddNodeOrderFn(kName, [state, w](const scheduler::TaskRef& t, scheduler::NodeId n) {
    return Score(*w, *state, t, n);
  });
}

int64_t NetworkTopologyPlugin::Score(const NetworkTopologyWeights& w, const scheduler::State& state,
                                     const scheduler::TaskRef& task, scheduler::NodeId node) {
  const topology::Cluster& c = state.cluster();
  const scheduler::GpuRequest& req = task.job->gpu(task.index);
  const int64_t take = req.whole() ? req.count : 0;
  double sum = 0, weights = 0;
  for (int t = 1; t <= c.num_tiers(); ++t) {
    const double wt = w.tier[std::min(t, 3) - 1];
    const topology::DomainId d = c.DomainOf(node, t);
    const int64_t total = c.domain(t, d).total_gpus;
    if (wt == 0 || total == 0) continue;
    const int64_t used = total - state.free_index().DomainFree(t, d) + take;
    sum += wt * static_cast<double>(std::min(used, total)) / static_cast<double>(total);
    weights += wt;
  }
  if (weights == 0) return 0;
  return static_cast<int64_t>(static_cast<double>(w.weight) * 100.0 * sum / weights);
}

}  // namespace ringmaster::plugins
