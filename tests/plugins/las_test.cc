#include "plugins/las.h"

#include <gtest/gtest.h>

#include "tests/support/builders.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::testing {
namespace {

using scheduler::Eviction;

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Make(const std::string& thresholds) {
  return plugins::LasPlugin::Create(scheduler::PluginArgs("las", "p.yaml", {{"thresholds", {thresholds, 4, 17}}}));
}

TEST(LasPlugin, ThresholdsAreGpuSecondsStrictlyIncreasing) {
  auto p = Make("3600, 36000");
  ASSERT_TRUE(p.ok()) << p.status();
  auto& las = static_cast<plugins::LasPlugin&>(**p);
  EXPECT_EQ(las.thresholds(), (std::vector<int64_t>{3'600'000'000, 36'000'000'000}));  // milli-GPU x ms
  for (const std::string bad : {"3600, 3600", "36000, 3600", "0", "-5", "1h", "3600,", ""}) {
    auto q = Make(bad);
    ASSERT_ERROR(q, absl::StatusCode::kInvalidArgument, "p.yaml:4:17: plugins[las].arguments.thresholds:") << "'" << bad << "' accepted";
    EXPECT_NE(q.status().message().find("p.yaml:4:17: plugins[las].arguments.thresholds: "), std::string::npos)
        << q.status().message();
  }
  auto def = plugins::LasPlugin::Create(scheduler::PluginArgs("las", "p.yaml", {}));
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(static_cast<const plugins::LasPlugin&>(**def).thresholds(), (std::vector<int64_t>{3'600'000'000}));
}

TEST(LasPlugin, DemotedAsAttainedServiceCrossesEachThreshold) {
  // Thresholds 100 and 1000 GPU-s; a 4-GPU job crosses them after 25 s and
  // 250 s of running.
  auto p = Make("100, 1000");
  ASSERT_TRUE(p.ok());
  auto& las = static_cast<plugins::LasPlugin&>(**p);
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  h.Submit(JobBuilder("a").GpusPerTask(4).Build());
  h.Submit(JobBuilder("b").GpusPerTask(4).Priority(1).Build());
  h.clock().Set(0);  // both start at 0 (Submit moves the harness clock on)
  h.Cycle();
  const scheduler::Job& a = h.job("a");
  EXPECT_EQ(las.Level(a, 0), 0);
  EXPECT_EQ(las.Level(a, 24'999), 0);   // 99.996 GPU-s
  EXPECT_EQ(las.Level(a, 25'000), 1);   // 100 GPU-s: crossed
  EXPECT_EQ(las.Level(a, 249'999), 1);
  EXPECT_EQ(las.Level(a, 250'000), 2);  // 1000 GPU-s
  EXPECT_EQ(las.Level(a, 1'000'000'000), 2) << "the last level has no end";
  // Rank: a higher priority outranks any level; inside a priority the lower
  // level ranks higher.
  EXPECT_GT(las.Rank(h.job("b"), 1'000'000), las.Rank(a, 0));
  EXPECT_GT(las.Rank(a, 0), las.Rank(a, 25'000));
  EXPECT_GT(las.Rank(a, 25'000), las.Rank(a, 250'000));
}

std::string LasPolicy(const std::string& thresholds, const std::string& more = "") {
  return R"(actions: "enqueue, allocate, preempt"
configurations:
- name: preempt
  arguments: {gracePeriod: 0, cooldown: 0}
tiers:
- plugins:
  - name: las
    arguments: {thresholds: ")" + thresholds + "\"" + more + R"(}
  - name: gang
- plugins:
  - name: predicates
)";
}

TEST(LasPlugin, LeastAttainedServiceStartsFirstFifoInsideALevel) {
  // One 8-GPU node. While `blocker` runs, `old` (ran 60 s on 8 GPUs before
  // losing its node: 480 GPU-s, level 1 of threshold 100) and two fresh jobs
  // wait. Fresh jobs go first in their submission order, then `old`.
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), PolicyFromYaml(LasPolicy("100")));
  h.Submit(JobBuilder("old").GpusPerTask(8).Build());
  h.Submit(JobBuilder("blocker").GpusPerTask(8).Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("old") && h.Running("blocker"));
  h.clock().Set(60'000);
  ASSERT_TRUE(h.engine().RemoveNode(h.state().cluster().node(h.job("old").task(0).node).name).ok());
  h.Submit(JobBuilder("fresh1").GpusPerTask(8).Build());
  h.clock().Set(61'000);
  h.Submit(JobBuilder("fresh2").GpusPerTask(8).Build());
  const std::vector<std::string> order = StartOrder(h, "blocker", {"old", "fresh1", "fresh2"});
  EXPECT_EQ(order, (std::vector<std::string>{"fresh1", "fresh2", "old"}));
}

TEST(LasPlugin, AWaitingJobOfALowerLevelPreemptsOneThatCrossedAThreshold) {
  // One 8-GPU node, threshold 3600 GPU-s. `long` runs 8 GPUs: it crosses
  // the threshold after 450 s. `new` (8 GPUs) arrives at 100 s and waits
  // (both level 0: first come first served); at 450 s it preempts `long`.
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), PolicyFromYaml(LasPolicy("3600")));
  h.Submit(JobBuilder("long").GpusPerTask(8).Build());
  h.clock().Set(0);  // starts at 0 (Submit moves the harness clock on)
  h.Cycle();
  h.clock().Set(100'000);
  h.Submit(JobBuilder("new").GpusPerTask(8).Build());
  auto d = h.Cycle();
  EXPECT_TRUE(d.evictions.empty()) << "same level: no preemption";
  EXPECT_TRUE(h.Running("long"));
  h.clock().Set(449'999);
  d = h.Cycle();
  EXPECT_TRUE(d.evictions.empty()) << "3599.99 GPU-s: still level 0";
  h.clock().Set(450'000);
  d = h.Cycle();
  ASSERT_EQ(d.evictions.size(), 1u);
  EXPECT_EQ(d.evictions[0].kind, Eviction::Kind::kEvict);
  EXPECT_EQ(d.evictions[0].preemptor, "new");
  EXPECT_EQ(h.state().job(d.evictions[0].job).name(), "long");
  EXPECT_TRUE(h.Running("new"));
  EXPECT_FALSE(h.Running("long"));
  // `long` keeps its service and waits at level 1 behind `new`, which does
  // not reach the threshold before it ends: no preemption back.
  h.clock().Set(600'000);
  d = h.Cycle();
  EXPECT_TRUE(d.evictions.empty());
  EXPECT_DOUBLE_EQ(h.job("long").AttainedGpuSeconds(600'000), 3600.0);
}

TEST(LasPlugin, WithoutLasTheSameJobsNeverPreempt) {
  // The control: equal priority under the priority plugin never preempts.
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), PolicyFromYaml(R"(actions: "enqueue, allocate, preempt"
configurations:
- name: preempt
  arguments: {gracePeriod: 0, cooldown: 0}
tiers:
- plugins:
  - name: priority
  - name: gang
)"));
  h.Submit(JobBuilder("long").GpusPerTask(8).Build());
  h.Cycle();
  h.clock().Set(100'000);
  h.Submit(JobBuilder("new").GpusPerTask(8).Build());
  h.Cycle();
  h.clock().Set(450'000);
  EXPECT_TRUE(h.Cycle().evictions.empty());
  EXPECT_TRUE(h.Running("long"));
}

TEST(LasPlugin, StarveLimitIsAMultipleAtLeastZero) {
  auto make = [](const std::string& v) {
    return plugins::LasPlugin::Create(
        scheduler::PluginArgs("las", "p.yaml", {{"thresholds", {"100", 4, 17}}, {"starveLimit", {v, 5, 18}}}));
  };
  auto p = make("2.5");
  ASSERT_TRUE(p.ok()) << p.status();
  EXPECT_EQ(static_cast<const plugins::LasPlugin&>(**p).starve_limit(), 2.5);
  for (const std::string bad : {"-1", "x", "1e10"}) {
    auto q = make(bad);
    ASSERT_ERROR(q, absl::StatusCode::kInvalidArgument, "p.yaml:5:18: plugins[las].arguments.starveLimit:") << "'" << bad << "' accepted";
    EXPECT_NE(q.status().message().find("p.yaml:5:18: plugins[las].arguments.starveLimit"), std::string::npos)
        << q.status().message();
  }
  auto def = plugins::LasPlugin::Create(scheduler::PluginArgs("las", "p.yaml", {}));
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(static_cast<const plugins::LasPlugin&>(**def).starve_limit(), 0) << "off unless asked for";
}

// One 8-GPU node, threshold 1 GPU-s (1/8 s on 8 GPUs: a job that has run a
// cycle is at level 1), a cycle every second. `long` runs from 0; a fresh
// 8-GPU job arrives every 20 s and never ends, and each one (level 0)
// preempts the job running. `long` is preempted at 20 s after a 20 s run.
// Without promotion it waits behind the stream for good; with starveLimit L
// it is promoted to level 0 once it has waited L x 20 s, and then preempts
// the job running (level 1) at once. Returns when `long` first runs again
// (-1: never, up to 200 s).
int64_t StarvedJobRestart(const std::string& more) {
  const scheduler::Policy policy = PolicyFromYaml(LasPolicy("1", more));
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), policy);
  h.clock().Set(0);
  h.Submit(JobBuilder("long").GpusPerTask(8).Build());
  int64_t restarted = -1;
  int next = 1;
  for (int64_t t = 0; t <= 200'000; t += 1000) {
    h.clock().Set(t);
    if (t > 0 && t % 20'000 == 0) h.Submit(JobBuilder("fresh" + std::to_string(next++)).GpusPerTask(8).Build());
    h.Cycle();
    if (t == 0) {
      EXPECT_TRUE(h.Running("long"));
    }
    if (t == 20'000) {
      EXPECT_FALSE(h.Running("long")) << "preempted by fresh1";
    }
    if (t > 20'000 && restarted < 0 && h.Running("long")) restarted = t;
  }
  return restarted;
}

TEST(LasPlugin, AStarvedJobIsPromotedToTheTopLevelAfterStarveLimitTimesItsLastRun) {
  EXPECT_EQ(StarvedJobRestart(""), -1) << "without starveLimit the stream of fresh jobs starves `long`";
  EXPECT_EQ(StarvedJobRestart(", starveLimit: 0"), -1) << "0 is off";
  // Stopped at 20.001 s (the cycle after the arrival) after 20.001 s: the
  // first cycle at or after 20.001 + L x 20.001 s.
  EXPECT_EQ(StarvedJobRestart(", starveLimit: 2"), 61'000) << "waited 2 x its 20 s run";
  EXPECT_EQ(StarvedJobRestart(", starveLimit: 3"), 81'000) << "waited 3 x its 20 s run";
  EXPECT_EQ(StarvedJobRestart(", starveLimit: 1.5"), 51'000) << "waited 1.5 x its 20 s run";
}

// One 8-GPU node. `blocker` (4 GPUs) runs; `early` (8 GPUs) arrives and
// cannot start; `late` (4 GPUs) arrives after it. All stay at level 0.
// Returns whether `late` runs then, and whether `early` runs (and `late` was
// stopped) once `blocker` ends.
std::pair<bool, bool> EarlyAndLate(bool reserve, bool fifo) {
  const std::string yaml = std::string(R"(actions: "enqueue, allocate, preempt"
configurations:
- name: preempt
  arguments: {gracePeriod: 0, cooldown: 0}
tiers:
- plugins:
  - name: las
    arguments: {thresholds: "1000000", fifoPreempt: )") + (fifo ? "true" : "false") + R"(}
  - name: gang
    arguments: {reserve: )" + (reserve ? "true" : "false") + R"(}
- plugins:
  - name: predicates
)";
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), PolicyFromYaml(yaml));
  h.clock().Set(0);
  const scheduler::JobId blocker = h.Submit(JobBuilder("blocker").GpusPerTask(4).Build());
  h.Cycle();
  h.clock().Set(10'000);
  h.Submit(JobBuilder("early").GpusPerTask(8).Build());
  h.Cycle();
  h.clock().Set(20'000);
  h.Submit(JobBuilder("late").GpusPerTask(4).Build());
  h.Cycle();
  const bool late_ran = h.Running("late");
  h.clock().Set(100'000);
  EXPECT_TRUE(h.engine().FinishJob(blocker, true).ok());
  h.Cycle();
  h.Cycle();  // the victim gone, the preemptor placed
  return {late_ran, h.Running("early") && !h.Running("late")};
}

TEST(LasPlugin, FifoPreemptLetsAnEarlierJobStopALaterOneOfItsLevel) {
  // With gang's reservation `late` waits behind `early`'s reserved node.
  EXPECT_FALSE(EarlyAndLate(true, false).first);
  // Without it `late` runs in the free half ...
  EXPECT_TRUE(EarlyAndLate(false, false).first);
  // ... and keeps running when `blocker` ends: same level, no preemption.
  EXPECT_FALSE(EarlyAndLate(false, false).second);
  // fifoPreempt: `early` outranks `late` and stops it.
  EXPECT_TRUE(EarlyAndLate(false, true).second);
}


TEST(LasPlugin, PreemptAfterHoldsAWaitingJobBackUntilItHasWaitedThatLong) {
  // As above (threshold 3600 GPU-s: `long` on 8 GPUs crosses it at 450 s),
  // with preemptAfter 600 s: `new`, submitted at 100 s, may preempt from
  // 700 s on, not at 450 s. A job of higher priority is not held back.
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(),
                  PolicyFromYaml(LasPolicy("3600", ", preemptAfter: 600")));
  h.Submit(JobBuilder("long").GpusPerTask(8).Build());
  h.clock().Set(0);
  h.Cycle();
  h.clock().Set(100'000);
  h.Submit(JobBuilder("new").GpusPerTask(8).Build());
  for (scheduler::Timestamp t : {450'000, 600'000, 699'999}) {
    h.clock().Set(t);
    EXPECT_TRUE(h.Cycle().evictions.empty()) << "at " << t << " ms `new` has waited less than 600 s";
    EXPECT_TRUE(h.Running("long"));
  }
  h.clock().Set(700'000);
  auto d = h.Cycle();
  ASSERT_EQ(d.evictions.size(), 1u);
  EXPECT_EQ(d.evictions[0].preemptor, "new");
  EXPECT_TRUE(h.Running("new"));
  // `long` now waits since 700 s; `urgent` (priority 1) takes `new`'s GPUs
  // at once, whatever preemptAfter says.
  h.clock().Set(701'000);
  h.Submit(JobBuilder("urgent").GpusPerTask(8).Priority(1).Build());
  d = h.Cycle();
  ASSERT_EQ(d.evictions.size(), 1u);
  EXPECT_EQ(d.evictions[0].preemptor, "urgent");
  EXPECT_EQ(h.state().job(d.evictions[0].job).name(), "new");
}

TEST(LasPlugin, PreemptAfterCountsFromTheLastStopForAJobThatRan) {
  // `a` (8 GPUs) is stopped by a node loss at 10 s and waits from then on;
  // `b` runs on the other node from 0 s and crosses 100 GPU-s at 12.5 s.
  // With preemptAfter 300 s, `a` preempts `b` at 360 s, not before
  // (it was submitted at 0 s: counting from submission would say 300 s).
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(),
                  PolicyFromYaml(LasPolicy("100, 100000", ", preemptAfter: 300")));
  h.Submit(JobBuilder("a").GpusPerTask(8).Build());
  h.Submit(JobBuilder("b").GpusPerTask(8).Build());
  h.clock().Set(0);
  h.Cycle();
  ASSERT_TRUE(h.Running("a") && h.Running("b"));
  h.clock().Set(10'000);
  ASSERT_TRUE(h.engine().RemoveNode(h.state().cluster().node(h.job("a").task(0).node).name).ok());
  // `a` attained 80 GPU-s (level 0); `b` is at level 1 from 12.5 s on.
  for (scheduler::Timestamp t : {300'000, 309'999}) {
    h.clock().Set(t);
    EXPECT_TRUE(h.Cycle().evictions.empty()) << "at " << t << " ms";
  }
  h.clock().Set(310'000);
  auto d = h.Cycle();
  ASSERT_EQ(d.evictions.size(), 1u);
  EXPECT_EQ(d.evictions[0].preemptor, "a");
  EXPECT_EQ(h.state().job(d.evictions[0].job).name(), "b");
}

TEST(LasPlugin, ByTimeCountsTimeRunNotGpusTimesTime) {
  auto p = plugins::LasPlugin::Create(scheduler::PluginArgs(
      "las", "p.yaml", {{"thresholds", {"100, 1000", 4, 17}}, {"byTime", {"true", 4, 40}}}));
  ASSERT_TRUE(p.ok()) << p.status();
  auto& las = static_cast<plugins::LasPlugin&>(**p);
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  h.Submit(JobBuilder("big").GpusPerTask(4).Gang(2).Build());
  h.clock().Set(0);
  h.Cycle();
  ASSERT_TRUE(h.Running("big"));
  const scheduler::Job& big = h.job("big");
  // 8 GPUs: 100 GPU-s after 12.5 s, but 100 s of running only at 100 s.
  EXPECT_EQ(las.Level(big, 99'999), 0);
  EXPECT_EQ(las.Level(big, 100'000), 1);
  EXPECT_EQ(las.Level(big, 999'999), 1);
  EXPECT_EQ(las.Level(big, 1'000'000), 2);
  auto gpu_s = Make("100, 1000");
  ASSERT_TRUE(gpu_s.ok());
  EXPECT_EQ(static_cast<plugins::LasPlugin&>(**gpu_s).Level(big, 12'500), 1) << "the control: GPU-seconds";
}

TEST(LasPlugin, GpuExponentCountsTimeTimesGpusToThatPower) {
  // gpuExponent 0.5: an 8-GPU gang (4 x 2) attains sqrt(8) = 2.828 service
  // units a second. Threshold 100: crossed at 100 / 2.828 = 35.355 s, i.e.
  // attained 8,000 milli-GPU x 35,356 ms / sqrt(8) = 100,001,869 >= 1e8 at
  // 35,356 ms, below it at 35,355 ms. NextChange names that crossing (early
  // is safe; late is not).
  auto p = plugins::LasPlugin::Create(scheduler::PluginArgs(
      "las", "p.yaml", {{"thresholds", {"100", 4, 17}}, {"gpuExponent", {"0.5", 4, 40}}}));
  ASSERT_TRUE(p.ok()) << p.status();
  auto& las = static_cast<plugins::LasPlugin&>(**p);
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  h.Submit(JobBuilder("big").GpusPerTask(4).Gang(2).Build());
  h.clock().Set(0);
  h.Cycle();
  ASSERT_TRUE(h.Running("big"));
  const scheduler::Job& big = h.job("big");
  EXPECT_EQ(las.Level(big, 35'355), 0);
  EXPECT_EQ(las.Level(big, 35'356), 1);
  const scheduler::Timestamp next = las.NextChange(h.state(), 0);
  EXPECT_LE(next, 35'356);
  EXPECT_GE(next, 35'300);
  // gpuExponent 1 is GPU-time (12.5 s), 0 is time run (100 s).
  for (const auto& [e, at] : std::vector<std::pair<std::string, scheduler::Timestamp>>{{"1", 12'500}, {"0", 100'000}}) {
    auto q = plugins::LasPlugin::Create(scheduler::PluginArgs(
        "las", "p.yaml", {{"thresholds", {"100", 4, 17}}, {"gpuExponent", {e, 4, 40}}}));
    ASSERT_TRUE(q.ok()) << q.status();
    auto& l = static_cast<plugins::LasPlugin&>(**q);
    EXPECT_EQ(l.Level(big, at - 1), 0) << e;
    EXPECT_EQ(l.Level(big, at), 1) << e;
  }
  for (const std::string bad : {"-0.1", "1.5", "half"}) {
    auto q = plugins::LasPlugin::Create(scheduler::PluginArgs("las", "p.yaml", {{"gpuExponent", {bad, 6, 3}}}));
    ASSERT_ERROR(q, absl::StatusCode::kInvalidArgument, "p.yaml:6:3: plugins[las].arguments.gpuExponent: ") << bad;
  }
  auto both = plugins::LasPlugin::Create(scheduler::PluginArgs(
      "las", "p.yaml", {{"byTime", {"true", 4, 40}}, {"gpuExponent", {"0.5", 5, 3}}}));
  ASSERT_ERROR(both, absl::StatusCode::kInvalidArgument, "byTime is gpuExponent 0");
}

TEST(LasPlugin, LevelCooldownHoldsBackLevelPreemptionButNotAHigherPriority) {
  // One node of 8 GPUs. `long` (priority 0) starts at 0 and is past the
  // 100 GPU-s threshold from 12.5 s on. `new` (priority 0, level 0) waits
  // from 200 s: with levelCooldown 1000 s it may stop `long` only from
  // 1,000 s (1000 s after long started), not at 200 s as without it.
  // `urgent` (priority 5) preempts at once, whatever levelCooldown says.
  auto policy = [](const std::string& las_args) {
    return PolicyFromYaml(std::string(R"(actions: "enqueue, allocate, preempt"
configurations:
- name: preempt
  arguments: {gracePeriod: 0, cooldown: 0}
tiers:
- plugins:
  - name: priority
    arguments: {victims: false}
  - name: las
    arguments: {thresholds: "100")") + las_args + R"(}
  - name: gang
- plugins:
  - name: predicates
)");
  };
  for (const bool limited : {false, true}) {
    EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), policy(limited ? ", levelCooldown: 1000" : ""));
    h.Submit(JobBuilder("long").GpusPerTask(8).Build());
    h.clock().Set(0);
    h.Cycle();
    h.clock().Set(200'000);
    h.Submit(JobBuilder("new").GpusPerTask(8).Build());
    auto d = h.Cycle();
    if (!limited) {
      ASSERT_EQ(d.evictions.size(), 1u) << "the control: level preemption at once";
      EXPECT_EQ(d.evictions[0].preemptor, "new");
      continue;
    }
    EXPECT_TRUE(d.evictions.empty()) << "long has run 200 s of its 1000 s level cooldown";
    h.clock().Set(500'000);
    d = h.Cycle();
    EXPECT_TRUE(d.evictions.empty()) << "long has run 500 s of its 1000 s level cooldown";
    EXPECT_EQ(h.engine().NextWakeup(), 1'000'000) << "the cooldown's end is a wake-up";
    h.clock().Set(999'999);
    EXPECT_TRUE(h.Cycle().evictions.empty());
    h.clock().Set(1'000'000);
    d = h.Cycle();
    ASSERT_EQ(d.evictions.size(), 1u);
    EXPECT_EQ(d.evictions[0].preemptor, "new");
    EXPECT_TRUE(h.Running("new"));
    // `new` has just started: a job of its priority could not stop it, a
    // higher priority does at once.
    h.clock().Set(1'001'000);
    h.Submit(JobBuilder("urgent").GpusPerTask(8).Priority(5).Build());
    d = h.Cycle();
    ASSERT_EQ(d.evictions.size(), 1u);
    EXPECT_EQ(d.evictions[0].preemptor, "urgent");
    EXPECT_EQ(h.state().job(d.evictions[0].job).name(), "new");
  }
  for (const std::string bad : {"-1", "2e9", "long"}) {
    auto q = plugins::LasPlugin::Create(scheduler::PluginArgs("las", "p.yaml", {{"levelCooldown", {bad, 6, 3}}}));
    ASSERT_ERROR(q, absl::StatusCode::kInvalidArgument, "p.yaml:6:3: plugins[las].arguments.levelCooldown: ") << bad;
  }
}

TEST(LasPlugin, PreemptAfterAndByTimeAreChecked) {
  for (const auto& [key, bad] : std::vector<std::pair<std::string, std::string>>{
           {"preemptAfter", "-1"}, {"preemptAfter", "2e9"}, {"preemptAfter", "soon"}, {"byTime", "maybe"}}) {
    auto q = plugins::LasPlugin::Create(scheduler::PluginArgs("las", "p.yaml", {{key, {bad, 6, 3}}}));
    ASSERT_ERROR(q, absl::StatusCode::kInvalidArgument, "p.yaml:6:3:") << key << ": " << bad;
    EXPECT_EQ(q.status().code(), absl::StatusCode::kInvalidArgument);
    EXPECT_NE(q.status().message().find("p.yaml:6:3: plugins[las].arguments." + key + ": "), std::string::npos)
        << q.status().message();
  }
}
TEST(LasPlugin, PriorityInTheTierForbidsLevelPreemptionUnlessVictimsFalse) {
  // The scenario of AWaitingJobOfALowerLevelPreemptsOneThatCrossedAThreshold
  // with `priority` first in the tier: its Preemptable answer (lower
  // priorities only) is intersected with the rest, so `new` never preempts
  // `long`; with `victims: false` it does at 450 s, as under las alone.
  for (const bool victims : {true, false}) {
    const std::string policy = std::string(R"(actions: "enqueue, allocate, preempt"
configurations:
- name: preempt
  arguments: {gracePeriod: 0, cooldown: 0}
tiers:
- plugins:
  - name: priority
)") + (victims ? "" : "    arguments: {victims: false}\n") + R"(  - name: las
    arguments: {thresholds: "3600"}
  - name: gang
- plugins:
  - name: predicates
)";
    EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), PolicyFromYaml(policy));
    h.Submit(JobBuilder("long").GpusPerTask(8).Build());
    h.clock().Set(0);
    h.Cycle();
    h.clock().Set(100'000);
    h.Submit(JobBuilder("new").GpusPerTask(8).Build());
    h.Cycle();
    h.clock().Set(450'000);
    auto d = h.Cycle();
    if (victims) {
      EXPECT_TRUE(d.evictions.empty()) << "priority's victim rule forbids it";
      EXPECT_TRUE(h.Running("long"));
    } else {
      ASSERT_EQ(d.evictions.size(), 1u);
      EXPECT_EQ(d.evictions[0].preemptor, "new");
      EXPECT_TRUE(h.Running("new"));
    }
  }
}
TEST(LasPlugin, NextChangeNamesTheEndOfPreemptAfterAndTheByTimeCrossing) {
  // The replay skips cycles before Engine::NextWakeup: a waiting job's
  // preemptAfter ending and a byTime threshold must be named, not missed.
  auto p = plugins::LasPlugin::Create(scheduler::PluginArgs(
      "las", "p.yaml",
      {{"thresholds", {"100", 4, 17}}, {"byTime", {"true", 4, 40}}, {"preemptAfter", {"600", 4, 60}}}));
  ASSERT_TRUE(p.ok()) << p.status();
  auto& las = static_cast<plugins::LasPlugin&>(**p);
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  h.Submit(JobBuilder("run").GpusPerTask(8).Build());
  h.clock().Set(0);
  h.Cycle();
  ASSERT_TRUE(h.Running("run"));
  // 8 GPUs: 100 GPU-s at 12.5 s, but 100 s of running only at 100 s.
  EXPECT_EQ(las.NextChange(h.state(), 0), 100'000);
  h.clock().Set(50'000);
  h.Submit(JobBuilder("wait").GpusPerTask(8).Build());  // created at 50 s, waits
  // The running job is past its only threshold at 200 s; the waiting one
  // may preempt from 650 s on.
  EXPECT_EQ(las.NextChange(h.state(), 200'000), 650'000);
  EXPECT_EQ(las.NextChange(h.state(), 700'000), scheduler::kNoChange) << "nothing left to change by time";
}

}  // namespace
}  // namespace ringmaster::testing
