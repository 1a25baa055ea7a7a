#include "topology/free_index.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <vector>

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


// The ordered sets follow the counters lazily (on the next ordered read):
// every read, whatever happened since the last one (moves that came back,
// nodes removed and added again), must see exactly the order a full
// recount gives.
TEST(FreeGpuIndex, OrderedReadsMatchABruteForceOrderUnderLazySync) {
  auto c = *MakeUniformCluster({.nodes = 24, .gpus_per_node = 8, .nodes_per_rack = 4, .racks_per_spine = 3});
  FreeGpuIndex idx(c);
  std::mt19937 rng(11);
  std::vector<int64_t> truth(24, 8);
  std::vector<bool> present(24, true);
  auto expected_nodes = [&](int64_t min_free) {
    std::vector<std::pair<int64_t, uint32_t>> all;
    for (uint32_t n = 0; n < 24; ++n) {
      if (present[n] && truth[n] >= min_free) all.push_back({truth[n], n});
    }
    std::sort(all.begin(), all.end());
    std::vector<uint32_t> out;
    for (const auto& [f, n] : all) out.push_back(n);
    return out;
  };
  for (int step = 0; step < 4000; ++step) {
    const uint32_t n = rng() % 24;
    switch (rng() % 8) {
      case 0:  // a move and its undo before anyone reads (a statement's vacate + refill)
        if (present[n]) {
          idx.SetNodeFree(NodeId(n), rng() % 9);
          idx.SetNodeFree(NodeId(n), truth[n]);
        }
        break;
      case 1:
        if (present[n]) {
          idx.RemoveNode(NodeId(n));
          present[n] = false;
          truth[n] = 0;
        } else {
          idx.AddNode(NodeId(n), 8);
          present[n] = true;
          truth[n] = 8;
        }
        break;
      default:
        if (present[n]) {
          truth[n] = rng() % 9;
          idx.SetNodeFree(NodeId(n), truth[n]);
        }
        break;
    }
    if (rng() % 4 != 0) continue;  // reads come now and then: several changes pile up
    const int64_t need = rng() % 9;
    std::vector<uint32_t> got;
    idx.ForEachNodeWithFree(need, [&](NodeId id) { got.push_back(id.value()); return true; });
    ASSERT_EQ(got, expected_nodes(need)) << "step " << step;
    int64_t largest = 0;
    for (uint32_t k = 0; k < 24; ++k) largest = std::max(largest, present[k] ? truth[k] : 0);
    ASSERT_EQ(idx.LargestFree(0), largest) << "step " << step;
    // Racks: the best-fit rack for `need` against a recount.
    int64_t best = -1;
    uint32_t best_rack = 0;
    for (uint32_t r = 0; r < 6; ++r) {
      int64_t sum = 0;
      for (uint32_t k = r * 4; k < r * 4 + 4; ++k) sum += present[k] ? truth[k] : 0;
      if (sum >= need * 2 && (best < 0 || sum < best)) {
        best = sum;
        best_rack = r;
      }
    }
    const DomainId rack = idx.SmallestFitting(1, need * 2);
    ASSERT_EQ(rack.valid(), best >= 0) << "step " << step;
    if (best >= 0) {
      ASSERT_EQ(rack.value(), best_rack) << "step " << step;
    }
    if (step % 200 == 0) {
      ASSERT_TRUE(idx.CheckConsistent(c).ok()) << "step " << step;
    }
  }
  EXPECT_TRUE(idx.CheckConsistent(c).ok());
}

}  // namespace
}  // namespace ringmaster::topology
