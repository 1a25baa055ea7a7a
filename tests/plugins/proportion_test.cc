#include "plugins/proportion.h"

#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <string>
#include <tuple>
#include <utility>
#include <vector>

#include "plugins/registry.h"
#include "tests/support/builders.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::testing {
namespace {

TEST(ProportionPlugin, QueuesShareByWeightWhenBothAskForEverything) {
  // 4 x 8 = 32 GPUs; a:b = 3:1 -> a deserves 24, b 8. Each submits 8 one-node jobs.
  auto policy = PolicyFromYaml(R"(
queues:
- {name: a, weight: 3}
- {name: b, weight: 1}
)");
  EngineHarness h(ClusterBuilder().NodesPerRack(4).Gpus(8).Build(), policy);
  for (int i = 0; i < 8; ++i) {
    h.Submit(JobBuilder("a" + std::to_string(i)).Queue("a").GpusPerTask(4).Build());
    h.Submit(JobBuilder("b" + std::to_string(i)).Queue("b").GpusPerTask(4).Build());
  }
  h.Cycle();
  const auto& st = h.state();
  const int64_t a = st.queue_usage(scheduler::QueueId(*st.queues().Find("a"))).allocated.gpu_milli() / 1000;
  const int64_t b = st.queue_usage(scheduler::QueueId(*st.queues().Find("b"))).allocated.gpu_milli() / 1000;
  EXPECT_EQ(a, 24);
  EXPECT_EQ(b, 8);
  int overused_reason = 0;
  for (int i = 0; i < 8; ++i) {
    overused_reason += h.job("b" + std::to_string(i)).pending_reason().find("deserved share") != std::string::npos;
  }
  EXPECT_GT(overused_reason, 0);
}

TEST(ProportionPlugin, OverusedNeedsEveryRequestedDimensionAtDeserved) {
  queue::QueueSpec spec{.name = "q"};
  scheduler::QueueUsage usage;
  usage.allocated = topology::Resources(4000, 0, 8000);
  scheduler::QueueInfo q{scheduler::QueueId(0), &spec, &usage};
  q.request = topology::Resources(8000, 0, 8000);
  q.deserved = topology::Resources(8000, 0, 8000);
  EXPECT_FALSE(plugins::ProportionPlugin::Overused(q));  // cpu 4 < 8
  usage.allocated = topology::Resources(8000, 0, 8000);
  EXPECT_TRUE(plugins::ProportionPlugin::Overused(q));
}

// --- Time-decayed fair share (usageHalfLife) ---------------------------------

using scheduler::Timestamp;

constexpr Timestamp kHour = 3'600'000;  // ms

// Queues of equal weight, in this order, on `actions` (by default no
// preempt, no reclaim: only the queue order decides), proportion with
// `arguments`.
scheduler::Policy Queues(const std::string& arguments, const std::vector<std::string>& names,
                         const std::string& actions = "enqueue, allocate") {
  std::string queues;
  for (const std::string& n : names) queues += "- {name: " + n + "}\n";
  return PolicyFromYaml(R"(
actions: ")" + actions + R"("
tiers:
- plugins:
  - name: gang
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
    arguments: )" + arguments + R"(
queues:
)" + queues);
}

scheduler::Policy TwoQueues(const std::string& arguments) { return Queues(arguments, {"a", "b"}); }

const plugins::ProportionPlugin& Proportion(EngineHarness& h) {
  const scheduler::Plugin* p = h.engine().plugin(plugins::ProportionPlugin::kName);
  EXPECT_NE(p, nullptr);
  return static_cast<const plugins::ProportionPlugin&>(*p);
}

scheduler::QueueId Queue(EngineHarness& h, const std::string& name) {
  return scheduler::QueueId(*h.state().queues().Find(name));
}

void Finish(EngineHarness& h, const std::string& name) {
  ASSERT_TRUE(h.engine().FinishJob(h.job(name).id(), true).ok()) << name;
}

// A cycle at exactly `t`, the clock left at `t` (the harness's own steps
// move it on by a second a cycle and a ms a submission).
void CycleAt(EngineHarness& h, Timestamp t) {
  h.clock().Set(t);
  h.Cycle();
  h.clock().Set(t);
}

TEST(ProportionPlugin, UsageHalfLifeIsSecondsAndBadValuesNameWhereTheyCameFrom) {
  auto make = [](const std::string& v) {
    return plugins::ProportionPlugin::Create(
        scheduler::PluginArgs("proportion", "p.yaml", {{"usageHalfLife", {v, 7, 20}}}));
  };
  for (const std::string bad : {"-1", "abc", "nan", "inf", "1e10", "0.0001", "1h"}) {
    auto p = make(bad);
    ASSERT_ERROR(p, absl::StatusCode::kInvalidArgument, "p.yaml:7:20: plugins[proportion].arguments.usageHalfLife: ")
        << "'" << bad << "' accepted";
  }
  auto on = make("1800.5");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(static_cast<const plugins::ProportionPlugin&>(**on).half_life_ms(), 1'800'500);
  EXPECT_TRUE((*on)->UsesTime());
  EXPECT_FALSE((*on)->VerdictHooksReadTime());  // only the queue order reads the clock
  auto off = make("0");
  ASSERT_TRUE(off.ok()) << off.status();
  EXPECT_FALSE((*off)->UsesTime());
  auto def = plugins::ProportionPlugin::Create(scheduler::PluginArgs("proportion", "p.yaml", {}));
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(static_cast<const plugins::ProportionPlugin&>(**def).half_life_ms(), 0);
  EXPECT_FALSE((*def)->UsesTime());
  auto unknown = plugins::ProportionPlugin::Create(
      scheduler::PluginArgs("proportion", "p.yaml", {{"usageHalflife", {"60", 8, 3}}}));
  ASSERT_ERROR(unknown, absl::StatusCode::kInvalidArgument, "p.yaml:8:3: plugins[proportion].arguments.usageHalflife: unknown");
}

TEST(ProportionPlugin, DecayedUsageHalvesEveryHalfLife) {
  // H = 1 h. Queue a holds 8 GPUs from 0 to H, then nothing.
  //   U_a(H)  = integral_0^H 8 x 2^(-(H - s)/H) ds = 8 H / ln 2 x (1 - 1/2) = 4 H / ln 2
  //           = 4 x 3600 / 0.6931 = 20,774.8 GPU-s; R_a = U ln 2 / H = 4 GPUs.
  //   U_a(2H) = U_a(H) / 2 = 10,387.7 GPU-s (R_a = 2); U_a(4H) = U_a(H) / 8 (R_a = 0.5).
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), TwoQueues("{usageHalfLife: 3600}"));
  h.Submit(JobBuilder("a0").Queue("a").GpusPerTask(8).Build());
  CycleAt(h, 0);
  ASSERT_TRUE(h.Running("a0"));
  const auto& p = Proportion(h);
  const scheduler::QueueId a = Queue(h, "a"), b = Queue(h, "b");
  EXPECT_EQ(p.UsageGpus(a), 0);  // no time has passed
  CycleAt(h, kHour / 2);
  EXPECT_NEAR(p.UsageGpus(a), 8 * (1 - std::exp2(-0.5)), 1e-9);  // 2.343 GPUs after half a half-life
  h.clock().Set(kHour);
  Finish(h, "a0");
  CycleAt(h, kHour);
  const double u1 = 4 * 3600 / std::numbers::ln2;
  EXPECT_NEAR(p.UsageGpus(a), 4, 1e-9);
  EXPECT_NEAR(p.DecayedGpuSeconds(a), u1, 1e-6);
  EXPECT_NEAR(p.DecayedGpuSeconds(a), 20'774.8, 0.1);
  // The plugin's figures are those of the last cycle that ran: with nothing
  // waiting to reorder, a cycle with no event between would be skipped
  // (Engine::Quiet), so an event (a gang that never fits, in b) runs each.
  h.Submit(JobBuilder("b-never-1").Queue("b").Gang(2).GpusPerTask(8).Build());
  CycleAt(h, 2 * kHour);
  EXPECT_NEAR(p.UsageGpus(a), 2, 1e-9);
  EXPECT_NEAR(p.DecayedGpuSeconds(a), u1 / 2, 1e-6);
  // Two half-lives without a cycle: the same as two cycles (the allocation
  // was constant, zero, throughout).
  h.Submit(JobBuilder("b-never-2").Queue("b").Gang(2).GpusPerTask(8).Build());
  CycleAt(h, 4 * kHour);
  EXPECT_NEAR(p.UsageGpus(a), 0.5, 1e-9);
  EXPECT_EQ(p.UsageGpus(b), 0);
}

