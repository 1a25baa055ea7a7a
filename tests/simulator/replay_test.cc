// The trace replay driver: exact JCTs where they can be computed by hand,
// conservation of GPU-seconds, determinism of the outputs, and errors that
// point at the trace line.
#include "simulator/replay.h"

#include <random>
#include <string>

#include "absl/strings/str_cat.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugins/registry.h"
#include "simulator/native_trace.h"
#include "simulator/replay_plot.h"
#include "simulator/replay_report.h"
#include "topology/uniform_cluster.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::simulator {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

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
    j.spec.name = "r" + std::to_string(i);
    j.line = i + 2;
    t += static_cast<int64_t>(rng() % 60);
    j.submit_s = static_cast<double>(t);
    j.duration_s = static_cast<double>(30 + rng() % 3000);
    const int shapes[][2] = {{1, 1}, {1, 2}, {1, 4}, {1, 8}, {2, 8}, {2, 4}};
    const auto& s = shapes[rng() % 6];
    j.worker().replicas = s[0];  // a rigid gang (size {})
    j.worker().gpu.count = s[1];
    j.spec.queue = rng() % 3 == 0 ? "b" : "a";
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
  // job never stopped held its GPUs exactly for its duration; one stopped
  // (the default policy preempts and reclaims) held them longer, since it
  // redoes the work it lost.
  const std::vector<TraceJob> trace = RandomTrace(11, 300);
  const ReplayResult r = RunReplay(Uniform(8, 8, 8), trace);
  double held = 0;
  int stopped = 0;
  for (size_t i = 0; i < r.jobs.size(); ++i) {
    ASSERT_TRUE(r.jobs[i].completed) << r.jobs[i].id;
    const double work = trace[i].duration_s * trace[i].gpus();
    if (r.jobs[i].evictions == 0) {
      EXPECT_DOUBLE_EQ(r.jobs[i].gpu_seconds, work) << r.jobs[i].id;
    } else {
      ++stopped;
      EXPECT_GE(r.jobs[i].gpu_seconds, work) << r.jobs[i].id;
    }
    held += r.jobs[i].gpu_seconds;
  }
  EXPECT_LT(stopped, static_cast<int>(r.jobs.size()) / 2) << "most jobs ran once";
  EXPECT_NEAR(held, r.allocated_gpu_seconds, 1e-6 * held);
  EXPECT_GT(StatsOf(r).avg_queue_delay_s, 0);  // it is contended
  // stops.csv has one row per eviction, each stop's preemptions counted in
  // jobs.csv, and what a job held at a stop is at most what it held in all.
  std::vector<int> rows(r.jobs.size()), for_someone(r.jobs.size());
  for (const StopRecord& s : r.stops) {
    ++rows[s.job];
    for_someone[s.job] += s.preemptor.has_value() ? 1 : 0;
    EXPECT_LE(s.gpu_seconds, r.jobs[s.job].gpu_seconds + 1e-9) << r.jobs[s.job].id;
  }
  int64_t evictions = 0;
  for (size_t i = 0; i < r.jobs.size(); ++i) {
    EXPECT_EQ(rows[i], r.jobs[i].evictions) << r.jobs[i].id;
    EXPECT_EQ(for_someone[i], r.jobs[i].preemptions) << r.jobs[i].id;
    evictions += r.jobs[i].evictions;
  }
  EXPECT_GT(evictions, 0);  // the check has something to count
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
  ASSERT_ERROR(r, absl::StatusCode::kInvalidArgument, "t.csv:3: job 'b': queue: unknown queue 'product'");
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

