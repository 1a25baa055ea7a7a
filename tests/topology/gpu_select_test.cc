#include "topology/gpu_select.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "tests/topology/random_cluster.h"

namespace ringmaster::topology {
namespace {

using ::testing::ElementsAre;

std::vector<Gpu> Layout(const std::vector<int>& island, const std::vector<int>& pcie, const std::vector<int>& numa) {
  std::vector<Gpu> g;
  for (size_t i = 0; i < island.size(); ++i) {
    g.push_back(Gpu{static_cast<int>(i), "G", 0, island[i], pcie[i], numa[i]});
  }
  return g;
}

// Level of a set: 0 one island, 1 one switch, 2 one socket, 3 the node.
int LevelOf(const std::vector<Gpu>& gpus, const std::vector<int>& set) {
  auto same = [&](int Gpu::*m) {
    for (int i : set) {
      if (gpus[i].*m != gpus[set[0]].*m) return false;
    }
    return true;
  };
  if (same(&Gpu::nvlink_island)) return 0;
  if (same(&Gpu::pcie_switch)) return 1;
  if (same(&Gpu::numa)) return 2;
  return 3;
}

int IslandsOf(const std::vector<Gpu>& gpus, const std::vector<int>& set) {
  std::set<int> s;
  for (int i : set) s.insert(gpus[i].nvlink_island);
  return static_cast<int>(s.size());
}

// Checks SelectWholeGpus against every k-subset of the free GPUs.
void CheckAgainstExhaustive(const std::vector<Gpu>& gpus, const std::vector<Quantity>& used, int k) {
  const int n = static_cast<int>(gpus.size());
  std::vector<int> free;
  for (int i = 0; i < n; ++i) {
    if (used[i] == 0) free.push_back(i);
  }
  const auto got = SelectWholeGpus(gpus, used, k);
  if (static_cast<int>(free.size()) < k) {
    EXPECT_FALSE(got.has_value());
    return;
  }
  ASSERT_TRUE(got.has_value());
  ASSERT_EQ(static_cast<int>(got->size()), k);
  if (k == 0) return;
  EXPECT_TRUE(std::is_sorted(got->begin(), got->end()));
  for (int i : *got) EXPECT_EQ(used[i], 0) << "gave a used GPU " << i;
  EXPECT_EQ(std::set<int>(got->begin(), got->end()).size(), got->size());

  // Best (level, islands) over all k-subsets of the free GPUs.
  std::pair<int, int> best{99, 99};
  const int f = static_cast<int>(free.size());
  for (uint32_t mask = 0; mask < (1u << f); ++mask) {
    if (__builtin_popcount(mask) != k) continue;
    std::vector<int> set;
    for (int b = 0; b < f; ++b) {
      if (mask & (1u << b)) set.push_back(free[b]);
    }
    best = std::min(best, std::make_pair(LevelOf(gpus, set), IslandsOf(gpus, set)));
  }
  const int level = LevelOf(gpus, *got);
  EXPECT_EQ(level, best.first) << "spans a slower level than needed";
  EXPECT_EQ(IslandsOf(gpus, *got), best.second) << "touches more islands than needed";
  if (level == 0) {
    // Best fit over islands: no island with >= k free has fewer free GPUs.
    std::map<int, int> free_in;
    for (int i : free) ++free_in[gpus[i].nvlink_island];
    const int chosen = free_in[gpus[(*got)[0]].nvlink_island];
    for (const auto& [island, count] : free_in) {
      if (count >= k) {
        EXPECT_LE(chosen, count) << "split a larger island than needed";
      }
    }
  }
}

TEST(GpuSelect, ExhaustiveOnEveryFourGpuNode) {
  // Every layout from these shapes x every used pattern x every k.
  const std::vector<std::vector<int>> islands = {{0, 0, 0, 0}, {0, 0, 1, 1}, {0, 1, 2, 3}, {0, 0, 0, 1}, {0, 1, 1, 2}};
  const std::vector<std::vector<int>> switches = {{0, 0, 0, 0}, {0, 0, 1, 1}, {0, 1, 2, 3}};
  const std::vector<std::vector<int>> sockets = {{0, 0, 0, 0}, {0, 0, 1, 1}};
  int cases = 0;
  for (const auto& is : islands) {
    for (const auto& sw : switches) {
      for (const auto& so : sockets) {
        const std::vector<Gpu> gpus = Layout(is, sw, so);
        for (uint32_t busy = 0; busy < 16; ++busy) {
          std::vector<Quantity> used(4);
          for (int i = 0; i < 4; ++i) used[i] = (busy >> i) & 1 ? (i % 2 ? 1000 : 300) : 0;
          for (int k = 0; k <= 5; ++k) {
            SCOPED_TRACE(::testing::Message() << "busy=" << busy << " k=" << k);
            CheckAgainstExhaustive(gpus, used, k);
            ++cases;
          }
        }
      }
    }
  }
  EXPECT_EQ(cases, 5 * 3 * 2 * 16 * 6);
}

TEST(GpuSelect, ExhaustiveOnRandomEightGpuNodes) {
  std::mt19937_64 rng(31);
  for (int trial = 0; trial < 400; ++trial) {
    const std::vector<Gpu> gpus = testing::RandomGpus(rng, 8);
    std::vector<Quantity> used(8);
    for (auto& u : used) u = rng() % 3 == 0 ? 1000 : 0;
    const int k = testing::Uniform(rng, 1, 8);
    SCOPED_TRACE(::testing::Message() << "trial " << trial << " k=" << k);
    CheckAgainstExhaustive(gpus, used, k);
  }
}

TEST(GpuSelect, KeepsTheLargerIslandWhole) {
  // Islands {0,1,2,3} and {4,5}; a 2-GPU task takes the pair, a 4-GPU task
  // the quad.
  const std::vector<Gpu> gpus = Layout({0, 0, 0, 0, 1, 1}, {0, 0, 0, 0, 0, 0}, {0, 0, 0, 0, 0, 0});
  const std::vector<Quantity> idle(6, 0);
  EXPECT_THAT(*SelectWholeGpus(gpus, idle, 2), ElementsAre(4, 5));
  EXPECT_THAT(*SelectWholeGpus(gpus, idle, 4), ElementsAre(0, 1, 2, 3));
  // 5 GPUs: the whole quad plus one of the pair.
  EXPECT_THAT(*SelectWholeGpus(gpus, idle, 5), ElementsAre(0, 1, 2, 3, 4));
}

TEST(GpuSelect, PrefersOneSocketWhenNoIslandFits) {
  // No NVLink; sockets {0,1} and {2,3,4,5}; switches {0,1}, {2,3}, {4,5}.
  const std::vector<Gpu> gpus = Layout({0, 1, 2, 3, 4, 5}, {0, 0, 1, 1, 2, 2}, {0, 0, 1, 1, 1, 1});
  std::vector<Quantity> used = {0, 0, 0, 1000, 0, 0};
  // Two GPUs: switch {0,1} (2 free) is the best fit over {4,5} (also 2) by id.
  EXPECT_THAT(*SelectWholeGpus(gpus, used, 2), ElementsAre(0, 1));
  // Three GPUs: only socket 1 holds 3 free (2, 4, 5).
  EXPECT_THAT(*SelectWholeGpus(gpus, used, 3), ElementsAre(2, 4, 5));
  EXPECT_FALSE(SelectWholeGpus(gpus, used, 6).has_value());
}

TEST(GpuSelect, SharedTaskGoesToTheFullestGpuThatFits) {
  EXPECT_EQ(SelectSharedGpu(std::vector<Quantity>{0, 600, 900, 300}, 300), 1);
  EXPECT_EQ(SelectSharedGpu(std::vector<Quantity>{0, 600, 900, 300}, 100), 2);
  EXPECT_EQ(SelectSharedGpu(std::vector<Quantity>{1000, 950}, 100), std::nullopt);
  EXPECT_EQ(SelectSharedGpu(std::vector<Quantity>{0}, 0), std::nullopt);
  EXPECT_EQ(SelectSharedGpu(std::vector<Quantity>{0}, 1001), std::nullopt);
}

TEST(GpuSelect, SharesNeverExceedOneGpu) {
  std::mt19937_64 rng(17);
  for (int trial = 0; trial < 200; ++trial) {
    const int n = testing::Uniform(rng, 1, 8);
    const std::vector<Gpu> gpus = testing::RandomGpus(rng, n);
    std::vector<Quantity> used(n, 0);
    for (int step = 0; step < 40; ++step) {
      if (rng() % 4 == 0) {
        const int k = testing::Uniform(rng, 1, 3);
        if (auto got = SelectWholeGpus(gpus, used, k)) {
          for (int g : *got) used[g] += kMilliPerGpu;
        }
      } else {
        const Quantity milli = testing::Uniform(rng, 1, 1000);
        if (auto g = SelectSharedGpu(used, milli)) used[*g] += milli;
      }
      for (Quantity u : used) ASSERT_LE(u, kMilliPerGpu) << "trial " << trial;
    }
  }
}

}  // namespace
}  // namespace ringmaster::topology
