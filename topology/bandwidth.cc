#include "topology/bandwidth.h"

#include <algorithm>
#include <limits>

namespace ringmaster::topology {
namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();

double Or(double v, double fallback) { return v > 0 ? v : fallback; }

double SlowestTierGbps(const Cluster& c) {
  double slowest = kInf;
  for (const TierSpec& t : c.tiers()) {
    if (t.bandwidth_gbps > 0) slowest = std::min(slowest, t.bandwidth_gbps);
  }
  return slowest == kInf ? kDefaultNetworkGbps : slowest;
}

}  // namespace

double LevelBandwidthGbps(const Cluster& cluster, NodeId node, int level) {
  const IntraNodeLinks& l = cluster.node(node).link_gbps;
  switch (level) {
    case kLevelSameGpu:
      return kInf;
    case kLevelNvLink:
      return Or(l.nvlink_gbps, kDefaultIntraNodeLinks.nvlink_gbps);
    case kLevelPcieSwitch:
      return Or(l.pcie_switch_gbps, kDefaultIntraNodeLinks.pcie_switch_gbps);
    case kLevelSocket:
      return Or(l.socket_gbps, kDefaultIntraNodeLinks.socket_gbps);
    case kLevelCrossSocket:
      return Or(l.cross_socket_gbps, kDefaultIntraNodeLinks.cross_socket_gbps);
    default:
      break;
  }
  const int tier = level - kLevelCrossSocket;
  if (tier >= 1 && tier <= cluster.num_tiers()) {
    return Or(cluster.tier(tier).bandwidth_gbps, SlowestTierGbps(cluster));
  }
  return SlowestTierGbps(cluster);
}

double RingBottleneckGbps(const Cluster& cluster, std::span<const RankSlot> ring) {
  double b = kInf;
  const size_t n = ring.size();
  if (n < 2) return b;
  for (size_t i = 0; i < n; ++i) {
    const RankSlot& a = ring[i];
    const RankSlot& c = ring[(i + 1) % n];
    // Within a node the link belongs to that node; between nodes the network.
    b = std::min(b, LevelBandwidthGbps(cluster, a.node, LinkLevelOf(cluster, a, c)));
  }
  return b;
}

double PlacementBottleneckGbps(const Cluster& cluster, std::span<const RankSlot> members) {
  const std::vector<RankSlot> ring = OrderRanks(cluster, members);
  return RingBottleneckGbps(cluster, ring);
}

double RingAllReduceSeconds(int n, double bytes, double bottleneck_gbps) {
  if (n < 2 || bytes <= 0) return 0;
  return 2.0 * (n - 1) / n * bytes / (bottleneck_gbps * 1e9 / 8);
}

double PlacementAllReduceSeconds(const Cluster& cluster, std::span<const RankSlot> members,
                                 double bytes) {
  return RingAllReduceSeconds(static_cast<int>(members.size()), bytes,
                              PlacementBottleneckGbps(cluster, members));
}

}  // namespace ringmaster::topology
