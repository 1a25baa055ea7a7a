// most-free: a gang fills the node with the most free GPUs first, then the
// next most free (the Pollux artifact's Tiresias placement).
#include "plugins/most_free.h"

#include <map>

#include <gtest/gtest.h>

#include "tests/support/builders.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::testing {
namespace {

constexpr const char* kPolicy = R"(actions: "enqueue, allocate"
nodesToScore: 0
tiers:
- plugins:
  - name: gang
- plugins:
  - name: predicates
  - name: most-free
)";

constexpr const char* kBestFit = R"(actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
- plugins:
  - name: predicates
)";

// GPUs the job holds per node index, in node order.
std::map<uint32_t, int> Placement(const EngineHarness& h, const std::string& name) {
  std::map<uint32_t, int> out;
  for (const scheduler::Task& t : h.job(name).tasks()) {
    if (scheduler::HoldsNode(t.state)) out[t.node.value()] += static_cast<int>(t.gpus.size());
  }
  return out;
}

TEST(MostFreePlugin, AGangFillsTheNodeWithTheMostFreeGpusFirst) {
  // Two nodes of 4 GPUs; `one` (1 GPU) takes node 0. A gang of six 1-GPU
  // tasks: 4 on node 1 (4 free), then 2 on node 0.
  for (const bool most_free : {true, false}) {
    EngineHarness h(ClusterBuilder().Racks(1).NodesPerRack(2).Gpus(4).Build(),
                    PolicyFromYaml(most_free ? kPolicy : kBestFit));
    h.Submit(JobBuilder("one").GpusPerTask(1).Build());
    h.Cycle();
    ASSERT_EQ(Placement(h, "one"), (std::map<uint32_t, int>{{0, 1}}));
    h.Submit(JobBuilder("six").Gang(6).GpusPerTask(1).Build());
    h.Cycle();
    ASSERT_TRUE(h.Running("six"));
    if (most_free) {
      EXPECT_EQ(Placement(h, "six"), (std::map<uint32_t, int>{{0, 2}, {1, 4}}));
    } else {
      // The control: best fit starts on the fuller node (3 + 3).
      EXPECT_EQ(Placement(h, "six"), (std::map<uint32_t, int>{{0, 3}, {1, 3}}));
    }
  }
}

TEST(MostFreePlugin, TheJobsOwnNodeIsScoredEvenWhenAnotherNodeLooksTheSame) {
  // Three nodes of 4 GPUs. `pair` (one task of 2 GPUs) takes node 0, GPUs
  // 0-1. A gang of four 1-GPU tasks starts on node 1 (4 free); after two
  // tasks node 1 looks exactly like node 0 (GPUs 0-1 used), yet only node 1
  // holds the gang: it must keep filling node 1, not spill to node 2.
  EngineHarness h(ClusterBuilder().Racks(1).NodesPerRack(3).Gpus(4).Build(), PolicyFromYaml(kPolicy));
  h.Submit(JobBuilder("pair").GpusPerTask(2).Build());
  h.Cycle();
  ASSERT_EQ(Placement(h, "pair"), (std::map<uint32_t, int>{{0, 2}}));
  h.Submit(JobBuilder("four").Gang(4).GpusPerTask(1).Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("four"));
  EXPECT_EQ(Placement(h, "four"), (std::map<uint32_t, int>{{1, 4}}));
}

TEST(MostFreePlugin, WeightMustBePositive) {
  EXPECT_ERROR(plugins::MostFreePlugin::Create(scheduler::PluginArgs("most-free", "p.yaml", {{"weight", {"0", 3, 9}}})), absl::StatusCode::kInvalidArgument, "p.yaml:3:9: plugins[most-free].arguments.weight: must be >=");
  EXPECT_TRUE(plugins::MostFreePlugin::Create(scheduler::PluginArgs("most-free", "p.yaml", {})).ok());
}

}  // namespace
}  // namespace ringmaster::testing
