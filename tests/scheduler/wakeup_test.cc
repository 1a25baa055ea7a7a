// What the engine retries, and when (docs/ARCHITECTURE.md, "What the engine
// retries"): after a cycle that changed nothing, Engine::NextWakeup names the
// first time a time-based condition turns (growIdle, an elastic cooldown, a
// victim's cooldown, a LAS threshold); any event, and any cycle that changed
// the state, wakes the next cycle at once. And the count bound of the gang
// planner (State::TasksFitByCount) against a recount.
#include <random>

#include "gtest/gtest.h"
#include "plugins/registry.h"
#include "scheduler/engine.h"
#include "tests/support/builders.h"
#include "tests/support/clock_free_policy.h"

namespace ringmaster::scheduler {
namespace {

using testing::ClusterBuilder;
using testing::EngineHarness;
using testing::JobBuilder;
using testing::PolicyFromYaml;

// Runs cycles one second apart until one changes nothing (at most 5).
void Settle(EngineHarness& h) {
  for (int i = 0; i < 5; ++i) {
    h.clock().Advance(1000);
    h.Cycle();
    if (h.engine().NextWakeup() != h.clock().Now()) return;
  }
}

// Preempt with a 100 s cooldown and no grace, under tiers that read no clock.
scheduler::Policy ClockFreePreempt() {
  return PolicyFromYaml("actions: \"enqueue, allocate, preempt\"\n"
                        "configurations:\n- {name: preempt, arguments: {gracePeriod: 0, cooldown: 100}}\n" +
                        std::string(testing::kClockFreeTiers));
}

TEST(Wakeup, ElasticGrowIdleEndsWakeIt) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(),
                  PolicyFromYaml("actions: \"enqueue, allocate, elastic\"\n"
                                 "configurations:\n- {name: elastic, arguments: {growIdle: 10, cooldown: 0}}\n"));
  h.Submit(JobBuilder("e").Gang(2).GpusPerTask(2).Elastic(1, 4).Build());
  h.Cycle();  // starts on 4 GPUs, 4 idle from now on
  ASSERT_TRUE(h.Running("e"));
  const Timestamp t0 = h.job("e").started();
  EXPECT_EQ(h.engine().NextWakeup(), h.clock().Now()) << "a cycle that placed: the next may decide at once";
  Settle(h);
  EXPECT_EQ(h.engine().NextWakeup(), t0 + 10'000) << "nothing before growIdle ends (GPUs idle since t0)";
  h.clock().Set(t0 + 9'999);
  h.engine().RunCycle();
  EXPECT_EQ(h.GpusOf("e"), 4) << "growIdle not over";
  h.clock().Set(t0 + 10'000);
  h.engine().RunCycle();
  EXPECT_EQ(h.GpusOf("e"), 8) << "it grows when growIdle ends";
}

TEST(Wakeup, ElasticCooldownEndWakesIt) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(),
                  PolicyFromYaml("actions: \"enqueue, allocate, elastic\"\n"
                                 "configurations:\n- {name: elastic, arguments: {growIdle: 0, cooldown: 30}}\n"));
  h.Submit(JobBuilder("e").Gang(2).GpusPerTask(2).Elastic(1, 4).Build());
  h.Cycle();
  Settle(h);
  EXPECT_EQ(h.engine().NextWakeup(), h.job("e").last_resize() + 30'000) << "its cooldown since it started";
}

TEST(Wakeup, AVictimsCooldownEndWakesThePreemptor) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(),
                  PolicyFromYaml("actions: \"enqueue, allocate, preempt\"\n"
                                 "configurations:\n- {name: preempt, arguments: {gracePeriod: 0, cooldown: 100}}\n"));
  h.Submit(JobBuilder("low").GpusPerTask(8).Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("low"));
  h.clock().Advance(5'000);
  h.Submit(JobBuilder("high").GpusPerTask(8).Priority(10).Build());
  EXPECT_EQ(h.engine().NextWakeup(), h.clock().Now()) << "an event wakes the next cycle at once";
  h.Cycle();
  Settle(h);
  const Timestamp cooled = h.job("low").last_resize() + 100'000;
  EXPECT_EQ(h.engine().NextWakeup(), cooled) << "low may be preempted once its cooldown ends";
  h.clock().Set(cooled - 1);
  h.engine().RunCycle();
  EXPECT_FALSE(h.Running("high")) << "low still cools down";
  h.clock().Set(cooled);
  h.engine().RunCycle();
  EXPECT_TRUE(h.Running("high"));
}

TEST(Wakeup, VictimsThatCannotMakeRoomWakeNothing) {
  // "high" needs two nodes' worth (2 x 8 GPUs) on a one-node cluster: once
  // "low" is out of its cooldown it is offered as a victim, but no choice of
  // victims could start high (a bound says so before any is chosen), and
  // with no victim's cost read, only an event or a cooldown can change that.
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), ClockFreePreempt());
  h.Submit(JobBuilder("low").GpusPerTask(8).Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("low"));
  h.Submit(JobBuilder("high").Gang(2).GpusPerTask(8).Priority(10).Build());
  h.Cycle();
  Settle(h);
  const Timestamp cooled = h.job("low").last_resize() + 100'000;
  EXPECT_EQ(h.engine().NextWakeup(), cooled) << "low is no victim before its cooldown ends";
  h.clock().Set(cooled);
  h.engine().RunCycle();
  EXPECT_FALSE(h.Running("high"));
  EXPECT_TRUE(h.Running("low"));
  Settle(h);
  EXPECT_EQ(h.engine().NextWakeup(), Engine::kNever)
      << "low is offered, but no choice could start high: it costs no cycle until something happens";
}

