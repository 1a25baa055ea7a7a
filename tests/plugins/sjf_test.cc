#include "plugins/sjf.h"

#include <gtest/gtest.h>

#include "tests/support/builders.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::testing {
namespace {

TEST(SjfPlugin, ShorterWalltimeFirstUnknownLast) {
  EngineHarness h(ClusterBuilder().Build());
  h.Submit(JobBuilder("long").Walltime(7'200'000).Build());
  h.Submit(JobBuilder("short").Walltime(1'800'000).Build());
  h.Submit(JobBuilder("unknown").Build());
  h.Submit(JobBuilder("short2").Walltime(1'800'000).Build());
  using plugins::SjfPlugin;
  EXPECT_LT(SjfPlugin::JobOrder(h.job("short"), h.job("long")), 0);  // 30 min before 2 h
  EXPECT_GT(SjfPlugin::JobOrder(h.job("long"), h.job("short")), 0);
  EXPECT_LT(SjfPlugin::JobOrder(h.job("long"), h.job("unknown")), 0) << "no walltime sorts last";
  EXPECT_GT(SjfPlugin::JobOrder(h.job("unknown"), h.job("short")), 0);
  EXPECT_EQ(SjfPlugin::JobOrder(h.job("short"), h.job("short2")), 0) << "a tie: the session's FIFO decides";
}

TEST(SjfPlugin, RejectsArguments) {
  scheduler::PluginArgs args("sjf", "p.yaml", {{"reverse", {"true", 3, 5}}});
  auto p = plugins::SjfPlugin::Create(args);
  ASSERT_ERROR(p, absl::StatusCode::kInvalidArgument, "p.yaml:3:5: plugins[sjf].arguments.reverse: unknown argument");
  EXPECT_NE(p.status().message().find("p.yaml:3:5: plugins[sjf].arguments.reverse: unknown argument"),
            std::string::npos)
      << p.status().message();
}

// One node of 8 GPUs, every job takes all of it: the order in which the
// waiting jobs start is the policy's job order.
std::vector<std::string> StartOrderUnder(const std::string& first_plugin) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), PolicyFromYaml(R"(actions: "enqueue, allocate"
tiers:
- plugins:
  - name: )" + first_plugin + R"(
  - name: gang
- plugins:
  - name: predicates
)"));
  h.Submit(JobBuilder("blocker").GpusPerTask(8).Build());
  h.Cycle();
  // Submitted in this order (FIFO would start them so): 3 h, none, 1 h, 2 h.
  h.clock().Set(1'000);
  h.Submit(JobBuilder("w3h").GpusPerTask(8).Walltime(3 * 3'600'000).Build());
  h.clock().Set(2'000);
  h.Submit(JobBuilder("wnone").GpusPerTask(8).Build());
  h.clock().Set(3'000);
  h.Submit(JobBuilder("w1h").GpusPerTask(8).Walltime(3'600'000).Build());
  h.clock().Set(4'000);
  h.Submit(JobBuilder("w2h").GpusPerTask(8).Walltime(2 * 3'600'000).Build());
  return StartOrder(h, "blocker", {"w3h", "wnone", "w1h", "w2h"});
}

TEST(SjfPlugin, WaitingJobsStartShortestWalltimeFirst) {
  EXPECT_EQ(StartOrderUnder("sjf"), (std::vector<std::string>{"w1h", "w2h", "w3h", "wnone"}));
  // The same jobs under `priority` (all equal): first come, first served.
  EXPECT_EQ(StartOrderUnder("priority"), (std::vector<std::string>{"w3h", "wnone", "w1h", "w2h"}));
}

}  // namespace
}  // namespace ringmaster::testing
