// The cluster file: a YAML description of what the cluster is (node groups,
// the links inside a node, the network tiers and which domain each node sits
// in), turned into a topology::Cluster. It is read once at start-up by the
// daemon and the simulator; the schema is documented in docs/CLUSTER_FILE.md.
//
// Every error names the file, the 1-based line and column (from yaml-cpp's
// marks) and the field's path, e.g.
//   "cluster.yaml:12:11: node_groups[1].gpus: must be an integer >= 0".
#ifndef RINGMASTER_TOPOLOGY_CLUSTER_FILE_H_
#define RINGMASTER_TOPOLOGY_CLUSTER_FILE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "topology/cluster.h"

namespace ringmaster::topology {

// Parses the text of a cluster file. `filename` only names the source in
// error messages. Fails with InvalidArgument (file:line:column: field: what)
// on a YAML syntax error, an unknown key, a missing or ill-typed field, a name
// pattern that disagrees with `count`, link groups that do not cover a node's
// GPUs exactly once, a tier with no domain for some node group, or anything
// Cluster::Build rejects.
absl::StatusOr<Cluster> ParseClusterFile(std::string_view text, std::string_view filename);

// Reads and parses the file at `path`. NotFound when it cannot be read.
absl::StatusOr<Cluster> LoadClusterFile(const std::string& path);

// The most nodes one node group (one name pattern) may name.
inline constexpr int kMaxNodesPerGroup = 1'000'000;

// Expands a node-name pattern: "dgx-{0..3}" gives dgx-0..dgx-3, "node-%03d"
// with count 3 gives node-000..node-002 (numbered from `start`), a plain name
// with count 1 gives itself. `count` < 0 means "not given". Fails when the
// count is missing, disagrees with a range, or the pattern is malformed, or
// names more than kMaxNodesPerGroup nodes.
absl::StatusOr<std::vector<std::string>> ExpandNamePattern(std::string_view pattern, int count,
                                                           int start);

}  // namespace ringmaster::topology

#endif  // RINGMASTER_TOPOLOGY_CLUSTER_FILE_H_
