// Attained service (Job::AttainedMilliMs): GPUs held x time, kept by the
// engine on its clock, across evictions; what las ranks jobs by.
#include <gtest/gtest.h>

#include "tests/support/builders.h"

namespace ringmaster::testing {
namespace {

TEST(AttainedService, GpusTimesTimeHeldOnTheEngineClock) {
  EngineHarness h(ClusterBuilder().NodesPerRack(4).Gpus(8).Build());
  h.Submit(JobBuilder("a").Gang(2).GpusPerTask(4).Build());
  EXPECT_EQ(h.job("a").AttainedMilliMs(h.clock().Now()), 0) << "nothing held yet";
  h.clock().Set(5'000);
  h.Cycle();
  ASSERT_TRUE(h.Running("a"));
  EXPECT_EQ(h.job("a").AttainedMilliMs(5'000), 0) << "waiting time is not service";
  // 2 tasks x 4 GPUs = 8 GPUs for 10 s = 80 GPU-s.
  h.clock().Set(15'000);
  EXPECT_DOUBLE_EQ(h.job("a").AttainedGpuSeconds(15'000), 80.0);
  ASSERT_TRUE(h.engine().FinishJob(h.job("a").id(), true).ok());
  h.clock().Set(100'000);
  EXPECT_DOUBLE_EQ(h.job("a").AttainedGpuSeconds(100'000), 80.0) << "a finished job attains nothing more";
}

TEST(AttainedService, KeptAcrossAnEvictionAndCountedAgainAfterTheRestart) {
  // Two nodes of 8 GPUs; an 8-GPU job on one of them loses its node.
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build());
  h.Submit(JobBuilder("a").GpusPerTask(8).Build());
  h.clock().Set(0);  // (Submit moved it on)
  h.Cycle();
  ASSERT_TRUE(h.Running("a"));
  h.clock().Set(1'000);  // 8 GPU-s
  const std::string node = h.state().cluster().node(h.job("a").task(0).node).name;
  ASSERT_TRUE(h.engine().FailNode(node).ok());
  EXPECT_FALSE(h.Running("a"));
  h.clock().Set(4'000);  // stopped: still 8 GPU-s
  EXPECT_EQ(h.job("a").AttainedMilliMs(4'000), 8'000'000);
  h.Cycle();  // restarts on the other node at t = 4 s
  ASSERT_TRUE(h.Running("a"));
  h.clock().Set(6'000);  // + 8 GPUs x 2 s
  EXPECT_EQ(h.job("a").AttainedMilliMs(6'000), 24'000'000);
}

TEST(AttainedService, SharedGpuCountsItsShare) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(1).Build());
  h.Submit(JobBuilder("half").GpuShare(500).Build());
  h.clock().Set(0);
  h.Cycle();
  ASSERT_TRUE(h.Running("half"));
  h.clock().Set(10'000);
  EXPECT_DOUBLE_EQ(h.job("half").AttainedGpuSeconds(10'000), 5.0);  // 0.5 GPU x 10 s
}

}  // namespace
}  // namespace ringmaster::testing