// a held the whole cluster (8 GPUs) for one hour; then a1 and b1, 8 GPUs
// each, arrive together and only one fits. Returns the one that starts.
std::string WhoStartsAfterAUsedTheClusterForAnHour(scheduler::Policy policy) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), std::move(policy));
  h.Submit(JobBuilder("a0").Queue("a").GpusPerTask(8).Build());
  h.Cycle();
  EXPECT_TRUE(h.Running("a0"));
  h.clock().Advance(kHour);
  Finish(h, "a0");
  h.Submit(JobBuilder("a1").Queue("a").GpusPerTask(8).Build());
  h.Submit(JobBuilder("b1").Queue("b").GpusPerTask(8).Build());
  h.Cycle();
  EXPECT_NE(h.Running("a1"), h.Running("b1"));
  return h.Running("a1") ? "a1" : "b1";
}

TEST(ProportionPlugin, WithAHalfLifeTheQueueThatUsedLessRecentlyGoesFirst) {
  // Both hold nothing now and deserve 4 GPUs each (8 asked by each of 8).
  // Control, no half-life: shares 0/4 = 0 both, a tie, so the queue order's
  // tie-break (queue index) puts a first and a1 starts.
  EXPECT_EQ(WhoStartsAfterAUsedTheClusterForAnHour(TwoQueues("{}")), "a1");
  // usageHalfLife 1 h: R_a = 8 (1 - 2^-1) = 4 GPUs, R_b = 0, so
  //   key_a = 0 + 4/4 = 1 > key_b = 0 + 0/4 = 0: b first and b1 starts.
  EXPECT_EQ(WhoStartsAfterAUsedTheClusterForAnHour(TwoQueues("{usageHalfLife: 3600}")), "b1");
}

