#include "scheduler/job_file.h"

#include <gtest/gtest.h>

namespace ringmaster::scheduler {
namespace {

TEST(JobFile, ParsesRolesSharesAndTopology) {
  auto jobs = ParseJobFile(R"(jobs:
- name: a
  queue: q
  priority: 3
  topology: {mode: soft}
  walltime: 1.5
  roles:
  - {name: launcher, cpu: 500m, memory: 1Gi}
  - {name: worker, replicas: 4, gpus: 8}
- name: b
  gpu_model: [H100, A100]
  roles:
  - {gpus: 0.25}
)", "j.yaml");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 2u);
  const JobSpec& a = (*jobs)[0];
  EXPECT_EQ(a.roles[0].request.cpu_milli(), 500);
  EXPECT_EQ(a.roles[0].request.memory(), 1LL << 30);
  EXPECT_EQ(a.roles[1].gpu.count, 8);
  EXPECT_EQ(a.topology_mode, TopologyMode::kSoft);
  EXPECT_EQ(a.walltime_ms, 1500);
  EXPECT_EQ((*jobs)[1].roles[0].gpu.count, 1);
  EXPECT_EQ((*jobs)[1].roles[0].gpu.milli, 250);
  EXPECT_TRUE(a.gpu_models.empty());
  EXPECT_EQ((*jobs)[1].gpu_models, (std::vector<std::string>{"H100", "A100"}));
  EXPECT_TRUE((*jobs)[1].AllowsModel("A100"));
  EXPECT_FALSE((*jobs)[1].AllowsModel("T4"));
}

TEST(JobFile, ErrorsSayWhereAndWhat) {
  auto bad = ParseJobFile("jobs:\n- name: a\n  roles:\n  - {gpus: 1.5}\n", "j.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "j.yaml:4:12: jobs[0].roles[0].gpus: more than one GPU must be a whole number");
  bad = ParseJobFile("jobs:\n- name: a\n  gpu_model: []\n  roles: []\n", "j.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "j.yaml:3:14: jobs[0].gpu_model: an empty list allows no GPU model");
  bad = ParseJobFile("jobs:\n- name: a\n  colour: red\n  roles: []\n", "j.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "j.yaml:3:3: jobs[0].colour: unknown field");
  bad = ParseJobFile("jobs:\n- name: a\n  topology: {mode: sideways}\n  roles: [{gpus: 1}]\n", "j.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("'sideways' is not hard or soft"), std::string::npos);
  bad = ParseJobFile("jobs:\n- name: a\n  priority: high\n  roles: [{gpus: 1}]\n", "j.yaml");
  ASSERT_FALSE(bad.ok());
  EXPECT_EQ(bad.status().message(), "j.yaml:3:13: jobs[0].priority: wrong type: expected an integer");
}

}  // namespace
}  // namespace ringmaster::scheduler
