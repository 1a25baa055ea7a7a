// The cluster as the scheduler sees it: nodes, their GPUs and the links inside
// a node, and the network as a tree of tiers.
//
// Tier 0 is a node. Tier 1 is the smallest multi-node domain (a leaf switch,
// or a multi-node NVLink domain such as an NVL72 rack), tier 2 a spine, tier 3
// a zone; a cluster declares as many tiers as it has. Above the highest tier
// the whole cluster is one implicit domain. Every node belongs to exactly one
// domain at every tier, and a domain's parent is the domain one tier up that
// contains all of its nodes (invariant 1).
//
// A Cluster is immutable shape plus node membership; free capacity lives in
// FreeGpuIndex and the scheduler's ClusterState.
#ifndef RINGMASTER_TOPOLOGY_CLUSTER_H_
#define RINGMASTER_TOPOLOGY_CLUSTER_H_

#include <map>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "topology/resources.h"
#include "topology/strong_id.h"

namespace ringmaster::topology {

// One GPU device of a node. Devices with the same nvlink_island talk over
// NVLink/NVSwitch; otherwise devices on the same pcie_switch are next best,
// then the same numa socket, then across sockets.
struct Gpu {
  int index = 0;
  std::string model;
  Quantity memory = 0;  // bytes
  int nvlink_island = 0;
  int pcie_switch = 0;
  int numa = 0;
};

enum class TaintEffect { kNoSchedule, kPreferNoSchedule, kNoExecute };

struct Taint {
  std::string key;
  std::string value;
  TaintEffect effect = TaintEffect::kNoSchedule;
};

// Bandwidth of the links inside a node, per GPU and direction, in Gbit/s.
// 0 means "use the default in topology/bandwidth.h".
struct IntraNodeLinks {
  double nvlink_gbps = 0;        // GPUs on the same NVLink island / NVSwitch
  double pcie_switch_gbps = 0;   // GPUs behind the same PCIe switch
  double socket_gbps = 0;        // same NUMA socket, through the host bridge
  double cross_socket_gbps = 0;  // across sockets (QPI/UPI/Infinity Fabric)
};

struct NodeSpec {
  std::string name;
  std::map<std::string, std::string> labels;
  std::vector<Taint> taints;
  // CPU, memory and scalar resources. gpu_milli is derived from `gpus`.
  Resources allocatable;
  std::vector<Gpu> gpus;
  // Intra-node link bandwidths (cluster file `links:`); zeros mean defaults.
  IntraNodeLinks link_gbps;
  // Domain name at tiers 1..T (domains[0] is the tier-1 domain). Names are
  // unique within a tier.
  std::vector<std::string> domains;
};

struct TierSpec {
  std::string name;            // e.g. "leaf", "spine", "zone"
  double bandwidth_gbps = 0;   // per-link bandwidth between children of a domain at this tier
};

struct Domain {
  std::string name;
  DomainId parent;                 // domain at tier+1; invalid at the top tier
  std::vector<NodeId> nodes;       // sorted, every node under this domain
  int64_t total_gpus = 0;          // whole GPUs under this domain
};

class Cluster {
 public:
  // Builds a cluster. Fails with a message naming the node and field when a
  // node has no name, a duplicate name, the wrong number of domains, or a
  // domain whose parent is inconsistent with another node's.
  static absl::StatusOr<Cluster> Build(std::vector<TierSpec> tiers, std::vector<NodeSpec> nodes);

  // Number of network tiers above the node (0 means a flat cluster).
  int num_tiers() const { return static_cast<int>(tiers_.size()); }
  const TierSpec& tier(int t) const { return tiers_[t - 1]; }  // 1 <= t <= num_tiers()
  const std::vector<TierSpec>& tiers() const { return tiers_; }

  size_t num_nodes() const { return nodes_.size(); }
  const NodeSpec& node(NodeId id) const { return nodes_[id.value()]; }
  const std::vector<NodeSpec>& nodes() const { return nodes_; }
  // Nodes removed from the cluster keep their id (ids are never reused) but
  // are no longer present.
  bool present(NodeId id) const { return present_[id.value()]; }
  NodeId FindNode(std::string_view name) const;
  // Changes whenever a node is added or removed, and is never the same for
  // two clusters that differ in which names map to which ids (unique in the
  // process; a copy keeps its original's until either changes): an id
  // remembered for a name with an epoch is that name's id while the epoch
  // holds. Never 0 once a node was added.
  uint64_t name_epoch() const { return name_epoch_; }

  // Domain of `node` at tier t (1 <= t <= num_tiers()).
  DomainId DomainOf(NodeId node, int t) const { return node_domains_[node.value()][t - 1]; }
  const std::vector<Domain>& domains(int t) const { return domains_[t - 1]; }
  const Domain& domain(int t, DomainId d) const { return domains_[t - 1][d.value()]; }
  // Lowest tier at which a and b share a domain: 0 if a == b, num_tiers()+1
  // if they only share the whole cluster.
  int CommonTier(NodeId a, NodeId b) const;

  int64_t total_gpus() const { return total_gpus_; }
  // A hash of the node's hardware as placement sees it (allocatable, GPUs
  // with their models and links, link bandwidths, the domains it sits in):
  // equal for interchangeable nodes. Labels and taints are not part of it.
  uint64_t shape_hash(NodeId id) const { return shape_hash_[id.value()]; }

  // Adds a node (its domains may be new). Returns its id.
  absl::StatusOr<NodeId> AddNode(NodeSpec spec);
  // Marks a node absent; its id stays reserved.
  absl::Status RemoveNode(NodeId id);

 private:
  absl::Status Attach(NodeId id);
  absl::Status ValidateNode(const NodeSpec& spec) const;

  std::vector<TierSpec> tiers_;
  std::vector<NodeSpec> nodes_;
  std::vector<bool> present_;
  std::vector<std::vector<DomainId>> node_domains_;  // [node][tier-1]
  std::vector<std::vector<Domain>> domains_;         // [tier-1][domain]
  std::vector<std::map<std::string, DomainId, std::less<>>> domain_by_name_;
  absl::flat_hash_map<std::string, NodeId> node_by_name_;  // hashed: the extender looks up every candidate
  int64_t total_gpus_ = 0;
  std::vector<uint64_t> shape_hash_;  // [node]
  uint64_t name_epoch_ = 0;
};

}  // namespace ringmaster::topology

#endif  // RINGMASTER_TOPOLOGY_CLUSTER_H_