TEST(ProportionPlugin, TheDefaultPolicyKeepsTheInstantaneousOrder) {
  scheduler::Policy policy = scheduler::DefaultPolicy();
  queue::QueueSpec a{.name = "a"}, b{.name = "b"};
  policy.queues = {a, b};
  {
    EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), policy);
    const auto& p = Proportion(h);
    EXPECT_EQ(p.half_life_ms(), 0);
    EXPECT_FALSE(p.UsesTime());
  }
  // The same decision as the control above (the default's reclaim leaves
  // a1 alone in its 5 min cooldown).
  EXPECT_EQ(WhoStartsAfterAUsedTheClusterForAnHour(policy), "a1");
}

TEST(ProportionPlugin, NextChangeIsWhenTheDecayingKeysCross) {
  // H = 1 h, 8 GPUs. a holds 8 GPUs over [0, H) (R_a(H) = 4, then held 0);
  // b's b0 holds 1 GPU from H on (R_b(H) = 0). a1 and b1 (8 GPUs each) wait:
  // requests a 8, b 9 -> deserved 4 and 4. With x = 2^(-(t - H) / H):
  //   key_a = 0 + (0 + (4 - 0) x) / 4 = x
  //   key_b = 1/4 + (1 + (0 - 1) x) / 4 = 0.5 - 0.25 x
  // At H: key_a = 1 > key_b = 0.25 (b first); they cross at x = 0.4, i.e.
  //   t = H + H log2(2.5) = 3,600,000 + 4,758,941.1 = 8,358,941.1 ms,
  // after which a goes first. Nothing else in this policy reads the clock,
  // so the engine's next wake-up after a quiet cycle is that crossing (a few
  // ms early).
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), TwoQueues("{usageHalfLife: 3600}"));
  h.Submit(JobBuilder("a0").Queue("a").GpusPerTask(8).Build());
  CycleAt(h, 0);
  h.clock().Set(kHour);
  Finish(h, "a0");
  h.Submit(JobBuilder("b0").Queue("b").GpusPerTask(1).Build());
  CycleAt(h, kHour);
  ASSERT_TRUE(h.Running("b0"));
  h.Submit(JobBuilder("a1").Queue("a").GpusPerTask(8).Build());
  h.Submit(JobBuilder("b1").Queue("b").GpusPerTask(8).Build());
  for (int i = 0; i < 5; ++i) {
    CycleAt(h, kHour);
    if (h.engine().NextWakeup() > kHour) break;
  }
  const Timestamp crossing = kHour + static_cast<Timestamp>(std::floor(kHour * std::log2(2.5)));
  ASSERT_EQ(crossing, 8'358'941);
  const Timestamp wake = h.engine().NextWakeup();
  EXPECT_LE(wake, crossing);
  EXPECT_GE(wake, crossing - 10);
  const auto& p = Proportion(h);
  EXPECT_NEAR(p.UsageGpus(Queue(h, "a")), 4, 1e-9);
  EXPECT_EQ(p.UsageGpus(Queue(h, "b")), 0);
  // The keys as the queue order sees them, just before and just after.
  auto keys = [&](Timestamp at) {
    CycleAt(h, at);
    scheduler::QueueInfo qa{Queue(h, "a"), nullptr, &h.state().queue_usage(Queue(h, "a"))};
    scheduler::QueueInfo qb{Queue(h, "b"), nullptr, &h.state().queue_usage(Queue(h, "b"))};
    qa.deserved = h.engine().deserved()[qa.id.value()];
    qb.deserved = h.engine().deserved()[qb.id.value()];
    return std::pair(p.OrderKey(qa), p.OrderKey(qb));
  };
  auto [a_before, b_before] = keys(wake);
  EXPECT_LT(b_before, a_before);
  // Waiting gangs whose state did not change keep their verdict (the memo
  // stays on: the clock reaches only the queue order).
  EXPECT_GT(h.engine().last_cycle_work().recalled, 0);
  auto [a_after, b_after] = keys(crossing + 1);
  EXPECT_LT(a_after, b_after);
  EXPECT_NEAR(a_after, 0.4, 1e-6);
  EXPECT_NEAR(b_after, 0.4, 1e-6);
}

