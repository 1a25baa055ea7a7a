// Free whole GPUs counted per topology domain at every tier, kept
// incrementally, so "the smallest domain with N free GPUs" is a lookup of
// O(tiers x log n) instead of a scan over nodes.
//
// Invariants:
//   1. DomainFree(t, d) == sum of NodeFree(n) over the present nodes n of d.
//   2. by_free_[t] holds exactly one (free, id) entry per domain at tier t
//      (per present node at tier 0), matching free_[t].
#ifndef RINGMASTER_TOPOLOGY_FREE_INDEX_H_
#define RINGMASTER_TOPOLOGY_FREE_INDEX_H_

#include <set>
#include <utility>
#include <vector>

#include "absl/status/status.h"
#include "topology/cluster.h"

namespace ringmaster::topology {

class FreeGpuIndex {
 public:
  FreeGpuIndex() = default;
  // Every present node starts with all its GPUs free.
  explicit FreeGpuIndex(const Cluster& cluster);

  // Sets the number of free whole GPUs on `node` and updates every domain
  // above it. O(tiers x log n).
  void SetNodeFree(NodeId node, int64_t free);
  // Adds a node that the cluster gained after construction (free = all GPUs).
  void AddNode(NodeId node, int64_t free);
  // Takes a node out of the index (removed, failed or cordoned).
  void RemoveNode(NodeId node);
  bool Contains(NodeId node) const;

  int64_t NodeFree(NodeId node) const { return free_[0][node.value()]; }
  // Free GPUs of domain d at tier t (1 <= t <= tiers).
  int64_t DomainFree(int tier, DomainId d) const { return free_[tier][d.value()]; }
  int64_t TotalFree() const { return total_free_; }

  // The domain at `tier` (0 = node) with the fewest free GPUs that still has
  // at least `need`; ties go to the lower id. Invalid when none has enough.
  DomainId SmallestFitting(int tier, int64_t need) const;
  // The most free GPUs of any single domain at `tier`; tier > tiers means the
  // whole cluster.
  int64_t LargestFree(int tier) const;

  // Calls f(NodeId) for present nodes with at least `min_free` free GPUs,
  // fewest free first (best fit), ties by id, until f returns false.
  template <typename F>
  void ForEachNodeWithFree(int64_t min_free, F&& f) const {
    for (auto it = by_free_[0].lower_bound({min_free, 0}); it != by_free_[0].end(); ++it) {
      if (!f(NodeId(it->second))) return;
    }
  }

  // Calls f(DomainId) for the domains at `tier` (0 = nodes, as DomainId of
  // the node's index) with at least `min_free` free GPUs, fewest free first
  // (best fit), ties by id, until f returns false. O(log n) to the first.
  template <typename F>
  void ForEachDomainWithFree(int tier, int64_t min_free, F&& f) const {
    for (auto it = by_free_[tier].lower_bound({min_free, 0}); it != by_free_[tier].end(); ++it) {
      if (!f(DomainId(it->second))) return;
    }
  }

  // Recounts every domain from the node counters and the cluster's shape and
  // reports the first mismatch (for invariant checks and tests).
  absl::Status CheckConsistent(const Cluster& cluster) const;

 private:
  void Move(int tier, uint32_t id, int64_t delta);

  const Cluster* cluster_ = nullptr;
  int tiers_ = 0;
  std::vector<std::vector<int64_t>> free_;                          // [tier][id]
  std::vector<std::set<std::pair<int64_t, uint32_t>>> by_free_;     // [tier]
  std::vector<bool> indexed_;                                       // [node]
  int64_t total_free_ = 0;
};

}  // namespace ringmaster::topology

#endif  // RINGMASTER_TOPOLOGY_FREE_INDEX_H_
