#include "plugins/gpu_affinity.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/builders.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::testing {
namespace {

using ::testing::ElementsAre;

scheduler::Policy AffinityPolicy() {
  return PolicyFromYaml(R"(actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: gpu-affinity
)");
}

TEST(GpuAffinityPlugin, KeepsTheOtherIslandWhole) {
  // One node, 8 GPUs, islands {0-3} and {4-7}.
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).GpusPerIsland(4).Build(), AffinityPolicy());
  h.Submit(JobBuilder("two").GpusPerTask(2).Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("two"));
  EXPECT_THAT(h.job("two").task(0).gpus, ElementsAre(0, 1));
  // Another pair goes to island 0 (best fit: 2 free), leaving {4-7} whole.
  h.Submit(JobBuilder("pair").GpusPerTask(2).Build());
  h.Cycle();
  EXPECT_THAT(h.job("pair").task(0).gpus, ElementsAre(2, 3));
  h.Submit(JobBuilder("four").GpusPerTask(4).Build());
  h.Cycle();
  EXPECT_THAT(h.job("four").task(0).gpus, ElementsAre(4, 5, 6, 7));
}

TEST(GpuAffinityPlugin, ScoresByTheSlowestLinkInside) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).GpusPerIsland(2).Build(), AffinityPolicy());
  h.Submit(JobBuilder("j2").GpusPerTask(2).Build());
  h.Submit(JobBuilder("j4").GpusPerTask(4).Build());
  h.Submit(JobBuilder("j8").GpusPerTask(8).Build());
  h.Submit(JobBuilder("cpu").CpuPerTask(1000).Build());
  const auto& st = h.state();
  const topology::NodeId n(0);
  // Islands of 2; switches of 2 (g / 2); sockets {0-3}, {4-7}.
  EXPECT_EQ(plugins::GpuAffinityPlugin::Score(1, st, {&h.job("j2"), 0}, n), 100);
  EXPECT_EQ(plugins::GpuAffinityPlugin::Score(1, st, {&h.job("j4"), 0}, n), 50);  // one socket
  EXPECT_EQ(plugins::GpuAffinityPlugin::Score(3, st, {&h.job("j8"), 0}, n), 75);   // 3 x across sockets
  EXPECT_EQ(plugins::GpuAffinityPlugin::Score(1, st, {&h.job("cpu"), 0}, n), 0);
}

TEST(GpuAffinityPlugin, SharesGoToTheFullestGpuAndNeverOverfill) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(2).Build(), AffinityPolicy());
  // 600m lands on a GPU; a 300m share must join it (the fullest GPU that
  // fits: 900m) rather than start the empty one (a spreading or first-free
  // choice would give 600/300).
  h.Submit(JobBuilder("a").GpuShare(600).Build());
  h.Cycle();
  const int16_t first = h.job("a").task(0).gpus.at(0);
  h.Submit(JobBuilder("b").GpuShare(300).Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("b"));
  EXPECT_EQ(h.job("b").task(0).gpus.at(0), first);
  // So a whole-GPU task still fits on the other GPU.
  h.Submit(JobBuilder("whole").GpusPerTask(1).Build());
  h.Cycle();
  EXPECT_TRUE(h.Running("whole"));
  // 200m does not fit the 900m GPU any more (1100 > 1000): it must wait.
  h.Submit(JobBuilder("c").GpuShare(200).Build());
  h.Cycle();
  EXPECT_FALSE(h.Running("c"));
  for (int16_t used : h.state().node(topology::NodeId(0)).gpu_used) EXPECT_LE(used, 1000);
}

TEST(GpuAffinityPlugin, RejectsBadArguments) {
  EXPECT_ERROR(plugins::GpuAffinityPlugin::Create(scheduler::PluginArgs("gpu-affinity", "p.yaml", {{"weight", {"-1", 2, 3}}})), absl::StatusCode::kInvalidArgument, "p.yaml:2:3: plugins[gpu-affinity].arguments.weight: must be");
  EXPECT_ERROR(plugins::GpuAffinityPlugin::Create(scheduler::PluginArgs("gpu-affinity", "p.yaml", {{"islands", {"1", 2, 3}}})), absl::StatusCode::kInvalidArgument, "p.yaml:2:3: plugins[gpu-affinity].arguments.islands");
  EXPECT_TRUE(plugins::GpuAffinityPlugin::Create(scheduler::PluginArgs()).ok());
}

}  // namespace
}  // namespace ringmaster::testing
