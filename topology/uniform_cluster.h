// A regular cluster shape, for the demo, tests and benchmarks: N identical
// nodes of G GPUs, R nodes per rack (tier 1 "rack"), optionally S racks per
// spine (tier 2 "spine").
#ifndef RINGMASTER_TOPOLOGY_UNIFORM_CLUSTER_H_
#define RINGMASTER_TOPOLOGY_UNIFORM_CLUSTER_H_

#include <string>

#include "absl/status/statusor.h"
#include "topology/cluster.h"

namespace ringmaster::topology {

struct UniformClusterSpec {
  int nodes = 4;
  int gpus_per_node = 8;
  int nodes_per_rack = 0;   // 0: one rack holds every node
  int racks_per_spine = 0;  // 0: no spine tier
  int gpus_per_island = 0;  // 0: every GPU of a node on one NVLink island
  std::string gpu_model = "H100";
  Quantity cpu_milli_per_node = 128'000;
  Quantity memory_per_node = Quantity{1024} << 30;
  double rack_gbps = 400;
  double spine_gbps = 200;
};

// Names nodes "node-0000", racks "rack-000", spines "spine-00".
absl::StatusOr<Cluster> MakeUniformCluster(const UniformClusterSpec& spec);

}  // namespace ringmaster::topology

#endif  // RINGMASTER_TOPOLOGY_UNIFORM_CLUSTER_H_
