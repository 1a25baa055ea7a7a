// The GPU matrix printed by `nvidia-smi topo -m`, turned into the link groups
// inside one node (NVLink islands, PCIe switches, NUMA sockets) that the
// cluster file's `links:` section and the intra-node GPU choice
// (topology/gpu_select.h) use. `ringmaster topo import-nvidia-smi FILE`
// prints the result as a YAML snippet.
//
// Input: the header row ("GPU0 GPU1 ... NIC0 ... CPU Affinity NUMA Affinity
// [GPU NUMA ID]"), one row per GPU (NIC rows and the legend are skipped), cells
// X (self), NV# (# bonded NVLinks), PIX, PXB, PHB, NODE, SYS. Tabs or spaces
// separate cells; terminal colour escapes and CRLF are tolerated.
//
// Groups:
//   1. nvlink_island: connected components of the NV# relation.
//   2. pcie_switch: connected components of PIX/PXB (behind the same PCIe
//      switch tree, without crossing a host bridge). Pairs shown as NV# hide
//      their PCIe relation, so NVLinked GPUs may land on separate switches.
//   3. numa: the NUMA Affinity column when every GPU has a number; else equal
//      CPU Affinity strings; else components of {PIX, PXB, PHB, NODE}.
//   Groups are numbered in order of their lowest GPU index.
#ifndef RINGMASTER_TOPOLOGY_NVIDIA_SMI_H_
#define RINGMASTER_TOPOLOGY_NVIDIA_SMI_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "topology/cluster.h"

namespace ringmaster::topology {

// How two GPUs of one node talk, best first.
enum class GpuLink { kSelf, kNvLink, kPix, kPxb, kPhb, kNode, kSys };

struct NvidiaSmiTopology {
  // link[i][j] and, for kNvLink, the number of bonded links nvlinks[i][j].
  std::vector<std::vector<GpuLink>> link;
  std::vector<std::vector<int>> nvlinks;
  std::vector<std::string> cpu_affinity;  // per GPU; empty when absent or N/A
  std::vector<int> numa_affinity;         // per GPU; -1 when absent or N/A
  // index, nvlink_island, pcie_switch and numa filled; model/memory empty.
  std::vector<Gpu> gpus;
};

// Parses the output of `nvidia-smi topo -m`. Errors name
// "file:line:column" and the cell (row and column GPU), e.g. an unknown link
// token, an X off the diagonal, an asymmetric pair, a missing or misnumbered
// GPU row, or a row with too few cells.
absl::StatusOr<NvidiaSmiTopology> ParseNvidiaSmiTopo(std::string_view text,
                                                     std::string_view filename);

// The `links:` block of a cluster-file node group for this matrix.
std::string LinkGroupsYaml(const NvidiaSmiTopology& topo);

}  // namespace ringmaster::topology

#endif  // RINGMASTER_TOPOLOGY_NVIDIA_SMI_H_