TEST(Wakeup, NoVictimOfLowerPriorityMeansNoWakeup) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), ClockFreePreempt());
  h.Submit(JobBuilder("a").GpusPerTask(8).Build());
  h.Cycle();
  h.Submit(JobBuilder("b").GpusPerTask(8).Build());
  h.Cycle();
  Settle(h);
  EXPECT_EQ(h.engine().NextWakeup(), Engine::kNever) << "equal priorities: only an event can start b";
}

TEST(Wakeup, ALasThresholdWakesItAtTheCrossing) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(),
                  PolicyFromYaml("actions: \"enqueue, allocate, preempt\"\n"
                                 "configurations:\n- {name: preempt, arguments: {gracePeriod: 0, cooldown: 0}}\n"
                                 "tiers:\n- plugins:\n  - name: las\n    arguments: {thresholds: \"100\"}\n"
                                 "  - name: gang\n"));
  h.Submit(JobBuilder("a").GpusPerTask(2).Build());  // 100 GPU-s after 50 s on 2 GPUs
  h.Submit(JobBuilder("b").GpusPerTask(8).Build());  // waits: same level as a
  h.Cycle();
  ASSERT_TRUE(h.Running("a"));
  Settle(h);
  const Timestamp crossed = h.job("a").started() + 50'000;
  EXPECT_EQ(h.engine().NextWakeup(), crossed) << "a drops a level 50 s after it started: b may preempt it then";
  h.clock().Set(crossed - 1);
  h.engine().RunCycle();
  EXPECT_FALSE(h.Running("b")) << "a still at b's level";
  h.clock().Set(crossed);
  h.engine().RunCycle();
  EXPECT_TRUE(h.Running("b")) << "b, now of a higher level, preempts a";
}

