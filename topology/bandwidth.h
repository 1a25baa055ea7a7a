// The bandwidth model of a placement: the bottleneck bandwidth of a gang's
// ring (its slowest hop) and the estimated ring all-reduce time
//   T = 2 (n - 1) / n * S / B_bottleneck
// for S bytes over n members. Used to score placements and by the
// simulator's job-speed model.
//
// Bandwidths are in Gbit/s, per GPU and direction. Network tiers use the
// cluster file's per-tier bandwidth_gbps; links inside a node use the node's
// IntraNodeLinks, where a zero falls back to these documented defaults:
//   NVLink island / NVSwitch  2400 Gbit/s  (A100 NVLink3: 300 GB/s per direction)
//   same PCIe switch           200 Gbit/s  (PCIe Gen4 x16, ~25 GB/s usable)
//   same socket (host bridge)  160 Gbit/s  (peer-to-peer through the root complex)
//   across sockets             100 Gbit/s  (through QPI/UPI, typically without P2P)
// A tier with bandwidth 0, and the cluster level above the top tier, use the
// slowest declared tier (100 Gbit/s when none is declared).
#ifndef RINGMASTER_TOPOLOGY_BANDWIDTH_H_
#define RINGMASTER_TOPOLOGY_BANDWIDTH_H_

#include <span>

#include "topology/cluster.h"
#include "topology/rank_order.h"

namespace ringmaster::topology {

inline constexpr IntraNodeLinks kDefaultIntraNodeLinks{2400, 200, 160, 100};
inline constexpr double kDefaultNetworkGbps = 100;

// Bandwidth of a hop at `level` (rank_order.h's levels) out of `node`.
// Same GPU is +infinity.
double LevelBandwidthGbps(const Cluster& cluster, NodeId node, int level);

// The slowest hop of the ring in the given order; +infinity for fewer than
// two members.
double RingBottleneckGbps(const Cluster& cluster, std::span<const RankSlot> ring);

// The bottleneck of the placement when ranks are ordered by OrderRanks.
double PlacementBottleneckGbps(const Cluster& cluster, std::span<const RankSlot> members);

// 2 (n - 1) / n * bytes / (gbps * 1e9 / 8) seconds; 0 when n < 2.
double RingAllReduceSeconds(int n, double bytes, double bottleneck_gbps);

// Estimated all-reduce time of `bytes` for the placement in OrderRanks order.
double PlacementAllReduceSeconds(const Cluster& cluster, std::span<const RankSlot> members,
                                 double bytes);

}  // namespace ringmaster::topology

#endif  // RINGMASTER_TOPOLOGY_BANDWIDTH_H_
