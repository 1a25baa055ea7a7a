// The speedup plugin (throughput-aware sizing): its answers against hand
// computed points, and the two decisions it changes (who grows, who shrinks),
// each beside a control run without it that decides otherwise.
#include "plugins/speedup.h"

#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <memory>
#include <set>

#include "tests/support/builders.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::testing {
namespace {

using scheduler::Eviction;
using scheduler::TaskState;

// rate(gpus, nodes) given as a function.
class FnSpeed : public scheduler::SpeedModel {
 public:
  explicit FnSpeed(std::function<double(int, int)> f) : f_(std::move(f)) {}
  double Rate(int gpus, int nodes) const override { return f_(gpus, nodes); }
  std::string Describe() const override { return "test"; }

 private:
  std::function<double(int, int)> f_;
};

std::shared_ptr<const scheduler::SpeedModel> Linear() {
  return std::make_shared<FnSpeed>([](int g, int) { return 10.0 * g; });
}
// No faster on more GPUs.
std::shared_ptr<const scheduler::SpeedModel> Flat() {
  return std::make_shared<FnSpeed>([](int, int) { return 10.0; });
}
// Amdahl with a cost per extra node: g / (1 + 0.2 (g - 1)) / (1 + 0.5 (nodes - 1)).
std::shared_ptr<const scheduler::SpeedModel> Amdahl() {
  return std::make_shared<FnSpeed>([](int g, int n) { return g / (1 + 0.2 * (g - 1)) / (1 + 0.5 * (n - 1)); });
}

scheduler::JobSpec WithSpeed(scheduler::JobSpec spec, std::shared_ptr<const scheduler::SpeedModel> m) {
  spec.speed = std::move(m);
  return spec;
}

TEST(SpeedupPlugin, SpeedupAgainstHandComputedPoints) {
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(4).Build());
  h.Submit(WithSpeed(JobBuilder("a").Gang(1).Elastic(1, 8).GpusPerTask(1).Build(), Amdahl()));
  h.Submit(WithSpeed(JobBuilder("two").Gang(1).Elastic(1, 4).GpusPerTask(2).Build(), Amdahl()));
  h.Submit(JobBuilder("none").Gang(1).Elastic(1, 4).Build());
  using plugins::SpeedupPlugin;
  const scheduler::Job& a = h.job("a");
  EXPECT_DOUBLE_EQ(*SpeedupPlugin::Speedup(a, 1, 4), 1.0);
  // 4 GPUs on one node: 4 / 1.6 = 2.5.
  EXPECT_DOUBLE_EQ(*SpeedupPlugin::Speedup(a, 4, 4), 2.5);
  // 5 GPUs need two nodes of 4: 5 / 1.8 / 1.5.
  EXPECT_DOUBLE_EQ(*SpeedupPlugin::Speedup(a, 5, 4), 5 / 1.8 / 1.5);
  EXPECT_DOUBLE_EQ(*SpeedupPlugin::Speedup(a, 0, 4), 0.0);
  // Two GPUs a member: 3 members are 6 GPUs on two nodes, relative to 2 GPUs.
  EXPECT_DOUBLE_EQ(*SpeedupPlugin::Speedup(h.job("two"), 3, 4), (6 / 2.0 / 1.5) / (2 / 1.2));
  EXPECT_FALSE(SpeedupPlugin::Speedup(h.job("none"), 2, 4).has_value()) << "no model: no answer";
}

TEST(SpeedupPlugin, ResizePaysItsReformation) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  h.Submit(WithSpeed(JobBuilder("lin").Gang(1).Elastic(1, 8).GpusPerTask(1).Build(), Linear()));
  h.Submit(WithSpeed(JobBuilder("flat").Gang(1).Elastic(1, 8).GpusPerTask(1).Build(), Flat()));
  h.Submit(WithSpeed(JobBuilder("amd").Gang(1).Elastic(1, 8).GpusPerTask(1).Build(), Amdahl()));
  // Pause 30 s, horizon 1800 s: a grow pays when S(to) / S(from) > 1800 / 1770.
  plugins::SpeedupPlugin p(30, 1800, 0.1);
  EXPECT_TRUE(p.Pays(h.job("lin"), 2, 3, 8));
  EXPECT_FALSE(p.Pays(h.job("flat"), 2, 3, 8)) << "no faster: the pause is never won back";
  EXPECT_TRUE(p.Pays(h.job("flat"), 3, 2, 8)) << "shrinks are not judged by the job's own speed";
  // Amdahl on one node: S(7) = 7 / 2.2 = 3.18, S(8) = 8 / 2.4 = 3.33: +0.15 per GPU, and 3.33 / 3.18 > 1.017.
  EXPECT_TRUE(p.Pays(h.job("amd"), 7, 8, 8));
  // With a minimum gain of 0.2 of one GPU's speed per GPU it does not.
  plugins::SpeedupPlugin strict(30, 1800, 0.2);
  EXPECT_FALSE(strict.Pays(h.job("amd"), 7, 8, 8));
  // A short horizon: 1.5 x in 60 s does not pay for a 30 s pause (1.5 x 30 < 1 x 60)...
  plugins::SpeedupPlugin short_horizon(30, 60, 0);
  EXPECT_FALSE(short_horizon.Pays(h.job("lin"), 2, 3, 8));
  // ... 3 x does (3 x 30 > 60).
  EXPECT_TRUE(short_horizon.Pays(h.job("lin"), 2, 6, 8));
}

