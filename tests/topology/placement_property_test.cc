// Property tests of the free-capacity index on random clusters: the counters
// equal a recount after random changes, and "the lowest tier a gang can span"
// read from SmallestFitting agrees with an exhaustive search.
#include <gtest/gtest.h>

#include <algorithm>
#include <map>

#include "tests/topology/random_cluster.h"
#include "topology/free_index.h"

namespace ringmaster::topology {
namespace {

using testing::LowestTierBySubsets;
using testing::RandomCluster;
using testing::Uniform;

// Free GPUs per domain at tier t by brute force (t = 0: per node).
std::map<uint32_t, int64_t> Recount(const Cluster& c, const std::vector<int64_t>& free, int t) {
  std::map<uint32_t, int64_t> sum;
  for (uint32_t n = 0; n < c.num_nodes(); ++n) {
    if (free[n] < 0) continue;  // not indexed
    sum[t == 0 ? n : c.DomainOf(NodeId(n), t).value()] += free[n];
  }
  return sum;
}

// The same question asked of the index: the lowest tier with a fitting domain.
int LowestTierByIndex(const Cluster& c, const FreeGpuIndex& index, int64_t need) {
  for (int t = 0; t <= c.num_tiers(); ++t) {
    if (index.SmallestFitting(t, need).valid()) return t;
  }
  return index.LargestFree(c.num_tiers() + 1) >= need ? c.num_tiers() + 1 : c.num_tiers() + 2;
}

TEST(FreeIndexProperty, CountersEqualARecountAfterRandomChanges) {
  std::mt19937_64 rng(2024);
  for (int trial = 0; trial < 200; ++trial) {
    const Cluster c = RandomCluster(rng);
    FreeGpuIndex index(c);
    std::vector<int64_t> free(c.num_nodes());
    std::vector<int64_t> milli(c.num_nodes());
    for (uint32_t n = 0; n < c.num_nodes(); ++n) {
      free[n] = static_cast<int64_t>(c.node(NodeId(n)).gpus.size());
      milli[n] = free[n] * 1000;
    }
    for (int step = 0; step < 60; ++step) {
      const NodeId node(static_cast<uint32_t>(rng() % c.num_nodes()));
      const int64_t gpus = static_cast<int64_t>(c.node(node).gpus.size());
      const int op = Uniform(rng, 0, 9);
      if (op == 0) {
        index.RemoveNode(node);
        free[node.value()] = -1;
        milli[node.value()] = -1;
      } else if (op == 1 && free[node.value()] < 0) {
        index.AddNode(node, gpus);
        free[node.value()] = gpus;
        milli[node.value()] = gpus * 1000;
      } else if (free[node.value()] >= 0) {
        // f whole GPUs free, the others partly used.
        const int64_t f = Uniform(rng, 0, static_cast<int>(gpus));
        const int64_t m = f * 1000 + Uniform(rng, 0, static_cast<int>(gpus - f) * 999);
        index.SetNodeFree(node, f);
        index.SetNodeFreeMilli(node, m);
        free[node.value()] = f;
        milli[node.value()] = m;
      }
      ASSERT_TRUE(index.CheckConsistent(c).ok()) << index.CheckConsistent(c);
      int64_t total = 0;
      for (int64_t f : free) total += std::max<int64_t>(f, 0);
      ASSERT_EQ(index.TotalFree(), total);
      int64_t total_milli = 0;
      for (int64_t m : milli) total_milli += std::max<int64_t>(m, 0);
      ASSERT_EQ(index.TotalFreeMilli(), total_milli);
      for (int t = 1; t <= c.num_tiers(); ++t) {
        const auto sum = Recount(c, free, t);
        for (uint32_t d = 0; d < c.domains(t).size(); ++d) {
          const auto it = sum.find(d);
          ASSERT_EQ(index.DomainFree(t, DomainId(d)), it == sum.end() ? 0 : it->second)
              << "trial " << trial << " tier " << t << " domain " << d;
          const auto sum_milli = Recount(c, milli, t);
          const auto jt = sum_milli.find(d);
          ASSERT_EQ(index.DomainFreeMilli(t, DomainId(d)), jt == sum_milli.end() ? 0 : jt->second)
              << "trial " << trial << " tier " << t << " domain " << d;
        }
      }
    }
  }
}

TEST(FreeIndexProperty, SmallestFittingIsTheBestFitDomain) {
  std::mt19937_64 rng(77);
  for (int trial = 0; trial < 300; ++trial) {
    const Cluster c = RandomCluster(rng);
    FreeGpuIndex index(c);
    std::vector<int64_t> free(c.num_nodes());
    for (uint32_t n = 0; n < c.num_nodes(); ++n) {
      free[n] = Uniform(rng, 0, static_cast<int>(c.node(NodeId(n)).gpus.size()));
      index.SetNodeFree(NodeId(n), free[n]);
    }
    const int64_t need = Uniform(rng, 1, 40);
    for (int t = 0; t <= c.num_tiers(); ++t) {
      // Brute force: fewest free among domains with >= need, lowest id.
      const auto sum = Recount(c, free, t);
      std::optional<std::pair<int64_t, uint32_t>> best;
      for (const auto& [d, f] : sum) {
        if (f >= need && (!best || std::make_pair(f, d) < *best)) best = std::make_pair(f, d);
      }
      const DomainId got = index.SmallestFitting(t, need);
      if (!best) {
        EXPECT_FALSE(got.valid()) << "trial " << trial << " tier " << t;
      } else {
        ASSERT_TRUE(got.valid()) << "trial " << trial << " tier " << t;
        EXPECT_EQ(got.value(), best->second) << "trial " << trial << " tier " << t;
      }
    }
  }
}

TEST(FreeIndexProperty, MostFreeFirstIsASortByFreeThenId) {
  std::mt19937_64 rng(91);
  for (int trial = 0; trial < 200; ++trial) {
    const Cluster c = RandomCluster(rng);
    FreeGpuIndex index(c);
    std::vector<std::pair<int64_t, uint32_t>> want;  // (-free, id)
    for (uint32_t n = 0; n < c.num_nodes(); ++n) {
      const int64_t f = Uniform(rng, 0, static_cast<int>(c.node(NodeId(n)).gpus.size()));
      index.SetNodeFree(NodeId(n), f);
      if (Uniform(rng, 0, 5) == 0) {
        index.RemoveNode(NodeId(n));
      } else {
        want.push_back({-f, n});
      }
    }
    std::sort(want.begin(), want.end());
    std::vector<std::pair<int64_t, uint32_t>> got;
    index.ForEachNodeMostFreeFirst([&](NodeId n) {
      got.push_back({-index.NodeFree(n), n.value()});
      return true;
    });
    ASSERT_EQ(got, want) << "trial " << trial;
    // Stops when told to.
    int seen = 0;
    index.ForEachNodeMostFreeFirst([&](NodeId) { return ++seen < 2; });
    EXPECT_EQ(seen, std::min<int>(2, static_cast<int>(want.size())));
  }
}

TEST(FreeIndexProperty, LowestTierAGangCanSpanAgreesWithExhaustiveSearch) {
  std::mt19937_64 rng(4242);
  for (int trial = 0; trial < 250; ++trial) {
    const Cluster c = RandomCluster(rng, 16, 3);
    FreeGpuIndex index(c);
    std::vector<int64_t> free(c.num_nodes());
    for (uint32_t n = 0; n < c.num_nodes(); ++n) {
      free[n] = Uniform(rng, 0, static_cast<int>(c.node(NodeId(n)).gpus.size()));
      index.SetNodeFree(NodeId(n), free[n]);
    }
    for (int64_t need : {int64_t{1}, int64_t{Uniform(rng, 2, 12)}, int64_t{Uniform(rng, 8, 60)}}) {
      EXPECT_EQ(LowestTierByIndex(c, index, need), LowestTierBySubsets(c, free, need))
          << "trial " << trial << " need " << need;
    }
  }
}

}  // namespace
}  // namespace ringmaster::topology
