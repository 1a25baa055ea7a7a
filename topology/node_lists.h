// Readers for real cluster lists published with GPU-cluster traces, turned
// into NodeSpecs of a flat cluster (no network tiers; the lists say nothing
// about the network). They feed the simulator and the FGD experiment.
//
//   * Alibaba openb node list (cluster-trace-gpu-v2023):
//       sn,cpu_milli,memory_mib,gpu,model
//   * Microsoft Philly machine lists, either the original
//       machineId, number of GPUs, single GPU mem      (e.g. "m0,2, 12GB")
//     or the revised one with a leading pandas index column
//       ,machineId,number of GPUs
//     Philly lists carry no CPU or memory: nodes get 0 of both.
//
// Every error names file:line, the column (1-based index and header name)
// and the offending text. Blank lines are skipped and CRLF is accepted.
#ifndef RINGMASTER_TOPOLOGY_NODE_LISTS_H_
#define RINGMASTER_TOPOLOGY_NODE_LISTS_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "topology/cluster.h"

namespace ringmaster::topology {

// Parses the text of an openb node list. GPUs get the row's model, index
// 0..gpu-1, and default links (one NVLink island, switch and socket: the
// list does not say).
absl::StatusOr<std::vector<NodeSpec>> ParseOpenbNodeList(std::string_view text,
                                                         std::string_view filename);
absl::StatusOr<std::vector<NodeSpec>> ReadOpenbNodeList(const std::string& path);

// Parses either Philly machine list (the header tells which).
absl::StatusOr<std::vector<NodeSpec>> ParsePhillyMachineList(std::string_view text,
                                                             std::string_view filename);
absl::StatusOr<std::vector<NodeSpec>> ReadPhillyMachineList(const std::string& path);

// Reads a whole file (or pipe) into a string. Errors name the path:
// NotFound when it cannot be opened, InvalidArgument for a directory or
// for more than kMaxTextFileBytes.
inline constexpr size_t kMaxTextFileBytes = size_t{1} << 30;
absl::StatusOr<std::string> ReadTextFile(const std::string& path);

}  // namespace ringmaster::topology

#endif  // RINGMASTER_TOPOLOGY_NODE_LISTS_H_
