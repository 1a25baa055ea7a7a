// The engine's fast paths (the planner's count bound, exact wake-ups) change
// what a cycle costs, never what it decides: random contended replays under
// every shipped policy give the same jobs and timeline with them on and off
// (ReplayOptions::fast_paths). The golden replays (tests/golden) pin the same
// on the bundled traces.
#include <fstream>
#include <random>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "plugins/registry.h"
#include "simulator/replay.h"
#include "tests/support/source_dir.h"
#include "topology/uniform_cluster.h"

namespace ringmaster::simulator {
namespace {

// Gangs of 1-32 GPUs, some elastic, two queues, two priorities, arriving
// faster than 3 nodes x 8 GPUs serve them.
std::vector<TraceJob> Contended(uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  std::vector<TraceJob> jobs;
  int64_t t = 0;
  for (int i = 0; i < n; ++i) {
    TraceJob j;
    j.spec.name = "c" + std::to_string(i);
    j.line = i + 2;
    t += static_cast<int64_t>(rng() % 120);
    j.submit_s = static_cast<double>(t);
    j.duration_s = static_cast<double>(60 + rng() % 5000);
    const int shapes[][2] = {{1, 1}, {1, 2}, {1, 4}, {1, 8}, {2, 8}, {4, 8}, {2, 4}, {3, 2}};
    const auto& s = shapes[rng() % 8];
    j.worker().replicas = s[0];  // a rigid gang (size {})
    j.worker().gpu.count = s[1];
    if (rng() % 4 == 0) {  // elastic: 1-GPU tasks
      j.worker().gpu.count = 1;
      j.worker().replicas = 2 + static_cast<int>(rng() % 4);
      j.spec.size = {1, j.tasks() * 2};
    }
    j.spec.queue = rng() % 3 == 0 ? "product" : "research";
    j.spec.priority = rng() % 5 == 0 ? 5 : 0;
    j.spec.walltime_ms = SecondsToMs(j.duration_s);
    j.checkpoint_interval_s = 600;
    jobs.push_back(j);
  }
  return jobs;
}

scheduler::Policy PolicyFile(const std::string& name) {
  if (name == "ringmaster.yaml+usageWeight") {
    // The default with deserved shares that read decayed usage (proportion's
    // usageHalfLife 30 min, usageWeight 2): levels change between events.
    scheduler::Policy p = PolicyFile("ringmaster.yaml");
    for (auto& tier : p.tiers) {
      for (scheduler::PluginConfig& c : tier) {
        if (c.name == "proportion") {
          c.args = scheduler::PluginArgs("proportion", "test",
                                         {{"usageHalfLife", {"1800", 0, 0}}, {"usageWeight", {"2", 0, 0}}});
        }
      }
    }
    return p;
  }
  if (name.starts_with("ringmaster.yaml+wayBack")) {
    // The default with a way back for stopped jobs and restarted jobs kept
    // at their level (las's wayBack, keepRestarted): the waiting jobs' order
    // changes between events.
    std::ifstream in(testing::SourceDir() + "/examples/policies/ringmaster.yaml");
    std::stringstream text;
    text << in.rdbuf();
    std::string yaml = text.str();
    const std::string at = "      victimFill: 8";
    const size_t pos = yaml.find(at);
    EXPECT_NE(pos, std::string::npos);
    const std::string more = name == "ringmaster.yaml+wayBack"
                                 ? "      wayBack: 0.5\n      keepRestarted: true\n"
                                 : "      wayBack: 1\n      wayBackReserve: false\n      keepRestarted: true\n"
                                   "      keepRestartedFrom: stopped\n";
    yaml.insert(yaml.find('\n', pos) + 1, more);
    std::vector<queue::ConfigError> errors;
    auto p = scheduler::ParsePolicy(yaml, name, plugins::BuiltinRegistry(), &errors);
    EXPECT_TRUE(p.ok()) << name << ": " << p.status();
    return p.ok() ? *std::move(p) : scheduler::DefaultPolicy();
  }
  std::vector<queue::ConfigError> errors;
  auto p = scheduler::LoadPolicyFile(testing::SourceDir() + "/examples/policies/" + name,
                                     plugins::BuiltinRegistry(), &errors);
  EXPECT_TRUE(p.ok()) << name << ": " << p.status();
  return p.ok() ? *std::move(p) : scheduler::DefaultPolicy();
}

TEST(FastPaths, RandomContendedReplaysDecideTheSameWithAndWithout) {
  const std::vector<std::string> policies = {"fifo-gang.yaml", "sjf.yaml", "las.yaml", "ringmaster.yaml",
                                             "elastic.yaml", "gittins.yaml", "ringmaster.yaml+usageWeight",
                                             "ringmaster.yaml+wayBack", "ringmaster.yaml+wayBackNoReserve", ""};
  topology::UniformClusterSpec spec;
  spec.nodes = 3;
  spec.gpus_per_node = 8;
  spec.nodes_per_rack = 2;
  int64_t fewer = 0;
  for (uint64_t seed = 1; seed <= 3; ++seed) {
    const auto trace = Contended(seed, 120);
    for (const std::string& name : policies) {
      const scheduler::Policy policy = name.empty() ? scheduler::DefaultPolicy() : PolicyFile(name);
      ReplayOptions on, off;
      // Whole cycle periods a wake-up (the closed form of the replay's skip),
      // and not (its walk over the chain).
      on.wake_period_s = off.wake_period_s = seed == 2 ? 7.5 : 15;
      off.fast_paths = false;
      const auto a = Replay(topology::MakeUniformCluster(spec).value(), policy, trace, "t.csv", on);
      const auto b = Replay(topology::MakeUniformCluster(spec).value(), policy, trace, "t.csv", off);
      ASSERT_TRUE(a.ok() && b.ok()) << name;
      const std::string what = "policy " + (name.empty() ? std::string("default") : name) + ", seed " + std::to_string(seed);
      ASSERT_EQ(a->jobs.size(), b->jobs.size());
      int64_t waited = 0;
      for (size_t i = 0; i < a->jobs.size(); ++i) {
        EXPECT_EQ(a->jobs[i].start_ms, b->jobs[i].start_ms) << what << ", " << a->jobs[i].id;
        EXPECT_EQ(a->jobs[i].end_ms, b->jobs[i].end_ms) << what << ", " << a->jobs[i].id;
        EXPECT_EQ(a->jobs[i].preemptions, b->jobs[i].preemptions) << what << ", " << a->jobs[i].id;
        EXPECT_EQ(a->jobs[i].shrinks, b->jobs[i].shrinks) << what << ", " << a->jobs[i].id;
        EXPECT_EQ(a->jobs[i].grows, b->jobs[i].grows) << what << ", " << a->jobs[i].id;
        waited += a->jobs[i].start_ms - a->jobs[i].submit_ms;
      }
      ASSERT_EQ(a->timeline.size(), b->timeline.size()) << what;
      for (size_t i = 0; i < a->timeline.size(); ++i) {
        EXPECT_EQ(a->timeline[i].time_ms, b->timeline[i].time_ms) << what << ", point " << i;
        EXPECT_EQ(a->timeline[i].allocated_gpus, b->timeline[i].allocated_gpus) << what << ", point " << i;
      }
      EXPECT_GT(waited, 0) << what << ": not contended";
      EXPECT_LE(a->cycles, b->cycles) << what;
      fewer += b->cycles - a->cycles;
    }
  }
  EXPECT_GT(fewer, 0) << "the exact wake-ups must skip some cycles";
}

}  // namespace
}  // namespace ringmaster::simulator
