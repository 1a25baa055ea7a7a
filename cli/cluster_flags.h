// The CLUSTER option set shared by the commands that run the engine
// (`simulate` now; `schedule` and `serve` can adopt it):
//   --cluster FILE   a cluster file (YAML, docs/CLUSTER_FILE.md), or a node
//                    list recognized by its header: Alibaba openb
//                    (sn,cpu_milli,memory_mib,gpu,model) or a Philly machine
//                    list (flat clusters, no network tiers)
//   --nodes N --gpus-per-node G --nodes-per-rack R [--racks-per-spine S]
//                    a uniform cluster (topology/uniform_cluster.h)
// `--nodes FILE` (a node list) is the old meaning of `simulate --nodes`: it
// still works as an alias of --cluster FILE, with a deprecation message.
#ifndef RINGMASTER_CLI_CLUSTER_FLAGS_H_
#define RINGMASTER_CLI_CLUSTER_FLAGS_H_

#include <string>

#include <CLI/CLI.hpp>

#include "absl/status/statusor.h"
#include "topology/cluster.h"
#include "topology/uniform_cluster.h"

namespace ringmaster::cli {

struct ClusterFlags {
  std::string cluster_file;
  std::string nodes;  // a count, or (deprecated) a node-list file
  topology::UniformClusterSpec uniform;
};

// Adds the options to `cmd`; values land in `flags`, which must outlive it.
void AddClusterFlags(CLI::App& cmd, ClusterFlags& flags);

// The cluster the flags describe. Errors name the flag or the file:line.
// A deprecation note for `--nodes FILE` goes to `notes` when non-null.
absl::StatusOr<topology::Cluster> BuildCluster(const ClusterFlags& flags, std::string* notes);

// Reads a cluster file, choosing the reader from the file's first line.
absl::StatusOr<topology::Cluster> LoadAnyClusterFile(const std::string& path);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_CLUSTER_FLAGS_H_
