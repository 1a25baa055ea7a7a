// The intra-node GPU choice: which devices of one node a task gets. Pure
// functions of the node's GPUs (with their NVLink islands, PCIe switches and
// NUMA sockets) and the milli-GPUs already used on each, so the gpu-affinity
// plugin, the GPU-sharing plugin and the simulator share one rule.
#ifndef RINGMASTER_TOPOLOGY_GPU_SELECT_H_
#define RINGMASTER_TOPOLOGY_GPU_SELECT_H_

#include <optional>
#include <span>
#include <vector>

#include "topology/cluster.h"
#include "topology/resources.h"

namespace ringmaster::topology {

// Picks `k` whole GPUs among the free ones (used_milli == 0). Returns their
// indices in increasing order, or nullopt when fewer than k are free (k <= 0
// gives an empty list).
//
// Algorithm:
//   1. The level is the first of {one NVLink island, one PCIe switch, one
//      socket, the node} at which some group has >= k free GPUs; the choice
//      never spans a slower level than needed.
//   2. At the island level: the island with the fewest free GPUs that still
//      has k (best fit, so larger islands stay whole); ties to the lowest id.
//   3. Above it: among groups of that level with >= k free, the one that
//      touches the fewest islands, then the fewest free GPUs (best fit),
//      then the lowest id. Inside it, whole islands are taken largest first
//      and the remainder from the smallest island that holds it.
//   4. Inside an island, the lowest free indices.
// Precondition: used_milli.size() == gpus.size().
std::optional<std::vector<int>> SelectWholeGpus(std::span<const Gpu> gpus,
                                                std::span<const Quantity> used_milli, int k);

// Picks one GPU for a GPU-sharing task of `milli` (1..1000): the GPU with
// the least room left that still fits (best fit, used + milli <= 1000), ties
// to the lowest index; nullopt when none fits.
std::optional<int> SelectSharedGpu(std::span<const Quantity> used_milli, Quantity milli);

}  // namespace ringmaster::topology

#endif  // RINGMASTER_TOPOLOGY_GPU_SELECT_H_
