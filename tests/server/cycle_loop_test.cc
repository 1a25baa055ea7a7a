// The cycle loop (server/loop/cycle_loop.h): the one owner of the engine's
// cycles, handing each cycle's decisions to every sink in order, whoever
// asked for the cycle (the daemon's timer or the extender's filter).
#include "server/loop/cycle_loop.h"

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "nlohmann/json.hpp"
#include "plugins/registry.h"
#include "server/extender/extender.h"
#include "tests/support/builders.h"

namespace ringmaster::server {
namespace {

using ringmaster::testing::ClusterBuilder;
using ringmaster::testing::EngineHarness;
using ringmaster::testing::JobBuilder;

// Records what it is called with, as "NAME:before", "NAME:binds=N", "NAME:after".
struct RecordingSink : CycleSink {
  RecordingSink(std::string n, std::vector<std::string>& l, absl::Mutex& m) : name(std::move(n)), log(l), mu(m) {}
  void BeforeCycle() override {
    mu.AssertHeld();
    log.push_back(name + ":before");
  }
  void OnCycle(const scheduler::Decisions& d) override {
    mu.AssertHeld();
    log.push_back(name + ":binds=" + std::to_string(d.binds.size()));
  }
  void AfterCycle() override {
    // The lock is released: a sink may take it (the extender's evictions).
    absl::MutexLock lock(&mu);
    log.push_back(name + ":after");
  }
  std::string name;
  std::vector<std::string>& log;
  absl::Mutex& mu;
};

TEST(CycleLoop, TickCallsEverySinkInOrderAroundOneCycle) {
  EngineHarness h(ClusterBuilder().Racks(1).NodesPerRack(2).Gpus(8).Build());
  absl::Mutex mu;
  CycleLoop loop(h.engine(), mu);
  std::vector<std::string> log;
  RecordingSink a("a", log, mu), b("b", log, mu);
  loop.AddSink(&a);
  loop.AddSink(&b);
  int observed = 0;
  loop.SetObserver([&](double seconds, const scheduler::Decisions& d, const scheduler::State&) {
    EXPECT_GE(seconds, 0.0);
    observed += static_cast<int>(d.binds.size());
    log.push_back("observer");
  });
  h.Submit(JobBuilder("j").Gang(2).GpusPerTask(8).Build());
  loop.Tick();
  EXPECT_EQ(log, (std::vector<std::string>{"a:before", "b:before", "observer", "a:binds=2", "b:binds=2", "a:after",
                                           "b:after"}));
  EXPECT_EQ(observed, 2);
  EXPECT_EQ(loop.cycles(), 1);
  EXPECT_TRUE(h.Running("j"));
}

TEST(CycleLoop, ACycleRunUnderTheLockReachesEverySinkAndRemovedSinksHearNothing) {
  EngineHarness h(ClusterBuilder().Racks(1).NodesPerRack(2).Gpus(8).Build());
  absl::Mutex mu;
  CycleLoop loop(h.engine(), mu);
  std::vector<std::string> log;
  RecordingSink a("a", log, mu), b("b", log, mu);
  loop.AddSink(&a);
  loop.AddSink(&b);
  h.Submit(JobBuilder("j").Gang(1).GpusPerTask(8).Build());
  {
    absl::MutexLock lock(&mu);
    const scheduler::Decisions d = loop.RunLocked();
    EXPECT_EQ(d.binds.size(), 1u);
  }
  // No BeforeCycle or AfterCycle: the caller does that work itself.
  EXPECT_EQ(log, (std::vector<std::string>{"a:binds=1", "b:binds=1"}));
  loop.RemoveSink(&a);
  log.clear();
  loop.Tick();
  EXPECT_EQ(log, (std::vector<std::string>{"b:before", "b:binds=0", "b:after"}));
  EXPECT_EQ(loop.cycles(), 2);
}

// The cycle a completed gang's filter runs is the loop's: the daemon's sink
// (here a recorder) sees the gang's binds, and so does a job submitted to
// the engine directly (as the admin API does), placed in the same cycle.
TEST(CycleLoop, TheExtendersCycleIsTheLoopsAndEverySinkSeesIt) {
  using nlohmann::json;
  auto registry = plugins::BuiltinRegistry();
  scheduler::ManualClock clock{1'000};
  scheduler::EngineOptions eo;
  eo.auto_confirm_binds = false;
  const TopologyLabels labels = DefaultTopologyLabels();
  auto engine = *scheduler::Engine::Create(*topology::Cluster::Build(TierSpecs(labels), {}),
                                           scheduler::DefaultPolicy(), registry, clock, eo);
  absl::Mutex mu;
  CycleLoop loop(*engine, mu);
  std::vector<std::string> log;
  Extender ext(*engine, clock, ExtenderOptions{}, nullptr, &loop);
  RecordingSink daemon("daemon", log, mu);
  loop.AddSink(&daemon);
  auto node = [](const std::string& name) {
    return json{{"metadata", {{"name", name}, {"labels", {{"topology.ringmaster.io/rack", "r1"}}}}},
                {"status", {{"allocatable", {{"cpu", "96"}, {"memory", "1Ti"}, {"nvidia.com/gpu", "8"}}}}}};
  };
  auto pod = [](const std::string& name) {
    return json{{"metadata",
                 {{"name", name}, {"namespace", "ml"}, {"uid", "uid-" + name},
                  {"labels", {{"scheduling.x-k8s.io/pod-group", "g"}}},
                  {"annotations", {{"scheduling.volcano.sh/group-min-member", "2"}}}}},
                {"spec", {{"containers", {{{"name", "t"}, {"resources", {{"limits", {{"nvidia.com/gpu", "8"}}}}}}}}}}};
  };
  ExtenderArgs args;
  args.nodes = NodeObjects({node("n1"), node("n2"), node("n3")});
  args.pod = pod("w-0");
  ext.Filter(args);
  {
    // A job of the admin API, waiting for the next cycle.
    absl::MutexLock lock(&mu);
    ASSERT_TRUE(engine->SubmitJob(JobBuilder("admin/j").Gang(1).GpusPerTask(8).Build()).ok());
  }
  EXPECT_TRUE(log.empty()) << "no cycle before the gang is complete";
  args.pod = pod("w-1");
  ext.Filter(args);  // completes the gang: one cycle, at once
  ASSERT_EQ(log, std::vector<std::string>{"daemon:binds=3"}) << "the gang's two binds and the admin job's";
  EXPECT_TRUE(ext.ReservedNode("ml/w-0").has_value());
  EXPECT_TRUE(ext.ReservedNode("ml/w-1").has_value());
  EXPECT_EQ(loop.cycles(), 1);
  loop.RemoveSink(&daemon);
}

}  // namespace
}  // namespace ringmaster::server
