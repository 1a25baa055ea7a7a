#include "topology/free_index.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringmaster::topology {

FreeGpuIndex::FreeGpuIndex(const Cluster& cluster) : cluster_(&cluster), tiers_(cluster.num_tiers()) {
  free_.resize(tiers_ + 1);
  by_free_.resize(tiers_ + 1);
  free_[0].assign(cluster.num_nodes(), 0);
  indexed_.assign(cluster.num_nodes(), false);
  for (int t = 1; t <= tiers_; ++t) {
    free_[t].assign(cluster.domains(t).size(), 0);
    for (uint32_t d = 0; d < cluster.domains(t).size(); ++d) by_free_[t].insert({0, d});
  }
  for (uint32_t n = 0; n < cluster.num_nodes(); ++n) {
    NodeId id(n);
    if (cluster.present(id)) AddNode(id, static_cast<int64_t>(cluster.node(id).gpus.size()));
  }
}

void FreeGpuIndex::Move(int tier, uint32_t id, int64_t delta) {
  int64_t& v = free_[tier][id];
  by_free_[tier].erase({v, id});
  v += delta;
  by_free_[tier].insert({v, id});
}

bool FreeGpuIndex::Contains(NodeId node) const {
  return node.value() < indexed_.size() && indexed_[node.value()];
}

void FreeGpuIndex::AddNode(NodeId node, int64_t free) {
  const uint32_t n = node.value();
  if (n >= indexed_.size()) {
    indexed_.resize(n + 1, false);
    free_[0].resize(n + 1, 0);
  }
  if (indexed_[n]) return;
  // Domains created after construction.
  for (int t = 1; t <= tiers_; ++t) {
    while (free_[t].size() < cluster_->domains(t).size()) {
      by_free_[t].insert({0, static_cast<uint32_t>(free_[t].size())});
      free_[t].push_back(0);
    }
  }
  indexed_[n] = true;
  free_[0][n] = free;
  by_free_[0].insert({free, n});
  for (int t = 1; t <= tiers_; ++t) Move(t, cluster_->DomainOf(node, t).value(), free);
  total_free_ += free;
}

void FreeGpuIndex::RemoveNode(NodeId node) {
  const uint32_t n = node.value();
  if (!Contains(node)) return;
  const int64_t free = free_[0][n];
  by_free_[0].erase({free, n});
  for (int t = 1; t <= tiers_; ++t) Move(t, cluster_->DomainOf(node, t).value(), -free);
  total_free_ -= free;
  free_[0][n] = 0;
  indexed_[n] = false;
}

void FreeGpuIndex::SetNodeFree(NodeId node, int64_t free) {
  const uint32_t n = node.value();
  if (!Contains(node)) return;
  const int64_t delta = free - free_[0][n];
  if (delta == 0) return;
  Move(0, n, delta);
  for (int t = 1; t <= tiers_; ++t) Move(t, cluster_->DomainOf(node, t).value(), delta);
  total_free_ += delta;
}

DomainId FreeGpuIndex::SmallestFitting(int tier, int64_t need) const {
  auto it = by_free_[tier].lower_bound({need, 0});
  if (it == by_free_[tier].end()) return DomainId();
  return DomainId(it->second);
}

int64_t FreeGpuIndex::LargestFree(int tier) const {
  if (tier > tiers_) return total_free_;
  if (by_free_[tier].empty()) return 0;
  return by_free_[tier].rbegin()->first;
}

absl::Status FreeGpuIndex::CheckConsistent(const Cluster& cluster) const {
  int64_t total = 0;
  std::vector<std::vector<int64_t>> recount(tiers_ + 1);
  for (int t = 1; t <= tiers_; ++t) recount[t].assign(cluster.domains(t).size(), 0);
  for (uint32_t n = 0; n < indexed_.size(); ++n) {
    if (!indexed_[n]) continue;
    NodeId id(n);
    if (!cluster.present(id)) {
      return absl::InternalError(absl::StrCat("free index holds absent node ", cluster.node(id).name));
    }
    total += free_[0][n];
    for (int t = 1; t <= tiers_; ++t) recount[t][cluster.DomainOf(id, t).value()] += free_[0][n];
  }
  if (total != total_free_) {
    return absl::InternalError(absl::StrCat("free index total ", total_free_, " != recount ", total));
  }
  for (int t = 1; t <= tiers_; ++t) {
    for (size_t d = 0; d < recount[t].size(); ++d) {
      if (recount[t][d] != free_[t][d]) {
        return absl::InternalError(absl::StrCat("free index tier ", t, " domain ",
                                                cluster.domains(t)[d].name, ": counter ",
                                                free_[t][d], " != recount ", recount[t][d]));
      }
      if (!by_free_[t].count({free_[t][d], static_cast<uint32_t>(d)})) {
        return absl::InternalError(absl::StrCat("free index tier ", t, " domain ", d, " not ordered"));
      }
    }
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::topology
