#include "scheduler/job_file.h"

#include "absl/strings/str_cat.h"
#include "tests/support/status_matchers.h"

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
  ASSERT_ERROR(bad, absl::StatusCode::kInvalidArgument, "j.yaml:4:12: jobs[0].roles[0].gpus: more than one GPU must");
  EXPECT_EQ(bad.status().message(), "j.yaml:4:12: jobs[0].roles[0].gpus: more than one GPU must be a whole number");
  bad = ParseJobFile("jobs:\n- name: a\n  gpu_model: []\n  roles: []\n", "j.yaml");
  ASSERT_ERROR(bad, absl::StatusCode::kInvalidArgument, "j.yaml:3:14: jobs[0].gpu_model: an empty list allows no GPU");
  EXPECT_EQ(bad.status().message(), "j.yaml:3:14: jobs[0].gpu_model: an empty list allows no GPU model");
  bad = ParseJobFile("jobs:\n- name: a\n  colour: red\n  roles: []\n", "j.yaml");
  ASSERT_ERROR(bad, absl::StatusCode::kInvalidArgument, "j.yaml:3:3: jobs[0].colour: unknown field");
  EXPECT_EQ(bad.status().message(), "j.yaml:3:3: jobs[0].colour: unknown field");
  bad = ParseJobFile("jobs:\n- name: a\n  topology: {mode: sideways}\n  roles: [{gpus: 1}]\n", "j.yaml");
  ASSERT_ERROR(bad, absl::StatusCode::kInvalidArgument, "j.yaml:3:20: jobs[0].topology.mode: 'sideways' is not hard");
  EXPECT_NE(bad.status().message().find("'sideways' is not hard or soft"), std::string::npos);
  bad = ParseJobFile("jobs:\n- name: a\n  priority: high\n  roles: [{gpus: 1}]\n", "j.yaml");
  ASSERT_ERROR(bad, absl::StatusCode::kInvalidArgument, "j.yaml:3:13: jobs[0].priority: wrong type: expected an");
  EXPECT_EQ(bad.status().message(), "j.yaml:3:13: jobs[0].priority: wrong type: expected an integer");
}

// Found by fuzz/job_file_fuzzer.cc (docs/FUZZING.md): two roles of 2^31 - 1
// replicas overflowed the task count (undefined behaviour), and one role of
// 200 million replicas had the engine build 200 million tasks.
TEST(JobFile, TaskCountsAreBounded) {
  auto overflow = ParseJobFile(
      "jobs:\n- name: a\n  roles:\n  - {name: w, replicas: 2147483647}\n  - {name: x, replicas: 2147483647}\n",
      "j.yaml");
  ASSERT_ERROR(overflow, absl::StatusCode::kInvalidArgument, "j.yaml:2:3: jobs[0]: job 'a': roles: 2147483647 tasks is");
  EXPECT_NE(overflow.status().message().find("2147483647 tasks is more than the 100000 a job may have"),
            std::string::npos)
      << overflow.status();
  auto huge = ParseJobFile("jobs:\n- name: a\n  roles:\n  - {name: w, replicas: 200000000, gpus: 1}\n", "j.yaml");
  ASSERT_ERROR(huge, absl::StatusCode::kInvalidArgument, "j.yaml:2:3: jobs[0]: job 'a': roles: 200000000 tasks is");
  EXPECT_NE(huge.status().message().find("200000000 tasks is more than the 100000"), std::string::npos)
      << huge.status();
  auto elastic = ParseJobFile("jobs:\n- name: a\n  elastic: {min: 1, max: 1000000}\n  roles: [{replicas: 2}]\n",
                              "j.yaml");
  ASSERT_ERROR(elastic, absl::StatusCode::kInvalidArgument, "j.yaml:2:3: jobs[0]: job 'a': elastic: max 1000000 is more");
  EXPECT_NE(elastic.status().message().find("max 1000000 is more than the 100000"), std::string::npos)
      << elastic.status();
  EXPECT_TRUE(ParseJobFile("jobs:\n- name: a\n  roles:\n  - {replicas: 100000}\n", "j.yaml").ok());
}

