#include "plugins/gittins.h"

#include <gtest/gtest.h>

#include "tests/support/builders.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::testing {
namespace {

using plugins::GittinsPlugin;
using plugins::GittinsTable;

TEST(GittinsTable, IndicesOfAHandDistribution) {
  // Bins [0,10) [10,20) [20,40) [40,inf); jobs ended after 5, 5, 15, 30, 100 s.
  GittinsTable t({10, 20, 40}, 1);
  for (double s : {5, 5, 15, 30, 100}) t.Add(s);
  // Bin 0, all 5 survive. Quanta ending at 10: 2 end, service 5+5 + 3 x 10 =
  // 40: 2/40 = .05; at 20: 3/(25 + 2 x 20) = .046; at 40: 4/(55 + 40) = .042;
  // no end: 5/155 = .032. Best .05, quantum 40/5 = 8, remaining 155/5 = 31.
  EXPECT_DOUBLE_EQ(t.At(0).index, 0.05);
  EXPECT_DOUBLE_EQ(t.At(0).quantum, 8);
  EXPECT_DOUBLE_EQ(t.At(0).remaining, 31);
  // Bin 1 (from 10): 15, 30, 100 survive. To 20: 1/(5 + 2 x 10) = .04; to
  // 40: 2/(25 + 30) = .036; no end: 3/115. Best .04, quantum 25/3.
  EXPECT_DOUBLE_EQ(t.At(1).index, 0.04);
  EXPECT_DOUBLE_EQ(t.At(1).quantum, 25.0 / 3);
  EXPECT_DOUBLE_EQ(t.At(1).remaining, 115.0 / 3);
  // Bin 2 (from 20): 30, 100. To 40: 1/(10 + 20) = 1/30; no end: 2/90.
  EXPECT_DOUBLE_EQ(t.At(2).index, 1.0 / 30);
  EXPECT_DOUBLE_EQ(t.At(2).quantum, 15);
  EXPECT_DOUBLE_EQ(t.At(2).remaining, 45);
  // Bin 3 (from 40): 100 alone: 1/60.
  EXPECT_DOUBLE_EQ(t.At(3).index, 1.0 / 60);
  EXPECT_DOUBLE_EQ(t.At(3).remaining, 60);
  EXPECT_TRUE(t.At(3).learned);
  EXPECT_EQ(t.BinOf(0), 0);
  EXPECT_EQ(t.BinOf(9.99), 0);
  EXPECT_EQ(t.BinOf(10), 1);
  EXPECT_EQ(t.BinOf(1e6), 3);
}

TEST(GittinsTable, ABinWithTooFewSurvivorsIsAParetoTailOfTheLastLearnedOne) {
  GittinsTable t({10, 20, 40}, 2);
  for (double s : {5, 5, 15, 30, 100}) t.Add(s);
  // Bin 3 has one survivor (< 2): bin 2's figures x U(2)/U(3) = 40/80.
  EXPECT_TRUE(t.At(2).learned);
  EXPECT_FALSE(t.At(3).learned);
  EXPECT_DOUBLE_EQ(t.At(3).index, 1.0 / 30 / 2);
  EXPECT_DOUBLE_EQ(t.At(3).quantum, 30);
  EXPECT_DOUBLE_EQ(t.At(3).remaining, 90);
  // Fewer jobs ended than minSamples: LAS over the quanta, 1 / upper edge.
  GittinsTable cold({10, 20, 40}, 10);
  for (double s : {5, 5, 15, 30, 100}) cold.Add(s);
  EXPECT_DOUBLE_EQ(cold.At(0).index, 1.0 / 10);
  EXPECT_DOUBLE_EQ(cold.At(1).index, 1.0 / 20);
  EXPECT_DOUBLE_EQ(cold.At(3).index, 1.0 / 80);
  EXPECT_FALSE(cold.At(0).learned);
}

TEST(GittinsTable, AJobNearALearnedEndOutranksAYoungerOne) {
  // Bimodal: three jobs end at 5 s, one at 100 s. Bins [0,10) [10,50)
  // [50,90) [90,inf). Unlike LAS, the index rises again toward 100 s.
  GittinsTable t({10, 50, 90}, 1);
  for (double s : {5, 5, 5, 100}) t.Add(s);
  EXPECT_DOUBLE_EQ(t.At(0).index, 3.0 / 25);   // to 10: 3 end, 15 + 1 x 10
  EXPECT_DOUBLE_EQ(t.At(1).index, 1.0 / 90);   // from 10 only 100 is left: 90 to go
  EXPECT_DOUBLE_EQ(t.At(2).index, 1.0 / 50);
  EXPECT_DOUBLE_EQ(t.At(3).index, 1.0 / 10);
  EXPECT_GT(t.At(3).index, t.At(1).index);
}

TEST(GittinsTable, RunningJobsCountAsSurvivors) {
  // Bins [0,10) [10,20) [20,40) [40,inf); jobs ended after 5 and 18 s.
  // Seen to end alone: to 10 s, 1/(5 + 10); to 20 s both end, 2/(5 + 18):
  // index 2/23, remaining 11.5.
  GittinsTable t({10, 20, 40}, 1);
  t.Add(5);
  t.Add(18);
  EXPECT_DOUBLE_EQ(t.At(0).index, 2.0 / 23);
  EXPECT_DOUBLE_EQ(t.At(0).remaining, 11.5);
  // One active job has run 30 s (bin 2, past its edge). At risk: bin 0
  // 2 ended + 1 running = 3, hazard 1/3 (the 5-s job, 5 s in); bin 1 1 + 1
  // = 2, hazard 1/2 (the 18-s job, 8 s in). E[min(S, 10)] = 1/3 x 5 + 2/3 x
  // 10 = 25/3; E[min(S, 20)] = 25/3 + 2/3 x (1/2 x 8 + 1/2 x 10) = 43/3,
  // P(S < 20) = 2/3: 2/43. The 1/3 that survive 20 s run as long again:
  // remaining 43/3 + 1/3 x 20 = 21, and 1/21 is the best index.
  t.SetRunning({0, 0, 1, 0}, {0, 0, 1, 0});
  EXPECT_DOUBLE_EQ(t.At(0).index, 1.0 / 21);
  EXPECT_DOUBLE_EQ(t.At(0).remaining, 21);
  EXPECT_LT(t.At(0).index, 2.0 / 23) << "the survivor makes the jobs look longer";
  t.SetRunning({}, {});
  EXPECT_DOUBLE_EQ(t.At(0).index, 2.0 / 23);
}

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Make(std::map<std::string, scheduler::PluginArgs::Value> args) {
  return GittinsPlugin::Create(scheduler::PluginArgs("gittins", "p.yaml", std::move(args)));
}

TEST(GittinsPlugin, ArgumentsAreChecked) {
  ASSERT_TRUE(Make({}).ok());
  for (const auto& [key, bad] : std::vector<std::pair<std::string, std::string>>{
           {"quantum", "0"}, {"growth", "1"}, {"minSamples", "0"}, {"gpuExponent", "2"}, {"preemptAfter", "-1"},
           {"margin", "0.5"}, {"restartCost", "-1"}, {"stopWorth", "-1"}, {"byTime", "maybe"}, {"countRunning", "2"},
           {"levels", "3"}}) {
    auto q = Make({{key, {bad, 6, 3}}});
    ASSERT_FALSE(q.ok()) << key << ": " << bad;
    EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(q.status().message().find("p.yaml:6:3: plugins[gittins].arguments." + key), std::string::npos)
        << q.status().message();
  }
  auto both = Make({{"byTime", {"true", 4, 4}}, {"gpuExponent", {"0.5", 5, 3}}});
  ASSERT_FALSE(both.ok());
}

// Runs `durations` (s) one after another, each on the whole 8-GPU node,
// from `at` (ms); returns when the last ended.
scheduler::Timestamp Teach(EngineHarness& h, const std::vector<int>& durations, scheduler::Timestamp at) {
  int n = 0;
  for (int d : durations) {
    const std::string name = "teach" + std::to_string(n++);
    h.Submit(JobBuilder(name).GpusPerTask(8).Build());
    h.clock().Set(at);
    h.Cycle();
    EXPECT_TRUE(h.Running(name));
    at += d * 1000;
    h.clock().Set(at);
    EXPECT_TRUE(h.engine().FinishJob(h.engine().FindJob(name), true).ok());
  }
  return at;
}

TEST(GittinsPlugin, LearnsTheServiceOfJobsSeenToEndNotOfCancelledOnes) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  scheduler::Timestamp at = Teach(h, {50, 100}, 0);
  h.Submit(JobBuilder("gone").GpusPerTask(8).Build());
  h.clock().Set(at);
  h.Cycle();
  h.clock().Set(at + 30'000);
  ASSERT_TRUE(h.engine().CancelJob(h.engine().FindJob("gone")).ok());
  auto p = Make({{"byTime", {"true", 1, 1}}, {"quantum", {"100", 1, 1}}, {"minSamples", {"1", 1, 1}},
                 {"countRunning", {"false", 1, 1}}});
  ASSERT_TRUE(p.ok()) << p.status();
  auto& g = static_cast<GittinsPlugin&>(**p);
  g.Learn(h.state());
  EXPECT_EQ(g.table().samples(), 2) << "50 s and 100 s; the cancelled job teaches nothing";
  // From bin 0: to 100 s one ends (50) and one runs it all: 1/(50 + 100);
  // to 200 s both end (100 is bin 1's): 2/(50 + 100), the best.
  EXPECT_DOUBLE_EQ(g.table().At(0).index, 2.0 / 150);
  g.Learn(h.state());
  EXPECT_EQ(g.table().samples(), 2) << "each ended job is read once";
}

// One 8-GPU node; gittins by time with quanta of 100 s (100, 200, 400, 800,
// 1600 ...), minSamples 1, restartCost 60, the jobs seen to end alone (no
// countRunning: the hand figures below), and `more` arguments.
scheduler::Policy GittinsPolicy(const std::string& more, int min_samples = 1) {
  return PolicyFromYaml(R"(actions: "enqueue, allocate, preempt"
configurations:
- name: preempt
  arguments: {gracePeriod: 0, cooldown: 0}
tiers:
- plugins:
  - name: priority
    arguments: {victims: false}
  - name: gittins
    arguments: {byTime: true, quantum: 100, restartCost: 60, countRunning: false, minSamples: )" +
                        std::to_string(min_samples) +
                        more + R"(}
  - name: gang
- plugins:
  - name: predicates
)");
}

TEST(GittinsPlugin, AStopIsMadeOnlyWhereTheIndexGainAndTheVictimsRemainingServiceAreWorthIt) {
  // Learned: 50, 50, 50, 1000 s. Fresh jobs (bin 0) have index 3/250 = .012
  // (to 100 s: 3 end, 150 + 1 x 100 s). `long` at 100-200 s (bin 1) has only
  // the 1000-s job ahead: index 1/900, remaining 900 s. At 100 s of running
  // `new` (.012 > .0011) asks to stop it. The stop costs restart 60 s + the
  // work lost (no checkpoint: the 100 s run; checkpoints every 60 s: 30 s).
  //   stopWorth 1: 900 >= 1 x 160: stopped.
  //   stopWorth 8: 900 < 8 x 160 (worth it while the loss is <= 900/8 - 60 =
  //     52.5 s): kept, and it gets no cheaper as it runs.
  //   stopWorth 8 with checkpoints every 60 s: 900 >= 8 x 90: stopped.
  //   margin 20 (stopWorth 1): .012 < 20 x .0011 = .022: kept.
  struct Case {
    std::string args;
    int64_t checkpoint_ms;
    bool stopped;
  };
  for (const Case& c : std::vector<Case>{{", stopWorth: 1", 0, true},
                                         {", stopWorth: 8", 0, false},
                                         {", stopWorth: 8", 60'000, true},
                                         {", stopWorth: 1, margin: 20", 0, false}}) {
    SCOPED_TRACE(c.args + " checkpoint " + std::to_string(c.checkpoint_ms));
    EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), GittinsPolicy(c.args));
    const scheduler::Timestamp at = Teach(h, {50, 50, 50, 1000}, 0);
    scheduler::JobSpec spec = JobBuilder("long").GpusPerTask(8).Build();
    spec.checkpoint_interval_ms = c.checkpoint_ms;
    h.Submit(spec);
    h.clock().Set(at);
    h.Cycle();
    ASSERT_TRUE(h.Running("long"));
    h.clock().Set(at + 50'000);
    h.Submit(JobBuilder("new").GpusPerTask(8).Build());
    EXPECT_TRUE(h.Cycle().evictions.empty()) << "both in bin 0: equal indices";
    h.clock().Set(at + 100'000);
    const auto d = h.Cycle();
    if (!c.stopped) {
      EXPECT_TRUE(d.evictions.empty());
      EXPECT_TRUE(h.Running("long"));
      h.clock().Set(at + 500'000);
      EXPECT_TRUE(h.Cycle().evictions.empty()) << "no cheaper later";
      continue;
    }
    ASSERT_EQ(d.evictions.size(), 1u);
    EXPECT_EQ(d.evictions[0].preemptor, "new");
    EXPECT_EQ(h.state().job(d.evictions[0].job).name(), "long");
    EXPECT_TRUE(h.Running("new"));
  }
}

TEST(GittinsPlugin, NoStopOfItsPriorityBeforeMinSamplesJobsHaveEnded) {
  // The scenario above with stopWorth 1: with minSamples 4 the four jobs
  // that ended teach the table and `new` stops `long` at 100 s; with
  // minSamples 5 nothing is learned (LAS over the quanta orders them, `new`
  // ranks higher), but nothing says a stop pays, and none is made.
  for (const int min_samples : {4, 5}) {
    SCOPED_TRACE(min_samples);
    EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), GittinsPolicy(", stopWorth: 1", min_samples));
    const scheduler::Timestamp at = Teach(h, {50, 50, 50, 1000}, 0);
    h.Submit(JobBuilder("long").GpusPerTask(8).Build());
    h.clock().Set(at);
    h.Cycle();
    h.clock().Set(at + 50'000);
    h.Submit(JobBuilder("new").GpusPerTask(8).Build());
    h.Cycle();
    h.clock().Set(at + 100'000);
    const auto d = h.Cycle();
    EXPECT_EQ(d.evictions.size(), min_samples == 4 ? 1u : 0u);
    EXPECT_EQ(h.Running("long"), min_samples == 5);
  }
}

TEST(GittinsPlugin, AHigherPriorityIsNeverHeldBack) {
  // stopWorth 8 keeps `long` from `new` (above); `urgent` (priority 5)
  // stops it at once.
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), GittinsPolicy(", stopWorth: 8, margin: 20"));
  const scheduler::Timestamp at = Teach(h, {50, 50, 50, 1000}, 0);
  h.Submit(JobBuilder("long").GpusPerTask(8).Build());
  h.clock().Set(at);
  h.Cycle();
  h.clock().Set(at + 150'000);
  h.Submit(JobBuilder("urgent").GpusPerTask(8).Priority(5).Build());
  const auto d = h.Cycle();
  ASSERT_EQ(d.evictions.size(), 1u);
  EXPECT_EQ(d.evictions[0].preemptor, "urgent");
}

TEST(GittinsPlugin, NextChangeNamesTheBinEdgeTheLossLimitAndPreemptAfter) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  const scheduler::Timestamp at = Teach(h, {50, 50, 50, 1000}, 0);
  h.Submit(JobBuilder("long").GpusPerTask(8).Build());
  h.clock().Set(at);
  h.Cycle();
  ASSERT_TRUE(h.Running("long"));
  auto p = Make({{"byTime", {"true", 1, 1}},
                 {"quantum", {"100", 1, 1}},
                 {"minSamples", {"1", 1, 1}},
                 {"stopWorth", {"5", 1, 1}},
                 {"countRunning", {"false", 1, 1}},
                 {"preemptAfter", {"600", 1, 1}}});
  ASSERT_TRUE(p.ok()) << p.status();
  auto& g = static_cast<GittinsPlugin&>(**p);
  g.Learn(h.state());
  const scheduler::Job& job = h.job("long");
  // In bin 1 (100-200 s run) the limit on the loss is 900/5 - 60 = 120 s:
  // worth stopping up to 120 s of running, not after.
  EXPECT_TRUE(g.WorthStopping(job, at + 120'000));
  EXPECT_FALSE(g.WorthStopping(job, at + 120'001));
  EXPECT_EQ(g.NextChange(h.state(), at + 50'000), at + 100'000) << "bin 0 ends at 100 s";
  EXPECT_EQ(g.NextChange(h.state(), at + 110'000), at + 120'001) << "the loss passes the limit";
  EXPECT_EQ(g.NextChange(h.state(), at + 150'000), at + 200'000) << "then bin 1 ends";
  h.clock().Set(at + 150'000);
  h.Submit(JobBuilder("wait").GpusPerTask(8).Build());  // created at 150 s + 0 ms
  EXPECT_EQ(g.NextChange(h.state(), at + 170'000), at + 200'000);
  EXPECT_EQ(g.NextChange(h.state(), at + 700'000), at + 750'000) << "wait's preemptAfter ends; long is in bin 3 to 800 s";
}

}  // namespace
}  // namespace ringmaster::testing