TEST(SpeedupPlugin, RejectsBadArguments) {
  using scheduler::PluginArgs;
  auto bad = [](std::string key, std::string value) {
    return plugins::SpeedupPlugin::Create(PluginArgs("speedup", "p.yaml", {{key, {value, 4, 7}}}));
  };
  ASSERT_ERROR(bad("reformPause", "-1"), absl::StatusCode::kInvalidArgument,
               "p.yaml:4:7: plugins[speedup].arguments.reformPause: must be a number of seconds");
  ASSERT_ERROR(bad("payoffHorizon", "10"), absl::StatusCode::kInvalidArgument,
               "plugins[speedup].arguments.payoffHorizon: must be a number of seconds above reformPause");
  ASSERT_ERROR(bad("minGainPerGpu", "2"), absl::StatusCode::kInvalidArgument,
               "plugins[speedup].arguments.minGainPerGpu: must be a number in [0, 1]");
  ASSERT_ERROR(bad("speed", "1"), absl::StatusCode::kInvalidArgument, "speed: unknown argument");
  EXPECT_TRUE(plugins::SpeedupPlugin::Create(PluginArgs("speedup", "p.yaml", {})).ok());
}

// Every action that sizes jobs, no grace period or cooldown, growth at once,
// no loans; with the speedup plugin (its arguments as given) or without it.
std::string Policy(bool speedup, const std::string& speedup_args = "") {
  std::string p = R"(actions: "enqueue, allocate, preempt, elastic, backfill"
configurations:
- name: preempt
  arguments: {gracePeriod: 0, cooldown: 0}
- name: elastic
  arguments: {growIdle: 0, cooldown: 0, returnLoans: false}
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: binpack
)";
  if (speedup) p += "  - name: speedup\n";
  if (speedup && !speedup_args.empty()) p += "    arguments: " + speedup_args + "\n";
  return p;
}

// One node of 8 GPUs: `flat` (no faster on more GPUs) and `lin` (linear)
// start at 2 GPUs each, flat first; 4 GPUs stay idle.
void StartTwo(EngineHarness& h) {
  h.Submit(WithSpeed(JobBuilder("flat").Gang(2).Elastic(1, 8).GpusPerTask(1).Build(), Flat()));
  h.Submit(WithSpeed(JobBuilder("lin").Gang(2).Elastic(1, 8).GpusPerTask(1).Build(), Linear()));
}

TEST(SpeedupPlugin, IdleGpusGoToTheJobThatScales) {
  for (const bool speedup : {true, false}) {
    SCOPED_TRACE(speedup ? "with speedup" : "without (control)");
    EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), PolicyFromYaml(Policy(speedup)));
    StartTwo(h);
    h.Cycle();  // both start at their desired 2 and grow in the same cycle's elastic action
    for (int c = 0; c < 3; ++c) h.Cycle();
    if (speedup) {
      EXPECT_EQ(h.job("lin").ReadyCount(), 6) << "every idle GPU to the job that scales";
      EXPECT_EQ(h.job("flat").ReadyCount(), 2) << "a job no faster on more GPUs is not grown";
    } else {
      EXPECT_EQ(h.job("flat").ReadyCount(), 6) << "job order: the first submitted grows first";
      EXPECT_EQ(h.job("lin").ReadyCount(), 2);
    }
  }
}

