// Free capacity counted per topology domain at every tier, kept
// incrementally, so "the smallest domain with N free GPUs" (or with M free
// milli-GPUs for GPU shares) is a lookup of O(tiers x log n) instead of a
// scan over nodes. Two counters: free whole GPUs, and free GPU milli (every
// GPU's unused share, 1000 for a free GPU).
//
// Invariants (per counter):
//   1. DomainFree(t, d) == sum of NodeFree(n) over the present nodes n of d.
//   2. The ordered set of tier t holds exactly one (free, id) entry per
//      domain at tier t (per present node at tier 0), matching the counter,
//      whenever it is read.
//
// The counters change at once; the ordered sets only when one is read: a
// change marks its domain, and the first ordered read of that tier and
// counter re-keys the marked entries whose value really moved. A statement
// that vacates a node and fills it again, or a counter nobody orders by
// (GPU milli without GPU-share gangs), costs no tree work. Like the rest of
// the engine's state this is for one thread: the const readers update the
// ordered sets.
#ifndef RINGMASTER_TOPOLOGY_FREE_INDEX_H_
#define RINGMASTER_TOPOLOGY_FREE_INDEX_H_

#include <cstdint>
#include <iterator>
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
  // above it. O(tiers); the ordered sets follow on the next ordered read.
  void SetNodeFree(NodeId node, int64_t free) { Set(whole_, node, free); }
  // Sets the free GPU milli on `node` (sum over its GPUs of 1000 - used).
  void SetNodeFreeMilli(NodeId node, int64_t milli) { Set(milli_, node, milli); }
  // Adds a node that the cluster gained after construction (free = all GPUs).
  void AddNode(NodeId node, int64_t free);
  // Takes a node out of the index (removed, failed or cordoned).
  void RemoveNode(NodeId node);
  bool Contains(NodeId node) const;

  int64_t NodeFree(NodeId node) const { return whole_.free[0][node.value()]; }
  int64_t NodeFreeMilli(NodeId node) const { return milli_.free[0][node.value()]; }
  // Free GPUs (milli) of domain d at tier t (1 <= t <= tiers).
  int64_t DomainFree(int tier, DomainId d) const { return whole_.free[tier][d.value()]; }
  int64_t DomainFreeMilli(int tier, DomainId d) const { return milli_.free[tier][d.value()]; }
  int64_t TotalFree() const { return whole_.total; }
  int64_t TotalFreeMilli() const { return milli_.total; }

  // The domain at `tier` (0 = node) with the fewest free GPUs that still has
  // at least `need`; ties go to the lower id. Invalid when none has enough.
  DomainId SmallestFitting(int tier, int64_t need) const;
  // The most free GPUs of any single domain at `tier`; tier > tiers means the
  // whole cluster.
  int64_t LargestFree(int tier) const;
  int64_t LargestFreeMilli(int tier) const;

  // Calls f(NodeId) for present nodes with at least `min_free` free GPUs,
  // fewest free first (best fit), ties by id, until f returns false.
  template <typename F>
  void ForEachNodeWithFree(int64_t min_free, F&& f) const {
    Sync(whole_, 0);
    for (auto it = whole_.by_free[0].lower_bound({min_free, 0}); it != whole_.by_free[0].end(); ++it) {
      if (!f(NodeId(it->second))) return;
    }
  }
  // Calls f(NodeId) for present nodes, most free GPUs first, ties by id,
  // until f returns false.
  template <typename F>
  void ForEachNodeMostFreeFirst(F&& f) const {
    Sync(whole_, 0);
    const auto& set = whole_.by_free[0];
    auto hi = set.end();
    while (hi != set.begin()) {
      const auto lo = set.lower_bound({std::prev(hi)->first, 0});
      for (auto it = lo; it != hi; ++it) {
        if (!f(NodeId(it->second))) return;
      }
      hi = lo;
    }
  }
  // Calls f(DomainId) for the domains at `tier` (0 = nodes, as DomainId of
  // the node's index) with at least `min_free` free GPUs, fewest free first
  // (best fit), ties by id, until f returns false. O(log n) to the first.
  // In every walk, f may change the counters (the walk goes on over the
  // order as it was) but must not read an order of the index.
  template <typename F>
  void ForEachDomainWithFree(int tier, int64_t min_free, F&& f) const {
    Walk(whole_, tier, min_free, f);
  }
  // The same over free GPU milli.
  template <typename F>
  void ForEachDomainWithFreeMilli(int tier, int64_t min_milli, F&& f) const {
    Walk(milli_, tier, min_milli, f);
  }

  // Recounts every domain from the node counters and the cluster's shape and
  // reports the first mismatch (for invariant checks and tests).
  absl::Status CheckConsistent(const Cluster& cluster) const;

 private:
  static constexpr int64_t kAbsent = INT64_MIN;  // Counter::keyed: not in by_free
  struct Counter {
    std::vector<std::vector<int64_t>> free;  // [tier][id], always current
    // The order, synced on read: by_free[t] holds (keyed[t][id], id) for
    // every id whose keyed value is not kAbsent; ids changed since the last
    // sync are in dirty[t] (once: marked[t][id]).
    mutable std::vector<std::set<std::pair<int64_t, uint32_t>>> by_free;  // [tier]
    mutable std::vector<std::vector<int64_t>> keyed;                      // [tier][id]
    mutable std::vector<std::vector<uint32_t>> dirty;                     // [tier]
    mutable std::vector<std::vector<uint8_t>> marked;                     // [tier][id]
    int64_t total = 0;
  };
  // Brings by_free[tier] up to date with the counters.
  void Sync(const Counter& c, int tier) const {
    if (!c.dirty[tier].empty()) SyncDirty(c, tier);
  }
  void SyncDirty(const Counter& c, int tier) const;
  void Mark(Counter& c, int tier, uint32_t id) {
    if (c.marked[tier][id]) return;
    c.marked[tier][id] = 1;
    c.dirty[tier].push_back(id);
  }
  template <typename F>
  void Walk(const Counter& c, int tier, int64_t min_free, F& f) const {
    Sync(c, tier);
    for (auto it = c.by_free[tier].lower_bound({min_free, 0}); it != c.by_free[tier].end(); ++it) {
      if (!f(DomainId(it->second))) return;
    }
  }
  void Init(Counter& c, const Cluster& cluster);
  void Grow(Counter& c);
  void Set(Counter& c, NodeId node, int64_t free);
  void Move(Counter& c, int tier, uint32_t id, int64_t delta);
  absl::Status Check(const Counter& c, const char* what, const Cluster& cluster) const;

  const Cluster* cluster_ = nullptr;
  int tiers_ = 0;
  Counter whole_;
  Counter milli_;
  std::vector<bool> indexed_;  // [node]
};

}  // namespace ringmaster::topology

#endif  // RINGMASTER_TOPOLOGY_FREE_INDEX_H_