// The one spelling of a job's size (issue 26 §6): its two input spellings,
// the CLI's range, the rule for the minimum and the errors.
TEST(GangSize, MinAndMaxDefaultToTheDesiredCount) {
  EXPECT_EQ(GangSize{}.Min(4), 4);
  EXPECT_EQ(GangSize{}.Max(4), 4);
  EXPECT_FALSE(GangSize{}.elastic());
  EXPECT_EQ((GangSize{2, 0}).Min(4), 2);
  EXPECT_EQ((GangSize{2, 0}).Max(4), 4);
  EXPECT_EQ((GangSize{2, 8}).Max(4), 8);
  EXPECT_TRUE((GangSize{4, 4}).elastic());  // a one-count range is still elastic, as before
}

TEST(GangSize, FromMinMemberTakesTheRangeOrTheMinimum) {
  EXPECT_EQ(*GangSize::FromMinMember(0, 0, 0), GangSize{});
  EXPECT_EQ(*GangSize::FromMinMember(3, 0, 0), (GangSize{3, 0}));
  EXPECT_EQ(*GangSize::FromMinMember(0, 2, 8), (GangSize{2, 8}));
  EXPECT_EQ(*GangSize::FromMinMember(2, 2, 8), (GangSize{2, 8}));
  EXPECT_ERROR(GangSize::FromMinMember(3, 2, 8), absl::StatusCode::kInvalidArgument,
               "min_member: 3 must equal the elastic minimum 2 (or be left out)");
  EXPECT_ERROR(GangSize::FromMinMember(0, 3, 0), absl::StatusCode::kInvalidArgument, "elastic: range [3, 0] is empty");
}

TEST(GangSize, ParseRangeQuotesTheText) {
  EXPECT_EQ(*GangSize::ParseRange("2:8"), (GangSize{2, 8}));
  for (const char* bad : {"", "2", "2:", ":8", "2-8", "a:b", "2:8x", " 2:8", "2:+8", "2:99999999999"}) {
    EXPECT_ERROR(GangSize::ParseRange(bad), absl::StatusCode::kInvalidArgument,
                 absl::StrCat("'", bad, "' is not MIN:MAX"));
  }
}

TEST(GangSize, ValidateNamesTheBoundAtFault) {
  EXPECT_TRUE(GangSize{}.Validate(4).ok());
  EXPECT_TRUE((GangSize{2, 8}).Validate(4).ok());
  EXPECT_ERROR((GangSize{5, 0}).Validate(4), absl::StatusCode::kInvalidArgument,
               "min_member: 5 is more than the job's 4 tasks");
  EXPECT_ERROR((GangSize{-1, 0}).Validate(4), absl::StatusCode::kInvalidArgument, "min_member: must be >= 0");
  EXPECT_ERROR((GangSize{0, 8}).Validate(4), absl::StatusCode::kInvalidArgument, "elastic: range [0, 8] is empty");
  EXPECT_ERROR((GangSize{5, 8}).Validate(4), absl::StatusCode::kInvalidArgument,
               "elastic: 4 tasks is outside the range [5, 8]");
  EXPECT_ERROR((GangSize{1, 200000}).Validate(4), absl::StatusCode::kInvalidArgument,
               "elastic: max 200000 is more than the 100000 tasks a job may have");
  const GangSize::Fields trace{.min = "min_tasks", .range_min = "min_tasks", .range_max = "max_tasks"};
  EXPECT_ERROR((GangSize{3, 2}).Validate(2, trace), absl::StatusCode::kInvalidArgument,
               "min_tasks: range [3, 2] is empty");
  EXPECT_ERROR((GangSize{2, 2}).Validate(4, trace), absl::StatusCode::kInvalidArgument,
               "max_tasks: 4 tasks is outside the range [2, 2]");
  EXPECT_EQ(GangSize::FromBounds(4, 4, 4), GangSize{});
  EXPECT_EQ(GangSize::FromBounds(2, 2, 4), (GangSize{2, 2}));  // not rigid: Validate refuses it
}

TEST(JobFile, MinMemberMustRepeatTheElasticMinimum) {
  auto ok = ParseJobFile("jobs:\n- name: a\n  min_member: 2\n  elastic: {min: 2, max: 8}\n  roles: [{replicas: 4}]\n",
                         "j.yaml");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)[0].size, (GangSize{2, 8}));
  auto bad = ParseJobFile("jobs:\n- name: a\n  min_member: 3\n  elastic: {min: 2, max: 8}\n  roles: [{replicas: 4}]\n",
                          "j.yaml");
  ASSERT_ERROR(bad, absl::StatusCode::kInvalidArgument,
               "j.yaml:2:3: jobs[0]: job 'a': min_member: 3 must equal the elastic minimum 2");
}

}  // namespace
}  // namespace ringmaster::scheduler
