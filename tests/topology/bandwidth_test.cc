#include "topology/bandwidth.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <limits>
#include <random>
#include <set>
#include <string>
#include <vector>

#include "tests/topology/random_cluster.h"
#include "topology/cluster_file.h"

namespace ringmaster::topology {
namespace {

Cluster TwoSpines() {
  auto c = ParseClusterFile(R"(tiers: [{name: leaf, bandwidth_gbps: 400}, {name: spine, bandwidth_gbps: 200}]
node_groups:
  - name: "a{0..3}"
    gpus: 8
    cpu: 8
    memory: 8Gi
    links:
      nvlink_islands: [[0, 1, 2, 3], [4, 5, 6, 7]]
      pcie_switches: [[0, 1, 2, 3], [4, 5, 6, 7]]
      numa: [[0, 1, 2, 3], [4, 5, 6, 7]]
      nvlink_gbps: 3000
    network: {fill: {leaf: 2}, in: {spine: s0}}
  - name: "b{0..1}"
    gpus: 2
    cpu: 8
    memory: 8Gi
    network: {fill: {leaf: 2}, in: {spine: s1}}
)", "bw.yaml");
  if (!c.ok()) abort();
  return *std::move(c);
}

TEST(Bandwidth, SlowestHopOfEachKindOfPlacement) {
  const Cluster c = TwoSpines();
  const NodeId a0 = c.FindNode("a0"), a1 = c.FindNode("a1"), a2 = c.FindNode("a2"),
               b0 = c.FindNode("b0");
  // One island: the node's NVLink override.
  std::vector<RankSlot> island = {{a0, 0}, {a0, 1}, {a0, 2}, {a0, 3}};
  EXPECT_EQ(PlacementBottleneckGbps(c, island), 3000);
  // Two islands on two sockets: the cross-socket default.
  std::vector<RankSlot> node = {{a0, 0}, {a0, 5}};
  EXPECT_EQ(PlacementBottleneckGbps(c, node), kDefaultIntraNodeLinks.cross_socket_gbps);
  // One GPU on each of two nodes of a leaf: the leaf.
  std::vector<RankSlot> leaf = {{a0, 0}, {a1, 0}};
  EXPECT_EQ(PlacementBottleneckGbps(c, leaf), 400);
  // Two leaves of a spine: the spine.
  std::vector<RankSlot> spine = {{a0, 0}, {a2, 0}};
  EXPECT_EQ(PlacementBottleneckGbps(c, spine), 200);
  // Two spines: above the top tier, the slowest declared tier.
  std::vector<RankSlot> cluster = {{a0, 0}, {b0, 0}};
  EXPECT_EQ(PlacementBottleneckGbps(c, cluster), 200);
  // A single member never communicates.
  std::vector<RankSlot> one = {{a0, 0}};
  EXPECT_EQ(PlacementBottleneckGbps(c, one), std::numeric_limits<double>::infinity());
  EXPECT_EQ(PlacementAllReduceSeconds(c, one, 1e9), 0);
}

TEST(Bandwidth, RingAllReduceFormula) {
  // 2 (n-1)/n * S / B: 4 members, 1 GB over 100 Gbit/s = 12.5 GB/s:
  // 1.5 * 1e9 / 12.5e9 = 0.12 s.
  EXPECT_DOUBLE_EQ(RingAllReduceSeconds(4, 1e9, 100), 0.12);
  EXPECT_DOUBLE_EQ(RingAllReduceSeconds(2, 1e9, 100), 0.08);
  EXPECT_EQ(RingAllReduceSeconds(1, 1e9, 100), 0);
}

TEST(Bandwidth, PlacementTimeUsesTheRankOrder) {
  const Cluster c = TwoSpines();
  const NodeId a0 = c.FindNode("a0"), a1 = c.FindNode("a1");
  // Interleaved a0/a1 input: the ranked ring still only crosses the leaf.
  std::vector<RankSlot> gang = {{a0, 0}, {a1, 0}, {a0, 1}, {a1, 1}};
  EXPECT_EQ(RingBottleneckGbps(c, gang), 400);
  EXPECT_DOUBLE_EQ(PlacementAllReduceSeconds(c, gang, 1e9), RingAllReduceSeconds(4, 1e9, 400));
}

// The ranked ring crosses each level's group boundaries the fewest times
// (rank_order.h), so it has a hop at a level exactly where two members meet
// at that level: its bottleneck is the slowest link between any two members
// (a network tier's bandwidth, or the node's own link inside a node),
// whichever order the members come in.
TEST(Bandwidth, PlacementBottleneckIsTheSlowestLinkBetweenTwoMembersOnRandomClusters) {
  std::mt19937_64 rng(5);
  int multi_level = 0;  // trials whose members meet at two levels or more
  for (int trial = 0; trial < 200; ++trial) {
    const Cluster c = testing::RandomCluster(rng);
    std::vector<RankSlot> gang;
    for (uint32_t n = 0; n < c.num_nodes(); ++n) {
      for (size_t g = 0; g < c.node(NodeId(n)).gpus.size(); ++g) {
        if (rng() % 3 == 0) gang.push_back({NodeId(n), static_cast<int>(g)});
      }
    }
    SCOPED_TRACE("trial " + std::to_string(trial) + ", " + std::to_string(gang.size()) + " members");
    double slowest = std::numeric_limits<double>::infinity();
    std::set<int> levels;
    for (size_t i = 0; i < gang.size(); ++i) {
      for (size_t j = i + 1; j < gang.size(); ++j) {
        const int level = LinkLevelOf(c, gang[i], gang[j]);
        levels.insert(level);
        slowest = std::min(slowest, LevelBandwidthGbps(c, gang[i].node, level));
      }
    }
    if (levels.size() >= 2) ++multi_level;
    const double b = PlacementBottleneckGbps(c, gang);
    EXPECT_EQ(b, slowest);
    std::vector<RankSlot> shuffled = gang;
    std::shuffle(shuffled.begin(), shuffled.end(), rng);
    EXPECT_EQ(PlacementBottleneckGbps(c, shuffled), b) << "depends on the input order";
    if (gang.size() >= 2) {
      EXPECT_GT(b, 0);
      EXPECT_TRUE(std::isfinite(b));
    }
  }
  EXPECT_GE(multi_level, 50) << "too few trials where the order matters";
}

}  // namespace
}  // namespace ringmaster::topology
