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

TEST(GangPlugin, ValidOnlyWithAtLeastMinimumTasksAndNotReadyGoesFirst) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  h.Submit(JobBuilder("g").Gang(2).GpusPerTask(4).Build());
  h.Submit(JobBuilder("w").Gang(2).GpusPerTask(8).Build());  // cannot fit: stays not ready
  EXPECT_TRUE(plugins::GangPlugin::Valid(h.job("g")).ok());
  h.Cycle();
  ASSERT_TRUE(plugins::GangPlugin::Ready(h.job("g")));
  ASSERT_FALSE(plugins::GangPlugin::Ready(h.job("w")));
  EXPECT_LT(plugins::GangPlugin::Order(h.job("w"), h.job("g")), 0);
  EXPECT_GT(plugins::GangPlugin::Order(h.job("g"), h.job("w")), 0);
}

}  // namespace
}  // namespace ringmaster::testing
