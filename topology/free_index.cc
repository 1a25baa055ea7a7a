#include "topology/free_index.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::topology {

FreeGpuIndex::FreeGpuIndex(const Cluster& cluster) : cluster_(&cluster), tiers_(cluster.num_tiers()) {
  Init(whole_, cluster);
  Init(milli_, cluster);
  indexed_.assign(cluster.num_nodes(), false);
  for (uint32_t n = 0; n < cluster.num_nodes(); ++n) {
    NodeId id(n);
    if (cluster.present(id)) AddNode(id, static_cast<int64_t>(cluster.node(id).gpus.size()));
  }
}

void FreeGpuIndex::Init(Counter& c, const Cluster& cluster) {
  c.free.resize(tiers_ + 1);
  c.by_free.resize(tiers_ + 1);
  c.keyed.resize(tiers_ + 1);
  c.dirty.resize(tiers_ + 1);
  c.marked.resize(tiers_ + 1);
  c.free[0].assign(cluster.num_nodes(), 0);
  c.keyed[0].assign(cluster.num_nodes(), kAbsent);
  c.marked[0].assign(cluster.num_nodes(), 0);
  for (int t = 1; t <= tiers_; ++t) {
    c.free[t].assign(cluster.domains(t).size(), 0);
    c.keyed[t].assign(cluster.domains(t).size(), 0);
    c.marked[t].assign(cluster.domains(t).size(), 0);
    for (uint32_t d = 0; d < cluster.domains(t).size(); ++d) c.by_free[t].insert({0, d});
  }
}

void FreeGpuIndex::Grow(Counter& c) {
  // Nodes and domains the cluster gained after construction.
  if (c.free[0].size() < indexed_.size()) {
    c.free[0].resize(indexed_.size(), 0);
    c.keyed[0].resize(indexed_.size(), kAbsent);
    c.marked[0].resize(indexed_.size(), 0);
  }
  for (int t = 1; t <= tiers_; ++t) {
    while (c.free[t].size() < cluster_->domains(t).size()) {
      c.by_free[t].insert({0, static_cast<uint32_t>(c.free[t].size())});
      c.free[t].push_back(0);
      c.keyed[t].push_back(0);
      c.marked[t].push_back(0);
    }
  }
}

void FreeGpuIndex::Move(Counter& c, int tier, uint32_t id, int64_t delta) {
  c.free[tier][id] += delta;
  Mark(c, tier, id);
}

void FreeGpuIndex::SyncDirty(const Counter& c, int tier) const {
  auto& set = c.by_free[tier];
  for (uint32_t id : c.dirty[tier]) {
    c.marked[tier][id] = 0;
    const bool present = tier > 0 || indexed_[id];
    const int64_t want = present ? c.free[tier][id] : kAbsent;
    int64_t& have = c.keyed[tier][id];
    if (want == have) continue;  // moved and came back: nothing to re-key
    if (have == kAbsent) {
      set.insert({want, id});
    } else if (want == kAbsent) {
      set.erase({have, id});
    } else {
      // Re-key the set's own node: no allocation per move.
      auto node = set.extract({have, id});
      node.value().first = want;
      set.insert(std::move(node));
    }
    have = want;
  }
  c.dirty[tier].clear();
}

bool FreeGpuIndex::Contains(NodeId node) const {
  return node.value() < indexed_.size() && indexed_[node.value()];
}

void FreeGpuIndex::AddNode(NodeId node, int64_t free) {
  const uint32_t n = node.value();
  if (n >= indexed_.size()) indexed_.resize(n + 1, false);
  if (indexed_[n]) return;
  Grow(whole_);
  Grow(milli_);
  indexed_[n] = true;
  for (auto [c, v] : {std::pair<Counter*, int64_t>{&whole_, free}, {&milli_, free * 1000}}) {
    c->free[0][n] = v;
    Mark(*c, 0, n);
    for (int t = 1; t <= tiers_; ++t) Move(*c, t, cluster_->DomainOf(node, t).value(), v);
    c->total += v;
  }
}

