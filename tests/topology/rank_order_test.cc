#include "topology/rank_order.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <set>

#include "tests/topology/random_cluster.h"
#include "topology/cluster_file.h"

namespace ringmaster::topology {
namespace {

using testing::RandomCluster;
using testing::Uniform;

// Hops of the ring at `level` or slower.
int HopsAtOrAbove(const Cluster& c, std::span<const RankSlot> ring, int level) {
  const std::vector<int> count = RingCrossings(c, ring);
  int s = 0;
  for (int l = level; l < static_cast<int>(count.size()); ++l) s += count[l];
  return s;
}

// Up to `max` distinct members drawn from the cluster's GPUs (or whole nodes).
std::vector<RankSlot> RandomGang(std::mt19937_64& rng, const Cluster& c, int max) {
  std::vector<RankSlot> all;
  for (uint32_t n = 0; n < c.num_nodes(); ++n) {
    const int g = static_cast<int>(c.node(NodeId(n)).gpus.size());
    if (g == 0) all.push_back({NodeId(n), -1});
    for (int i = 0; i < g; ++i) all.push_back({NodeId(n), i});
  }
  std::shuffle(all.begin(), all.end(), rng);
  all.resize(std::min<size_t>(all.size(), Uniform(rng, 1, max)));
  return all;
}

TEST(RankOrder, TwoNodesOnTwoLeavesCrossTheSpineTwice) {
  auto c = ParseClusterFile(R"(tiers: [{name: leaf, bandwidth_gbps: 400}, {name: spine, bandwidth_gbps: 200}]
node_groups:
  - name: "n{0..3}"
    gpus: 2
    cpu: 8
    memory: 8Gi
    network: {fill: {leaf: 2}, in: {spine: s}}
)", "c.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  // Interleaved input: n0, n2, n1, n3 (GPU 0 each), then their GPU 1.
  std::vector<RankSlot> in;
  for (int gpu : {0, 1}) {
    for (int n : {0, 2, 1, 3}) in.push_back({NodeId(n), gpu});
  }
  const std::vector<RankSlot> ring = OrderRanks(*c, in);
  // Grouped: n0 g0, n0 g1, n1 g0, n1 g1, n2 ..., n3 ...
  for (size_t i = 0; i < ring.size(); ++i) {
    EXPECT_EQ(ring[i].node.value(), i / 2);
    EXPECT_EQ(ring[i].gpu, static_cast<int>(i % 2));
  }
  const std::vector<int> hops = RingCrossings(*c, ring);
  EXPECT_EQ(hops[kLevelNvLink], 4);      // inside each node
  EXPECT_EQ(hops[NetworkLevel(1)], 2);   // n0-n1, n2-n3 inside a leaf
  EXPECT_EQ(hops[NetworkLevel(2)], 2);   // leaf 0 <-> leaf 1, twice round the ring
  // The interleaved input order crosses the spine at every hop.
  EXPECT_EQ(RingCrossings(*c, in)[NetworkLevel(2)], 8);
}

TEST(RankOrder, NoOrderOfASmallGangCrossesAnyLevelLessOften) {
  std::mt19937_64 rng(20240613);
  for (int trial = 0; trial < 150; ++trial) {
    const Cluster c = RandomCluster(rng, 6, 3);
    std::vector<RankSlot> gang = RandomGang(rng, c, 6);
    const std::vector<RankSlot> ring = OrderRanks(c, gang);
    ASSERT_EQ(ring.size(), gang.size());
    std::vector<int> best(NumLinkLevels(c), 1 << 30);
    std::sort(gang.begin(), gang.end(), [](const RankSlot& a, const RankSlot& b) {
      return std::make_pair(a.node, a.gpu) < std::make_pair(b.node, b.gpu);
    });
    do {
      for (int l = 1; l < NumLinkLevels(c); ++l) best[l] = std::min(best[l], HopsAtOrAbove(c, gang, l));
    } while (std::next_permutation(gang.begin(), gang.end(), [](const RankSlot& a, const RankSlot& b) {
      return std::make_pair(a.node, a.gpu) < std::make_pair(b.node, b.gpu);
    }));
    for (int l = 1; l < NumLinkLevels(c); ++l) {
      EXPECT_EQ(HopsAtOrAbove(c, ring, l), best[l]) << "trial " << trial << " level " << l;
    }
  }
}

TEST(RankOrder, NetworkHopsEqualTheNumberOfDomainsBelow) {
  // At tier t the sorted ring leaves each tier-(t-1) group once: k groups
  // give k hops at tier t or above (one for a ring of two), 0 for one group.
  std::mt19937_64 rng(7);
  for (int trial = 0; trial < 300; ++trial) {
    const Cluster c = RandomCluster(rng, 16, 3);
    const std::vector<RankSlot> gang = RandomGang(rng, c, 24);
    const std::vector<RankSlot> ring = OrderRanks(c, gang);
    for (int t = 1; t <= c.num_tiers() + 1; ++t) {
      std::set<uint32_t> groups;  // tier t-1 domains (nodes for t = 1)
      for (const RankSlot& s : gang) {
        if (t == 1) {
          groups.insert(s.node.value());
        } else {
          groups.insert(c.DomainOf(s.node, t - 1).value());
        }
      }
      const int k = static_cast<int>(groups.size());
      const int expected = ring.size() == 2 ? k - 1 : (k > 1 ? k : 0);
      EXPECT_EQ(HopsAtOrAbove(c, ring, NetworkLevel(t)), expected) << "trial " << trial << " tier " << t;
    }
  }
}

TEST(RankOrder, DeterministicWhateverTheInputOrder) {
  std::mt19937_64 rng(99);
  for (int trial = 0; trial < 100; ++trial) {
    const Cluster c = RandomCluster(rng);
    std::vector<RankSlot> gang = RandomGang(rng, c, 32);
    const std::vector<RankSlot> first = OrderRanks(c, gang);
    std::shuffle(gang.begin(), gang.end(), rng);
    EXPECT_EQ(OrderRanks(c, gang), first);
  }
}

// The order as positions, against a stable sort by the documented key
// written out here: domains from the top tier down, node, socket, switch,
// island, GPU; members of one slot (CPU-only tasks of a node, several
// tasks on one GPU) keep their input order. The scratch is reused across
// calls, as the engine does.
TEST(RankOrder, IndicesAreAStableSortByTheKey) {
  std::mt19937_64 rng(7);
  std::vector<uint32_t> order;
  std::vector<int64_t> keys;
  for (int trial = 0; trial < 200; ++trial) {
    const Cluster c = RandomCluster(rng);
    std::vector<RankSlot> gang = RandomGang(rng, c, 24);
    // Repeat some slots: shared GPUs and CPU-only tasks on one node.
    const size_t distinct = gang.size();
    for (size_t k = 0, extra = static_cast<size_t>(Uniform(rng, 0, 8)); k < extra; ++k) {
      RankSlot dup = gang[Uniform(rng, 0, static_cast<int>(distinct) - 1)];
      if (Uniform(rng, 0, 1) == 0) dup.gpu = -1;
      gang.insert(gang.begin() + Uniform(rng, 0, static_cast<int>(gang.size())), dup);
    }
    auto key = [&](const RankSlot& s) {
      std::vector<int64_t> k;
      for (int t = c.num_tiers(); t >= 1; --t) k.push_back(c.DomainOf(s.node, t).value());
      k.push_back(s.node.value());
      const auto& gpus = c.node(s.node).gpus;
      const Gpu* g = s.gpu >= 0 && s.gpu < static_cast<int>(gpus.size()) ? &gpus[s.gpu] : nullptr;
      k.push_back(g ? g->numa : -1);
      k.push_back(g ? g->pcie_switch : -1);
      k.push_back(g ? g->nvlink_island : -1);
      k.push_back(s.gpu);
      return k;
    };
    std::vector<uint32_t> expected(gang.size());
    for (uint32_t i = 0; i < expected.size(); ++i) expected[i] = i;
    std::stable_sort(expected.begin(), expected.end(),
                     [&](uint32_t a, uint32_t b) { return key(gang[a]) < key(gang[b]); });
    OrderRankIndices(c, gang, &order, &keys);
    ASSERT_EQ(order, expected) << "trial " << trial;
    const std::vector<RankSlot> ring = OrderRanks(c, gang);
    ASSERT_EQ(ring.size(), gang.size());
    for (size_t r = 0; r < ring.size(); ++r) EXPECT_EQ(ring[r], gang[order[r]]) << "trial " << trial;
  }
}

TEST(RankOrder, OneMemberHasNoHops) {
  std::mt19937_64 rng(1);
  const Cluster c = RandomCluster(rng);
  const RankSlot one{NodeId(0), -1};
  const std::vector<int> hops = RingCrossings(c, std::span<const RankSlot>(&one, 1));
  for (int h : hops) EXPECT_EQ(h, 0);
}

}  // namespace
}  // namespace ringmaster::topology
