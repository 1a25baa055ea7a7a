#include "plugins/gang.h"

#include <gtest/gtest.h>

#include "tests/support/builders.h"

namespace ringmaster::testing {
namespace {

TEST(GangPlugin, ReadyOnlyAtMinimumAndVictimsKeepGangWhole) {
  EngineHarness h(ClusterBuilder().NodesPerRack(4).Gpus(8).Build());
  h.Submit(JobBuilder("g").Gang(4).MinMember(2).GpusPerTask(8).Build());
  const auto& job = h.job("g");
  EXPECT_FALSE(plugins::GangPlugin::Ready(job));
  EXPECT_TRUE(plugins::GangPlugin::Starving(job));
  h.Cycle();
  ASSERT_EQ(job.ReadyCount(), 4);
  EXPECT_TRUE(plugins::GangPlugin::Ready(job));
  // 4 running, minimum 2: of 3 candidates only 2 may go; of all 4, all may.
  std::vector<scheduler::TaskRef> three{{&job, 0}, {&job, 1}, {&job, 2}};
  EXPECT_EQ(plugins::GangPlugin::Victims(three).size(), 2u);
  std::vector<scheduler::TaskRef> four{{&job, 0}, {&job, 1}, {&job, 2}, {&job, 3}};
  EXPECT_EQ(plugins::GangPlugin::Victims(four).size(), 4u);
}

TEST(GangPlugin, InvalidWhenFewerTasksThanMinimum) {
  EngineHarness h(ClusterBuilder().Build());
  h.Submit(JobBuilder("g").Gang(2).Build());
  EXPECT_TRUE(plugins::GangPlugin::Valid(h.job("g")).ok);
}

}  // namespace
}  // namespace ringmaster::testing