void FreeGpuIndex::RemoveNode(NodeId node) {
  const uint32_t n = node.value();
  if (!Contains(node)) return;
  for (Counter* c : {&whole_, &milli_}) {
    const int64_t v = c->free[0][n];
    Mark(*c, 0, n);  // the next sync takes it out of the order
    for (int t = 1; t <= tiers_; ++t) Move(*c, t, cluster_->DomainOf(node, t).value(), -v);
    c->total -= v;
    c->free[0][n] = 0;
  }
  indexed_[n] = false;
}

void FreeGpuIndex::Set(Counter& c, NodeId node, int64_t free) {
  const uint32_t n = node.value();
  if (!Contains(node)) return;
  const int64_t delta = free - c.free[0][n];
  if (delta == 0) return;
  Move(c, 0, n, delta);
  for (int t = 1; t <= tiers_; ++t) Move(c, t, cluster_->DomainOf(node, t).value(), delta);
  c.total += delta;
}

DomainId FreeGpuIndex::SmallestFitting(int tier, int64_t need) const {
  Sync(whole_, tier);
  auto it = whole_.by_free[tier].lower_bound({need, 0});
  if (it == whole_.by_free[tier].end()) return DomainId();
  return DomainId(it->second);
}

int64_t FreeGpuIndex::LargestFree(int tier) const {
  if (tier > tiers_) return whole_.total;
  Sync(whole_, tier);
  if (whole_.by_free[tier].empty()) return 0;
  return whole_.by_free[tier].rbegin()->first;
}

int64_t FreeGpuIndex::LargestFreeMilli(int tier) const {
  if (tier > tiers_) return milli_.total;
  Sync(milli_, tier);
  if (milli_.by_free[tier].empty()) return 0;
  return milli_.by_free[tier].rbegin()->first;
}

absl::Status FreeGpuIndex::Check(const Counter& c, const char* what, const Cluster& cluster) const {
  for (int t = 0; t <= tiers_; ++t) Sync(c, t);
  int64_t total = 0;
  size_t present = 0;
  std::vector<std::vector<int64_t>> recount(tiers_ + 1);
  for (int t = 1; t <= tiers_; ++t) recount[t].assign(cluster.domains(t).size(), 0);
  for (uint32_t n = 0; n < indexed_.size(); ++n) {
    if (!indexed_[n]) continue;
    NodeId id(n);
    if (!cluster.present(id)) {
      return absl::InternalError(absl::StrCat("free index holds absent node ", cluster.node(id).name));
    }
    if (!c.by_free[0].count({c.free[0][n], n})) {
      return absl::InternalError(absl::StrCat("free index (", what, ") node ", n, " not ordered"));
    }
    ++present;
    total += c.free[0][n];
    for (int t = 1; t <= tiers_; ++t) recount[t][cluster.DomainOf(id, t).value()] += c.free[0][n];
  }
  if (c.by_free[0].size() != present) {
    return absl::InternalError(absl::StrCat("free index (", what, ") orders ", c.by_free[0].size(), " nodes, ",
                                            present, " present"));
  }
  if (total != c.total) {
    return absl::InternalError(absl::StrCat("free index (", what, ") total ", c.total, " != recount ", total));
  }
  for (int t = 1; t <= tiers_; ++t) {
    for (size_t d = 0; d < recount[t].size(); ++d) {
      if (recount[t][d] != c.free[t][d]) {
        return absl::InternalError(absl::StrCat("free index (", what, ") tier ", t, " domain ",
                                                cluster.domains(t)[d].name, ": counter ", c.free[t][d],
                                                " != recount ", recount[t][d]));
      }
      if (!c.by_free[t].count({c.free[t][d], static_cast<uint32_t>(d)})) {
        return absl::InternalError(absl::StrCat("free index (", what, ") tier ", t, " domain ", d, " not ordered"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status FreeGpuIndex::CheckConsistent(const Cluster& cluster) const {
  RM_RETURN_IF_ERROR(Check(whole_, "GPUs", cluster));
  return Check(milli_, "GPU milli", cluster);
}

}  // namespace ringmaster::topology