TEST(SpeedupPlugin, AShrinkTakesFromTheJobThatLosesLeast) {
  for (const bool speedup : {true, false}) {
    SCOPED_TRACE(speedup ? "with speedup" : "without (control)");
    EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), PolicyFromYaml(Policy(speedup)));
    // flat starts first (older), lin second (younger): both at 4 GPUs.
    h.Submit(WithSpeed(JobBuilder("flat").Gang(4).Elastic(1, 4).GpusPerTask(1).Build(), Flat()));
    h.Cycle();
    h.clock().Set(h.clock().Now() + 1'000);
    h.Submit(WithSpeed(JobBuilder("lin").Gang(4).Elastic(1, 4).GpusPerTask(1).Build(), Linear()));
    h.Cycle();
    ASSERT_EQ(h.job("flat").ReadyCount() + h.job("lin").ReadyCount(), 8);
    h.Submit(JobBuilder("urgent").Gang(2).GpusPerTask(1).Priority(10).Build());
    auto d = h.Cycle();
    ASSERT_TRUE(h.Running("urgent")) << h.job("urgent").pending_reason();
    for (const Eviction& e : d.evictions) EXPECT_EQ(e.kind, Eviction::Kind::kShrink);
    if (speedup) {
      EXPECT_EQ(h.job("flat").ReadyCount(), 2) << "the job that loses nothing by it gives the 2 GPUs";
      EXPECT_EQ(h.job("lin").ReadyCount(), 4);
    } else {
      EXPECT_EQ(h.job("lin").ReadyCount(), 2) << "without speeds: the younger job is shrunk";
      EXPECT_EQ(h.job("flat").ReadyCount(), 4);
    }
  }
}

TEST(SpeedupPlugin, JobsWithoutAModelGrowAsWithoutThePlugin) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), PolicyFromYaml(Policy(true)));
  h.Submit(JobBuilder("plain").Gang(2).Elastic(1, 8).GpusPerTask(1).Build());
  for (int c = 0; c < 3; ++c) h.Cycle();
  EXPECT_EQ(h.job("plain").ReadyCount(), 8);
}

}  // namespace
}  // namespace ringmaster::testing

namespace ringmaster::testing {
namespace {

TEST(SpeedupPlugin, AJobWithAModelIsPlacedOnTheFewestNodes) {
  // 4 nodes x 4 GPUs under the default policy plus speedup: a 1-GPU job
  // holds a GPU of some node; a gang of 4 x 1 GPU with a model lands on one
  // node (the model says spreading is slow), not in the holes binpack prefers.
  std::string policy(scheduler::DefaultPolicyYaml());
  const std::string anchor = "  - name: binpack";
  policy.insert(policy.find(anchor), "  - name: speedup\n");
  EngineHarness h(ClusterBuilder().NodesPerRack(4).Gpus(4).Build(), PolicyFromYaml(policy));
  h.Submit(WithSpeed(JobBuilder("small").Gang(1).GpusPerTask(1).Build(), Amdahl()));
  h.Cycle();
  h.Submit(WithSpeed(JobBuilder("four").Gang(4).GpusPerTask(1).Build(), Amdahl()));
  h.Cycle();
  ASSERT_TRUE(h.Running("four")) << h.job("four").pending_reason();
  std::set<uint32_t> nodes;
  for (const scheduler::Task& t : h.job("four").tasks()) nodes.insert(t.node.value());
  EXPECT_EQ(nodes.size(), 1u);
}

}  // namespace
}  // namespace ringmaster::testing

