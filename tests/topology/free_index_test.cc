#include "topology/free_index.h"

#include <gtest/gtest.h>

#include <random>

#include "topology/uniform_cluster.h"

namespace ringmaster::topology {
namespace {

TEST(FreeGpuIndex, SmallestFittingDomainIsBestFit) {
  auto c = *MakeUniformCluster({.nodes = 8, .gpus_per_node = 8, .nodes_per_rack = 2, .racks_per_spine = 2});
  FreeGpuIndex idx(c);
  idx.SetNodeFree(NodeId(0), 2);  // rack 0: 2 + 8 = 10
  idx.SetNodeFree(NodeId(2), 6);  // rack 1: 14
  // need 9: racks with >= 9 free: rack0 (10), rack1 (14), rack2 (16), rack3 (16) -> rack0
  EXPECT_EQ(idx.SmallestFitting(1, 9).value(), 0u);
  EXPECT_EQ(idx.SmallestFitting(1, 11).value(), 1u);
  EXPECT_FALSE(idx.SmallestFitting(1, 17).valid());
  EXPECT_EQ(idx.LargestFree(2), 32);
  EXPECT_EQ(idx.LargestFree(3), 2 + 8 + 6 + 8 + 32);
  EXPECT_TRUE(idx.CheckConsistent(c).ok());
}

TEST(FreeGpuIndex, CountersEqualARecountAfterRandomUpdates) {
  auto c = *MakeUniformCluster({.nodes = 16, .gpus_per_node = 8, .nodes_per_rack = 4, .racks_per_spine = 2});
  FreeGpuIndex idx(c);
  std::mt19937 rng(7);
  std::vector<int64_t> truth(16, 8);
  for (int step = 0; step < 5000; ++step) {
    const uint32_t n = rng() % 16;
    truth[n] = rng() % 9;
    idx.SetNodeFree(NodeId(n), truth[n]);
    if (step % 500 == 0) {
      ASSERT_TRUE(idx.CheckConsistent(c).ok());
    }
  }
  for (int r = 0; r < 4; ++r) {
    int64_t sum = 0;
    for (int n = r * 4; n < r * 4 + 4; ++n) sum += truth[n];
    EXPECT_EQ(idx.DomainFree(1, DomainId(r)), sum);
  }
  std::vector<uint32_t> order;
  idx.ForEachNodeWithFree(3, [&](NodeId n) { order.push_back(n.value()); return true; });
  for (size_t i = 1; i < order.size(); ++i) EXPECT_LE(truth[order[i - 1]], truth[order[i]]);
  EXPECT_TRUE(idx.CheckConsistent(c).ok());
}

}  // namespace
}  // namespace ringmaster::topology
