#include "plugins/network_topology.h"

#include <gtest/gtest.h>

#include "tests/support/builders.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::testing {
namespace {

TEST(NetworkTopologyPlugin, FillsTheUsedRackFirst) {
  // 2 racks x 2 nodes x 8 GPUs. A 4-GPU job is pinned to node 3 (rack 1);
  // the next 8-GPU job goes to node 2, the other node of rack 1, leaving
  // rack 0 whole (without the plugin it would take node 0, the lowest id).
  auto policy = PolicyFromYaml(R"(actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: network-topology
    arguments: {weight: 2}
)");
  EngineHarness h(ClusterBuilder().Racks(2).NodesPerRack(2).Gpus(8).Label(3, "pin", "yes").Build(), policy);
  h.Submit(JobBuilder("small").GpusPerTask(4).Selector("pin", "yes").Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("small"));
  const topology::NodeId first = h.job("small").task(0).node;
  ASSERT_EQ(first, topology::NodeId(3));
  h.Submit(JobBuilder("big").GpusPerTask(8).Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("big"));
  const auto& c = h.state().cluster();
  EXPECT_EQ(c.DomainOf(h.job("big").task(0).node, 1), c.DomainOf(first, 1));
  EXPECT_EQ(h.job("big").task(0).node, topology::NodeId(2));
  // The other rack is still whole: a 2 x 8 gang fits in it.
  h.Submit(JobBuilder("gang").Gang(2).GpusPerTask(8).Hard(1).Build());
  h.Cycle();
  EXPECT_TRUE(h.Running("gang"));
}

TEST(NetworkTopologyPlugin, ScoreArithmetic) {
  EngineHarness h(ClusterBuilder().Racks(2).NodesPerRack(2).Gpus(8).Build());
  h.Submit(JobBuilder("six").GpusPerTask(6).Build());
  h.Cycle();
  h.Submit(JobBuilder("two").GpusPerTask(2).Build());
  const topology::NodeId used = h.job("six").task(0).node;
  const auto& c = h.state().cluster();
  topology::NodeId same_rack, other_rack;
  for (uint32_t n = 0; n < c.num_nodes(); ++n) {
    const topology::NodeId id(n);
    if (id == used) continue;
    if (c.DomainOf(id, 1) == c.DomainOf(used, 1)) same_rack = id; else other_rack = id;
  }
  plugins::NetworkTopologyWeights w;
  // Rack of 16 GPUs: (6 + 2) / 16 = .5 -> 50; empty rack: 2 / 16 -> 12.
  EXPECT_EQ(plugins::NetworkTopologyPlugin::Score(w, h.state(), {&h.job("two"), 0}, same_rack), 50);
  EXPECT_EQ(plugins::NetworkTopologyPlugin::Score(w, h.state(), {&h.job("two"), 0}, other_rack), 12);
  w.weight = 3;
  EXPECT_EQ(plugins::NetworkTopologyPlugin::Score(w, h.state(), {&h.job("two"), 0}, same_rack), 150);
}

TEST(NetworkTopologyPlugin, RejectsBadArguments) {
  EXPECT_ERROR(plugins::NetworkTopologyPlugin::Create(scheduler::PluginArgs("network-topology", "p.yaml", {{"tier2", {"-1", 2, 3}}})), absl::StatusCode::kInvalidArgument, "p.yaml:2:3: plugins[network-topology].arguments.tier2: must");
  EXPECT_ERROR(plugins::NetworkTopologyPlugin::Create(scheduler::PluginArgs("network-topology", "p.yaml", {{"tier9", {"1", 2, 3}}})), absl::StatusCode::kInvalidArgument, "p.yaml:2:3: plugins[network-topology].arguments.tier9");
  auto e = plugins::NetworkTopologyPlugin::Create(scheduler::PluginArgs("network-topology", "p.yaml", {{"weight", {"x", 2, 3}}}));
  ASSERT_ERROR(e, absl::StatusCode::kInvalidArgument, "p.yaml:2:3: plugins[network-topology].arguments.weight");
  EXPECT_NE(std::string(e.status().message()).find("p.yaml:2:3"), std::string::npos) << e.status();
}

}  // namespace
}  // namespace ringmaster::testing