// --- Decayed usage across a policy reload --------------------------------------

// a holds the whole cluster (8 GPUs) over [0, H) with H = 1 h, then nothing:
// at H, R_a = 8 (1 - 1/2) = 4 GPUs and U_a = 4 H / ln 2 = 20,774.8 GPU-s.
void AUsesTheClusterForAnHour(EngineHarness& h) {
  h.Submit(JobBuilder("a0").Queue("a").GpusPerTask(8).Build());
  CycleAt(h, 0);
  ASSERT_TRUE(h.Running("a0"));
  h.clock().Set(kHour);
  Finish(h, "a0");
  CycleAt(h, kHour);
  ASSERT_NEAR(Proportion(h).UsageGpus(Queue(h, "a")), 4, 1e-9);
}

TEST(ProportionPlugin, DecayedUsageSurvivesAPolicyReloadByQueueName) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), TwoQueues("{usageHalfLife: 3600}"));
  AUsesTheClusterForAnHour(h);
  const scheduler::PluginRegistry registry = plugins::BuiltinRegistry();
  // A reload that is refused (no plugin of its names can be built) leaves
  // the plugin and its history.
  ASSERT_FALSE(h.engine().SetPolicy(Queues("{usageHalfLife: 3600}", {"c", "a"}), scheduler::PluginRegistry()).ok());
  EXPECT_NEAR(Proportion(h).UsageGpus(Queue(h, "a")), 4, 1e-9);
  // Reloaded at H with queues c, a (b removed, c new, a's index moved from 0
  // to 1) and the same half-life.
  ASSERT_TRUE(h.engine().SetPolicy(Queues("{usageHalfLife: 3600}", {"c", "a"}), registry).ok());
  // Before the new plugin's first session: what it was given, valued now,
  // in the new queues' order; b is no queue any more, c has none yet.
  std::vector<scheduler::DecayedUsage> u = h.engine().DecayedUsages();
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0], (scheduler::DecayedUsage{"c", 0, kHour, kHour}));
  EXPECT_EQ(u[1].queue, "a");
  EXPECT_NEAR(u[1].gpu_seconds, 20'774.8, 0.1);  // 4 x 3600 / ln 2
  EXPECT_EQ(u[1].half_life_ms, kHour);
  EXPECT_EQ(u[1].at, kHour);
  // c1 takes the cluster at H.
  h.Submit(JobBuilder("c1").Queue("c").GpusPerTask(8).Build());
  CycleAt(h, kHour);
  ASSERT_TRUE(h.Running("c1"));
  const auto& p = Proportion(h);  // the new plugin
  EXPECT_NEAR(p.UsageGpus(Queue(h, "a")), 4, 1e-9);
  EXPECT_EQ(p.UsageGpus(Queue(h, "c")), 0);
  // One half-life later (an event, a gang that never fits, runs the cycle):
  // a held nothing, R_a = 4 / 2 = 2; c held 8 over [H, 2H), R_c = 8 (1 - 1/2) = 4.
  h.Submit(JobBuilder("c-never").Queue("c").Gang(2).GpusPerTask(8).Build());
  CycleAt(h, 2 * kHour);
  EXPECT_NEAR(p.UsageGpus(Queue(h, "a")), 2, 1e-9);
  EXPECT_NEAR(p.UsageGpus(Queue(h, "c")), 4, 1e-9);
}

TEST(ProportionPlugin, AReloadedQueueWithHistoryWaitsBehindOneWithout) {
  // The order decided by the carried history alone: the same policy
  // reloaded at H. Without the carry both queues would start from zero, a
  // tie that a (declared first) wins, and a1 would start
  // (WithAHalfLifeTheQueueThatUsedLessRecentlyGoesFirst's control).
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), TwoQueues("{usageHalfLife: 3600}"));
  AUsesTheClusterForAnHour(h);
  const scheduler::PluginRegistry registry = plugins::BuiltinRegistry();
  ASSERT_TRUE(h.engine().SetPolicy(TwoQueues("{usageHalfLife: 3600}"), registry).ok());
  h.Submit(JobBuilder("a1").Queue("a").GpusPerTask(8).Build());
  h.Submit(JobBuilder("b1").Queue("b").GpusPerTask(8).Build());
  CycleAt(h, kHour);
  // key_a = 0 + 4/4 = 1 > key_b = 0: b1 starts.
  EXPECT_TRUE(h.Running("b1"));
  EXPECT_FALSE(h.Running("a1"));
}