namespace ringmaster::testing {
namespace {

// Amdahl without a cost per extra node.
std::shared_ptr<const scheduler::SpeedModel> AmdahlFlatNetwork() {
  return std::make_shared<FnSpeed>([](int g, int) { return g / (1 + 0.2 * (g - 1)); });
}


TEST(SpeedupPlugin, AStartThisSpreadWaitsUnlessStartRatioIsZero) {
  // 2 nodes x 4 GPUs, 3 held on each: a job of desired 2 (Amdahl, 0.5 per
  // extra node) could start only as 1 + 1 over two nodes: S = 2 / 1.2 / 1.5
  // = 1.11 against 2 / 1.2 = 1.67 on one node (0.67 < startRatio 0.75).
  for (const bool judged : {true, false}) {
    SCOPED_TRACE(judged ? "startRatio 0.75 (default)" : "startRatio 0 (control)");
    EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(4).Build(),
                    PolicyFromYaml(Policy(true, judged ? "" : "{startRatio: 0}")));
    h.Submit(JobBuilder("b0").GpusPerTask(3).Build());
    h.Submit(JobBuilder("b1").GpusPerTask(3).Build());
    h.Cycle();
    ASSERT_TRUE(h.Running("b0") && h.Running("b1"));
    ASSERT_NE(h.job("b0").task(0).node, h.job("b1").task(0).node);
    h.Submit(WithSpeed(JobBuilder("m").Gang(2).Elastic(1, 2).GpusPerTask(1).Build(), Amdahl()));
    for (int c = 0; c < 3; ++c) h.Cycle();
    if (judged) {
      EXPECT_FALSE(h.Running("m"));
      EXPECT_NE(h.job("m").pending_reason().find("would not pay"), std::string::npos) << h.job("m").pending_reason();
      ASSERT_TRUE(h.engine().FinishJob(h.engine().FindJob("b1"), true).ok());
      h.Cycle();
      h.Cycle();
      ASSERT_TRUE(h.Running("m")) << "started once a node can take it whole: " << scheduler::PhaseName(h.job("m").phase()) << " ready " << h.job("m").ReadyCount() << " " << h.job("m").pending_reason();
      EXPECT_EQ(h.job("m").ReadyCount(), 2);
      EXPECT_EQ(h.job("m").task(0).node, h.job("m").task(1).node);
    } else {
      EXPECT_TRUE(h.Running("m"));
      EXPECT_NE(h.job("m").task(0).node, h.job("m").task(1).node) << "spread over the two holes";
    }
  }
}

TEST(SpeedupPlugin, APreemptorWithAModelTakesItsDesiredSizeOnOneNode) {
  // 2 nodes x 4 GPUs held by a low-priority elastic job (8 of 1 GPU, minimum
  // 2). A priority-10 job of desired 4 with a model: with speedup its victims
  // are sought for all 4 on one node; without, preempt frees its minimum (1).
  for (const bool speedup : {true, false}) {
    SCOPED_TRACE(speedup ? "with speedup" : "without (control)");
    EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(4).Build(), PolicyFromYaml(Policy(speedup)));
    h.Submit(JobBuilder("low").Gang(8).Elastic(2, 8).GpusPerTask(1).Build());
    h.Cycle();
    ASSERT_EQ(h.job("low").ReadyCount(), 8);
    h.Submit(WithSpeed(JobBuilder("hp").Gang(4).Elastic(1, 4).GpusPerTask(1).Priority(10).Build(), Amdahl()));
    auto d = h.Cycle();
    ASSERT_TRUE(h.Running("hp")) << h.job("hp").pending_reason();
    int shrinks = 0;
    for (const Eviction& e : d.evictions) shrinks += e.kind == Eviction::Kind::kShrink;
    if (speedup) {
      EXPECT_EQ(shrinks, 4);
      EXPECT_EQ(h.job("hp").ReadyCount(), 4);
      std::set<uint32_t> nodes;
      for (const scheduler::Task& t : h.job("hp").tasks()) {
        if (scheduler::HoldsNode(t.state)) nodes.insert(t.node.value());
      }
      EXPECT_EQ(nodes.size(), 1u) << "all four on the node its victims left";
    } else {
      EXPECT_EQ(shrinks, 1);
      EXPECT_EQ(h.job("hp").ReadyCount(), 1);
    }
  }
}

TEST(SpeedupPlugin, AGrowThatLandsOnAnotherNodeMustPayWhereItLands) {
  // g runs 2 GPUs on node 0 beside a 2-GPU job; node 1 is idle. Growing g to
  // 4 pays on one node (2.5 against 1.67), but the room is on node 1: 2 + 2
  // over two nodes is no faster with a cost per extra node (kept at 2); with
  // a network that costs nothing (control) it grows.
  for (const bool node_cost : {true, false}) {
    SCOPED_TRACE(node_cost ? "0.5 per extra node" : "no cost per node (control)");
    EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(4).Build(), PolicyFromYaml(Policy(true)));
    h.Submit(WithSpeed(JobBuilder("g").Gang(2).Elastic(1, 4).GpusPerTask(1).Build(),
                       node_cost ? Amdahl() : AmdahlFlatNetwork()));
    h.Cycle();
    h.Submit(JobBuilder("other").Gang(2).GpusPerTask(1).Build());
    for (int c = 0; c < 3; ++c) h.Cycle();
    ASSERT_TRUE(h.Running("other"));
    ASSERT_EQ(h.job("other").task(0).node, h.job("g").task(0).node) << "packed beside g";
    EXPECT_EQ(h.job("g").ReadyCount(), node_cost ? 2 : 4);
  }
}

}  // namespace
}  // namespace ringmaster::testing

