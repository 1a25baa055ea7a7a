#include "scheduler/policy.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "plugins/registry.h"
#include "tests/support/source_dir.h"

namespace ringmaster::scheduler {
namespace {

std::vector<std::string> Errors(const std::string& yaml) {
  std::vector<queue::ConfigError> errors;
  auto p = ParsePolicy(yaml, "p.yaml", plugins::BuiltinRegistry(), &errors);
  std::vector<std::string> out;
  for (const auto& e : errors) out.push_back(e.ToString());
  EXPECT_EQ(p.ok(), errors.empty());
  return out;
}

TEST(Policy, DefaultParsesAndBuilds) {
  EXPECT_TRUE(Errors(std::string(DefaultPolicyYaml())).empty());
  Policy p = DefaultPolicy();
  EXPECT_EQ(p.actions,
            (std::vector<std::string>{"enqueue", "allocate", "preempt", "reclaim", "elastic", "backfill"}));
  ASSERT_EQ(p.tiers.size(), 2u);
  std::vector<std::string> names;
  for (const auto& tier : p.tiers) {
    for (const auto& c : tier) names.push_back(c.name);
  }
  EXPECT_EQ(names, (std::vector<std::string>{"priority", "las", "gang", "drf", "predicates", "proportion",
                                             "network-topology", "speedup", "binpack"}));
  // Arguments and configurations come with it (the old built-in had none).
  EXPECT_EQ(p.tiers[0][1].args.String("thresholds", "").value(), "3600, 36000, 100000, 250000");
  EXPECT_TRUE(p.action_args.count("preempt"));
  EXPECT_EQ(p.file, "<default policy>");
}

// One default policy: the built-in text is examples/policies/ringmaster.yaml
// byte for byte (compiled in; a stale build or a hand-edited copy fails
// here), and parsing that file gives the same policy. deploy/policy.yaml is
// held to it by deploy/check.py (tests/deploy/check_test.sh).
TEST(Policy, DefaultIsTheExamplesRingmasterYaml) {
  const std::string path = ringmaster::testing::SourceDir() + "/examples/policies/ringmaster.yaml";
  std::ifstream in(path);
  ASSERT_TRUE(in) << path;
  std::stringstream text;
  text << in.rdbuf();
  EXPECT_EQ(std::string(DefaultPolicyYaml()), text.str());
  auto loaded = LoadPolicyOrDefault(path, plugins::BuiltinRegistry());
  ASSERT_TRUE(loaded.ok()) << loaded.status();
  const Policy def = DefaultPolicy();
  EXPECT_EQ(loaded->actions, def.actions);
  ASSERT_EQ(loaded->tiers.size(), def.tiers.size());
  for (size_t t = 0; t < def.tiers.size(); ++t) {
    ASSERT_EQ(loaded->tiers[t].size(), def.tiers[t].size());
    for (size_t i = 0; i < def.tiers[t].size(); ++i) EXPECT_EQ(loaded->tiers[t][i].name, def.tiers[t][i].name);
  }
}

TEST(Policy, UnknownActionNamesLineAndKnownOnes) {
  auto e = Errors("actions: \"enqueue, allocate, shuffle\"\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_EQ(e[0],
            "p.yaml:1:10: actions: unknown action 'shuffle' (known: enqueue, allocate, preempt, reclaim, "
            "elastic, backfill)");
}

TEST(Policy, ActionArgumentsAreReadAndChecked) {
  EXPECT_TRUE(Errors(R"(actions: "enqueue, allocate, preempt, reclaim, elastic, backfill"
configurations:
- name: preempt
  arguments: {gracePeriod: 30, cooldown: 300, maxEvictionsPerCycle: 64}
- name: reclaim
  arguments: {gracePeriod: 0.5}
- name: elastic
  arguments: {growIdle: 60, cooldown: 120, maxGrowPerCycle: 16}
)").empty());
  auto e = Errors(R"(actions: "enqueue, allocate, preempt, elastic"
configurations:
- name: preempt
  arguments: {gracePeriod: -1}
- name: elastic
  arguments: {growIdel: 60}
- name: reclaim
  arguments: {cooldown: 5}
- name: preempt
- name: backfill
  colour: red
)");
  ASSERT_EQ(e.size(), 6u) << ::testing::PrintToString(e);
  EXPECT_EQ(e[0], "p.yaml:4:28: configurations[preempt].arguments.gracePeriod: must be a number of seconds >= 0");
  EXPECT_EQ(e[1], "p.yaml:6:25: configurations[elastic].arguments.growIdel: unknown argument");
  EXPECT_EQ(e[2], "p.yaml:7:9: configurations[2].name: configures action 'reclaim', which `actions` does not list");
  EXPECT_EQ(e[3], "p.yaml:9:9: configurations[3].name: action 'preempt' is configured twice");
  EXPECT_EQ(e[4], "p.yaml:11:3: configurations[4].colour: unknown field (known: name, arguments)");
  EXPECT_EQ(e[5], "p.yaml:10:9: configurations[4].name: configures action 'backfill', which `actions` does not list");
}

TEST(Policy, UnknownPluginAndArgumentAndWrongType) {
  auto e = Errors(R"(tiers:
- plugins:
  - name: gangg
  - name: binpack
    arguments: {gpu: lots}
  - name: drf
    arguments: {cpu: 1}
)");
  ASSERT_EQ(e.size(), 3u);
  EXPECT_NE(e[0].find("p.yaml:3:11: tiers[0].plugins[0].name: unknown plugin 'gangg'"), std::string::npos) << e[0];
  EXPECT_EQ(e[1], "p.yaml:5:22: plugins[binpack].arguments.gpu: wrong type: expected an integer, got 'lots'");
  EXPECT_EQ(e[2], "p.yaml:7:22: plugins[drf].arguments.cpu: unknown argument");
}

TEST(Policy, QueueErrors) {
  auto e = Errors(R"(queues:
- name: a
  parent: b
- name: b
  parent: a
- name: c
  weight: 0
- name: d
  guarantee: {gpu: 16}
  capability: {gpu: 8}
- name: e
  colour: blue
)");
  std::string all;
  for (const auto& s : e) all += s + "\n";
  EXPECT_NE(all.find("queues[c].weight: must be > 0, got 0"), std::string::npos) << all;
  EXPECT_NE(all.find("p.yaml:8:3: queues[d].guarantee: guarantee (gpu=16) is above capability (gpu=8)"),
            std::string::npos) << all;
  EXPECT_NE(all.find("cycle in queue parents: a -> b -> a"), std::string::npos) << all;
  EXPECT_NE(all.find("p.yaml:12:3: queues[4].colour: unknown field"), std::string::npos) << all;
}

TEST(Policy, NodesToScore) {
  std::vector<queue::ConfigError> errors;
  auto p = ParsePolicy("nodesToScore: 0\n", "p.yaml", plugins::BuiltinRegistry(), &errors);
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(p->nodes_to_score, 0);
  EXPECT_EQ(DefaultPolicy().nodes_to_score, 16);
  for (const char* bad : {"nodesToScore: -1\n", "nodesToScore: lots\n", "nodesToScore: [1]\n"}) {
    auto e = Errors(bad);
    ASSERT_EQ(e.size(), 1u) << bad;
    EXPECT_NE(e[0].find("p.yaml:1:15: nodesToScore: must be an integer in [0, 1000000]"), std::string::npos) << e[0];
  }
}

TEST(Policy, NotYaml) {
  auto e = Errors("actions: [\n");
  ASSERT_EQ(e.size(), 1u);
  EXPECT_NE(e[0].find("p.yaml:"), std::string::npos);
  EXPECT_NE(e[0].find("not valid YAML"), std::string::npos);
}

}  // namespace
}  // namespace ringmaster::scheduler
