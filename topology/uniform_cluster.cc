#include "topology/uniform_cluster.h"

#include "absl/strings/str_format.h"

namespace ringmaster::topology {

absl::StatusOr<Cluster> MakeUniformCluster(const UniformClusterSpec& spec) {
  if (spec.nodes < 0 || spec.gpus_per_node < 0 || spec.nodes_per_rack < 0 || spec.racks_per_spine < 0) {
    return absl::InvalidArgumentError("uniform cluster: counts must be >= 0");
  }
  std::vector<TierSpec> tiers = {{"rack", spec.rack_gbps}};
  if (spec.racks_per_spine > 0) tiers.push_back({"spine", spec.spine_gbps});
  const int per_rack = spec.nodes_per_rack > 0 ? spec.nodes_per_rack : std::max(spec.nodes, 1);
  std::vector<NodeSpec> nodes;
  nodes.reserve(spec.nodes);
  for (int i = 0; i < spec.nodes; ++i) {
    NodeSpec n;
    n.name = absl::StrFormat("node-%04d", i);
    n.allocatable = Resources(spec.cpu_milli_per_node, spec.memory_per_node, 0);
    for (int g = 0; g < spec.gpus_per_node; ++g) {
      Gpu gpu;
      gpu.index = g;
      gpu.model = spec.gpu_model;
      gpu.memory = Quantity{80} << 30;
      gpu.nvlink_island = spec.gpus_per_island > 0 ? g / spec.gpus_per_island : 0;
      gpu.pcie_switch = g / 2;
      gpu.numa = g < spec.gpus_per_node / 2 ? 0 : 1;
      n.gpus.push_back(gpu);
    }
    const int rack = i / per_rack;
    n.domains.push_back(absl::StrFormat("rack-%03d", rack));
    if (spec.racks_per_spine > 0) n.domains.push_back(absl::StrFormat("spine-%02d", rack / spec.racks_per_spine));
    nodes.push_back(std::move(n));
  }
  return Cluster::Build(std::move(tiers), std::move(nodes));
}

}  // namespace ringmaster::topology
