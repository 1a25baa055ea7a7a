#include "plugins/drf.h"

#include <gtest/gtest.h>

#include "tests/support/builders.h"

namespace ringmaster::testing {
namespace {

TEST(DrfPlugin, LowerDominantShareGoesFirst) {
  // 4 nodes x 8 GPUs x 128 cores = 32 GPUs, 512 cores.
  EngineHarness h(ClusterBuilder().NodesPerRack(4).Gpus(8).Build());
  h.Submit(JobBuilder("gpuheavy").GpusPerTask(8).Build());                  // 8/32 GPUs = .25
  h.Submit(JobBuilder("cpuheavy").Gang(2).CpuPerTask(100'000).Build());    // 200/512 cores = .39
  h.Submit(JobBuilder("idle").GpusPerTask(1).Selector("none", "x").Build()); // never placed: 0
  h.Cycle();
  const auto& total = h.state().total();
  // .25 < .39, so gpuheavy first
  EXPECT_LT(plugins::DrfPlugin::Compare(total, h.job("gpuheavy"), h.job("cpuheavy")), 0);
  EXPECT_LT(plugins::DrfPlugin::Compare(total, h.job("idle"), h.job("gpuheavy")), 0);
  EXPECT_EQ(plugins::DrfPlugin::Compare(total, h.job("idle"), h.job("idle")), 0);
}

}  // namespace
}  // namespace ringmaster::testing
