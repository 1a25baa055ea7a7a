// The planner against an exhaustive search: on random clusters of up to 16
// nodes (0-3 network tiers, 0-8 GPUs per node, random free GPUs), a gang of
// k tasks x g GPUs with a topology constraint is placed in the lowest tier a
// gang can span, as found by trying every subset of nodes:
//   soft:       placed, spanning exactly that tier (whole cluster if needed);
//   hard, t:    placed within that tier if it is <= t, else pending.
#include <gtest/gtest.h>

#include <algorithm>
#include <random>
#include <set>

#include "absl/strings/str_cat.h"
#include "tests/support/builders.h"
#include "tests/topology/random_cluster.h"

namespace ringmaster::scheduler {
namespace {

using topology::Cluster;
using topology::NodeId;
using topology::testing::LowestTierBySubsets;
using topology::testing::RandomCluster;
using topology::testing::Uniform;

// Tier spanned by the nodes a job holds.
int SpannedTier(const Cluster& c, const Job& job) {
  int span = 0;
  NodeId first;
  for (const Task& t : job.tasks()) {
    if (!t.node.valid()) continue;
    if (!first.valid()) first = t.node;
    span = std::max(span, c.CommonTier(first, t.node));
  }
  return span;
}

// The random cluster with a "host" label per node, so fillers can be pinned.
Cluster Labelled(const Cluster& c) {
  std::vector<topology::NodeSpec> nodes = c.nodes();
  for (topology::NodeSpec& n : nodes) n.labels["host"] = n.name;
  auto built = Cluster::Build(c.tiers(), std::move(nodes));
  if (!built.ok()) abort();
  return *std::move(built);
}

TEST(PlacementExhaustive, GangSpansTheLowestTierAnExhaustiveSearchFinds) {
  std::mt19937_64 rng(2611);
  int placed_soft = 0, placed_hard = 0, pending_hard = 0, multi_node = 0;
  for (int trial = 0; trial < 300; ++trial) {
    const Cluster c = Labelled(RandomCluster(rng, 16, 3));
    const bool soft = Uniform(rng, 0, 1) == 0;
    const int hard_tier = Uniform(rng, 0, c.num_tiers());
    const int64_t g = Uniform(rng, 1, 4);
    const int64_t k = Uniform(rng, 1, 8);
    testing::EngineHarness h(c);
    // Random free GPUs: one pinned filler per node.
    std::vector<int64_t> free(c.num_nodes());
    for (uint32_t n = 0; n < c.num_nodes(); ++n) {
      const int gpus = static_cast<int>(c.node(NodeId(n)).gpus.size());
      const int used = Uniform(rng, 0, gpus);
      free[n] = gpus - used;
      if (used == 0) continue;
      h.Submit(testing::JobBuilder(absl::StrCat("fill-", n))
                   .GpusPerTask(used)
                   .Selector("host", c.node(NodeId(n)).name)
                   .Build());
    }
    h.Cycle();
    for (uint32_t n = 0; n < c.num_nodes(); ++n) {
      ASSERT_EQ(h.state().FreeWholeGpus(NodeId(n)), free[n]) << "trial " << trial << ": filler not placed";
    }
    // k tasks of g GPUs fit a set of nodes iff the sum of free / g reaches k.
    std::vector<int64_t> holds(free.size());
    for (size_t n = 0; n < free.size(); ++n) holds[n] = free[n] / g;
    const int want = LowestTierBySubsets(c, holds, k);
    testing::JobBuilder gang("gang");
    gang.Gang(static_cast<int>(k)).GpusPerTask(static_cast<int>(g));
    if (soft) {
      gang.Soft();
    } else {
      gang.Hard(hard_tier);
    }
    h.Submit(gang.Build());
    h.Cycle();
    const Job& job = h.job("gang");
    const std::string mode = soft ? std::string("soft") : absl::StrCat("hard tier ", hard_tier);
    const std::string what = absl::StrCat("trial ", trial, " ", mode, ": ", k, " x ", g, " GPUs, tiers ",
                                          c.num_tiers(), ", lowest tier by search ", want);
    const bool should_place = soft ? want <= c.num_tiers() + 1 : want <= hard_tier;
    if (!should_place) {
      EXPECT_FALSE(h.Running("gang")) << what;
      ++pending_hard;
      continue;
    }
    ASSERT_TRUE(h.Running("gang")) << what << "; reason: " << job.pending_reason();
    EXPECT_EQ(SpannedTier(c, job), want) << what;
    (soft ? placed_soft : placed_hard)++;
    multi_node += want > 0;
  }
  // The random cases cover every outcome.
  EXPECT_GT(placed_soft, 50);
  EXPECT_GT(placed_hard, 20);
  EXPECT_GT(pending_hard, 10);
  EXPECT_GT(multi_node, 30);
}

// A gang of GPU shares with a topology constraint is held to it, by the free
// GPU milli per domain: hard tier 0 = one node.
TEST(PlacementExhaustive, ShareGangKeepsItsTier) {
  // Two nodes of one GPU: two 600m shares fit only across nodes.
  testing::EngineHarness one_gpu(testing::ClusterBuilder().NodesPerRack(2).Gpus(1).Build());
  one_gpu.Submit(testing::JobBuilder("pair").Gang(2).GpuShare(600).Hard(0).Build());
  one_gpu.Cycle();
  EXPECT_FALSE(one_gpu.Running("pair"));
  EXPECT_NE(one_gpu.job("pair").pending_reason().find("on one node; the largest free node has 1 GPU free in shares"),
            std::string::npos)
      << one_gpu.job("pair").pending_reason();
  // Soft: the whole cluster is allowed, so it runs across the two nodes.
  one_gpu.Submit(testing::JobBuilder("soft").Gang(2).GpuShare(600).Soft().Build());
  one_gpu.Cycle();
  EXPECT_TRUE(one_gpu.Running("soft"));
  // Two nodes of two GPUs, node 0 with 700m of one GPU used. Best fit by
  // free milli tries node 0 first (1.3 GPUs free), but after one share its
  // holes are 300m and 400m, so the gang goes to node 1, both on one node.
  testing::EngineHarness two_gpu(testing::ClusterBuilder().NodesPerRack(2).Gpus(2).Label(0, "host", "0").Build());
  two_gpu.Submit(testing::JobBuilder("filler").GpuShare(700).Selector("host", "0").Build());
  two_gpu.Cycle();
  two_gpu.Submit(testing::JobBuilder("pair").Gang(2).GpuShare(600).Hard(0).Build());
  two_gpu.Cycle();
  ASSERT_TRUE(two_gpu.Running("pair")) << two_gpu.job("pair").pending_reason();
  const Job& pair = two_gpu.job("pair");
  EXPECT_EQ(pair.task(0).node, pair.task(1).node);
  EXPECT_EQ(pair.task(0).node, NodeId(1));
}

}  // namespace
}  // namespace ringmaster::scheduler
