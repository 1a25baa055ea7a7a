// `ringmaster policy import volcano` (cli/volcano_import.h): Volcano's
// plugins become the ringmaster plugins that do their job, the result is a
// policy `policy check` accepts, and every part left out is named.
#include "cli/volcano_import.h"

#include <gtest/gtest.h>

#include <fstream>
#include <sstream>

#include "plugins/registry.h"
#include "scheduler/policy.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::cli {
namespace {

std::string Read(const std::string& name) {
  std::ifstream in(std::string(RINGMASTER_TEST_DIR) + "/volcano/" + name);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

bool Noted(const VolcanoImport& v, const std::string& part) {
  for (const std::string& n : v.notes) {
    if (n.find(part) != std::string::npos) return true;
  }
  return false;
}

scheduler::Policy Check(const VolcanoImport& v) {
  std::vector<queue::ConfigError> errors;
  auto p = scheduler::ParsePolicy(v.policy_yaml, "imported", plugins::BuiltinRegistry(), &errors);
  std::string all;
  for (const auto& e : errors) all += e.ToString() + "\n";
  EXPECT_TRUE(p.ok()) << all << v.policy_yaml;
  return p.ok() ? *p : scheduler::Policy{};
}

TEST(VolcanoImport, TheChartsDefaultPluginsBecomeAPolicyAndTheRestIsNamed) {
  const std::string text = Read("default.conf");
  ASSERT_FALSE(text.empty());
  EXPECT_TRUE(LooksLikeVolcanoConf(text));
  auto v = ImportVolcanoConf(text, "default.conf");
  ASSERT_TRUE(v.ok()) << v.status();
  const scheduler::Policy p = Check(*v);
  EXPECT_EQ(p.actions, (std::vector<std::string>{"enqueue", "allocate", "backfill"}));
  ASSERT_EQ(p.tiers.size(), 2u);
  std::vector<std::string> t0, t1;
  for (const auto& c : p.tiers[0]) t0.push_back(c.name);
  for (const auto& c : p.tiers[1]) t1.push_back(c.name);
  EXPECT_EQ(t0, (std::vector<std::string>{"priority", "gang"}));
  EXPECT_EQ(t1, (std::vector<std::string>{"drf", "predicates", "proportion", "binpack"}));
  EXPECT_TRUE(Noted(*v, "plugin conformance: left out"));
  EXPECT_TRUE(Noted(*v, "plugin overcommit: left out"));
  EXPECT_TRUE(Noted(*v, "plugin nodeorder: left out"));
  EXPECT_TRUE(Noted(*v, "plugin gang: enablePreemptable: false left out"));
  EXPECT_TRUE(Noted(*v, "plugin drf: enablePreemptable: false left out"));
}

TEST(VolcanoImport, ActionsArgumentsAndConfigurationsLeftOutAreNamed) {
  auto v = ImportVolcanoConf(Read("preempt.conf"), "preempt.conf");
  ASSERT_TRUE(v.ok()) << v.status();
  const scheduler::Policy p = Check(*v);
  EXPECT_EQ(p.actions, (std::vector<std::string>{"enqueue", "allocate", "preempt", "reclaim", "backfill"}));
  bool topology = false;
  for (const auto& tier : p.tiers) {
    for (const auto& c : tier) topology |= c.name == "network-topology";
  }
  EXPECT_TRUE(topology) << v->policy_yaml;
  for (const char* part : {"action shuffle: left out", "plugin sla: left out", "plugin tdm: left out",
                           "plugin binpack: arguments left out", "plugin drf: enableHierarchy",
                           "configurations: left out"}) {
    EXPECT_TRUE(Noted(*v, part)) << part;
  }
}

// Newer Volcano releases write actions as a list of {name, arguments}.
TEST(VolcanoImport, ActionsAsAListOfMapsAreReadAndTheirArgumentsNamed) {
  auto v = ImportVolcanoConf(
      "actions:\n- name: enqueue\n  arguments: {x: 1}\n- name: allocate\n- name: shuffle\n- name: preempt\n"
      "tiers:\n- plugins:\n  - name: gang\n",
      "list.conf");
  ASSERT_TRUE(v.ok()) << v.status();
  const scheduler::Policy p = Check(*v);
  EXPECT_EQ(p.actions, (std::vector<std::string>{"enqueue", "allocate", "preempt"}));
  EXPECT_TRUE(Noted(*v, "action enqueue: arguments left out"));
  EXPECT_TRUE(Noted(*v, "action shuffle: left out"));
  auto bad = ImportVolcanoConf("actions:\n- name: allocate\n- 3\n", "z.conf");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("z.conf: actions[1]: expected a map with a name"), std::string::npos)
      << bad.status();
}

TEST(VolcanoImport, WhatIsNotAVolcanoConfIsAnErrorThatSaysWhere) {
  EXPECT_ERROR(ImportVolcanoConf("- a\n- b\n", "x.conf"), absl::StatusCode::kInvalidArgument, "x.conf: not a volcano-scheduler.conf (a map with actions");
  auto bad = ImportVolcanoConf("actions: [\n", "x.conf");
  ASSERT_ERROR(bad, absl::StatusCode::kInvalidArgument, "x.conf:2:1: end of sequence flow not found");
  EXPECT_EQ(bad.status().message().rfind("x.conf:", 0), 0u) << bad.status();
  auto tiers = ImportVolcanoConf("tiers: 3\n", "y.conf");
  EXPECT_NE(tiers.status().message().find("tiers: expected a list"), std::string::npos) << tiers.status();
  EXPECT_FALSE(LooksLikeVolcanoConf(std::string(scheduler::DefaultPolicyYaml())));
}

}  // namespace
}  // namespace ringmaster::cli
