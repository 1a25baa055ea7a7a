// Backfill on learned walltimes (scheduler/actions/learned_walltime.h): the
// estimates by hand, a backfill that only the estimate allows (and the same
// without the option), and an estimate that is never a limit.
#include "scheduler/actions/learned_walltime.h"

#include <gtest/gtest.h>

#include <string>

#include "scheduler/actions/action.h"
#include "tests/support/builders.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::testing {
namespace {

using scheduler::JobPhase;
using scheduler::WalltimeEstimator;

// The default policy with two queues; with `percentile` > 0 backfill learns
// walltimes (at least `min_samples` per group).
scheduler::Policy Policy(int percentile, int min_samples = 5) {
  std::string yaml(scheduler::DefaultPolicyYaml());
  if (percentile > 0) {
    // configurations is a list: backfill's entry goes first in it.
    const std::string entry = "- name: backfill\n  arguments: {learnedWalltimePercentile: " +
                              std::to_string(percentile) +
                              ", learnedWalltimeMinSamples: " + std::to_string(min_samples) + "}\n";
    const size_t at = yaml.find("configurations:\n");
    yaml.insert(at + std::string("configurations:\n").size(), entry);
  }
  yaml += "queues:\n- {name: a, weight: 1}\n- {name: b, weight: 1}\n";
  return PolicyFromYaml(yaml);
}

// Runs `name` (g GPUs, queue q) alone for `secs` seconds, to its end.
void RunFor(EngineHarness& h, const std::string& name, int g, const std::string& q, int secs) {
  h.Submit(JobBuilder(name).GpusPerTask(g).Queue(q).Build());
  h.Cycle();
  ASSERT_TRUE(h.Running(name)) << h.job(name).pending_reason();
  h.clock().Advance(secs * 1000 - 1000);  // Cycle() moved the clock 1 s on
  ASSERT_TRUE(h.engine().FinishJob(h.engine().FindJob(name), true).ok());
  h.Cycle();
}

TEST(WalltimeEstimator, NearestRankPercentileOfTheQueueAndGpusThenOfTheGpus) {
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), Policy(0));
  // Queue a, 1 GPU: runs of 10, 20, ..., 100 s.
  for (int k = 1; k <= 10; ++k) RunFor(h, "a" + std::to_string(k), 1, "a", 10 * k);
  // Queue b, 1 GPU: 3 runs of 1000 s (fewer than minSamples 5).
  for (int k = 1; k <= 3; ++k) RunFor(h, "b" + std::to_string(k), 1, "b", 1000);
  // A cancelled job teaches nothing.
  h.Submit(JobBuilder("cancelled").GpusPerTask(1).Queue("a").Build());
  h.Cycle();
  h.clock().Advance(5'000'000);
  ASSERT_TRUE(h.engine().CancelJob(h.engine().FindJob("cancelled")).ok());
  h.Cycle();

  WalltimeEstimator p90(90, 5);
  p90.Learn(h.state());
  EXPECT_EQ(p90.version(), 13u);  // 10 + 3 ended runs; the cancelled one not
  // a, 1 GPU: ceil(0.9 x 10) = 9th smallest of 10..100 s = 90 s.
  EXPECT_EQ(p90.Walltime(h.job("a1")), 90'000);
  // b, 1 GPU: 3 < 5 samples in b; all 1-GPU runs: 10..100 and 3 x 1000,
  // ceil(0.9 x 13) = 12th smallest = 1000 s.
  EXPECT_EQ(p90.Walltime(h.job("b1")), 1'000'000);
  // A job's own walltime wins.
  h.Submit(JobBuilder("own").GpusPerTask(1).Queue("a").Walltime(7'000).Build());
  EXPECT_EQ(p90.Walltime(h.job("own")), 7'000);
  // 8 GPUs: no run ended, no estimate.
  h.Submit(JobBuilder("eight").GpusPerTask(8).Queue("a").Build());
  EXPECT_EQ(p90.Walltime(h.job("eight")), 0);

  // p50: ceil(0.5 x 10) = 5th = 50 s; p100: the longest, 100 s; p1: 10 s.
  WalltimeEstimator p50(50, 5), p100(100, 5), p1(1, 5);
  for (WalltimeEstimator* e : {&p50, &p100, &p1}) e->Learn(h.state());
  EXPECT_EQ(p50.Walltime(h.job("a1")), 50'000);
  EXPECT_EQ(p100.Walltime(h.job("a1")), 100'000);
  EXPECT_EQ(p1.Walltime(h.job("a1")), 10'000);
  // minSamples 14: no group has 14 runs.
  WalltimeEstimator strict(90, 14);
  strict.Learn(h.state());
  EXPECT_EQ(strict.Walltime(h.job("a1")), 0);
  // Learned a piece at a time (as cycles read State::ended_jobs) or at once:
  // the same.
  EXPECT_EQ(p90.version(), strict.version());
}

TEST(WalltimeEstimator, ArgumentsAreCheckedAndOffByDefault) {
  EXPECT_EQ(scheduler::ReadBackfillArgs({})->learned_percentile, 0);
  auto args = [](std::map<std::string, scheduler::PluginArgs::Value> v) {
    return scheduler::PluginArgs("backfill", "p.yaml", std::move(v), "configurations");
  };
  EXPECT_FALSE(scheduler::ReadBackfillArgs(args({{"learnedWalltimePercentile", {"101", 1, 1}}})).ok());
  EXPECT_FALSE(scheduler::ReadBackfillArgs(args({{"learnedWalltimeMinSamples", {"5", 1, 1}}})).ok())
      << "minSamples without a percentile";
  EXPECT_FALSE(scheduler::ReadBackfillArgs(args({{"learnedWalltime", {"90", 1, 1}}})).ok()) << "unknown";
  // A misspelled percentile is named as unknown, not as a missing one.
  auto typo = scheduler::ReadBackfillArgs(
      args({{"learnedWalltimePercentil", {"90", 1, 1}}, {"learnedWalltimeMinSamples", {"5", 2, 1}}}));
  ASSERT_FALSE(typo.ok());
  EXPECT_NE(typo.status().message().find("learnedWalltimePercentil"), std::string::npos) << typo.status();
  EXPECT_EQ(typo.status().message().find("needs"), std::string::npos) << typo.status();
  auto ok = scheduler::ReadBackfillArgs(
      args({{"learnedWalltimePercentile", {"90", 1, 1}}, {"learnedWalltimeMinSamples", {"3", 1, 1}}}));
  ASSERT_TRUE(ok.ok()) << ok.status();
  EXPECT_EQ(ok->learned_percentile, 90);
  EXPECT_EQ(ok->learned_min_samples, 3);
  EXPECT_TRUE(scheduler::MakeAction("backfill", args({{"learnedWalltimePercentile", {"90", 1, 1}}})).ok());
}

// 2 nodes x 8 GPUs. Learned: 1-GPU runs of 10 s, 8-GPU runs of 100 s (5
// each). "running" (8 GPUs, no walltime) starts at t0 on one node; a 2 x 8
// gang reserves both nodes; "short" (1 GPU, no walltime) asks for the free
// node. Rule (b) refuses it (8 - 1 < 8 GPUs left for the gang); rule (a)
// with the estimates: t0 + 10 s <= t0 + 100 s (running's estimated end).
void Teach(EngineHarness& h) {
  for (int k = 0; k < 5; ++k) RunFor(h, "one" + std::to_string(k), 1, "a", 10);
  for (int k = 0; k < 5; ++k) RunFor(h, "eight" + std::to_string(k), 8, "a", 100);
}

void StartRunningThenGangAndShort(EngineHarness& h) {
  h.Submit(JobBuilder("running").GpusPerTask(8).Queue("a").Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("running"));
  h.Submit(JobBuilder("gang").Gang(2).GpusPerTask(8).Queue("a").Build());
  h.Submit(JobBuilder("short").GpusPerTask(1).Queue("a").Build());
  h.Cycle();
  ASSERT_FALSE(h.Running("gang"));
  ASSERT_TRUE(h.state().reservation().has_value());
  ASSERT_EQ(h.state().reservation()->nodes.size(), 2u);
}

TEST(LearnedWalltimeBackfill, AJobStartsOnAReservedNodeBecauseItsEstimateEndsFirst) {
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), Policy(90));
  Teach(h);
  StartRunningThenGangAndShort(h);
  EXPECT_TRUE(h.Running("short")) << h.job("short").pending_reason();
}

TEST(LearnedWalltimeBackfill, WithoutTheOptionTheSameJobWaits) {
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), Policy(0));
  Teach(h);
  StartRunningThenGangAndShort(h);
  EXPECT_FALSE(h.Running("short"));
  EXPECT_NE(h.job("short").pending_reason().find("reserved for a waiting gang"), std::string::npos)
      << h.job("short").pending_reason();
}

TEST(LearnedWalltimeBackfill, AnEstimateTooLongForTheReservationDoesNotBackfill) {
  // The same, but 1-GPU runs of 1000 s: t0 + 1000 s > t0 + 100 s.
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), Policy(90));
  for (int k = 0; k < 5; ++k) RunFor(h, "one" + std::to_string(k), 1, "a", 1000);
  for (int k = 0; k < 5; ++k) RunFor(h, "eight" + std::to_string(k), 8, "a", 100);
  StartRunningThenGangAndShort(h);
  EXPECT_FALSE(h.Running("short"));
}

TEST(LearnedWalltimeBackfill, AWrongEstimateNeverStopsAJob) {
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), Policy(90));
  Teach(h);
  StartRunningThenGangAndShort(h);
  ASSERT_TRUE(h.Running("short"));
  // Both outrun their estimates (10 s and 100 s) many times over, well
  // inside las' preemptAfter (900 s): nothing is stopped or evicted.
  for (int s = 0; s < 10; ++s) {
    h.clock().Advance(60'000);
    const scheduler::Decisions d = h.Cycle();
    EXPECT_TRUE(d.evictions.empty());
    EXPECT_TRUE(h.Running("short"));
    EXPECT_TRUE(h.Running("running"));
  }
  EXPECT_EQ(h.job("short").phase(), JobPhase::kRunning);
  EXPECT_FALSE(h.Running("gang"));
}

}  // namespace
}  // namespace ringmaster::testing