TEST(ProportionPlugin, AChangedHalfLifeKeepsTheRateAndDecaysAtTheNewOne) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), TwoQueues("{usageHalfLife: 3600}"));
  AUsesTheClusterForAnHour(h);
  // Reloaded at H with usageHalfLife 2 h: R_a stays 4 GPUs (the order does
  // not jump), so U_a = R H' / ln 2 = 4 x 7200 / ln 2 = 41,549.6 GPU-s (it
  // was 20,774.8 with H = 1 h).
  const scheduler::PluginRegistry registry = plugins::BuiltinRegistry();
  ASSERT_TRUE(h.engine().SetPolicy(TwoQueues("{usageHalfLife: 7200}"), registry).ok());
  h.Submit(JobBuilder("b-never-1").Queue("b").Gang(2).GpusPerTask(8).Build());
  CycleAt(h, kHour);
  const auto& p = Proportion(h);
  EXPECT_EQ(p.half_life_ms(), 2 * kHour);
  EXPECT_NEAR(p.UsageGpus(Queue(h, "a")), 4, 1e-9);
  EXPECT_NEAR(p.DecayedGpuSeconds(Queue(h, "a")), 41'549.6, 0.1);
  // One hour on, half the new half-life, nothing held:
  //   R_a = 4 x 2^(-1/2) = 2.828 GPUs, U_a = 2.828 x 7200 / ln 2 = 29,380.0 GPU-s.
  h.Submit(JobBuilder("b-never-2").Queue("b").Gang(2).GpusPerTask(8).Build());
  CycleAt(h, 2 * kHour);
  EXPECT_NEAR(p.UsageGpus(Queue(h, "a")), 4 * std::exp2(-0.5), 1e-9);
  EXPECT_NEAR(p.DecayedGpuSeconds(Queue(h, "a")), 29'380.0, 0.1);
  // Valued between cycles, as the journal and the admin API read it: the
  // same closed form, a quarter of the new half-life after the last cycle.
  h.clock().Set(2 * kHour + kHour / 2);
  std::vector<scheduler::DecayedUsage> u = h.engine().DecayedUsages();
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].queue, "a");
  EXPECT_NEAR(u[0].gpu_seconds, 4 * std::exp2(-0.75) * 7200 / std::numbers::ln2, 1e-6);
  EXPECT_EQ(u[0].at, 2 * kHour + kHour / 2);
  EXPECT_EQ(u[1].queue, "b");
  EXPECT_EQ(u[1].gpu_seconds, 0);
}

TEST(ProportionPlugin, AReloadToAPolicyWithoutAHalfLifeKeepsNoHistory) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), TwoQueues("{usageHalfLife: 3600}"));
  AUsesTheClusterForAnHour(h);
  const scheduler::PluginRegistry registry = plugins::BuiltinRegistry();
  ASSERT_TRUE(h.engine().SetPolicy(TwoQueues("{}"), registry).ok());
  EXPECT_TRUE(h.engine().DecayedUsages().empty());
  // ... so a half-life set again starts from zero.
  ASSERT_TRUE(h.engine().SetPolicy(TwoQueues("{usageHalfLife: 3600}"), registry).ok());
  h.Submit(JobBuilder("b-never").Queue("b").Gang(2).GpusPerTask(8).Build());
  CycleAt(h, kHour);
  EXPECT_EQ(Proportion(h).UsageGpus(Queue(h, "a")), 0);
}

TEST(ProportionPlugin, RestoredRowsThatAreNoUsageAreLeftOut) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), TwoQueues("{usageHalfLife: 3600}"));
  const std::vector<scheduler::DecayedUsage> rows = {
      {"a", -1, kHour, 0},                                        // negative
      {"b", std::numeric_limits<double>::quiet_NaN(), kHour, 0},  // not a number
      {"a", 100, 0, 0},                                           // no half-life
  };
  h.engine().RestoreDecayedUsages(rows);
  for (const scheduler::DecayedUsage& u : h.engine().DecayedUsages()) EXPECT_EQ(u.gpu_seconds, 0) << u.queue;
  h.Submit(JobBuilder("b-never").Queue("b").Gang(2).GpusPerTask(8).Build());
  CycleAt(h, 0);
  EXPECT_EQ(Proportion(h).UsageGpus(Queue(h, "a")), 0);
  EXPECT_EQ(Proportion(h).UsageGpus(Queue(h, "b")), 0);
}

// --- Deserved shares that read decayed usage (usageWeight) -------------------