namespace ringmaster::simulator {
namespace {

scheduler::Policy ElasticPolicy() {
  std::vector<queue::ConfigError> errors;
  auto p = scheduler::ParsePolicy(
      "actions: \"enqueue, allocate, backfill, preempt, elastic\"\n"
      "tiers:\n- plugins:\n  - name: priority\n  - name: gang\n- plugins:\n  - name: predicates\n"
      "configurations:\n- name: elastic\n  arguments: {growIdle: 10, cooldown: 10}\n"
      "- name: preempt\n  arguments: {cooldown: 5}\n",
      "elastic.yaml", plugins::BuiltinRegistry(), &errors);
  EXPECT_TRUE(p.ok()) << p.status();
  return *std::move(p);
}

scheduler::Policy PolicyOf(const std::string& yaml) {
  std::vector<queue::ConfigError> errors;
  auto p = scheduler::ParsePolicy(yaml, "p.yaml", plugins::BuiltinRegistry(), &errors);
  EXPECT_TRUE(p.ok()) << p.status();
  return *std::move(p);
}

// Priority preemption alone (priority, gang, predicates) with a grace period
// and a cooldown, in seconds.
scheduler::Policy PreemptPolicy(int grace_s, int cooldown_s) {
  return PolicyOf(absl::StrCat(
      "actions: \"enqueue, allocate, preempt\"\n"
      "configurations:\n- name: preempt\n  arguments: {gracePeriod: ", grace_s, ", cooldown: ", cooldown_s, "}\n"
      "tiers:\n- plugins:\n  - name: priority\n  - name: gang\n- plugins:\n  - name: predicates\n"));
}

TEST(Replay, APolicyThatDoesNotReadTheClockRunsNoWakeUpCyclesAndDecidesTheSame) {
  // FIFO gang scheduling reads no clock (Engine::NextWakeup: never), so the
  // replay runs cycles only after events. The same order with las in front
  // (a threshold no job reaches: every job at level 0, the same ties) reads
  // the clock, so the replay adds a wake-up cycle every 60 s while jobs
  // wait. Every job starts and ends at the same time in both.
  const auto trace = RandomTrace(7, 150);
  const std::string tail = "- plugins:\n  - name: predicates\n";
  const auto fifo = Replay(Uniform(4, 8, 2), PolicyOf("actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: gang\n" + tail),
                           trace, "t.csv", ReplayOptions{});
  const auto timed = Replay(Uniform(4, 8, 2),
                            PolicyOf("actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: las\n"
                                     "    arguments: {thresholds: \"1e11\"}\n  - name: gang\n" + tail),
                            trace, "t.csv", ReplayOptions{});
  ASSERT_TRUE(fifo.ok() && timed.ok());
  ASSERT_EQ(fifo->jobs.size(), timed->jobs.size());
  int64_t waited = 0;
  for (size_t i = 0; i < fifo->jobs.size(); ++i) {
    EXPECT_EQ(fifo->jobs[i].start_ms, timed->jobs[i].start_ms) << fifo->jobs[i].id;
    EXPECT_EQ(fifo->jobs[i].end_ms, timed->jobs[i].end_ms) << fifo->jobs[i].id;
    waited += fifo->jobs[i].start_ms - fifo->jobs[i].submit_ms;
  }
  EXPECT_GT(waited, 0) << "the cluster must be contended for wake-ups to matter";
  EXPECT_LT(fifo->cycles, timed->cycles) << "no wake-up cycles without a clock";
  EXPECT_EQ(fifo->timeline.size(), timed->timeline.size());
}

TEST(Replay, AnElasticJobThatGrowsFinishesWhenItsRemainingWorkSays) {
  // 1 node x 8 GPUs. e wants 2 tasks (elastic 1..4), 100 s at 2 tasks:
  // 200 task-s of work. It starts at 0 on 2 GPUs; 6 GPUs stay idle, so at
  // t = 10 (growIdle and cooldown 10 s) it grows to 4: done 2 x 10 = 20,
  // then a 5 s re-form pause, then 180 / 4 = 45 s: it ends at 10 + 5 + 45 = 60.
  const auto trace = Native("job_id,submit_time_s,duration_s,tasks,min_tasks,max_tasks\ne,0,100,2,1,4\n");
  ReplayOptions o;
  o.wake_period_s = 1;
  o.check = true;
  auto r = Replay(Uniform(1, 8, 1), ElasticPolicy(), trace, "t.csv", o);
  ASSERT_TRUE(r.ok()) << r.status();
  const JobOutcome& e = r->jobs[0];
  EXPECT_FALSE(r->violation.has_value());
  ASSERT_TRUE(e.completed);
  EXPECT_EQ(e.grows, 1);
  EXPECT_EQ(e.end_ms, 60'000);
  // GPU-seconds: 2 GPUs x 10 s + 4 GPUs x 50 s.
  EXPECT_DOUBLE_EQ(e.gpu_seconds, 2 * 10 + 4 * 50);
  EXPECT_NEAR(r->allocated_gpu_seconds, e.gpu_seconds, 1e-9);
}

TEST(Replay, AnElasticJobThatShrinksAndGrowsFinishesWhenItsRemainingWorkSays) {
  // 1 node x 4 GPUs. e (elastic 1..4, wants 2, 100 s at 2 tasks = 200 task-s)
  // starts on 2 GPUs and grows to 4 at t = 10. h (priority 10, 2 GPUs, 20 s)
  // arrives at 30: preempt shrinks e to 2 and h runs 30 -> 50. The GPUs are
  // idle from 50, so e grows back at 60 (growIdle 10).
  //   0-10   2 tasks        20   (20)
  //   10-15  re-form pause   0
  //   15-30  4 tasks        60   (80)
  //   30-35  re-form pause   0
  //   35-60  2 tasks        50   (130)
  //   60-65  re-form pause   0
  //   65-    4 tasks: 70 / 4 = 17.5 s, so e ends at 82.5.
  const auto trace = Native(
      "job_id,submit_time_s,duration_s,tasks,min_tasks,max_tasks,priority\n"
      "e,0,100,2,1,4,0\n"
      "h,30,20,2,2,2,10\n");
  ReplayOptions o;
  o.wake_period_s = 1;
  o.check = true;
  auto r = Replay(Uniform(1, 4, 1), ElasticPolicy(), trace, "t.csv", o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->violation.has_value());
  const JobOutcome& e = r->jobs[0];
  const JobOutcome& h = r->jobs[1];
  ASSERT_TRUE(e.completed && h.completed);
  EXPECT_EQ(h.start_ms, 30'000);
  EXPECT_EQ(h.end_ms, 50'000);
  EXPECT_EQ(e.grows, 2);
  EXPECT_EQ(e.shrinks, 1);
  EXPECT_EQ(e.evictions, 0);  // a shrink is not an eviction
  EXPECT_EQ(e.end_ms, 82'500);
}

// The same shrink-and-grow scenario with other re-form pauses P, given to
// the replay (simulate --reform-pause) or per job (the trace's
// reform_pause_s column, which wins): e does 20 task-s by t = 10, pauses P,
// runs 4 tasks to 30 (4 (20 - P)), pauses P, runs 2 tasks to 60
// (2 (30 - P)), pauses P and finishes the 200 - 20 - 4 (20 - P) - 2 (30 - P)
// = 40 + 6 P task-s left on 4 tasks: it ends at 60 + P + (40 + 6 P) / 4 =
// 70 + 2.5 P.
TEST(Replay, TheReformPauseIsConfigurableAndEachPauseCostsExactlyItsLength) {
  for (const double pause : {0.0, 2.0, 8.0, 12.5}) {
    for (const bool in_trace : {false, true}) {
      const std::string column = in_trace ? ",reform_pause_s" : "";
      const std::string value = in_trace ? absl::StrCat(",", pause) : "";
      const auto trace = Native(absl::StrCat("job_id,submit_time_s,duration_s,tasks,min_tasks,max_tasks,priority",
                                             column, "\ne,0,100,2,1,4,0", value, "\nh,30,20,2,2,2,10", value,
                                             "\n"));
      ReplayOptions o;
      o.wake_period_s = 1;
      o.check = true;
      o.reform_pause_s = in_trace ? 5 : pause;  // the trace's column wins over the replay's
      auto r = Replay(Uniform(1, 4, 1), ElasticPolicy(), trace, "t.csv", o);
      ASSERT_TRUE(r.ok()) << r.status();
      EXPECT_FALSE(r->violation.has_value());
      const JobOutcome& e = r->jobs[0];
      ASSERT_TRUE(e.completed) << pause;
      EXPECT_EQ(e.shrinks, 1) << pause;
      EXPECT_EQ(e.grows, 2) << pause;
      EXPECT_EQ(e.end_ms, std::llround((70 + 2.5 * pause) * 1000)) << "pause " << pause << (in_trace ? " (trace)" : "");
      EXPECT_EQ(r->jobs[1].end_ms, 50'000);
    }
  }
}

TEST(Replay, ABadReformPauseInTheTraceNamesItsLine) {
  auto r = NativeTraceReader::Parse("job_id,submit_time_s,duration_s,reform_pause_s\na,0,10,1\nb,0,10,-2\n", "t.csv");
  ASSERT_ERROR(r, absl::StatusCode::kInvalidArgument, "t.csv:3: reform_pause_s: must be in [0, 1e9] seconds");
  EXPECT_THAT(r.status().message(), HasSubstr("t.csv:3: reform_pause_s"));
  auto ok = NativeTraceReader::Parse("job_id,submit_time_s,duration_s,reform_pause_s\na,0,10,1.5\nb,0,10,\n", "t.csv");
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ((*ok)[0].reform_pause_s, 1.5);
  EXPECT_LT((*ok)[1].reform_pause_s, 0);  // empty: the replay's default
}

}  // namespace
}  // namespace ringmaster::simulator

namespace ringmaster::simulator {
namespace {

TEST(ReplayPlot, QueueDelayBySizeAndTheScriptReadTheOutputs) {
  // FifoGangJctsByHand's trace: a (8 GPUs) waits 0, b (4) 90 s, c (4) 80 s,
  // d (2) 110 s.
  const auto trace = Native(
      "job_id,submit_time_s,duration_s,tasks,gpus_per_task\n"
      "a,0,100,2,4\nb,10,50,1,4\nc,20,30,1,4\nd,20,10,1,2\n");
  auto r = Replay(Uniform(2, 4, 2), scheduler::DefaultPolicy(), trace, "t.csv", {});
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(QueueDelayBySizeCsv(*r),
            "gpus,jobs,avg_queue_delay_s,p99_queue_delay_s\n"
            "2,1,110.000,110.000\n"
            "4,2,85.000,90.000\n"
            "8,1,0.000,0.000\n");
  const std::string gp = GnuplotScript(*r, "it's");
  EXPECT_THAT(gp, HasSubstr("set output 'alloc.png'"));
  EXPECT_THAT(gp, HasSubstr("'timeline.csv'"));
  EXPECT_THAT(gp, HasSubstr("'jobs.csv'"));
  EXPECT_THAT(gp, HasSubstr("'queue_delay_by_size.csv'"));
  EXPECT_THAT(gp, HasSubstr("'it''s: GPU allocation and pending jobs'"));
  // Ranges from the data, never gnuplot's [-1:1] for an all-zero series:
  // 8 GPUs; the longest wait is d's 110 s.
  EXPECT_THAT(gp, HasSubstr("set yrange [0:8]\n"));
  EXPECT_THAT(gp, HasSubstr("set y2range [0:"));
  EXPECT_THAT(gp, HasSubstr("set yrange [0:121.000]\n"));
  EXPECT_THAT(gp, Not(HasSubstr("no job waited")));
}

}  // namespace
}  // namespace ringmaster::simulator

namespace ringmaster::simulator {
namespace {

TEST(ReplayFailures, ARigidJobRestartsFromItsLastCheckpoint) {
  // 1 node x 8 GPUs. x (8 GPUs, 100 s, checkpoint every 30 s) runs from 0;
  // the node fails at 50 (x has done 50 s, its last checkpoint is at 30) and
  // comes back at 70. x restarts at 70, pays the 30 s restart cost, then
  // needs the 70 s it lost or had left: it ends at 70 + 30 + 70 = 170.
  const auto trace = Native("job_id,submit_time_s,duration_s,tasks,gpus_per_task,checkpoint_interval_s\nx,0,100,1,8,30\n");
  ReplayOptions o;
  o.failures = {{50, "node-0000", 20}};
  o.check = true;
  const ReplayResult r = RunReplay(Uniform(1, 8, 1), trace, o);
  ASSERT_TRUE(r.jobs[0].completed);
  EXPECT_EQ(r.jobs[0].evictions, 1);
  EXPECT_EQ(r.jobs[0].end_ms, 170'000);
  // stops.csv: the stop at 50, after 8 GPUs x 50 s, for nobody.
  ASSERT_EQ(r.stops.size(), 1u);
  EXPECT_EQ(r.stops[0].time_ms, 50'000);
  EXPECT_DOUBLE_EQ(r.stops[0].gpu_seconds, 400);
  EXPECT_FALSE(r.stops[0].preemptor.has_value());
  EXPECT_THAT(StopsCsv(r), HasSubstr("\n50.000,x,8,400.000,50.000,,,,,\""));
  EXPECT_EQ(r.node_failures, 1);
  // Held: 8 GPUs x (50 + 100) s.
  EXPECT_DOUBLE_EQ(r.jobs[0].gpu_seconds, 8 * 150);
  EXPECT_NEAR(r.allocated_gpu_seconds, 8 * 150, 1e-9);
}

TEST(ReplayStops, EachStopSaysAfterHowMuchServiceForWhomAndAfterWhatWait) {
  // 1 node x 4 GPUs; the preempt action's cooldown is 15 s, no grace, no
  // restart cost. lo (4 GPUs, 100 s) runs from 0. hi (priority 10, 4 GPUs,
  // 20 s) arrives at 10; lo may be its victim only from 15 (the cooldown),
  // so hi has waited 5 s when it stops lo, which had held 4 GPUs x 15 s = 60
  // GPU-s. hi runs 15 -> 35; lo (no checkpoint) runs its 100 s again from
  // 35 and ends at 135. mid (4 GPUs, 10 s, priority 0) arrives at 1 and
  // waits behind lo the whole time: nobody stops for it.
  const auto trace = Native(
      "job_id,submit_time_s,duration_s,tasks,gpus_per_task,priority\n"
      "lo,0,100,1,4,0\n"
      "mid,1,10,1,4,0\n"
      "hi,10,20,1,4,10\n");
  const scheduler::Policy policy = PreemptPolicy(0, 15);
  ReplayOptions o;
  o.restart_cost_s = 0;
  o.queues_from_trace = false;
  o.wake_period_s = 1;
  o.check = true;
  auto r = Replay(Uniform(1, 4, 1), policy, trace, "t.csv", o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->violation.has_value());
  EXPECT_EQ(r->jobs[2].start_ms, 15'000);
  EXPECT_EQ(r->jobs[0].end_ms, 135'000);
  ASSERT_EQ(r->stops.size(), 1u);
  const StopRecord& s = r->stops[0];
  EXPECT_EQ(s.time_ms, 15'000);
  EXPECT_EQ(s.job, 0u);
  EXPECT_DOUBLE_EQ(s.gpu_seconds, 60);
  EXPECT_EQ(s.since_start_ms, 15'000);
  ASSERT_TRUE(s.preemptor.has_value());
  EXPECT_EQ(*s.preemptor, 2u);
  EXPECT_DOUBLE_EQ(s.preemptor_gpu_seconds, 0);
  EXPECT_EQ(s.preemptor_waited_ms, 5'000);
  EXPECT_THAT(s.reason, HasSubstr("evicted for hi"));
  const std::string csv = StopsCsv(*r);
  EXPECT_THAT(csv, HasSubstr("time_s,job_id,gpus,gpu_seconds,since_start_s,preemptor,preemptor_gpus,"
                             "preemptor_gpu_seconds,preemptor_waited_s,reason\n"));
  EXPECT_THAT(csv, HasSubstr("\n15.000,lo,4,60.000,15.000,hi,4,0.000,5.000,\"evicted for hi"));
  // Quoted free text: a quote in the reason is doubled.
  ReplayResult q;
  q.jobs.push_back(JobOutcome{.id = "a", .gpus = 1});
  q.stops.push_back(StopRecord{.time_ms = 1'000, .job = 0, .reason = "lost \"n1\", sorry"});
  EXPECT_EQ(StopsCsv(q), absl::StrCat("time_s,job_id,gpus,gpu_seconds,since_start_s,preemptor,preemptor_gpus,",
                                      "preemptor_gpu_seconds,preemptor_waited_s,reason\n",
                                      "1.000,a,1,0.000,0.000,,,,,\"lost \"\"n1\"\", sorry\"\n"));
}

TEST(ReplayFailures, AnElasticJobAboveItsMinimumShrinksInstead) {
  // 2 nodes x 4 GPUs. e (2 tasks x 4 GPUs, elastic 1..2, 100 s: 200 task-s)
  // spans both nodes; node-0001 fails for good at 40 (80 done). e runs on
  // with 1 task after a 5 s re-form pause: 120 / 1 = 120 s, so it ends at 165.
  const auto trace = Native("job_id,submit_time_s,duration_s,tasks,gpus_per_task,min_tasks,max_tasks\ne,0,100,2,4,1,2\n");
  ReplayOptions o;
  o.failures = {{40, "node-0001", 0}};
  o.check = true;
  const ReplayResult r = RunReplay(Uniform(2, 4, 2), trace, o);
  ASSERT_TRUE(r.jobs[0].completed);
  EXPECT_EQ(r.jobs[0].shrinks, 1);
  EXPECT_EQ(r.jobs[0].evictions, 0);
  EXPECT_TRUE(r.stops.empty());  // a shrink is not a stop
  EXPECT_EQ(r.jobs[0].end_ms, 165'000);
}

TEST(ReplayFailures, DrawnFailuresAreDeterministicAndConserveGpuSeconds) {
  const std::vector<TraceJob> trace = RandomTrace(13, 200);
  ReplayOptions o;
  o.node_mtbf_s = 4 * 3600;
  o.node_mttr_s = 600;
  o.check = true;
  const ReplayResult a = RunReplay(Uniform(16, 8, 4, 2), trace, o);
  const ReplayResult b = RunReplay(Uniform(16, 8, 4, 2), trace, o);
  EXPECT_GT(a.node_failures, 0);
  EXPECT_FALSE(a.violation.has_value());
  EXPECT_EQ(JobsCsv(a), JobsCsv(b));
  EXPECT_EQ(TimelineCsv(a), TimelineCsv(b));
  double held = 0;
  int64_t completed = 0;
  for (const JobOutcome& j : a.jobs) {
    held += j.gpu_seconds;
    completed += j.completed;
  }
  EXPECT_EQ(completed, 200);
  EXPECT_NEAR(held, a.allocated_gpu_seconds, 1e-6 * held);
  EXPECT_EQ(StopsCsv(a), StopsCsv(b));
  int64_t evictions = 0;
  for (const JobOutcome& j : a.jobs) evictions += j.evictions;
  EXPECT_EQ(static_cast<int64_t>(a.stops.size()), evictions);  // lost nodes' stops too
  o.seed = 14;
  EXPECT_NE(JobsCsv(RunReplay(Uniform(16, 8, 4, 2), trace, o)), JobsCsv(a));
}

}  // namespace
}  // namespace ringmaster::simulator

namespace ringmaster::simulator {
namespace {

// A jobs file's job is its spec whole (roles, selector, tolerations,
// checkpoint interval), the engine's job as the file gives it; the replay
// also reads the checkpoint interval for its progress model.
TEST(ReplayJobFile, JobsKeepTheirSpecWhole) {
  auto jobs = scheduler::ParseTimedJobFile(R"(jobs:
- name: train
  queue: research
  priority: 3
  elastic: {min: 2, max: 8}
  walltime: 3600
  checkpoint_interval: 600
  submit: 5
  duration: 100
  node_selector: {pool: training}
  tolerations: [{key: dedicated, value: ml}]
  roles:
  - {name: launcher, replicas: 1, cpu: 2}
  - {name: worker, replicas: 4, gpus: 2}
)",
                                           "jobs.yaml");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  const std::vector<TraceJob> trace = TraceOfJobFile(*jobs);
  ASSERT_EQ(trace.size(), 1u);
  const TraceJob& t = trace[0];
  EXPECT_EQ(t.id(), "train");
  EXPECT_EQ(t.spec.queue, "research");
  EXPECT_EQ(t.spec.priority, 3);
  ASSERT_EQ(t.spec.roles.size(), 2u);
  EXPECT_EQ(t.spec.roles[1].name, "worker");
  EXPECT_EQ(t.tasks(), 5);
  EXPECT_EQ(t.gpus(), 8);  // the workers' 4 x 2; the launcher has none
  EXPECT_EQ(t.spec.size, (scheduler::GangSize{2, 8}));
  EXPECT_EQ(t.spec.walltime_ms, 3'600'000);
  EXPECT_EQ(t.spec.checkpoint_interval_ms, 600'000);
  EXPECT_EQ(t.checkpoint_interval_s, 600);
  EXPECT_EQ(t.spec.node_selector.at("pool"), "training");
  ASSERT_EQ(t.spec.tolerations.size(), 1u);
  EXPECT_EQ(t.submit_s, 5);
  EXPECT_EQ(t.duration_s, 100);
  EXPECT_FALSE(t.endless);
}

// `ringmaster schedule`'s use of the driver: a jobs file, fixed durations,
// evicted members leaving release_after_s after the decision.
TEST(ReplayJobFile, FixedDurationsAndDelayedReleases) {
  // 2 nodes x 4 GPUs. lo (4 GPUs, 100 s) runs from 0 on one, `endless` (no
  // duration, priority 10, 4 GPUs) on the other, and never ends. hi
  // (priority 10, 4 GPUs, 20 s) arrives at 10 and preempts lo; lo's process
  // leaves 2 s later, so hi binds at 12 and ends at 32; lo (no checkpoint)
  // runs its 100 s again from 32 and ends at 132.
  auto jobs = scheduler::ParseTimedJobFile(R"(jobs:
- name: lo
  duration: 100
  roles: [{replicas: 1, gpus: 4}]
- name: hi
  priority: 10
  submit: 10
  duration: 20
  roles: [{replicas: 1, gpus: 4}]
- name: endless
  priority: 10
  roles: [{replicas: 1, gpus: 4}]
)",
                                           "jobs.yaml");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  const std::vector<TraceJob> trace = TraceOfJobFile(*jobs);
  ASSERT_EQ(trace.size(), 3u);  // submit order: lo, endless, hi
  EXPECT_EQ(trace[1].id(), "endless");
  EXPECT_TRUE(trace[1].endless);
  const scheduler::Policy policy = PreemptPolicy(30, 0);
  ReplayOptions o;
  o.release_after_s = 2;
  o.speed_scales_with_size = false;
  o.restart_cost_s = 0;
  o.queues_from_trace = false;
  o.check = true;
  int binds = 0;
  std::vector<std::string> finished;
  bool ended = false;
  o.on_cycle = [&](const scheduler::Engine&, const scheduler::Decisions& d, int64_t) {
    binds += static_cast<int>(d.binds.size());
  };
  o.on_finish = [&](const scheduler::Engine& e, scheduler::JobId id, int64_t now) {
    finished.push_back(e.state().job(id).name() + "@" + std::to_string(now));
  };
  o.on_end = [&](const scheduler::Engine& e, int64_t) { ended = e.state().num_jobs() == 3; };
  auto r = Replay(Uniform(2, 4, 2), policy, trace, "jobs.yaml", o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_FALSE(r->violation.has_value());
  const JobOutcome& lo = r->jobs[0];
  const JobOutcome& hi = r->jobs[2];
  EXPECT_EQ(hi.start_ms, 12'000);
  EXPECT_EQ(hi.end_ms, 32'000);
  EXPECT_EQ(lo.preemptions, 1);
  EXPECT_EQ(lo.end_ms, 132'000);
  EXPECT_FALSE(r->jobs[1].completed);
  EXPECT_EQ(finished, (std::vector<std::string>{"hi@32000", "lo@132000"}));
  EXPECT_EQ(binds, 4);  // lo twice, hi, endless
  EXPECT_TRUE(ended);
}

}  // namespace
}  // namespace ringmaster::simulator
