// The policies of the comparison (examples/policies/, bench/policy_sweep.sh)
// replayed through the engine: sjf's order by hand, and the literature's
// ordering on a slice of the bundled Philly trace (LAS below FIFO in average
// JCT on a contended cluster).
#include <gtest/gtest.h>

#include <string>

#include "plugins/registry.h"
#include "simulator/native_trace.h"
#include "simulator/replay.h"
#include "simulator/replay_report.h"
#include "simulator/trace.h"
#include "topology/uniform_cluster.h"
#include "tests/support/source_dir.h"

namespace ringmaster::simulator {
namespace {

topology::Cluster Nodes(int nodes, int gpus, int per_rack = 0) {
  topology::UniformClusterSpec spec;
  spec.nodes = nodes;
  spec.gpus_per_node = gpus;
  spec.nodes_per_rack = per_rack > 0 ? per_rack : nodes;
  return topology::MakeUniformCluster(spec).value();
}

scheduler::Policy Example(const std::string& name) {
  auto p = scheduler::LoadPolicyOrDefault(
      ringmaster::testing::SourceDir() + "/examples/policies/" + name + ".yaml", plugins::BuiltinRegistry());
  EXPECT_TRUE(p.ok()) << p.status();
  return p.ok() ? *std::move(p) : scheduler::DefaultPolicy();
}

ReplayResult ReplayWith(const std::string& policy, topology::Cluster c, const std::vector<TraceJob>& trace,
                 bool check = true) {
  ReplayOptions o;
  o.check = check;
  auto r = Replay(std::move(c), Example(policy), trace, "t.csv", o);
  EXPECT_TRUE(r.ok()) << r.status();
  if (!r.ok()) return {};
  EXPECT_FALSE(r->violation.has_value()) << r->violation->message;
  return *std::move(r);
}

TEST(PolicyOrdering, SjfStartsTheShortestWalltimeFirst) {
  // One node of 8 GPUs; every job takes it all. a runs 0-100. b (50 s) and
  // c (10 s) wait; the walltime oracle gives each its duration.
  //   fifo-gang: b 100-150, c 150-160: JCTs a 100, b 149, c 158
  //   sjf:       c 100-110, b 110-160: JCTs a 100, b 159, c 108
  auto trace = NativeTraceReader::Parse(
                   "job_id,submit_time_s,duration_s,gpus_per_task\n"
                   "a,0,100,8\n"
                   "b,1,50,8\n"
                   "c,2,10,8\n",
                   "t.csv")
                   .value();
  trace = SliceTrace(std::move(trace), {.walltime_oracle = true});
  auto jct = [](const ReplayResult& r, size_t i) { return r.jobs[i].end_ms - r.jobs[i].submit_ms; };
  const ReplayResult fifo = ReplayWith("fifo-gang", Nodes(1, 8), trace);
  ASSERT_EQ(fifo.jobs.size(), 3u);
  EXPECT_EQ(jct(fifo, 0), 100'000);
  EXPECT_EQ(jct(fifo, 1), 149'000);
  EXPECT_EQ(jct(fifo, 2), 158'000);
  const ReplayResult sjf = ReplayWith("sjf", Nodes(1, 8), trace);
  ASSERT_EQ(sjf.jobs.size(), 3u);
  EXPECT_EQ(jct(sjf, 0), 100'000);
  EXPECT_EQ(jct(sjf, 1), 159'000);
  EXPECT_EQ(jct(sjf, 2), 108'000);
}

TEST(PolicyOrdering, LasBeatsFifoOnPhillysAverageJct) {
  // 300 Philly jobs from day 40 of the trace, all in one queue, on 2 nodes x
  // 8 GPUs (contended: most jobs wait), jobs checkpointing every 10 min.
  // Measured: FIFO gang 39,016 s, LAS 20,230 s average JCT (-48 %); the
  // literature (Tiresias, NSDI'19) reports LAS well below FIFO on Philly.
  auto all = ReadTrace(ringmaster::testing::SourceDir() + "/data/traces/philly/philly.csv", TraceFormat::kPhilly);
  ASSERT_TRUE(all.ok()) << all.status();
  const std::vector<TraceJob> trace = SliceTrace(
      *std::move(all), {.from_s = 40 * 86400.0, .max_jobs = 300, .one_queue = "default", .checkpoint_interval_s = 600});
  ASSERT_EQ(trace.size(), 300u);
  const ReplayStats fifo = StatsOf(ReplayWith("fifo-gang", Nodes(2, 8), trace, false));
  const ReplayStats las = StatsOf(ReplayWith("las", Nodes(2, 8), trace, false));
  EXPECT_EQ(las.jobs_completed, fifo.jobs_completed);
  EXPECT_GT(fifo.avg_queue_delay_s, 3600) << "the slice must contend for the cluster";
  EXPECT_LT(las.avg_jct_s, 0.8 * fifo.avg_jct_s) << "LAS " << las.avg_jct_s << " s, FIFO " << fifo.avg_jct_s << " s";
  EXPECT_GT(las.preemptions, 0) << "LAS's preemption took part";
  EXPECT_EQ(fifo.preemptions, 0);
}

TEST(PolicyOrdering, TheDefaultPolicyBeatsFifoWithoutPayingTheTail) {
  // The default policy (examples/policies/ringmaster.yaml, the built-in one)
  // without the walltime oracle: 1,000 Philly jobs from day 50 on 8 nodes x 8
  // GPUs (4 per rack), one queue, checkpoints every 10 min. Measured with
  // `simulate` (the same slice): FIFO gang 83,515 s average / 620,096 s p99,
  // LAS 25,473 / 553,905 with 358 preemptions, the default 50,751 / 511,525
  // with 99. On this small, heavily contended slice LAS's average is better
  // (docs/POLICY.md: the gap, and where the default is below LAS); the
  // default halves FIFO's average at a lower p99 than FIFO's, with less than
  // half of LAS's preemptions.
  auto all = ReadTrace(ringmaster::testing::SourceDir() + "/data/traces/philly/philly.csv", TraceFormat::kPhilly);
  ASSERT_TRUE(all.ok()) << all.status();
  const std::vector<TraceJob> trace = SliceTrace(
      *std::move(all), {.from_s = 50 * 86400.0, .max_jobs = 1000, .one_queue = "default", .checkpoint_interval_s = 600});
  ASSERT_EQ(trace.size(), 1000u);
  const ReplayStats fifo = StatsOf(ReplayWith("fifo-gang", Nodes(8, 8, 4), trace, false));
  const ReplayStats las = StatsOf(ReplayWith("las", Nodes(8, 8, 4), trace, false));
  const ReplayStats def = StatsOf(ReplayWith("ringmaster", Nodes(8, 8, 4), trace, false));
  ASSERT_EQ(def.jobs_completed, fifo.jobs_completed);
  EXPECT_GT(fifo.avg_queue_delay_s, 3600) << "the slice must contend for the cluster";
  EXPECT_LT(def.avg_jct_s, 0.7 * fifo.avg_jct_s) << "default " << def.avg_jct_s << " s, FIFO " << fifo.avg_jct_s;
  EXPECT_LE(def.p99_jct_s, fifo.p99_jct_s) << "no tail paid for the average";
  EXPECT_GT(def.preemptions, 0) << "its preemption took part";
  EXPECT_LE(2 * def.preemptions, las.preemptions) << "default " << def.preemptions << ", LAS " << las.preemptions;
}

TEST(PolicyOrdering, TheDefaultIsBelowLasOnAverageAndBelowFifoAtP99) {
  // Issue 23's criteria on a committed slice, without the walltime oracle:
  // 2,000 Philly jobs from day 80 on 32 nodes x 8 GPUs (4 per rack), one
  // queue, checkpoints every 10 min. Measured with `simulate` (the same
  // slice): FIFO gang 22,279 s average / 310,982 s p99; LAS 17,455 /
  // 358,977 with 267 preemptions (its tail above FIFO's); the default
  // 16,613 / 292,929 with 89: below LAS's average, below FIFO's p99, under
  // half of LAS's stops.
  auto all = ReadTrace(ringmaster::testing::SourceDir() + "/data/traces/philly/philly.csv", TraceFormat::kPhilly);
  ASSERT_TRUE(all.ok()) << all.status();
  const std::vector<TraceJob> trace = SliceTrace(
      *std::move(all), {.from_s = 80 * 86400.0, .max_jobs = 2000, .one_queue = "default", .checkpoint_interval_s = 600});
  ASSERT_EQ(trace.size(), 2000u);
  const ReplayStats fifo = StatsOf(ReplayWith("fifo-gang", Nodes(32, 8, 4), trace, false));
  const ReplayStats las = StatsOf(ReplayWith("las", Nodes(32, 8, 4), trace, false));
  const ReplayStats def = StatsOf(ReplayWith("ringmaster", Nodes(32, 8, 4), trace, false));
  ASSERT_EQ(def.jobs_completed, fifo.jobs_completed);
  ASSERT_EQ(las.jobs_completed, fifo.jobs_completed);
  EXPECT_GT(fifo.avg_queue_delay_s, 3600) << "the slice must contend for the cluster";
  EXPECT_GT(las.p99_jct_s, fifo.p99_jct_s) << "the control: LAS pays for its average with its tail here";
  EXPECT_LT(def.avg_jct_s, las.avg_jct_s) << "default " << def.avg_jct_s << " s, LAS " << las.avg_jct_s;
  EXPECT_LT(def.p99_jct_s, fifo.p99_jct_s) << "default " << def.p99_jct_s << " s, FIFO " << fifo.p99_jct_s;
  EXPECT_GT(def.preemptions, 0) << "its preemption took part";
  EXPECT_LE(2 * def.preemptions, las.preemptions) << "default " << def.preemptions << ", LAS " << las.preemptions;
}

TEST(PolicyOrdering, TheDefaultBoundsABigGangsWaitBehindAStreamOfSmallJobs) {
  // 2 nodes x 8 GPUs kept full by 1-GPU jobs of 2 h, one every 450 s for two
  // days; a 16-GPU gang (2 x 8) arrives at 1 h. Under the default the gang
  // is the head of its level: the GPUs freed as the running jobs end are held
  // for it (no later small job takes them), so it starts once the jobs
  // running at its arrival have ended (at most 2 h) and runs once, unstopped.
  // Under plain LAS the same gang is demoted after a few minutes and stopped
  // again and again by new small jobs: it finishes days later.
  std::string csv = "job_id,submit_time_s,duration_s,tasks,gpus_per_task\n";
  int n = 0;
  for (int t = 0; t < 2 * 86400; t += 450) csv += "s" + std::to_string(n++) + "," + std::to_string(t) + ",7200,1,1\n";
  csv += "big,3600,3600,2,8\n";
  auto trace = NativeTraceReader::Parse(csv, "stream.csv");
  ASSERT_TRUE(trace.ok()) << trace.status();
  const std::vector<TraceJob> jobs = SliceTrace(*std::move(trace), {.one_queue = "default"});
  auto big = [](const ReplayResult& r) {
    for (const auto& j : r.jobs) {
      if (j.id == "big") return j;
    }
    ADD_FAILURE() << "no job big";
    return r.jobs.front();
  };
  // The same holds under gittins.yaml (opt-in): the stream's jobs all end
  // at 2 h, so the gang's index equals a fresh small job's and it heads them.
  for (const std::string policy : {"ringmaster", "gittins"}) {
    SCOPED_TRACE(policy);
    const ReplayResult def = ReplayWith(policy, Nodes(2, 8), jobs);
    const auto b = big(def);
    ASSERT_GE(b.end_ms, 0) << "the gang finished";
    EXPECT_LE(b.start_ms - b.submit_ms, 7'200'000) << "it waited at most for the running jobs to end";
    EXPECT_EQ(b.evictions, 0) << "and ran once, unstopped";
    EXPECT_EQ(b.end_ms - b.start_ms, 3'600'000);
  }
  const ReplayResult las = ReplayWith("las", Nodes(2, 8), jobs);
  EXPECT_GT(big(las).end_ms - big(las).submit_ms, 86'400'000) << "the control: under LAS it starves for days";
}

}  // namespace
}  // namespace ringmaster::simulator