TEST(ProportionPlugin, UsageWeightIsAStrengthThatNeedsAHalfLife) {
  auto make = [](const std::string& half_life, const std::string& k) {
    std::map<std::string, scheduler::PluginArgs::Value> args = {{"usageWeight", {k, 9, 4}}};
    if (!half_life.empty()) args["usageHalfLife"] = {half_life, 8, 4};
    return plugins::ProportionPlugin::Create(scheduler::PluginArgs("proportion", "p.yaml", args));
  };
  for (const std::string bad : {"-1", "abc", "nan", "inf", "100.5", "1e9"}) {
    auto p = make("3600", bad);
    ASSERT_ERROR(p, absl::StatusCode::kInvalidArgument, "p.yaml:9:4: plugins[proportion].arguments.usageWeight: ")
        << "'" << bad << "' accepted";
  }
  // Without a half-life there is no decayed usage to read.
  for (const std::string off : {"", "0"}) {
    auto p = make(off, "1");
    ASSERT_ERROR(p, absl::StatusCode::kInvalidArgument,
                 "p.yaml:9:4: plugins[proportion].arguments.usageWeight: needs usageHalfLife > 0");
  }
  auto on = make("3600", "2.5");
  ASSERT_TRUE(on.ok()) << on.status();
  EXPECT_EQ(static_cast<const plugins::ProportionPlugin&>(**on).usage_weight(), 2.5);
  EXPECT_TRUE((*on)->UsesTime());
  EXPECT_FALSE((*on)->VerdictHooksReadTime());  // deserved shares reach the memo through its context
  auto zero = make("3600", "0");
  ASSERT_TRUE(zero.ok()) << zero.status();
  EXPECT_EQ(static_cast<const plugins::ProportionPlugin&>(**zero).usage_weight(), 0);
  auto def = plugins::ProportionPlugin::Create(scheduler::PluginArgs("proportion", "p.yaml", {}));
  ASSERT_TRUE(def.ok());
  EXPECT_EQ(static_cast<const plugins::ProportionPlugin&>(**def).usage_weight(), 0);
}

TEST(ProportionPlugin, LevelsAreEightADoublingOfTheOveruse) {
  using P = plugins::ProportionPlugin;
  // p = 1 + k max(0, rho - 1), level = floor(8 log2 p).
  EXPECT_EQ(P::LevelOf(0, 1), 0);
  EXPECT_EQ(P::LevelOf(1, 100), 0);    // exactly its part
  EXPECT_EQ(P::LevelOf(2, 1), 8);      // p = 2
  EXPECT_EQ(P::LevelOf(3, 1), 12);     // p = 3, 8 x 1.585 = 12.68
  EXPECT_EQ(P::LevelOf(2, 0.5), 4);    // p = 1.5, 8 x 0.585 = 4.68
  EXPECT_EQ(P::LevelOf(1.05, 1), 0);   // p = 1.05, 8 x 0.0704 = 0.56
  EXPECT_EQ(P::LevelOf(1e300, 100), P::kMaxLevel);
  EXPECT_EQ(P::LevelOf(std::numeric_limits<double>::quiet_NaN(), 1), 0);
  EXPECT_DOUBLE_EQ(P::LevelRho(8, 1), 2);                            // 1 + (2 - 1) / 1
  EXPECT_DOUBLE_EQ(P::LevelRho(4, 0.5), 1 + (std::sqrt(2.0) - 1) * 2);  // 1.8284
  EXPECT_DOUBLE_EQ(P::LevelFactor(8), 0.5);
  EXPECT_DOUBLE_EQ(P::LevelFactor(12), std::exp2(-1.5));  // 0.3536
}

// Queues of equal weight with usageHalfLife 1 h and usageWeight `k` on
// `actions`.
scheduler::Policy Weighted(const std::string& k, const std::vector<std::string>& names,
                           const std::string& actions = "enqueue, allocate") {
  return Queues("{usageHalfLife: 3600, usageWeight: " + k + "}", names, actions);
}

int64_t DeservedMilliGpus(EngineHarness& h, const std::string& queue) {
  return h.engine().deserved()[Queue(h, queue).value()].gpu_milli();
}