TEST(Wakeup, APolicyThatReadsTheClockSkipsCyclesUntilItsNextWakeup) {
  // The las case above: b waits at a's level until a crosses 100 GPU-s.
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(),
                  PolicyFromYaml("actions: \"enqueue, allocate, preempt\"\n"
                                 "configurations:\n- {name: preempt, arguments: {gracePeriod: 0, cooldown: 0}}\n"
                                 "tiers:\n- plugins:\n  - name: las\n    arguments: {thresholds: \"100\"}\n"
                                 "  - name: gang\n"));
  ASSERT_TRUE(h.engine().ReadsClock());
  h.Submit(JobBuilder("a").GpusPerTask(2).Build());
  h.Submit(JobBuilder("b").GpusPerTask(8).Build());
  h.Cycle();
  Settle(h);
  const Timestamp crossed = h.job("a").started() + 50'000;
  ASSERT_EQ(h.engine().NextWakeup(), crossed);
  const std::string reason = h.job("b").pending_reason();
  for (const Timestamp t : {crossed - 40'000, crossed - 1}) {
    h.clock().Set(t);
    h.engine().RunCycle();
    EXPECT_FALSE(h.engine().last_cycle_work().ran) << "nothing turns before the crossing: not run, at " << t;
    EXPECT_EQ(h.job("b").pending_reason(), reason) << "a skipped cycle keeps the reason";
  }
  // An event in between: the next cycle runs.
  ASSERT_TRUE(h.engine().SetJobSpeed(h.engine().FindJob("a"), nullptr).ok());
  h.engine().RunCycle();
  EXPECT_TRUE(h.engine().last_cycle_work().ran) << "an event wakes it";
  EXPECT_FALSE(h.Running("b"));
  h.clock().Set(crossed);
  h.engine().RunCycle();
  EXPECT_TRUE(h.engine().last_cycle_work().ran) << "the crossing";
  EXPECT_TRUE(h.Running("b")) << "b, now of a higher level, preempts a";
}

TEST(Wakeup, EventsAPolicyReloadAndANewNodeWakeAtOnce) {
  // Tiers that do not read the clock (the default policy's las does).
  auto policy = PolicyFromYaml("actions: \"enqueue, allocate, elastic\"\n"
                               "configurations:\n- {name: elastic, arguments: {growIdle: 1000, cooldown: 0}}\n" +
                               std::string(testing::kClockFreeTiers));
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), policy);
  h.Submit(JobBuilder("a").GpusPerTask(8).Build());
  h.Submit(JobBuilder("b").GpusPerTask(8).Build());
  h.Cycle();
  Settle(h);
  const Timestamp now = h.clock().Now();
  ASSERT_EQ(h.engine().NextWakeup(), Engine::kNever) << "no GPU idle, nothing to grow: only an event";
  ASSERT_TRUE(h.engine().SetPolicy(policy, plugins::BuiltinRegistry()).ok());
  EXPECT_EQ(h.engine().NextWakeup(), now) << "a policy reload";
  Settle(h);
  ASSERT_EQ(h.engine().NextWakeup(), Engine::kNever);
  topology::NodeSpec spec = h.state().cluster().node(NodeId(0));
  spec.name = "extra";
  ASSERT_TRUE(h.engine().AddNode(spec).ok());
  EXPECT_EQ(h.engine().NextWakeup(), h.clock().Now()) << "a node added";
  h.Cycle();
  EXPECT_TRUE(h.Running("b"));
}

// State::TasksFitByCount against a recount after random placements and
// releases: the bound the planner skips hopeless gangs by.
TEST(CountBound, TasksFitByCountIsTheSumOfFloorsOverNodes) {
  EngineHarness h(ClusterBuilder().Racks(2).NodesPerRack(4).Gpus(8).Build());
  std::mt19937 rng(3);
  for (int round = 0; round < 40; ++round) {
    const int g = 1 << (rng() % 4);
    h.Submit(JobBuilder("j" + std::to_string(round)).Gang(1 + static_cast<int>(rng() % 3)).GpusPerTask(g).Build());
    if (round % 3 == 2) {
      for (JobId id : h.state().active_jobs()) {
        if (h.state().job(id).phase() == JobPhase::kRunning && rng() % 2 == 0) {
          ASSERT_TRUE(h.engine().FinishJob(id, true).ok());
          break;
        }
      }
    }
    h.clock().Advance(1000);
    h.Cycle();
    for (int64_t k = 1; k <= 8; ++k) {
      int64_t want = 0;
      for (uint32_t n = 0; n < h.state().num_nodes(); ++n) want += h.state().FreeWholeGpus(NodeId(n)) / k;
      ASSERT_EQ(h.state().TasksFitByCount(k), want) << "round " << round << ", " << k << " GPUs a task";
    }
  }
}

}  // namespace
}  // namespace ringmaster::scheduler
