// Parsing the CLUSTER options into a topology::Cluster.
#include "cli/cluster_flags.h"

#include <charconv>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "topology/cluster_file.h"
#include "topology/node_lists.h"

namespace ringmaster::cli {
namespace {

std::string_view FirstLineOf(std::string_view text) {
  const size_t end = text.find('\n');
  std::string_view line = text.substr(0, end);
  if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
  return line;
}

std::optional<int> Count(std::string_view s) {
  int v = 0;
  auto [p, ec] = std::from_chars(s.data(), s.data() + s.size(), v);
  if (ec != std::errc() || p != s.data() + s.size()) return std::nullopt;
  return v;
}

}  // namespace

void AddClusterFlags(CLI::App& cmd, ClusterFlags& f) {
  cmd.add_option("--cluster", f.cluster_file,
                 "cluster file: YAML (docs/CLUSTER_FILE.md), an openb node list or a Philly machine list")
      ->check(CLI::ExistingFile);
  cmd.add_option("--nodes", f.nodes, "number of nodes of a uniform cluster (a file here is deprecated: use --cluster)");
  cmd.add_option("--gpus-per-node", f.uniform.gpus_per_node, "GPUs per node (8)")->check(CLI::Range(0, 64));
  cmd.add_option("--nodes-per-rack", f.uniform.nodes_per_rack, "nodes per rack, tier 1 (0: one rack)")
      ->check(CLI::Range(0, 1000000));
  cmd.add_option("--racks-per-spine", f.uniform.racks_per_spine, "racks per spine, tier 2 (0: none)")
      ->check(CLI::Range(0, 1000000));
}

absl::StatusOr<topology::Cluster> LoadAnyClusterFile(const std::string& path) {
  RM_ASSIGN_OR_RETURN(auto text, topology::ReadTextFile(path));
  const std::string_view first = FirstLineOf(text);
  if (first.starts_with("sn,cpu_milli,memory_mib,gpu,model")) {
    RM_ASSIGN_OR_RETURN(auto nodes, topology::ParseOpenbNodeList(text, path));
    return topology::Cluster::Build({}, std::move(nodes));
  }
  if (first.find("machineId") != std::string_view::npos) {
    RM_ASSIGN_OR_RETURN(auto nodes, topology::ParsePhillyMachineList(text, path));
    return topology::Cluster::Build({}, std::move(nodes));
  }
  return topology::ParseClusterFile(text, path);
}

absl::StatusOr<topology::Cluster> BuildCluster(const ClusterFlags& f, std::string* notes) {
  std::string file = f.cluster_file;
  if (!f.nodes.empty()) {
    const std::optional<int> n = Count(f.nodes);
    if (!n) {
      if (!file.empty()) return absl::InvalidArgumentError("--nodes: give a count, or the file with --cluster only");
      if (notes) absl::StrAppend(notes, "--nodes FILE is deprecated; use --cluster ", f.nodes, "\n");
      file = f.nodes;
    } else if (!file.empty()) {
      return absl::InvalidArgumentError("--cluster and --nodes N: give one of them");
    } else {
      if (*n < 1 || *n > 1000000) return absl::InvalidArgumentError("--nodes: must be in [1, 1000000]");
      topology::UniformClusterSpec spec = f.uniform;
      spec.nodes = *n;
      return topology::MakeUniformCluster(spec);
    }
  }
  if (file.empty()) return absl::InvalidArgumentError("no cluster: give --cluster FILE or --nodes N");
  return LoadAnyClusterFile(file);
}

}  // namespace ringmaster::cli