TEST(ProportionPlugin, DeservedSharesOfThreeQueuesWithKnownHistory) {
  // 8 GPUs, queues a, b, c of weight 1, H = 1 h. a holds all 8 GPUs over
  // [0, H); at H a1, b1 and c1 (8 GPUs each) wait, so all three compete and
  // each could use the whole cluster.
  //   R_a = 8 (1 - 1/2) = 4, R_b = R_c = 0; sum R = 4, sum w = 3
  //   rho_a = (4 / 4) / (1 / 3) = 3, rho_b = rho_c = 0
  // k = 1: p_a = 1 + 1 x (3 - 1) = 3, level floor(8 log2 3) = floor(12.68) = 12,
  //   w'_a = 2^(-12/8) = 0.35355 (integers: round(65,536 x 0.35355) = 23,170
  //   against 65,536 for b and c; sum 154,242).
  //   a deserves 8,000 x 23,170 / 154,242 = 1,201.7 -> 1,201 milli-GPUs,
  //   b and c 8,000 x 65,536 / 154,242 = 3,399.1 -> 3,399 each; the 1 milli
  //   left over goes to the first queue still short: a 1,202, b 3,399, c 3,399
  //   (8 x 0.35355 / 2.35355 = 1.2018 GPUs against 3.3991).
  // k = 0 (control): 2,668 / 2,666 / 2,666 (8,000 / 3 = 2,666 each; the 2
  // milli left over go to the first queue still short).
  auto run = [](const std::string& k) {
    EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), Weighted(k, {"a", "b", "c"}));
    h.Submit(JobBuilder("a0").Queue("a").GpusPerTask(8).Build());
    CycleAt(h, 0);
    EXPECT_TRUE(h.Running("a0"));
    h.clock().Set(kHour);
    Finish(h, "a0");
    for (const std::string q : {"a", "b", "c"}) h.Submit(JobBuilder(q + "1").Queue(q).GpusPerTask(8).Build());
    CycleAt(h, kHour);
    EXPECT_NEAR(Proportion(h).UsageGpus(Queue(h, "a")), 4, 1e-9);
    return std::tuple(DeservedMilliGpus(h, "a"), DeservedMilliGpus(h, "b"), DeservedMilliGpus(h, "c"),
                      Proportion(h).ShareLevel(Queue(h, "a")), h.Running("a1"));
  };
  const auto [a, b, c, level, a_runs] = run("1");
  EXPECT_EQ(level, 12);
  EXPECT_EQ(a, 1'202);
  EXPECT_EQ(b, 3'399);
  EXPECT_EQ(c, 3'399);
  EXPECT_FALSE(a_runs);  // b1 starts: b is first in the decayed order (key 0 against a's 4 / 1.202)
  const auto [a0, b0, c0, level0, a0_runs] = run("0");
  EXPECT_EQ(level0, 0);
  EXPECT_EQ(a0, 2'668);
  EXPECT_EQ(b0, 2'666);
  EXPECT_EQ(c0, 2'666);
}

TEST(ProportionPlugin, ReclaimTakesBackFromTheQueueThatUsedMore) {
  // 8 GPUs, a and b of weight 1, H = 1 h, enqueue, allocate, reclaim.
  // a0..a7 (1 GPU each) hold the cluster over [0, H); at H a4..a7 end and b
  // asks for b0 (4 GPUs) and b1 (1 GPU). Allocate starts b0 in the 4 free
  // GPUs; b1 needs reclaim. Both queues compete (a asks for its 4 running,
  // b for 5): R_a = 8 (1 - 1/2) = 4, R_b = 0.
  // Instantaneous shares (k = 0): a deserves 4 (its request) and b 4; a
  // holds 4, not above, and b would end at 5 > 4: no reclaim.
  // k = 1: rho_a = (4 / 4) / (1 / 2) = 2, p_a = 2, level 8, w'_a = 1/2
  // (32,768 against 65,536). Water-filling 8,000 milli: a gets 8,000 x 1/3
  // = 2,666, b 5,333 capped at its request, 5,000; the 334 left go to a,
  // the only one short: a deserves 3,000, b 5,000. a holds 4,000 > 3,000
  // and b ends at 5,000 <= 5,000: reclaim stops one of a's jobs for b1.
  auto evictions = [](const std::string& k) {
    EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(),
                    Weighted(k, {"a", "b"}, "enqueue, allocate, reclaim"));
    for (int i = 0; i < 8; ++i) h.Submit(JobBuilder("a" + std::to_string(i)).Queue("a").GpusPerTask(1).Build());
    CycleAt(h, 0);
    h.clock().Set(kHour);
    for (int i = 4; i < 8; ++i) Finish(h, "a" + std::to_string(i));
    h.Submit(JobBuilder("b0").Queue("b").GpusPerTask(4).Build());
    h.Submit(JobBuilder("b1").Queue("b").GpusPerTask(1).Build());
    h.clock().Set(kHour);
    const scheduler::Decisions d = h.Cycle();
    EXPECT_TRUE(h.Running("b0"));
    std::vector<std::string> stopped;
    for (const scheduler::Eviction& e : d.evictions) stopped.push_back(h.state().job(e.job).name());
    return std::pair(stopped, DeservedMilliGpus(h, "a"));
  };
  const auto [instant, a_instant] = evictions("0");
  EXPECT_TRUE(instant.empty());
  EXPECT_EQ(a_instant, 4'000);
  const auto [decayed, a_decayed] = evictions("1");
  ASSERT_EQ(decayed.size(), 1u);
  EXPECT_EQ(decayed[0].substr(0, 1), "a");
  EXPECT_EQ(a_decayed, 3'000);
}

TEST(ProportionPlugin, NextChangeIsWhenALevelChanges) {
  // 8 GPUs, a and b of weight 1, H = 1 h, k = 0.5. a holds 8 GPUs over
  // [0, H); from H b0 holds 1 GPU, and a and b each wait with a gang that
  // never fits (2 x 8 GPUs): both compete. With x = 2^(-(t - H) / H):
  //   R_a = 4 x, R_b = 1 - x, rho_a = 2 x 4x / (1 + 3x) = 8x / (1 + 3x)
  // At H rho_a = 2: p_a = 1 + 0.5 x 1 = 1.5, level floor(8 x 0.585) = 4,
  // w'_a = 2^(-1/2) (46,341 against 65,536): a deserves 8,000 x 46,341 /
  // 111,877 = 3,313 (+1 left over) = 3,314 milli, b 4,686. a's level falls
  // to 3 when rho_a reaches LevelRho(4) = 1 + (2^(1/2) - 1) / 0.5 = 1.82843:
  //   8x = 1.82843 (1 + 3x)  ->  x = 1.82843 / 2.51472 = 0.727090
  //   t = H + H (-log2 0.727090) = 3,600,000 + 1,655,257.9 ms = 5,255,257.9 ms
  // (b's rho = 2 (1 - x) / (1 + 3x) reaches LevelRho(1) = 1.18102 later, at
  // x = 0.14775; the queue keys cross at x = 0.30, later too). Then
  // w'_a = 2^(-3/8) (50,535): a deserves 3,483 + 1 = 3,484, b 4,516.
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), Weighted("0.5", {"a", "b"}));
  h.Submit(JobBuilder("a0").Queue("a").GpusPerTask(8).Build());
  CycleAt(h, 0);
  h.clock().Set(kHour);
  Finish(h, "a0");
  h.Submit(JobBuilder("b0").Queue("b").GpusPerTask(1).Build());
  h.Submit(JobBuilder("a-never").Queue("a").Gang(2).GpusPerTask(8).Build());
  h.Submit(JobBuilder("b-never").Queue("b").Gang(2).GpusPerTask(8).Build());
  for (int i = 0; i < 5; ++i) {
    CycleAt(h, kHour);
    if (h.engine().NextWakeup() > kHour) break;
  }
  ASSERT_TRUE(h.Running("b0"));
  const auto& p = Proportion(h);
  EXPECT_EQ(p.ShareLevel(Queue(h, "a")), 4);
  EXPECT_EQ(p.ShareLevel(Queue(h, "b")), 0);
  EXPECT_EQ(DeservedMilliGpus(h, "a"), 3'314);
  const double x = plugins::ProportionPlugin::LevelRho(4, 0.5) / (8 - 3 * plugins::ProportionPlugin::LevelRho(4, 0.5));
  EXPECT_NEAR(x, 0.727090, 1e-6);
  const Timestamp change = kHour + static_cast<Timestamp>(std::floor(kHour * -std::log2(x)));
  ASSERT_EQ(change, 5'255'257);
  const Timestamp wake = h.engine().NextWakeup();
  EXPECT_LE(wake, change);
  EXPECT_GE(wake, change - 10);
  // Just before: level 4 still (the cycle the engine was told to skip to
  // decides as the quiet ones before it).
  CycleAt(h, wake);
  EXPECT_EQ(p.ShareLevel(Queue(h, "a")), 4);
  EXPECT_EQ(DeservedMilliGpus(h, "a"), 3'314);
  // Just after: level 3.
  CycleAt(h, change + 1);
  EXPECT_EQ(p.ShareLevel(Queue(h, "a")), 3);
  EXPECT_EQ(DeservedMilliGpus(h, "a"), 3'484);
  EXPECT_EQ(DeservedMilliGpus(h, "b"), 4'516);
}

TEST(ProportionPlugin, DeservedSharesReadingUsageSurviveAPolicyReload) {
  // a held the cluster over [0, H), then at H both wait with gangs that
  // never fit (16 GPUs each): with k = 1, R_a = 4 and R_b = 0, level 8,
  // a deserves 8,000 x 1/3 = 2,666 (+1 left over) = 2,667 milli, b 5,333.
  // A plugin that got the usage from a reload at H computes the same: the
  // carried R_a = 4 gives the same level.
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), Weighted("1", {"a", "b"}));
  AUsesTheClusterForAnHour(h);
  h.Submit(JobBuilder("a-never").Queue("a").Gang(2).GpusPerTask(8).Build());
  h.Submit(JobBuilder("b-never").Queue("b").Gang(2).GpusPerTask(8).Build());
  CycleAt(h, kHour);
  const std::vector<topology::Resources> before = h.engine().deserved();
  EXPECT_EQ(DeservedMilliGpus(h, "a"), 2'667);
  EXPECT_EQ(Proportion(h).ShareLevel(Queue(h, "a")), 8);
  const scheduler::PluginRegistry registry = plugins::BuiltinRegistry();
  ASSERT_TRUE(h.engine().SetPolicy(Weighted("1", {"a", "b"}), registry).ok());
  CycleAt(h, kHour);
  EXPECT_EQ(Proportion(h).ShareLevel(Queue(h, "a")), 8);
  EXPECT_EQ(h.engine().deserved(), before);
  // A reload without usageWeight: the instantaneous shares, 4 and 4.
  ASSERT_TRUE(h.engine().SetPolicy(TwoQueues("{usageHalfLife: 3600}"), registry).ok());
  CycleAt(h, kHour);
  EXPECT_EQ(DeservedMilliGpus(h, "a"), 4'000);
}

}  // namespace
}  // namespace ringmaster::testing
