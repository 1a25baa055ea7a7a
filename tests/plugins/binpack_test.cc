#include "plugins/binpack.h"

#include <gtest/gtest.h>

#include "tests/support/builders.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::testing {
namespace {

TEST(BinpackPlugin, FullerNodeScoresHigher) {
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build());
  h.Submit(JobBuilder("six").GpusPerTask(6).Build());
  h.Cycle();
  h.Submit(JobBuilder("one").GpusPerTask(1).Build());
  const auto& st = h.state();
  const topology::NodeId used = h.job("six").task(0).node;
  const topology::NodeId empty(1 - used.value());
  plugins::BinpackWeights w;
  w.cpu = 0;
  w.memory = 0;
  // gpu only: (6 + 1) / 8 = .875 -> 87; (0 + 1) / 8 -> 12
  EXPECT_EQ(plugins::BinpackPlugin::Score(w, st, {&h.job("one"), 0}, used), 87);
  EXPECT_EQ(plugins::BinpackPlugin::Score(w, st, {&h.job("one"), 0}, empty), 12);
  h.Cycle();
  EXPECT_EQ(h.job("one").task(0).node, used) << "binpack fills the used node";
}

TEST(BinpackPlugin, RejectsUnknownAndNegativeArguments) {
  scheduler::PluginArgs bad("binpack", "p.yaml", {{"gpu", {"-1", 3, 9}}});
  auto p = plugins::BinpackPlugin::Create(bad);
  ASSERT_ERROR(p, absl::StatusCode::kInvalidArgument, "p.yaml:3:9: plugins[binpack].arguments.gpu: must be >= 0");
  EXPECT_EQ(p.status().message(), "p.yaml:3:9: plugins[binpack].arguments.gpu: must be >= 0");
  scheduler::PluginArgs unknown("binpack", "p.yaml", {{"colour", {"red", 4, 9}}});
  EXPECT_ERROR(plugins::BinpackPlugin::Create(unknown), absl::StatusCode::kInvalidArgument, "p.yaml:4:9: plugins[binpack].arguments.colour: unknown");
}

}  // namespace
}  // namespace ringmaster::testing
