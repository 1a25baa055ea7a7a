#include "topology/cluster.h"

#include <algorithm>
#include <atomic>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::topology {
namespace {
// One counter for the process: every change of any cluster's names takes a
// value no other cluster has had.
uint64_t NextNameEpoch() {
  static std::atomic<uint64_t> next{0};
  return next.fetch_add(1, std::memory_order_relaxed) + 1;
}
}  // namespace

absl::StatusOr<Cluster> Cluster::Build(std::vector<TierSpec> tiers, std::vector<NodeSpec> nodes) {
  Cluster c;
  c.tiers_ = std::move(tiers);
  c.domains_.resize(c.tiers_.size());
  c.domain_by_name_.resize(c.tiers_.size());
  for (size_t t = 0; t < c.tiers_.size(); ++t) {
    if (c.tiers_[t].name.empty()) c.tiers_[t].name = absl::StrCat("tier", t + 1);
    if (c.tiers_[t].bandwidth_gbps < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("tier ", t + 1, " (", c.tiers_[t].name, "): bandwidth_gbps must be >= 0"));
    }
  }
  c.nodes_.reserve(nodes.size());
  for (auto& n : nodes) {
    RM_RETURN_IF_ERROR(c.AddNode(std::move(n)).status());
  }
  return c;
}

absl::Status Cluster::ValidateNode(const NodeSpec& spec) const {
  if (spec.name.empty()) return absl::InvalidArgumentError("node has no name");
  if (node_by_name_.count(spec.name)) {
    return absl::InvalidArgumentError(absl::StrCat("node '", spec.name, "': duplicate name"));
  }
  if (spec.domains.size() != tiers_.size()) {
    return absl::InvalidArgumentError(absl::StrCat("node '", spec.name, "': has ",
                                                   spec.domains.size(), " domains, the cluster has ",
                                                   tiers_.size(), " tiers"));
  }
  if (spec.allocatable.AnyNegative()) {
    return absl::InvalidArgumentError(absl::StrCat("node '", spec.name, "': negative allocatable"));
  }
  for (size_t i = 0; i < spec.gpus.size(); ++i) {
    if (spec.gpus[i].index != static_cast<int>(i)) {
      return absl::InvalidArgumentError(absl::StrCat("node '", spec.name, "': gpu ", i,
                                                     " has index ", spec.gpus[i].index));
    }
  }
  // Parent consistency: a domain at tier t seen before must have the same
  // parent at tier t+1.
  for (size_t t = 0; t + 1 < spec.domains.size(); ++t) {
    auto it = domain_by_name_[t].find(spec.domains[t]);
    if (it == domain_by_name_[t].end()) continue;
    const Domain& d = domains_[t][it->second.value()];
    const Domain& parent = domains_[t + 1][d.parent.value()];
    if (parent.name != spec.domains[t + 1]) {
      return absl::InvalidArgumentError(absl::StrCat(
          "node '", spec.name, "': ", tiers_[t].name, " '", spec.domains[t], "' is under ",
          tiers_[t + 1].name, " '", parent.name, "', not '", spec.domains[t + 1], "'"));
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<NodeId> Cluster::AddNode(NodeSpec spec) {
  RM_RETURN_IF_ERROR(ValidateNode(spec));
  spec.allocatable.set_gpu_milli(static_cast<Quantity>(spec.gpus.size()) * kMilliPerGpu);
  NodeId id(static_cast<uint32_t>(nodes_.size()));
  node_by_name_[spec.name] = id;
  name_epoch_ = NextNameEpoch();
  nodes_.push_back(std::move(spec));
  present_.push_back(true);
  node_domains_.emplace_back(tiers_.size());
  RM_RETURN_IF_ERROR(Attach(id));
  // FNV-1a over the fields that make two nodes interchangeable.
  const NodeSpec& n = nodes_.back();
  uint64_t h = 1469598103934665603ULL;
  auto mix = [&h](const void* p, size_t len) {
    const auto* b = static_cast<const unsigned char*>(p);
    for (size_t i = 0; i < len; ++i) h = (h ^ b[i]) * 1099511628211ULL;
  };
  auto num = [&mix](int64_t v) { mix(&v, sizeof(v)); };
  num(n.allocatable.cpu_milli());
  num(n.allocatable.memory());
  for (const auto& [name, v] : n.allocatable.scalars()) {
    mix(name.data(), name.size());
    num(v);
  }
  for (const Gpu& g : n.gpus) {
    mix(g.model.data(), g.model.size());
    num(g.memory);
    num(g.nvlink_island);
    num(g.pcie_switch);
    num(g.numa);
  }
  for (double b : {n.link_gbps.nvlink_gbps, n.link_gbps.pcie_switch_gbps, n.link_gbps.socket_gbps,
                   n.link_gbps.cross_socket_gbps}) {
    mix(&b, sizeof(b));
  }
  for (size_t t = 0; t < tiers_.size(); ++t) num(node_domains_.back()[t].value());
  shape_hash_.push_back(h);
  return id;
}

absl::Status Cluster::Attach(NodeId id) {
  const NodeSpec& spec = nodes_[id.value()];
  const int64_t gpus = static_cast<int64_t>(spec.gpus.size());
  total_gpus_ += gpus;
  // Resolve or create domains from the top tier down so parents exist first.
  for (int t = static_cast<int>(tiers_.size()) - 1; t >= 0; --t) {
    auto& by_name = domain_by_name_[t];
    auto it = by_name.find(spec.domains[t]);
    DomainId d;
    if (it == by_name.end()) {
      d = DomainId(static_cast<uint32_t>(domains_[t].size()));
      Domain dom;
      dom.name = spec.domains[t];
      if (t + 1 < static_cast<int>(tiers_.size())) dom.parent = node_domains_[id.value()][t + 1];
      domains_[t].push_back(std::move(dom));
      by_name.emplace(spec.domains[t], d);
    } else {
      d = it->second;
    }
    node_domains_[id.value()][t] = d;
    Domain& dom = domains_[t][d.value()];
    dom.nodes.insert(std::upper_bound(dom.nodes.begin(), dom.nodes.end(), id), id);
    dom.total_gpus += gpus;
  }
  return absl::OkStatus();
}

absl::Status Cluster::RemoveNode(NodeId id) {
  if (!id.valid() || id.value() >= nodes_.size() || !present_[id.value()]) {
    return absl::NotFoundError("node is not in the cluster");
  }
  present_[id.value()] = false;
  const int64_t gpus = static_cast<int64_t>(nodes_[id.value()].gpus.size());
  total_gpus_ -= gpus;
  for (size_t t = 0; t < tiers_.size(); ++t) {
    Domain& dom = domains_[t][node_domains_[id.value()][t].value()];
    dom.nodes.erase(std::remove(dom.nodes.begin(), dom.nodes.end(), id), dom.nodes.end());
    dom.total_gpus -= gpus;
  }
  node_by_name_.erase(nodes_[id.value()].name);
  name_epoch_ = NextNameEpoch();
  return absl::OkStatus();
}

NodeId Cluster::FindNode(std::string_view name) const {
  auto it = node_by_name_.find(absl::string_view(name.data(), name.size()));
  return it == node_by_name_.end() ? NodeId() : it->second;
}

int Cluster::CommonTier(NodeId a, NodeId b) const {
  if (a == b) return 0;
  for (int t = 1; t <= num_tiers(); ++t) {
    if (DomainOf(a, t) == DomainOf(b, t)) return t;
  }
  return num_tiers() + 1;
}

}  // namespace ringmaster::topology
