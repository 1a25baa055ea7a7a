// Rank order of a gang: the order in which a job's workers form their ring
// all-reduce (rank 0, 1, ..., n-1, back to 0). A ring runs at the speed of
// its slowest hop, and every hop that leaves a group (an NVLink island, a
// node, a leaf, a spine) costs a slow link, so ranks are ordered to keep each
// group's members together at every level at once. The scheduler exports
// this order with the placement; it is the rank order the worker shims use.
//
// Link levels (LinkLevelOf), from fastest to slowest:
//   0 same GPU, 1 same NVLink island, 2 same PCIe switch, 3 same NUMA socket,
//   4 same node across sockets, 4+t network tier t (1..T), 5+T whole cluster.
#ifndef RINGMASTER_TOPOLOGY_RANK_ORDER_H_
#define RINGMASTER_TOPOLOGY_RANK_ORDER_H_

#include <cstdint>
#include <span>
#include <vector>

#include "topology/cluster.h"

namespace ringmaster::topology {

// One member of a gang: its node and the GPU index on that node (-1 for a
// member without a GPU, which counts as "same socket" with its node mates).
struct RankSlot {
  NodeId node;
  int gpu = -1;
  bool operator==(const RankSlot&) const = default;
};

inline constexpr int kLevelSameGpu = 0;
inline constexpr int kLevelNvLink = 1;
inline constexpr int kLevelPcieSwitch = 2;
inline constexpr int kLevelSocket = 3;
inline constexpr int kLevelCrossSocket = 4;
// Level of network tier t (1 <= t <= num_tiers + 1; num_tiers + 1 = cluster).
inline int NetworkLevel(int tier) { return kLevelCrossSocket + tier; }
// Number of levels: valid levels are 0 .. NumLinkLevels(c) - 1.
inline int NumLinkLevels(const Cluster& c) { return NetworkLevel(c.num_tiers() + 1) + 1; }

// The slowest link between two members: the lowest level at which they
// share a group. Precondition: nodes present, gpu indices valid or -1.
int LinkLevelOf(const Cluster& cluster, const RankSlot& a, const RankSlot& b);

// The members in ring order: sorted by their domains from the top tier down,
// then node, NUMA socket, PCIe switch, NVLink island, GPU index (stable for
// equal slots). For every network tier, and inside nodes whose islands nest
// in switches and switches in sockets, the ring then crosses each level's
// group boundaries the fewest times possible (once per group when there are
// two or more groups). Deterministic: depends only on the input.
std::vector<RankSlot> OrderRanks(const Cluster& cluster, std::span<const RankSlot> members);
// The same order as positions into `members`: ring position r holds
// members[(*order)[r]]. Equal slots keep their input order. `order` and
// `keys` are the caller's (cleared here; reused across calls, they keep their
// capacity: the engine orders every membership change it emits).
void OrderRankIndices(const Cluster& cluster, std::span<const RankSlot> members, std::vector<uint32_t>* order,
                      std::vector<int64_t>* keys);

// How many hops of the ring (i -> i+1, and n-1 -> 0) are at each level;
// size NumLinkLevels(cluster). A ring of one member has no hops.
std::vector<int> RingCrossings(const Cluster& cluster, std::span<const RankSlot> ring);

}  // namespace ringmaster::topology

#endif  // RINGMASTER_TOPOLOGY_RANK_ORDER_H_
