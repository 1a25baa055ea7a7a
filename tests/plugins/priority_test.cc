#include "plugins/priority.h"

#include <gtest/gtest.h>

#include "tests/support/builders.h"

namespace ringmaster::testing {
namespace {

TEST(PriorityPlugin, HigherPriorityFirstAndOnlyLowerPreemptable) {
  EngineHarness h(ClusterBuilder().Build());
  h.Submit(JobBuilder("lo").Priority(1).Build());
  h.Submit(JobBuilder("hi").Priority(5).Build());
  h.Submit(JobBuilder("hi2").Priority(5).Build());
  EXPECT_LT(plugins::PriorityPlugin::JobOrder(h.job("hi"), h.job("lo")), 0);
  EXPECT_GT(plugins::PriorityPlugin::JobOrder(h.job("lo"), h.job("hi")), 0);
  EXPECT_EQ(plugins::PriorityPlugin::JobOrder(h.job("hi"), h.job("hi2")), 0);
  std::vector<scheduler::TaskRef> c{{&h.job("lo"), 0}, {&h.job("hi2"), 0}};
  auto v = plugins::PriorityPlugin::Preemptable({&h.job("hi"), 0}, c);
  ASSERT_EQ(v.size(), 1u);
  EXPECT_EQ(v[0].job->name(), "lo");
}

}  // namespace
}  // namespace ringmaster::testing
