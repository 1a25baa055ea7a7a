#include "plugins/las.h"

#include <gtest/gtest.h>

#include <functional>
#include <map>
#include <utility>
#include <vector>

#include "tests/support/builders.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::testing {
namespace {

using scheduler::Eviction;

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Make(const std::string& thresholds) {
  return plugins::LasPlugin::Create(scheduler::PluginArgs("las", "p.yaml", {{"thresholds", {thresholds, 4, 17}}}));
}

// A las plugin from (argument, value) pairs, asked directly by a test (null,
// and the test fails, when they are refused).
std::unique_ptr<plugins::LasPlugin> LasWith(const std::vector<std::pair<std::string, std::string>>& args) {
  std::map<std::string, scheduler::PluginArgs::Value> values;
  int column = 17;
  for (const auto& [name, text] : args) {
    values[name] = {text, 4, column};
    column += 23;
  }
  auto p = plugins::LasPlugin::Create(scheduler::PluginArgs("las", "p.yaml", std::move(values)));
  EXPECT_TRUE(p.ok()) << p.status();
  if (!p.ok()) return nullptr;
  return std::unique_ptr<plugins::LasPlugin>(static_cast<plugins::LasPlugin*>(p->release()));
}

// Submits `job` and runs one cycle at 0 s: whether it started.
bool StartAtZero(EngineHarness& h, scheduler::JobSpec job) {
  const std::string name = job.name;
  h.Submit(std::move(job));
  h.clock().Set(0);  // Submit moves the harness clock on
  h.Cycle();
  return h.Running(name);
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
  auto p = LasWith({{"thresholds", "100, 1000"}, {"byTime", "true"}});
  ASSERT_NE(p, nullptr);
  auto& las = *p;
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  ASSERT_TRUE(StartAtZero(h, JobBuilder("big").GpusPerTask(4).Gang(2).Build()));
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
  auto p = LasWith({{"thresholds", "100"}, {"gpuExponent", "0.5"}});
  ASSERT_NE(p, nullptr);
  auto& las = *p;
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  ASSERT_TRUE(StartAtZero(h, JobBuilder("big").GpusPerTask(4).Gang(2).Build()));
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
  auto p = LasWith({{"thresholds", "100"}, {"byTime", "true"}, {"preemptAfter", "600"}});
  ASSERT_NE(p, nullptr);
  auto& las = *p;
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  ASSERT_TRUE(StartAtZero(h, JobBuilder("run").GpusPerTask(8).Build()));
  // 8 GPUs: 100 GPU-s at 12.5 s, but 100 s of running only at 100 s.
  EXPECT_EQ(las.NextChange(h.state(), 0), 100'000);
  h.clock().Set(50'000);
  h.Submit(JobBuilder("wait").GpusPerTask(8).Build());  // created at 50 s, waits
  // The running job is past its only threshold at 200 s; the waiting one
  // may preempt from 650 s on.
  EXPECT_EQ(las.NextChange(h.state(), 200'000), 650'000);
  EXPECT_EQ(las.NextChange(h.state(), 700'000), scheduler::kNoChange) << "nothing left to change by time";
}

TEST(LasPlugin, VictimGpuExponentMakesABigGangTheVictimSooner) {
  // Two nodes of 8 GPUs, byTime with threshold 100 s. `big` (8 GPUs) fills
  // one node and eight 1-GPU jobs the other, all from 0 s. At 50 s `new` (1
  // GPU) waits. By time every running job has run 50 s (level 0, as `new`),
  // so none is a victim. With victimGpuExponent 1 a running job's victim
  // level counts GPU-time: `big` has 8 x 50 = 400 GPU-s (level 1), each
  // 1-GPU job 50 (level 0), so `new` stops `big` and only `big`.
  for (const bool gpu_time : {false, true}) {
    EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(),
                    PolicyFromYaml(LasPolicy("100", std::string(", byTime: true") +
                                                        (gpu_time ? ", victimGpuExponent: 1" : ""))));
    h.Submit(JobBuilder("big").GpusPerTask(8).Build());
    for (int i = 0; i < 8; ++i) h.Submit(JobBuilder("s" + std::to_string(i)).GpusPerTask(1).Build());
    h.clock().Set(0);
    h.Cycle();
    ASSERT_TRUE(h.Running("big") && h.Running("s7"));
    h.clock().Set(50'000);
    h.Submit(JobBuilder("new").GpusPerTask(1).Build());
    auto d = h.Cycle();
    if (!gpu_time) {
      EXPECT_TRUE(d.evictions.empty()) << "by time all have run 50 s: level 0, no victim";
      continue;
    }
    ASSERT_EQ(d.evictions.size(), 1u);
    EXPECT_EQ(d.evictions[0].preemptor, "new");
    EXPECT_EQ(h.state().job(d.evictions[0].job).name(), "big");
    // The job order still counts time: `big`, stopped after 50 s, is level 0.
    auto p = LasWith({{"thresholds", "100"}, {"byTime", "true"}, {"victimGpuExponent", "1"}});
    ASSERT_NE(p, nullptr);
    auto& las = *p;
    EXPECT_EQ(las.Level(h.job("big"), 50'001), 0);
  }
  for (const std::string bad : {"-0.1", "1.5", "all"}) {
    auto q = plugins::LasPlugin::Create(scheduler::PluginArgs("las", "p.yaml", {{"victimGpuExponent", {bad, 6, 3}}}));
    ASSERT_ERROR(q, absl::StatusCode::kInvalidArgument, "p.yaml:6:3: plugins[las].arguments.victimGpuExponent: ")
        << bad;
  }
}

TEST(LasPlugin, VictimFillStopsOneJobBigEnoughForEveryWaitingJob) {
  // Two nodes of 8 GPUs, byTime with threshold 100 s. `big` (8 GPUs) fills
  // one node and eight 1-GPU jobs the other, all from 0 s. At 150 s every
  // running job has run 150 s (level 1) and n0, n1, n2 (1 GPU each, level
  // 0) arrive. Without victimFill each stops a job of its own: the cheapest
  // victims (equal in all but submission: the latest first) are 1-GPU jobs,
  // three stops. With victimFill 8 the three need 3 GPUs, so a victim holds
  // min(3, 8) = 3 GPUs or more: only `big` does. n0 stops it; n1 and n2
  // find no victim of 3 GPUs left and take `big`'s other GPUs in the next
  // cycle: one stop for three jobs.
  for (const bool fill : {false, true}) {
    EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(),
                    PolicyFromYaml(LasPolicy("100", std::string(", byTime: true") + (fill ? ", victimFill: 8" : ""))));
    h.Submit(JobBuilder("big").GpusPerTask(8).Build());
    for (int i = 0; i < 8; ++i) h.Submit(JobBuilder("s" + std::to_string(i)).GpusPerTask(1).Build());
    h.clock().Set(0);
    h.Cycle();
    ASSERT_TRUE(h.Running("big") && h.Running("s7"));
    h.clock().Set(150'000);
    for (int i = 0; i < 3; ++i) h.Submit(JobBuilder("n" + std::to_string(i)).GpusPerTask(1).Build());
    auto d = h.Cycle();
    if (!fill) {
      ASSERT_EQ(d.evictions.size(), 3u);
      for (const auto& e : d.evictions) EXPECT_NE(h.state().job(e.job).name(), "big");
      continue;
    }
    ASSERT_EQ(d.evictions.size(), 1u);
    EXPECT_EQ(d.evictions[0].preemptor, "n0");
    EXPECT_EQ(h.state().job(d.evictions[0].job).name(), "big");
    h.clock().Set(151'000);
    EXPECT_TRUE(h.Cycle().evictions.empty());
    EXPECT_TRUE(h.Running("n0") && h.Running("n1") && h.Running("n2"));
  }
  for (const std::string bad : {"-1", "2e6", "many"}) {
    auto q = plugins::LasPlugin::Create(scheduler::PluginArgs("las", "p.yaml", {{"victimFill", {bad, 6, 3}}}));
    ASSERT_ERROR(q, absl::StatusCode::kInvalidArgument, "p.yaml:6:3: plugins[las].arguments.victimFill: ") << bad;
  }
}

TEST(LasPlugin, NextChangeNamesTheVictimLevelsOwnCrossing) {
  // byTime thresholds 100 s with victimGpuExponent 1: an 8-GPU job crosses
  // 100 s of running at 100 s, but 100 GPU-s (its victim level) at 12.5 s.
  auto p = LasWith({{"thresholds", "100"}, {"byTime", "true"}, {"victimGpuExponent", "1"}});
  ASSERT_NE(p, nullptr);
  auto& las = *p;
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  ASSERT_TRUE(StartAtZero(h, JobBuilder("run").GpusPerTask(8).Build()));
  EXPECT_EQ(las.NextChange(h.state(), 0), 12'500);
  EXPECT_EQ(las.NextChange(h.state(), 20'000), 100'000) << "past its victim threshold: the time one is next";
}

TEST(LasPlugin, StoppedPreemptsFalseLeavesAStoppedJobToWaitForFreeGpus) {
  // As PreemptAfterCountsFromTheLastStopForAJobThatRan, on three nodes: `a`
  // (8 GPUs) is stopped by a node loss at 10 s; `b` and `c` are at level 1
  // from 12.5 s on. With preemptAfter 300 s `a` would stop one of them at
  // 310 s; with stoppedPreempts false it never does (it holds allocate's
  // reservation and waits for a node to free). `fresh`, which never ran,
  // still preempts once it has waited 300 s.
  EngineHarness h(ClusterBuilder().NodesPerRack(3).Gpus(8).Build(),
                  PolicyFromYaml(LasPolicy("100, 100000", ", preemptAfter: 300, stoppedPreempts: false")));
  h.Submit(JobBuilder("a").GpusPerTask(8).Build());
  h.Submit(JobBuilder("b").GpusPerTask(8).Build());
  h.Submit(JobBuilder("c").GpusPerTask(8).Build());
  h.clock().Set(0);
  h.Cycle();
  ASSERT_TRUE(h.Running("a") && h.Running("b") && h.Running("c"));
  h.clock().Set(10'000);
  ASSERT_TRUE(h.engine().RemoveNode(h.state().cluster().node(h.job("a").task(0).node).name).ok());
  for (scheduler::Timestamp t : {310'000, 400'000, 5'000'000}) {
    h.clock().Set(t);
    EXPECT_TRUE(h.Cycle().evictions.empty()) << "at " << t << " ms the stopped `a` may not preempt";
  }
  h.clock().Set(5'000'000);
  h.Submit(JobBuilder("fresh").GpusPerTask(8).Build());
  h.clock().Set(5'299'000);
  EXPECT_TRUE(h.Cycle().evictions.empty());
  h.clock().Set(5'301'000);
  auto d = h.Cycle();
  ASSERT_EQ(d.evictions.size(), 1u);
  EXPECT_EQ(d.evictions[0].preemptor, "fresh");
  EXPECT_NE(h.state().job(d.evictions[0].job).name(), "a");
  EXPECT_FALSE(h.Running("a"));
}

TEST(LasPlugin, StoppedAheadPutsAStoppedJobAheadOfLaterJobs) {
  // LeastAttainedServiceStartsFirstFifoInsideALevel's scenario: `old` ran
  // 480 GPU-s (level 1) and lost its node; fresh jobs go first without the
  // option, `old` (submitted first) with it. It keeps its level otherwise.
  for (const bool ahead : {false, true}) {
    EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(),
                    PolicyFromYaml(LasPolicy("100", ahead ? ", stoppedAhead: true" : "")));
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
    EXPECT_EQ(order, ahead ? (std::vector<std::string>{"old", "fresh1", "fresh2"})
                           : (std::vector<std::string>{"fresh1", "fresh2", "old"}));
  }
}

TEST(LasPlugin, StoppedAheadKeepsTheGpusThatFreeForTheStoppedGang) {
  // Nodes A and B of 8 GPUs. `old` (8 GPUs) runs on A, `h1` and `h2` (4
  // GPUs each) on B. A is lost at 60 s: `old` (480 GPU-s, level 1) waits;
  // `fresh` (4 GPUs, level 0) arrives at 61 s. When `h1` ends at 100 s, 4
  // GPUs free on B. Without stoppedAhead `fresh` is first in order and
  // takes them; with it `old` is first, holds B (allocate's reservation) and
  // starts when `h2` ends at 200 s, before `fresh`. (preemptAfter keeps
  // level preemption out of it.)
  for (const bool ahead : {false, true}) {
    EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(),
                    PolicyFromYaml(LasPolicy("100", std::string(", preemptAfter: 100000") +
                                                        (ahead ? ", stoppedAhead: true" : ""))));
    h.Submit(JobBuilder("old").GpusPerTask(8).Build());
    h.Submit(JobBuilder("h1").GpusPerTask(4).Build());
    h.Submit(JobBuilder("h2").GpusPerTask(4).Build());
    h.clock().Set(0);
    h.Cycle();
    ASSERT_TRUE(h.Running("old") && h.Running("h1") && h.Running("h2"));
    h.clock().Set(60'000);
    ASSERT_TRUE(h.engine().RemoveNode(h.state().cluster().node(h.job("old").task(0).node).name).ok());
    h.clock().Set(61'000);
    h.Submit(JobBuilder("fresh").GpusPerTask(4).Build());
    h.Cycle();
    ASSERT_FALSE(h.Running("old") || h.Running("fresh"));
    ASSERT_TRUE(h.engine().FinishJob(h.job("h1").id(), true).ok());
    h.clock().Set(100'000);
    h.Cycle();
    EXPECT_EQ(h.Running("fresh"), !ahead) << (ahead ? "B's freed GPUs are kept for `old`" : "`fresh` first");
    ASSERT_TRUE(h.engine().FinishJob(h.job("h2").id(), true).ok());
    h.clock().Set(200'000);
    h.Cycle();
    EXPECT_EQ(h.Running("old"), ahead);
  }
}

TEST(LasPlugin, WayBackOrdersAStoppedJobAheadOfLaterJobsOnceItHasWaitedItsLastRun) {
  // StoppedAheadPutsAStoppedJobAheadOfLaterJobs' scenario: `old` (8 GPUs)
  // runs 0-60 s (480 GPU-s, level 1) and loses its node; `fresh1` (60 s)
  // and `fresh2` (61 s) arrive at level 0; `blocker` holds the one node
  // left until 119.5 s, and each job that starts ends 0.5 s later
  // (preemptAfter keeps level preemption out of it). With
  // wayBack 1 `old` goes to level 0 once it has waited its last run, 60 s:
  // at 119.5 s (59.5 s) `fresh1` is still first, at 120 s `old` is, ahead
  // of `fresh2`. wayBack 0.5 (30 s), or 1 capped by wayBackMax 20 s: `old`
  // first at 119.5 s. Off: `old` last.
  struct Case {
    std::string args;
    std::vector<std::string> order;
  };
  const std::vector<Case> cases = {
      {"", {"fresh1", "fresh2", "old"}},
      {", wayBack: 1", {"fresh1", "old", "fresh2"}},
      {", wayBack: 0.5", {"old", "fresh1", "fresh2"}},
      {", wayBack: 1, wayBackMax: 20", {"old", "fresh1", "fresh2"}},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(c.args);
    EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(),
                    PolicyFromYaml(LasPolicy("100", ", preemptAfter: 100000" + c.args)));
    h.Submit(JobBuilder("old").GpusPerTask(8).Build());
    h.Submit(JobBuilder("blocker").GpusPerTask(8).Build());
    h.clock().Set(0);
    h.Cycle();
    ASSERT_TRUE(h.Running("old") && h.Running("blocker"));
    h.clock().Set(60'000);
    ASSERT_TRUE(h.engine().RemoveNode(h.state().cluster().node(h.job("old").task(0).node).name).ok());
    h.Submit(JobBuilder("fresh1").GpusPerTask(8).Build());
    h.clock().Set(61'000);
    h.Submit(JobBuilder("fresh2").GpusPerTask(8).Build());
    h.clock().Set(61'000);
    h.Cycle();
    std::vector<std::string> order;
    std::string running = "blocker";
    for (scheduler::Timestamp t = 119'500; order.size() < 3; t += 500) {
      ASSERT_TRUE(h.engine().FinishJob(h.job(running).id(), true).ok());
      h.clock().Set(t);
      h.Cycle();
      for (const std::string n : {"old", "fresh1", "fresh2"}) {
        if (h.Running(n)) running = n;
      }
      ASSERT_TRUE(h.Running(running)) << "nothing started at " << t << " ms";
      order.push_back(running);
    }
    EXPECT_EQ(order, c.order);
  }
  // The way back is a wake-up: at 61 s the next change is `old`'s, at 120 s.
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), PolicyFromYaml(LasPolicy("100")));
  h.Submit(JobBuilder("old").GpusPerTask(8).Build());
  h.clock().Set(0);
  h.Cycle();
  h.clock().Set(60'000);
  ASSERT_TRUE(h.engine().RemoveNode(h.state().cluster().node(h.job("old").task(0).node).name).ok());
  h.Submit(JobBuilder("full").GpusPerTask(8).Build());
  h.clock().Set(61'000);
  h.Cycle();
  ASSERT_TRUE(h.Running("full") && !h.Running("old"));
  auto las = LasWith({{"thresholds", "100000"}, {"wayBack", "1"}});
  ASSERT_NE(las, nullptr);
  EXPECT_EQ(las->NextChange(h.state(), 61'000), 120'000);
  EXPECT_FALSE(las->OnWayBack(h.job("old"), 119'999));
  EXPECT_TRUE(las->OnWayBack(h.job("old"), 120'000));
  EXPECT_FALSE(las->OnWayBack(h.job("full"), 120'000)) << "it never stopped";
  EXPECT_GT(LasWith({{"thresholds", "100000"}})->NextChange(h.state(), 61'000), 120'000) << "without it, none then";
}

TEST(LasPlugin, WayBackReserveFalseLeavesTheReservationToTheNextGang) {
  // StoppedAheadKeepsTheGpusThatFreeForTheStoppedGang's scenario with
  // wayBack 0.01 (`old` ran 60 s: on its way back from 60.6 s): it is first
  // in order and, by default, holds B's freed GPUs (`fresh` waits at 100
  // s); with wayBackReserve false it holds nothing, and `fresh` takes them.
  for (const bool reserve : {true, false}) {
    EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(),
                    PolicyFromYaml(LasPolicy("100", std::string(", preemptAfter: 100000, wayBack: 0.01") +
                                                        (reserve ? "" : ", wayBackReserve: false"))));
    h.Submit(JobBuilder("old").GpusPerTask(8).Build());
    h.Submit(JobBuilder("h1").GpusPerTask(4).Build());
    h.Submit(JobBuilder("h2").GpusPerTask(4).Build());
    h.clock().Set(0);
    h.Cycle();
    ASSERT_TRUE(h.Running("old") && h.Running("h1") && h.Running("h2"));
    h.clock().Set(60'000);
    ASSERT_TRUE(h.engine().RemoveNode(h.state().cluster().node(h.job("old").task(0).node).name).ok());
    h.clock().Set(61'000);
    h.Submit(JobBuilder("fresh").GpusPerTask(4).Build());
    h.Cycle();
    ASSERT_FALSE(h.Running("old") || h.Running("fresh"));
    ASSERT_TRUE(h.engine().FinishJob(h.job("h1").id(), true).ok());
    h.clock().Set(100'000);
    h.Cycle();
    EXPECT_EQ(h.Running("fresh"), !reserve) << (reserve ? "B's freed GPUs are kept for `old`" : "nothing kept");
  }
}

TEST(LasPlugin, WayBackAndKeepRestartedArgumentsAreChecked) {
  for (const auto& bad : std::vector<std::vector<std::pair<std::string, std::string>>>{
           {{"wayBack", "-1"}}, {{"wayBackMax", "60"}}, {{"wayBackReserve", "false"}}, {{"wayBack", "1"}, {"wayBackMax", "-5"}},
           {{"keepRestartedLevel", "2"}}, {{"keepRestarted", "true"}, {"keepRestartedLevel", "-1"}},
           {{"keepRestartedFrom", "stopped"}}, {{"keepRestarted", "true"}, {"keepRestartedFrom", "chains"}}}) {
    auto p = plugins::LasPlugin::Create(scheduler::PluginArgs("las", "p.yaml", [&] {
      std::map<std::string, scheduler::PluginArgs::Value> v;
      for (const auto& [k, t] : bad) v[k] = {t, 4, 17};
      return v;
    }()));
    EXPECT_FALSE(p.ok()) << bad[0].first << " " << bad[0].second;
  }
}

TEST(LasPlugin, KeepRestartedStopsARestartedJobAgainOnlyPastItsNextThreshold) {
  // Thresholds 100 and 100,000 GPU-s: an 8-GPU job is at level 1 from 12.5
  // s, level 2 from 12,500 s of run. `a` runs 0-60 s (480 GPU-s, level 1)
  // and loses its node; it restarts at 100 s when `b` ends, at level 1.
  // `fresh` (level 0) arrives at 200 s. Without keepRestarted it stops `a`
  // at once; with it `a` is kept at the level it restarted at, and `fresh`
  // stops it once it has crossed 100,000 GPU-s: 60 + 12,440 s of run, at
  // 12,540 s.
  // keepRestartedFrom: stopped keeps it only from a job that was stopped
  // itself: `fresh`, a newcomer, stops it at once as without the option.
  for (const std::string mode : {"off", "all", "stopped"}) {
    SCOPED_TRACE(mode);
    const bool keep = mode == "all";
    EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(),
                    PolicyFromYaml(LasPolicy("100, 100000", mode == "off"   ? ""
                                                            : mode == "all" ? ", keepRestarted: true"
                                                                            : ", keepRestarted: true, keepRestartedFrom: stopped")));
    h.Submit(JobBuilder("a").GpusPerTask(8).Build());
    h.Submit(JobBuilder("b").GpusPerTask(8).Build());
    h.clock().Set(0);
    h.Cycle();
    ASSERT_TRUE(h.Running("a") && h.Running("b"));
    h.clock().Set(60'000);
    ASSERT_TRUE(h.engine().RemoveNode(h.state().cluster().node(h.job("a").task(0).node).name).ok());
    h.Cycle();
    ASSERT_FALSE(h.Running("a"));
    ASSERT_TRUE(h.engine().FinishJob(h.job("b").id(), true).ok());
    h.clock().Set(100'000);
    h.Cycle();
    ASSERT_TRUE(h.Running("a")) << "restarted at level 1";
    auto las = LasWith({{"thresholds", "100, 100000"}, {"keepRestarted", mode == "off" ? "false" : "true"}});
    ASSERT_NE(las, nullptr);
    EXPECT_EQ(las->KeptAtRestartLevel(h.job("a"), 200'000), mode != "off");
    EXPECT_EQ(las->KeptAtRestartLevel(h.job("a"), 12'539'000), mode != "off");
    EXPECT_FALSE(las->KeptAtRestartLevel(h.job("a"), 12'540'000)) << "past its next threshold";
    // keepRestartedLevel: only a job that restarted at that level or above.
    for (const auto& [level, kept] : std::vector<std::pair<std::string, bool>>{{"1", true}, {"2", false}}) {
      auto at = LasWith({{"thresholds", "100, 100000"}, {"keepRestarted", "true"}, {"keepRestartedLevel", level}});
      ASSERT_NE(at, nullptr);
      EXPECT_EQ(at->KeptAtRestartLevel(h.job("a"), 200'000), kept) << "keepRestartedLevel " << level;
    }
    h.clock().Set(200'000);
    h.Submit(JobBuilder("fresh").GpusPerTask(8).Build());
    h.clock().Set(200'000);
    auto d = h.Cycle();
    EXPECT_EQ(d.evictions.size(), keep ? 0u : 1u);
    if (!keep) continue;
    h.clock().Set(12'539'000);
    EXPECT_TRUE(h.Cycle().evictions.empty());
    h.clock().Set(12'540'000);
    d = h.Cycle();
    ASSERT_EQ(d.evictions.size(), 1u);
    EXPECT_EQ(d.evictions[0].preemptor, "fresh");
  }
}

TEST(RunLengths, EndWithinCountsTheSamplesAboveTheAgeThatEndBeforeTheHorizon) {
  plugins::RunLengths r;
  for (int64_t s : {10, 100, 1000}) r.Add(s * 1000);
  EXPECT_EQ(r.samples(), 3);
  // Above 50 s: 100 s and 1000 s; within 50 + 100 s: 100 s. 1 / 2.
  EXPECT_DOUBLE_EQ(r.EndWithin(50'000, 100'000), 0.5);
  // From 0: all three; within 20 s: 10 s. 1 / 3.
  EXPECT_DOUBLE_EQ(r.EndWithin(0, 20'000), 1.0 / 3);
  // Above 500 s: 1000 s, which ends within 500 + 600 s: 1.
  EXPECT_DOUBLE_EQ(r.EndWithin(500'000, 600'000), 1.0);
  EXPECT_DOUBLE_EQ(r.EndWithin(500'000, 400'000), 0.0) << "1000 s is past 900 s";
  EXPECT_DOUBLE_EQ(r.EndWithin(2'000'000, 1'000'000), 0.0) << "no job seen to run longer: not expected to end";
  // Whole bins of 5 %: 100 s and 104 s share none (1.05^95 = 103.1 s), 100
  // s and 101 s share one, so an age of 101 s is not below 100 s's sample.
  EXPECT_EQ(plugins::RunLengths::BinOf(100'000), plugins::RunLengths::BinOf(101'000));
  EXPECT_LT(plugins::RunLengths::BinOf(100'000), plugins::RunLengths::BinOf(104'000));
  EXPECT_DOUBLE_EQ(r.EndWithin(101'000, 500'000), 0.0) << "only 1000 s is above, and it runs past 601 s";
}

// One 8-GPU node; byTime threshold 50 s, preemptAfter 10 s. Two 4-GPU jobs
// run 0-100 s and end (two samples of 100 s run). `long` (8 GPUs) starts at
// 100 s, `new` (8 GPUs) arrives at 150 s and may preempt from 160 s.
EngineHarness FreeHorizonScenario(const std::string& more) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(),
                  PolicyFromYaml(LasPolicy("50", ", byTime: true, preemptAfter: 10" + more)));
  h.Submit(JobBuilder("t1").GpusPerTask(4).Build());
  h.Submit(JobBuilder("t2").GpusPerTask(4).Build());
  h.clock().Set(0);
  h.Cycle();
  EXPECT_TRUE(h.Running("t1") && h.Running("t2"));
  h.clock().Set(100'000);
  EXPECT_TRUE(h.engine().FinishJob(h.job("t1").id(), true).ok());
  EXPECT_TRUE(h.engine().FinishJob(h.job("t2").id(), true).ok());
  h.Submit(JobBuilder("long").GpusPerTask(8).Build());
  h.clock().Set(100'000);
  h.Cycle();
  EXPECT_TRUE(h.Running("long"));
  h.clock().Set(150'000);
  h.Submit(JobBuilder("new").GpusPerTask(8).Build());
  return h;
}

TEST(LasPlugin, FreeHorizonHoldsANewcomerWhileTheRunningJobsAreExpectedToEnd) {
  // Control: without freeHorizon `new` stops `long` (level 1) at 160 s.
  {
    EngineHarness h = FreeHorizonScenario("");
    h.clock().Set(160'000);
    auto d = h.Cycle();
    ASSERT_EQ(d.evictions.size(), 1u);
    EXPECT_EQ(d.evictions[0].preemptor, "new");
  }
  // freeHorizon 1 h, 2 samples suffice. At 160 s the ages are read at 120 s:
  // `long` had run 20 s, and both jobs seen to end ran 100 s, so it is
  // expected to end within the hour (P = 2 / 2): 8 GPUs expected >= the 8
  // `new` needs, `new` is held. The same at 230 s (ages at 180 s: 80 s).
  // At 240 s `long` had run 140 s, longer than any job seen to end: it is
  // not expected to end, and `new` preempts.
  EngineHarness h = FreeHorizonScenario(", freeHorizon: 3600, freeMinSamples: 2");
  for (scheduler::Timestamp t : {160'000, 179'000, 230'000}) {
    h.clock().Set(t);
    EXPECT_TRUE(h.Cycle().evictions.empty()) << "at " << t << " ms `long` is expected to end within the hour";
    EXPECT_TRUE(h.Running("long"));
  }
  // The arithmetic on the same state, by a plugin given the two samples:
  // at 230 s `long` (80 s run at 180 s) is expected to free its 8 GPUs; at
  // 240 s (140 s run) none. While `new` is in its window the next minute is
  // a wake-up.
  auto p = LasWith({{"thresholds", "50"}, {"byTime", "true"}, {"preemptAfter", "10"}, {"freeHorizon", "3600"}});
  ASSERT_NE(p, nullptr);
  auto& las = *p;
  las.run_lengths().Add(100'000);
  las.run_lengths().Add(100'000);
  EXPECT_DOUBLE_EQ(las.ExpectedFreeGpus(h.state(), 230'000), 8.0);
  EXPECT_DOUBLE_EQ(las.ExpectedFreeGpus(h.state(), 240'000), 0.0);
  EXPECT_EQ(las.NextChange(h.state(), 230'000), 240'000);
  h.clock().Set(240'000);
  auto d = h.Cycle();
  ASSERT_EQ(d.evictions.size(), 1u);
  EXPECT_EQ(d.evictions[0].preemptor, "new");
  EXPECT_EQ(h.state().job(d.evictions[0].job).name(), "long");
}

TEST(LasPlugin, FreeHorizonCountsTheWaitingJobsAheadAndEndsWithItsWindow) {
  // Two 8-GPU nodes; byTime threshold 50 s, preemptAfter 10 s, freeHorizon
  // 1 h after 2 samples. `long2` (8 GPUs) runs from 0 s on one node; on the
  // other `t1` and `t2` (4 GPUs) run 0-100 s (two samples of 100 s), then
  // `long` (8 GPUs) from 100 s. `first` (8 GPUs) waits from 140 s, `new`
  // (8 GPUs) from 150 s. At 150-159 s (ages read at 120 s: `long` 20 s, so
  // P = 1; `long2` 120 s, past every sample, P = 0) 8 GPUs are expected
  // within the hour: they cover `first` (8), held, but not `first` and
  // `new` (16), so at 160 s `new` preempts.
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(),
                  PolicyFromYaml(LasPolicy(
                      "50", ", byTime: true, preemptAfter: 10, freeHorizon: 3600, freeMinSamples: 2")));
  h.Submit(JobBuilder("long2").GpusPerTask(8).Build());
  h.Submit(JobBuilder("t1").GpusPerTask(4).Build());
  h.Submit(JobBuilder("t2").GpusPerTask(4).Build());
  h.clock().Set(0);
  h.Cycle();
  ASSERT_TRUE(h.Running("long2") && h.Running("t1") && h.Running("t2"));
  h.clock().Set(100'000);
  ASSERT_TRUE(h.engine().FinishJob(h.job("t1").id(), true).ok());
  ASSERT_TRUE(h.engine().FinishJob(h.job("t2").id(), true).ok());
  h.Submit(JobBuilder("long").GpusPerTask(8).Build());
  h.clock().Set(100'000);
  h.Cycle();
  ASSERT_TRUE(h.Running("long"));
  h.clock().Set(140'000);
  h.Submit(JobBuilder("first").GpusPerTask(8).Build());
  h.clock().Set(150'000);
  h.Submit(JobBuilder("new").GpusPerTask(8).Build());
  h.clock().Set(159'000);
  EXPECT_TRUE(h.Cycle().evictions.empty()) << "`first` held, `new` short of preemptAfter";
  h.clock().Set(160'000);
  auto d = h.Cycle();
  ASSERT_EQ(d.evictions.size(), 1u);
  EXPECT_EQ(d.evictions[0].preemptor, "new");
  EXPECT_FALSE(h.Running("first"));

  // The window: a job held is held at most preemptAfter + freeHorizon; the
  // window's end is a wake-up. freeHorizon 60 s: `first` (waiting since
  // 140 s) may preempt from 150 s, held until 210 s at most.
  auto p = LasWith({{"thresholds", "50"}, {"byTime", "true"}, {"preemptAfter", "10"}, {"freeHorizon", "60"}});
  ASSERT_NE(p, nullptr);
  auto& las = *p;
  EngineHarness w(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  w.Submit(JobBuilder("run").GpusPerTask(8).Build());
  w.clock().Set(0);
  w.Cycle();
  w.clock().Set(140'000);
  w.Submit(JobBuilder("first").GpusPerTask(8).Build());
  // run's byTime threshold is crossed at 50 s; at 170 s the next changes
  // are the minute (180 s) and the window's end (210 s).
  EXPECT_EQ(las.NextChange(w.state(), 170'000), 180'000);
  EXPECT_EQ(las.NextChange(w.state(), 200'000), 210'000);
  EXPECT_EQ(las.NextChange(w.state(), 210'000), scheduler::kNoChange) << "past its window: nothing by time";
  for (const std::string bad : {"-1", "2e9", "soon"}) {
    auto q = plugins::LasPlugin::Create(scheduler::PluginArgs("las", "p.yaml", {{"freeHorizon", {bad, 6, 3}}}));
    ASSERT_ERROR(q, absl::StatusCode::kInvalidArgument, "p.yaml:6:3: plugins[las].arguments.freeHorizon: ") << bad;
  }
  auto q = plugins::LasPlugin::Create(scheduler::PluginArgs("las", "p.yaml", {{"freeMinSamples", {"0", 6, 3}}}));
  ASSERT_ERROR(q, absl::StatusCode::kInvalidArgument, "p.yaml:6:3: plugins[las].arguments.freeMinSamples: ");
}

// Two 8-GPU nodes, each running two 4-GPU jobs from 0 s; at 100 s one job
// on each node ends (two samples of 100 s run): 4 GPUs free on each node, 8
// in all, but no node has 8. `gang` (one task of 8 GPUs) waits from 100 s
// and may preempt from 130 s (preemptAfter 30 s; byTime threshold 50 s puts
// the two left at level 1). At 130 s their ages are read at 120 s, longer
// than any job seen to end: neither is expected to end within the hour.
EngineHarness FragmentedScenario(const std::string& more) {
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(),
                  PolicyFromYaml(LasPolicy(
                      "50", ", byTime: true, preemptAfter: 30, freeHorizon: 3600, freeMinSamples: 2" + more)));
  const std::vector<std::string> names = {"j1", "j2", "j3", "j4"};
  for (const std::string& n : names) h.Submit(JobBuilder(n).GpusPerTask(4).Build());
  h.clock().Set(0);
  h.Cycle();
  std::map<uint32_t, std::string> first_on;  // one job on each node
  for (const std::string& n : names) {
    EXPECT_TRUE(h.Running(n)) << n;
    first_on.emplace(h.job(n).task(0).node.value(), n);
  }
  EXPECT_EQ(first_on.size(), 2u);
  h.clock().Set(100'000);
  for (const auto& [node, name] : first_on) EXPECT_TRUE(h.engine().FinishJob(h.job(name).id(), true).ok());
  h.Submit(JobBuilder("gang").GpusPerTask(8).Build());
  h.clock().Set(100'000);
  h.Cycle();
  EXPECT_FALSE(h.Running("gang")) << "4 GPUs free on each node";
  return h;
}

TEST(LasPlugin, FreeByNodeDoesNotHoldAGangForGpusScatteredOverNodes) {
  // Counted as GPUs, the 8 free (4 + 4) cover `gang`'s 8: it is held at
  // 130 s, though no node will have 8 free within the hour.
  {
    EngineHarness h = FragmentedScenario("");
    h.clock().Set(130'000);
    EXPECT_TRUE(h.Cycle().evictions.empty()) << "held by the GPU count";
  }
  // freeByNode: tasks of 8 GPUs expected to fit: floor(4 / 8) on each node
  // (nothing there is expected to end), 0 < the 1 task `gang` needs: not
  // held, it stops one of the two (which frees a node's 8).
  for (const std::string mode : {"expected", "floor"}) {
    EngineHarness h = FragmentedScenario(", freeByNode: " + mode);
    h.clock().Set(130'000);
    auto d = h.Cycle();
    ASSERT_EQ(d.evictions.size(), 1u) << mode;
    EXPECT_EQ(d.evictions[0].preemptor, "gang") << mode;
  }
  // freeGangHorizon 0: a job of tasks of more than 1 GPU is never held.
  EngineHarness h = FragmentedScenario(", freeGangHorizon: 0");
  h.clock().Set(130'000);
  auto d = h.Cycle();
  ASSERT_EQ(d.evictions.size(), 1u);
  EXPECT_EQ(d.evictions[0].preemptor, "gang");
}

TEST(LasPlugin, FreeByNodeCountsTheTasksThatFitPerNodeByEachJobsChance) {
  // Samples of 100 s and 10,000 s; horizon 1 h. At 60 s a job that started
  // at 0 s has run 60 s: of the two samples above it, 100 s ends within 60 s
  // + 1 h: P = 1/2.
  auto make = [](const std::string& mode) {
    auto p = LasWith({{"thresholds", "50"}, {"freeHorizon", "3600"}, {"freeByNode", mode}});
    if (p != nullptr) {
      p->run_lengths().Add(100'000);
      p->run_lengths().Add(10'000'000);
    }
    return p;
  };
  auto expected = make("expected"), floor = make("floor");
  ASSERT_NE(expected, nullptr);
  ASSERT_NE(floor, nullptr);
  // One 8-GPU node, two 4-GPU jobs, each ending with P = 1/2: the node has
  // 0, 4 or 8 GPUs free with P 1/4, 1/2, 1/4.
  EngineHarness two(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  ASSERT_TRUE(StartAtZero(two, JobBuilder("a1").GpusPerTask(4).Build()));
  ASSERT_TRUE(StartAtZero(two, JobBuilder("a2").GpusPerTask(4).Build()));
  // "expected": E[floor(F / g)]. g = 8: 1/4; g = 4: 1/2 x 1 + 1/4 x 2 = 1;
  // g = 2: 1/2 x 2 + 1/4 x 4 = 2.
  EXPECT_DOUBLE_EQ(expected->ExpectedFreeTasks(two.state(), 60'000, 8), 0.25);
  EXPECT_DOUBLE_EQ(expected->ExpectedFreeTasks(two.state(), 60'000, 4), 1.0);
  EXPECT_DOUBLE_EQ(expected->ExpectedFreeTasks(two.state(), 60'000, 2), 2.0);
  // "floor": floor(E[F] / g), E[F] = 4: 0, 1, 2. The GPUs: 4.
  EXPECT_DOUBLE_EQ(floor->ExpectedFreeTasks(two.state(), 60'000, 8), 0.0);
  EXPECT_DOUBLE_EQ(floor->ExpectedFreeTasks(two.state(), 60'000, 4), 1.0);
  EXPECT_DOUBLE_EQ(floor->ExpectedFreeTasks(two.state(), 60'000, 2), 2.0);
  EXPECT_DOUBLE_EQ(expected->ExpectedFreeGpus(two.state(), 60'000), 4.0);
  // One job of two 4-GPU tasks on the node: both end with it, 0 or 8 free
  // with P 1/2 each: 1/2 task of 8 (two jobs' 1/4 if counted apart).
  EngineHarness one(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  ASSERT_TRUE(StartAtZero(one, JobBuilder("a").GpusPerTask(4).Gang(2).Build()));
  EXPECT_DOUBLE_EQ(expected->ExpectedFreeTasks(one.state(), 60'000, 8), 0.5);
  EXPECT_DOUBLE_EQ(floor->ExpectedFreeTasks(one.state(), 60'000, 8), 0.0);
  // Two 8-GPU nodes: one free, the other held by an 8-GPU job (P = 1/2):
  // 1 + 1/2 tasks of 8; floor: 1 + floor(4 / 8) = 1. Tasks of 3: 2 on the
  // free node, 2 x 1/2 on the other; floor: 2 + floor(4 / 3) = 3.
  EngineHarness half(ClusterBuilder().NodesPerRack(2).Gpus(8).Build());
  ASSERT_TRUE(StartAtZero(half, JobBuilder("b").GpusPerTask(8).Build()));
  EXPECT_DOUBLE_EQ(expected->ExpectedFreeTasks(half.state(), 60'000, 8), 1.5);
  EXPECT_DOUBLE_EQ(floor->ExpectedFreeTasks(half.state(), 60'000, 8), 1.0);
  EXPECT_DOUBLE_EQ(expected->ExpectedFreeTasks(half.state(), 60'000, 3), 3.0);
  EXPECT_DOUBLE_EQ(floor->ExpectedFreeTasks(half.state(), 60'000, 3), 3.0);
}

TEST(LasPlugin, FreeByNodeCountsTheGangTasksAheadInTheJobsShape) {
  // Three 8-GPU nodes, two 4-GPU jobs on each from 0 s. At 100 s both end on
  // node A and one on each of B and C (four samples of 100 s run); `young`
  // (8 GPUs) starts on A. `first` and `second` (8 GPUs each) wait from 100 s
  // and may preempt from 130 s. At 140 s (ages read at 120 s) `young` (20 s) ends
  // within the hour with P = 1, the 4-GPU jobs left (120 s) with P = 0.
  const std::string args = ", byTime: true, preemptAfter: 30, freeHorizon: 3600, freeMinSamples: 2";
  EngineHarness h(ClusterBuilder().NodesPerRack(3).Gpus(8).Build(), PolicyFromYaml(LasPolicy("50", args)));
  const std::vector<std::string> names = {"j1", "j2", "j3", "j4", "j5", "j6"};
  for (const std::string& n : names) h.Submit(JobBuilder(n).GpusPerTask(4).Build());
  h.clock().Set(0);
  h.Cycle();
  std::map<uint32_t, std::vector<std::string>> on;  // by node
  for (const std::string& n : names) {
    ASSERT_TRUE(h.Running(n)) << n;
    on[h.job(n).task(0).node.value()].push_back(n);
  }
  ASSERT_EQ(on.size(), 3u);
  h.clock().Set(100'000);
  bool node_a = true;
  for (const auto& [node, jobs] : on) {
    ASSERT_EQ(jobs.size(), 2u);
    ASSERT_TRUE(h.engine().FinishJob(h.job(jobs[0]).id(), true).ok());
    if (node_a) {
      ASSERT_TRUE(h.engine().FinishJob(h.job(jobs[1]).id(), true).ok());
    }
    node_a = false;
  }
  h.Submit(JobBuilder("young").GpusPerTask(8).Build());
  h.clock().Set(100'000);
  h.Cycle();
  ASSERT_TRUE(h.Running("young"));
  h.clock().Set(100'000);
  h.Submit(JobBuilder("first").GpusPerTask(8).Build());
  h.Submit(JobBuilder("second").GpusPerTask(8).Build());
  h.clock().Set(100'000);
  h.Cycle();
  // At 140 s both may preempt. Counted as GPUs: 8 free + 8 expected = 16
  // cover `first` (8) and `first` and `second` (16): both held, nobody is
  // stopped.
  h.clock().Set(140'000);
  EXPECT_TRUE(h.Cycle().evictions.empty());
  ASSERT_FALSE(h.Running("first") || h.Running("second"));
  // Counted as tasks of 8: 1 on A, none on B or C (4 free each): it covers
  // `first` (1 task), not `first` and `second` (2). Asked on the same state.
  auto& state = const_cast<scheduler::State&>(h.state());
  h.clock().Set(140'000);
  for (const bool by_node : {false, true}) {
    auto p = LasWith({{"thresholds", "50"},
                      {"byTime", "true"},
                      {"preemptAfter", "30"},
                      {"freeHorizon", "3600"},
                      {"freeMinSamples", "2"},
                      {"freeByNode", by_node ? "expected" : "off"}});
    ASSERT_NE(p, nullptr);
    const std::vector<std::vector<scheduler::Plugin*>> tiers = {{p.get()}};
    scheduler::Session s(state, h.clock(), 1000, tiers);
    EXPECT_TRUE(p->HeldForFreeGpus(h.job("first"))) << by_node;
    EXPECT_EQ(p->HeldForFreeGpus(h.job("second")), !by_node);
    if (by_node) {
      EXPECT_DOUBLE_EQ(p->ExpectedFreeTasks(state, 140'000, 8), 1.0);
      EXPECT_DOUBLE_EQ(p->ExpectedFreeTasks(state, 140'000, 4), 4.0) << "2 on A, 1 on B, 1 on C";
    }
    s.Close();
  }
}

TEST(LasPlugin, FreeGangHorizonIsTheWindowOfAJobOfMultiGpuTasks) {
  // preemptAfter 10 s, freeHorizon 60 s, freeGangHorizon 600 s: a job of 8
  // GPUs waiting from 140 s is in its window 150-750 s, a 1-GPU job 150-210 s.
  auto p = LasWith({{"thresholds", "50"},
                    {"byTime", "true"},
                    {"preemptAfter", "10"},
                    {"freeHorizon", "60"},
                    {"freeGangHorizon", "600"}});
  ASSERT_NE(p, nullptr);
  auto& las = *p;
  EngineHarness w(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  w.Submit(JobBuilder("run").GpusPerTask(8).Build());
  w.clock().Set(0);
  w.Cycle();
  w.clock().Set(140'000);
  w.Submit(JobBuilder("gang").GpusPerTask(8).Build());
  EXPECT_EQ(las.NextChange(w.state(), 200'000), 240'000) << "the minute, not 210 s";
  EXPECT_EQ(las.NextChange(w.state(), 730'000), 750'000);
  EXPECT_EQ(las.NextChange(w.state(), 750'000), scheduler::kNoChange);
  EngineHarness one(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  one.Submit(JobBuilder("run").GpusPerTask(8).Build());
  one.clock().Set(0);
  one.Cycle();
  one.clock().Set(140'000);
  one.Submit(JobBuilder("small").GpusPerTask(1).Build());
  EXPECT_EQ(las.NextChange(one.state(), 200'000), 210'000) << "a 1-GPU job keeps freeHorizon";
  for (const std::string bad : {"-2", "2e9", "soon"}) {
    auto q = plugins::LasPlugin::Create(scheduler::PluginArgs("las", "p.yaml", {{"freeGangHorizon", {bad, 6, 3}}}));
    ASSERT_ERROR(q, absl::StatusCode::kInvalidArgument, "p.yaml:6:3: plugins[las].arguments.freeGangHorizon: ") << bad;
  }
  auto q = plugins::LasPlugin::Create(scheduler::PluginArgs("las", "p.yaml", {{"freeByNode", {"nodes", 6, 3}}}));
  ASSERT_ERROR(q, absl::StatusCode::kInvalidArgument, "p.yaml:6:3: plugins[las].arguments.freeByNode: ");
}

// One freeGangCharge case: las with `args` and freeGangCharge `charge`, a
// session opened on `h` at `at`, in which `check` asks the plugin.
struct ChargeCase {
  std::string charge;
  scheduler::Timestamp at;
  bool held;
};
void ForEachCharge(EngineHarness& h, std::vector<std::pair<std::string, std::string>> args,
                   const std::vector<ChargeCase>& cases,
                   const std::function<void(plugins::LasPlugin&, const ChargeCase&)>& check) {
  auto& state = const_cast<scheduler::State&>(h.state());
  args.push_back({"freeGangCharge", ""});
  for (const ChargeCase& c : cases) {
    args.back().second = c.charge;
    auto p = LasWith(args);
    ASSERT_NE(p, nullptr);
    h.clock().Set(c.at);
    const std::vector<std::vector<scheduler::Plugin*>> tiers = {{p.get()}};
    scheduler::Session s(state, h.clock(), 1000, tiers);
    check(*p, c);
    s.Close();
  }
}

TEST(LasPlugin, FreeGangChargeEndsAGangsHoldOnceTheJobsBehindItHaveWaitedItsBudget) {
  // FreeHorizonScenario: `long` (8 GPUs) runs from 100 s and is expected to
  // end within the hour until 240 s; `new` (8 GPUs, one task) waits from
  // 150 s, its window opens at 160 s. Behind it in job order (level 0,
  // first come first served): `a` (1 GPU) waits from 155 s, `b` (1 GPU)
  // from 170 s. At 180-239 s the waits are read at 180 s: `a` 180 - 160 =
  // 20 s (since the window opened), `b` 180 - 170 = 10 s: a charge of 30 s.
  // freeGangCharge c allows c x 8 GPUs: 3 (24 s) ends the hold, 4 (32 s)
  // keeps it. At 179 s (read at 120 s, before the window opened) nothing is
  // charged and both hold.
  EngineHarness h = FreeHorizonScenario("");
  h.clock().Set(155'000);
  h.Submit(JobBuilder("a").GpusPerTask(1).Build());
  h.clock().Set(170'000);
  h.Submit(JobBuilder("b").GpusPerTask(1).Build());
  ForEachCharge(h,
                {{"thresholds", "50"}, {"byTime", "true"}, {"preemptAfter", "10"}, {"freeHorizon", "3600"},
                 {"freeMinSamples", "2"}},
                {{"0", 230'000, true}, {"3", 179'000, true}, {"3", 180'000, false}, {"3", 239'000, false},
                 {"4", 230'000, true}, {"3.75", 230'000, true}, {"3.74", 230'000, false}},
                [&](plugins::LasPlugin& p, const ChargeCase& c) {
                  EXPECT_EQ(p.HeldForFreeGpus(h.job("new")), c.held) << "freeGangCharge " << c.charge << " at " << c.at;
                  EXPECT_FALSE(p.HeldForFreeGpus(h.job("a"))) << "8 + 1 GPUs ahead of `a`, 8 expected";
                  // Past the budget `new` ranks at its level (it may preempt
                  // `long`), held as its priority's lowest.
                  EXPECT_EQ(p.PreemptRank(h.job("new"), c.at) > p.PreemptRank(h.job("long"), c.at), !c.held);
                });
  // Checked like the other arguments.
  for (const std::string bad : {"-1", "2e9", "soon"}) {
    auto q = plugins::LasPlugin::Create(scheduler::PluginArgs("las", "p.yaml", {{"freeGangCharge", {bad, 6, 3}}}));
    ASSERT_ERROR(q, absl::StatusCode::kInvalidArgument, "p.yaml:6:3: plugins[las].arguments.freeGangCharge: ") << bad;
  }
}

TEST(LasPlugin, FreeGangChargeByIdleChargesTheFreeGpusItKeepsFromTheJobsBehind) {
  // FragmentedScenario: 4 GPUs free on each of two nodes (8 in all), no
  // running job expected to end; `gang` (8 GPUs) waits from 100 s, its
  // window opens at 130 s, and counted as GPUs it is held (8 free >= 8).
  // Behind it `a` (1 GPU) and `b` (2 GPUs) wait: the free GPUs it keeps
  // from them are min(8, 1 + 2) = 3. At 180-239 s (read at 180 s) it has
  // been 50 s in its window: 3 x 50 = 150 GPU-s, against freeGangCharge x
  // 8: 18.75 (150) keeps the hold, 18 (144) ends it. At 179 s (read at
  // 120 s, before the window opened) nothing is charged.
  EngineHarness h = FragmentedScenario("");
  h.clock().Set(110'000);
  h.Submit(JobBuilder("a").GpusPerTask(1).Build());
  h.clock().Set(120'000);
  h.Submit(JobBuilder("b").GpusPerTask(2).Build());
  ForEachCharge(h,
                {{"thresholds", "50"}, {"byTime", "true"}, {"preemptAfter", "30"}, {"freeHorizon", "3600"},
                 {"freeMinSamples", "2"}, {"freeGangChargeBy", "idle"}},
                {{"18", 179'000, true}, {"18", 180'000, false}, {"18", 239'000, false}, {"18.75", 230'000, true},
                 {"0", 230'000, true}},
                [&](plugins::LasPlugin& p, const ChargeCase& c) {
                  EXPECT_EQ(p.HeldForFreeGpus(h.job("gang")), c.held) << "freeGangCharge " << c.charge << " at " << c.at;
                });
  auto q = plugins::LasPlugin::Create(scheduler::PluginArgs("las", "p.yaml", {{"freeGangChargeBy", {"gpus", 6, 3}}}));
  ASSERT_ERROR(q, absl::StatusCode::kInvalidArgument, "p.yaml:6:3: plugins[las].arguments.freeGangChargeBy: ");
}

TEST(LasPlugin, FreeGangChanceIsTheShareOfTheHoldsOfItsClassThatEndedStarted) {
  // Classes: 2 | 3-4 | 5-8 | 9-16 | 17-32 GPUs.
  EXPECT_EQ(plugins::LasPlugin::GangClass(2), 1);
  EXPECT_EQ(plugins::LasPlugin::GangClass(3), 2);
  EXPECT_EQ(plugins::LasPlugin::GangClass(4), 2);
  EXPECT_EQ(plugins::LasPlugin::GangClass(5), 3);
  EXPECT_EQ(plugins::LasPlugin::GangClass(8), 3);
  EXPECT_EQ(plugins::LasPlugin::GangClass(9), 4);
  EXPECT_EQ(plugins::LasPlugin::GangClass(32), 5);
  // Five holds of 8-GPU gangs seen to end: started after 10, 100 and 1000 s;
  // not started after 50 and 5000 s (freeMinSamples 5).
  for (const std::string mode : {"share", "survival"}) {
    auto p = LasWith({{"thresholds", "50"}, {"freeHorizon", "3600"}, {"freeMinSamples", "5"},
                      {"freeGangCharge", "600"}, {"freeGangChance", mode}});
    ASSERT_NE(p, nullptr);
    for (int64_t s : {10, 100, 1000}) p->RecordGangHold(8, s * 1000, true);
    p->RecordGangHold(8, 50'000, false);
    EXPECT_DOUBLE_EQ(p->GangHoldChance(8, 0), 1.0) << "4 seen, fewer than freeMinSamples: the budget as is";
    p->RecordGangHold(8, 5'000'000, false);
    EXPECT_EQ(p->GangHoldsSeen(8), 5);
    EXPECT_EQ(p->GangHoldsSeen(5), 5) << "5-8 GPUs: one class";
    EXPECT_EQ(p->GangHoldsSeen(16), 0);
    EXPECT_DOUBLE_EQ(p->GangHoldChance(16, 0), 1.0) << "none of 9-16 GPUs seen";
    EXPECT_DOUBLE_EQ(p->GangHoldChance(8, 0), 0.6) << "3 of 5 started";
    EXPECT_DOUBLE_EQ(p->GangHoldChance(5, 0), 0.6);
    if (mode == "share") {
      EXPECT_DOUBLE_EQ(p->GangHoldChance(8, 2'000'000), 0.6) << "share: the age does not count";
      continue;
    }
    // survival: of the holds that lasted at least the age (whole bins of 5 %).
    EXPECT_DOUBLE_EQ(p->GangHoldChance(8, 10'000), 0.6) << "all five lasted 10 s or more";
    EXPECT_DOUBLE_EQ(p->GangHoldChance(8, 11'000), 0.5) << "50, 100, 1000 s and 5000 s: 2 of 4";
    EXPECT_DOUBLE_EQ(p->GangHoldChance(8, 60'000), 2.0 / 3) << "100, 1000 (started) and 5000 s";
    EXPECT_DOUBLE_EQ(p->GangHoldChance(8, 2'000'000), 0.0) << "only 5000 s, not started";
    EXPECT_DOUBLE_EQ(p->GangHoldChance(8, 6'000'000), 0.0) << "none lasted so long";
  }
  for (const std::string bad : {"yes", "1"}) {
    auto q = plugins::LasPlugin::Create(scheduler::PluginArgs(
        "las", "p.yaml", {{"freeGangCharge", {"600", 5, 3}}, {"freeGangChance", {bad, 6, 3}}}));
    ASSERT_ERROR(q, absl::StatusCode::kInvalidArgument, "p.yaml:6:3: plugins[las].arguments.freeGangChance: ") << bad;
  }
  auto q = plugins::LasPlugin::Create(scheduler::PluginArgs("las", "p.yaml", {{"freeGangChance", {"share", 6, 3}}}));
  ASSERT_ERROR(q, absl::StatusCode::kInvalidArgument, "p.yaml:6:3: plugins[las].arguments.freeGangChance: ");
}

TEST(LasPlugin, FreeGangChanceScalesTheChargeBudgetByTheChanceTheHoldSucceeds) {
  // The scenario of FreeGangChargeEndsAGangsHoldOnceTheJobsBehindItHaveWaitedItsBudget:
  // at 230 s `new` (8 GPUs) has charged 30 job-seconds to `a` and `b`.
  // freeGangCharge 4 allows 4 x 8 = 32 x the chance: 1 (none or too few
  // seen: held), 15 / 16 (30: held), 9 / 10 (28.8: ended). Holds of another
  // class do not count.
  EngineHarness h = FreeHorizonScenario("");
  h.clock().Set(155'000);
  h.Submit(JobBuilder("a").GpusPerTask(1).Build());
  h.clock().Set(170'000);
  h.Submit(JobBuilder("b").GpusPerTask(1).Build());
  auto& state = const_cast<scheduler::State&>(h.state());
  struct Case {
    int64_t gpus, started, not_started;
    bool held;
  };
  for (const Case& c : std::vector<Case>{
           {8, 0, 0, true}, {8, 0, 1, true}, {8, 15, 1, true}, {8, 9, 1, false}, {16, 0, 20, true}}) {
    auto p = LasWith({{"thresholds", "50"}, {"byTime", "true"}, {"preemptAfter", "10"}, {"freeHorizon", "3600"},
                      {"freeMinSamples", "2"}, {"freeGangCharge", "4"}, {"freeGangChance", "share"}});
    ASSERT_NE(p, nullptr);
    for (int64_t i = 0; i < c.started; ++i) p->RecordGangHold(c.gpus, 60'000, true);
    for (int64_t i = 0; i < c.not_started; ++i) p->RecordGangHold(c.gpus, 60'000, false);
    h.clock().Set(230'000);
    const std::vector<std::vector<scheduler::Plugin*>> tiers = {{p.get()}};
    scheduler::Session s(state, h.clock(), 1000, tiers);
    EXPECT_EQ(p->HeldForFreeGpus(h.job("new")), c.held)
        << c.gpus << " GPUs: " << c.started << " started, " << c.not_started << " not";
    s.Close();
  }
  // survival reads the hold's age at the last whole minute. Held first at
  // 170 s (nothing charged: read at 120 s); at 230 s (read at 180 s) it is
  // 10 s old. Seen: started after 5 s and 60 s, not started after 60 s:
  // share 2 / 3, survival at 10 s 1 / 2. freeGangCharge 6: 48 x 2 / 3 = 32
  // keeps the hold (30), 48 x 1 / 2 = 24 ends it.
  for (const std::string mode : {"share", "survival"}) {
    auto p = LasWith({{"thresholds", "50"}, {"byTime", "true"}, {"preemptAfter", "10"}, {"freeHorizon", "3600"},
                      {"freeMinSamples", "2"}, {"freeGangCharge", "6"}, {"freeGangChance", mode}});
    ASSERT_NE(p, nullptr);
    p->RecordGangHold(8, 5'000, true);
    p->RecordGangHold(8, 60'000, true);
    p->RecordGangHold(8, 60'000, false);
    const std::vector<std::vector<scheduler::Plugin*>> tiers = {{p.get()}};
    for (const scheduler::Timestamp at : {170'000, 230'000}) {
      h.clock().Set(at);
      scheduler::Session s(state, h.clock(), 1000, tiers);
      EXPECT_EQ(p->HeldForFreeGpus(h.job("new")), at == 170'000 || mode == "share") << mode << " at " << at;
      s.Close();
    }
  }
}

TEST(LasPlugin, FreeGangChanceLearnsWhetherEachHeldGangStartedWithoutAStop) {
  auto las = [] {
    return LasWith({{"thresholds", "50"}, {"byTime", "true"}, {"preemptAfter", "10"}, {"freeHorizon", "3600"},
                    {"freeMinSamples", "1"}, {"freeGangCharge", "1000"}, {"freeGangChance", "survival"}});
  };
  // Held at 170 s for `long`'s expected end; `long` ends at 200 s and `new`
  // starts in the free GPUs: a hold that ended started, after 30 s.
  {
    EngineHarness h = FreeHorizonScenario("");
    auto& state = const_cast<scheduler::State&>(h.state());
    auto p = las();
    ASSERT_NE(p, nullptr);
    const std::vector<std::vector<scheduler::Plugin*>> tiers = {{p.get()}};
    h.clock().Set(170'000);
    {
      scheduler::Session s(state, h.clock(), 1000, tiers);
      EXPECT_TRUE(p->HeldForFreeGpus(h.job("new")));
      s.Close();
    }
    h.clock().Set(200'000);
    ASSERT_TRUE(h.engine().FinishJob(h.job("long").id(), true).ok());
    h.clock().Set(200'000);
    EXPECT_TRUE(h.Cycle().evictions.empty());
    ASSERT_TRUE(h.Running("new"));
    EXPECT_EQ(p->GangHoldsSeen(8), 0) << "seen at the next session";
    h.clock().Set(210'000);
    scheduler::Session s(state, h.clock(), 1000, tiers);
    EXPECT_EQ(p->GangHoldsSeen(8), 1);
    EXPECT_DOUBLE_EQ(p->GangHoldChance(8, 30'000), 1.0);
    EXPECT_DOUBLE_EQ(p->GangHoldChance(8, 40'000), 0.0) << "it lasted 30 s";
    s.Close();
  }
  // Held at 170 and 230 s; at 240 s `long` is no longer expected to end, the
  // hold ends and `new` preempts it: a hold that did not end started, after
  // 230 - 170 = 60 s.
  EngineHarness h = FreeHorizonScenario(", freeHorizon: 3600, freeMinSamples: 2");
  auto& state = const_cast<scheduler::State&>(h.state());
  auto p = las();
  ASSERT_NE(p, nullptr);
  const std::vector<std::vector<scheduler::Plugin*>> tiers = {{p.get()}};
  for (const scheduler::Timestamp at : {170'000, 230'000, 240'000}) {
    h.clock().Set(at);
    scheduler::Session s(state, h.clock(), 1000, tiers);
    EXPECT_EQ(p->HeldForFreeGpus(h.job("new")), at < 240'000) << at;
    s.Close();
    EXPECT_EQ(h.Cycle().evictions.size(), at < 240'000 ? 0u : 1u) << at;
  }
  for (scheduler::Timestamp at = 250'000; at < 400'000 && !h.Running("new"); at += 10'000) {
    h.clock().Set(at);
    h.Cycle();
  }
  ASSERT_TRUE(h.Running("new"));
  h.clock().Set(400'000);
  scheduler::Session s(state, h.clock(), 1000, tiers);
  EXPECT_EQ(p->GangHoldsSeen(8), 1);
  EXPECT_DOUBLE_EQ(p->GangHoldChance(8, 60'000), 0.0) << "not started";
  EXPECT_DOUBLE_EQ(p->GangHoldChance(8, 70'000), 0.0) << "none lasted so long";
  s.Close();
}

TEST(LasPlugin, FreeGangChanceCountsAHoldOfAGangThatAlreadyPreemptedAsNotStarted) {
  // As FreeHorizonScenario on two nodes, with a 60 s grace period: `long`
  // and `other` (8 GPUs each) run from 100 s; at 160 s `new` (no freeHorizon
  // in the engine's policy) stops one of them and waits for its GPUs
  // (nominated). A plugin with freeHorizon holds it at 170 s (the other,
  // 20 s run at 120 s, is expected to end within the hour), but no stop is
  // saved: when `new` starts, the hold counts as not started.
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), PolicyFromYaml(R"(actions: "enqueue, allocate, preempt"
configurations:
- name: preempt
  arguments: {gracePeriod: 60, cooldown: 0}
tiers:
- plugins:
  - name: las
    arguments: {thresholds: "50", byTime: true, preemptAfter: 10}
  - name: gang
- plugins:
  - name: predicates
)"));
  h.Submit(JobBuilder("t1").GpusPerTask(4).Build());
  h.Submit(JobBuilder("t2").GpusPerTask(4).Build());
  h.clock().Set(0);
  h.Cycle();
  h.clock().Set(100'000);
  ASSERT_TRUE(h.engine().FinishJob(h.job("t1").id(), true).ok());
  ASSERT_TRUE(h.engine().FinishJob(h.job("t2").id(), true).ok());
  h.Submit(JobBuilder("long").GpusPerTask(8).Build());
  h.Submit(JobBuilder("other").GpusPerTask(8).Build());
  h.clock().Set(100'000);
  h.Cycle();
  ASSERT_TRUE(h.Running("long") && h.Running("other"));
  h.clock().Set(150'000);
  h.Submit(JobBuilder("new").GpusPerTask(8).Build());
  h.clock().Set(160'000);
  ASSERT_EQ(h.Cycle().evictions.size(), 1u);
  ASSERT_FALSE(h.Running("new"));
  ASSERT_TRUE(h.job("new").nominated() || h.job("new").PipelinedCount() > 0);
  auto p = LasWith({{"thresholds", "50"}, {"byTime", "true"}, {"preemptAfter", "10"}, {"freeHorizon", "3600"},
                    {"freeMinSamples", "1"}, {"freeGangCharge", "1000"}, {"freeGangChance", "share"}});
  ASSERT_NE(p, nullptr);
  auto& state = const_cast<scheduler::State&>(h.state());
  const std::vector<std::vector<scheduler::Plugin*>> tiers = {{p.get()}};
  h.clock().Set(170'000);
  {
    scheduler::Session s(state, h.clock(), 1000, tiers);
    ASSERT_TRUE(p->HeldForFreeGpus(h.job("new")));
    s.Close();
  }
  for (scheduler::Timestamp at = 180'000; at < 400'000 && !h.Running("new"); at += 10'000) {
    h.clock().Set(at);
    h.Cycle();
  }
  ASSERT_TRUE(h.Running("new"));
  h.clock().Set(400'000);
  scheduler::Session s(state, h.clock(), 1000, tiers);
  EXPECT_EQ(p->GangHoldsSeen(8), 1);
  EXPECT_DOUBLE_EQ(p->GangHoldChance(8, 0), 0.0) << "held, but after its stop";
  s.Close();
}

}  // namespace
}  // namespace ringmaster::testing
