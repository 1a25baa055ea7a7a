#include "plugins/proportion.h"

#include <gtest/gtest.h>

#include "tests/support/builders.h"

namespace ringmaster::testing {
namespace {

TEST(ProportionPlugin, QueuesShareByWeightWhenBothAskForEverything) {
  // 4 x 8 = 32 GPUs; a:b = 3:1 -> a deserves 24, b 8. Each submits 8 one-node jobs.
  auto policy = PolicyFromYaml(R"(
queues:
- {name: a, weight: 3}
- {name: b, weight: 1}
)");
  EngineHarness h(ClusterBuilder().NodesPerRack(4).Gpus(8).Build(), policy);
  for (int i = 0; i < 8; ++i) {
    h.Submit(JobBuilder("a" + std::to_string(i)).Queue("a").GpusPerTask(4).Build());
    h.Submit(JobBuilder("b" + std::to_string(i)).Queue("b").GpusPerTask(4).Build());
  }
  h.Cycle();
  const auto& st = h.state();
  const int64_t a = st.queue_usage(scheduler::QueueId(*st.queues().Find("a"))).allocated.gpu_milli() / 1000;
  const int64_t b = st.queue_usage(scheduler::QueueId(*st.queues().Find("b"))).allocated.gpu_milli() / 1000;
  EXPECT_EQ(a, 24);
  EXPECT_EQ(b, 8);
  int overused_reason = 0;
  for (int i = 0; i < 8; ++i) {
    overused_reason += h.job("b" + std::to_string(i)).pending_reason().find("deserved share") != std::string::npos;
  }
  EXPECT_GT(overused_reason, 0);
}

TEST(ProportionPlugin, OverusedNeedsEveryRequestedDimensionAtDeserved) {
  queue::QueueSpec spec{.name = "q"};
  scheduler::QueueUsage usage;
  usage.allocated = topology::Resources(4000, 0, 8000);
  scheduler::QueueInfo q{scheduler::QueueId(0), &spec, &usage};
  q.request = topology::Resources(8000, 0, 8000);
  q.deserved = topology::Resources(8000, 0, 8000);
  EXPECT_FALSE(plugins::ProportionPlugin::Overused(q));  // cpu 4 < 8
  usage.allocated = topology::Resources(8000, 0, 8000);
  EXPECT_TRUE(plugins::ProportionPlugin::Overused(q));
}

}  // namespace
}  // namespace ringmaster::testing
