// The trace replay driver: exact JCTs where they can be computed by hand,
// conservation of GPU-seconds, determinism of the outputs, and errors that
// point at the trace line.
#include "simulator/replay.h"

#include <random>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simulator/native_trace.h"
#include "simulator/replay_report.h"
#include "topology/uniform_cluster.h"

namespace ringmaster::simulator {
namespace {

using ::testing::HasSubstr;

topology::Cluster Uniform(int nodes, int gpus, int per_rack, int racks_per_spine = 0) {
  topology::UniformClusterSpec spec;
  spec.nodes = nodes;
  spec.gpus_per_node = gpus;
  spec.nodes_per_rack = per_rack;
  spec.racks_per_spine = racks_per_spine;
  return topology::MakeUniformCluster(spec).value();
}

std::vector<TraceJob> Native(std::string_view csv) { return NativeTraceReader::Parse(csv, "t.csv").value(); }

// A seeded random workload: gangs of 1-16 GPUs arriving over an hour.
std::vector<TraceJob> RandomTrace(uint64_t seed, int n) {
  std::mt19937_64 rng(seed);
  std::vector<TraceJob> jobs;
  int64_t t = 0;
  for (int i = 0; i < n; ++i) {
    TraceJob j;
    j.id = "r" + std::to_string(i);
    j.line = i + 2;
    t += static_cast<int64_t>(rng() % 60);
    j.submit_s = static_cast<double>(t);
    j.duration_s = static_cast<double>(30 + rng() % 3000);
    const int shapes[][2] = {{1, 1}, {1, 2}, {1, 4}, {1, 8}, {2, 8}, {2, 4}};
    const auto& s = shapes[rng() % 6];
    j.tasks = j.min_tasks = j.max_tasks = s[0];
    j.gpus_per_task = s[1];
    j.queue = rng() % 3 == 0 ? "b" : "a";
    jobs.push_back(j);
  }
  return jobs;
}

ReplayResult RunReplay(topology::Cluster c, const std::vector<TraceJob>& trace, ReplayOptions o = {}) {
  auto r = Replay(std::move(c), scheduler::DefaultPolicy(), trace, "t.csv", o);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *std::move(r) : ReplayResult{};
}

TEST(Replay, OnAnAmpleClusterEveryJctIsItsDurationAndNobodyWaits) {
  // 64 nodes x 8 GPUs in one rack: the random load (at most a few hundred
  // GPUs at once) always fits, and a two-node gang stays inside the rack.
  const std::vector<TraceJob> trace = RandomTrace(7, 200);
  const ReplayResult r = RunReplay(Uniform(64, 8, 64), trace);
  ASSERT_EQ(r.jobs.size(), trace.size());
  for (size_t i = 0; i < trace.size(); ++i) {
    const JobOutcome& j = r.jobs[i];
    ASSERT_TRUE(j.completed) << j.id;
    EXPECT_EQ(j.start_ms, j.submit_ms) << j.id;
    EXPECT_EQ(j.end_ms - j.submit_ms, static_cast<int64_t>(trace[i].duration_s * 1000)) << j.id;
  }
  const ReplayStats s = StatsOf(r);
  EXPECT_EQ(s.avg_queue_delay_s, 0);
  EXPECT_EQ(s.p99_queue_delay_s, 0);
}

TEST(Replay, FifoGangJctsByHand) {
  // 2 nodes x 4 GPUs, one rack. a holds all 8 GPUs from 0 to 100. b and c
  // (4 GPUs each) wait and start at 100: c ends 130, b 150. d (2 GPUs, same
  // instant as c but later in the file) waits for c: 130 -> 140.
  //   JCT a = 100, b = 150 - 10 = 140, c = 130 - 20 = 110, d = 140 - 20 = 120.
  const auto trace = Native(
      "job_id,submit_time_s,duration_s,tasks,gpus_per_task\n"
      "a,0,100,2,4\n"
      "b,10,50,1,4\n"
      "c,20,30,1,4\n"
      "d,20,10,1,2\n");
  const ReplayResult r = RunReplay(Uniform(2, 4, 2), trace);
  ASSERT_EQ(r.jobs.size(), 4u);
  const int64_t want_jct_ms[] = {100'000, 140'000, 110'000, 120'000};
  const int64_t want_start_ms[] = {0, 100'000, 100'000, 130'000};
  for (int i = 0; i < 4; ++i) {
    EXPECT_EQ(r.jobs[i].end_ms - r.jobs[i].submit_ms, want_jct_ms[i]) << r.jobs[i].id;
    EXPECT_EQ(r.jobs[i].start_ms, want_start_ms[i]) << r.jobs[i].id;
  }
  EXPECT_EQ(r.makespan_ms, 150'000);
  // 8 GPUs x 100 s + 4 x 50 + 4 x 30 + 2 x 10 = 1140 GPU-s over 8 x 150.
  EXPECT_DOUBLE_EQ(StatsOf(r).gpu_alloc_ratio, 1140.0 / 1200.0);
}

TEST(Replay, GpuSecondsAreConserved) {
  // Contended (8 nodes x 8 GPUs in one rack): what the jobs
  // held equals what the cluster had allocated, and with no slowdown every
  // job held its GPUs exactly for its duration.
  const std::vector<TraceJob> trace = RandomTrace(11, 300);
  const ReplayResult r = RunReplay(Uniform(8, 8, 8), trace);
  double held = 0;
  for (size_t i = 0; i < r.jobs.size(); ++i) {
    ASSERT_TRUE(r.jobs[i].completed) << r.jobs[i].id;
    EXPECT_DOUBLE_EQ(r.jobs[i].gpu_seconds, trace[i].duration_s * trace[i].gpus()) << r.jobs[i].id;
    held += r.jobs[i].gpu_seconds;
  }
  EXPECT_NEAR(held, r.allocated_gpu_seconds, 1e-6 * held);
  EXPECT_GT(StatsOf(r).avg_queue_delay_s, 0);  // it is contended
}

TEST(Replay, ARingAcrossSpinesRunsSlower) {
  // 4 nodes x 8 GPUs, racks of 1 node under one spine each: a 4-node gang
  // crosses spines (200 Gbit/s) against the rack's 400, slowdown 1, so with
  // comm_fraction 0.5 it runs 1.5x its duration.
  const auto trace = Native("job_id,submit_time_s,duration_s,tasks,gpus_per_task,comm_fraction\nx,0,100,4,8,0.5\n");
  const ReplayResult r = RunReplay(Uniform(4, 8, 1, 1), trace);
  ASSERT_TRUE(r.jobs[0].completed);
  EXPECT_EQ(r.jobs[0].end_ms, 150'000);
  EXPECT_EQ(r.jobs[0].tier_spanned, 3);  // the whole cluster, above both tiers
  EXPECT_EQ(StatsOf(r).cross_tier_jobs, 1);
}

TEST(Replay, SameInputsGiveByteIdenticalOutputs) {
  const std::vector<TraceJob> trace = RandomTrace(3, 300);
  ReplayOptions o;
  o.check = true;
  const ReplayResult a = RunReplay(Uniform(8, 8, 2, 2), trace, o);
  const ReplayResult b = RunReplay(Uniform(8, 8, 2, 2), trace, o);
  EXPECT_FALSE(a.violation.has_value());
  const RunInfo info{"t.csv", "native", "default", 42, 0};
  EXPECT_EQ(SummaryJson(a, info), SummaryJson(b, info));
  EXPECT_EQ(JobsCsv(a), JobsCsv(b));
  EXPECT_EQ(TimelineCsv(a), TimelineCsv(b));
  EXPECT_GT(JobsCsv(a).size(), 300u * 20);
  EXPECT_GT(TimelineCsv(a).size(), 100u);
  EXPECT_THAT(SummaryJson(a, info), HasSubstr("\"jobs_completed\": 300,"));
}

TEST(Replay, AJobTooBigForTheClusterNeverRunsAndIsNotLost) {
  const auto trace = Native("job_id,submit_time_s,duration_s,tasks,gpus_per_task\nbig,0,10,4,8\nsmall,5,10,1,1\n");
  const ReplayResult r = RunReplay(Uniform(2, 8, 2), trace);
  ASSERT_EQ(r.jobs.size(), 2u);
  EXPECT_FALSE(r.jobs[0].completed);
  EXPECT_EQ(r.jobs[0].start_ms, -1);
  EXPECT_TRUE(r.jobs[1].completed);
  EXPECT_THAT(JobsCsv(r), HasSubstr("\nbig,default,0.000,,,,,32,"));
}

TEST(Replay, AnUnknownQueueNamesTheTraceLine) {
  scheduler::Policy policy = scheduler::DefaultPolicy();
  queue::QueueSpec q;
  q.name = "research";
  policy.queues.push_back(q);
  const auto trace = Native("job_id,submit_time_s,duration_s,queue\na,0,10,research\nb,1,10,product\n");
  auto r = Replay(Uniform(2, 8, 2), policy, trace, "t.csv", {});
  ASSERT_FALSE(r.ok());
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("t.csv:3: job 'b': queue: unknown queue 'product'"));
}

TEST(Replay, QueuesComeFromTheTraceWhenThePolicyHasNone) {
  const std::vector<TraceJob> trace = RandomTrace(5, 50);
  const ReplayResult r = RunReplay(Uniform(16, 8, 16), trace);
  const std::string json = SummaryJson(r, RunInfo{});
  EXPECT_THAT(json, HasSubstr("\"a\": {\"jobs\": "));
  EXPECT_THAT(json, HasSubstr("\"b\": {\"jobs\": "));
  EXPECT_THAT(json, HasSubstr("\"jain_fairness\": "));
}

}  // namespace
}  // namespace ringmaster::simulator
