// Preempt, reclaim and elastic, each scenario one that users of other gang
// schedulers report going wrong, written so that a scheduler without the rule
// fails it.
#include <gtest/gtest.h>

#include <map>
#include <set>

#include "plugins/gang.h"
#include "plugins/priority.h"
#include "scheduler/actions/action.h"
#include "scheduler/statement.h"
#include "tests/support/builders.h"

namespace ringmaster::testing {
namespace {

using scheduler::Eviction;
using scheduler::JobPhase;
using scheduler::MembershipChange;
using scheduler::TaskState;

// Every action on, no grace period, no cooldown, growth at once.
std::string Policy(const std::string& grace = "0", const std::string& extra = "") {
  return R"(actions: "enqueue, allocate, preempt, reclaim, elastic, backfill"
configurations:
- name: preempt
  arguments: {gracePeriod: )" + grace + R"(, cooldown: 0}
- name: reclaim
  arguments: {gracePeriod: )" + grace + R"(, cooldown: 0}
- name: elastic
  arguments: {growIdle: 0, cooldown: 0}
)" + extra;
}

int Count(const scheduler::Decisions& d, Eviction::Kind k) {
  int n = 0;
  for (const auto& e : d.evictions) n += e.kind == k;
  return n;
}

TEST(Preempt, HighPriorityTwoNodeGangStartsByEvictingOneLowPriorityJob) {
  // 4 nodes x 8 GPUs. Three 8-GPU low-priority jobs hold nodes 0-2; node 3 is
  // idle. A priority-10 gang of 2 x 8 GPUs needs one more node: one victim.
  EngineHarness h(ClusterBuilder().NodesPerRack(4).Gpus(8).Build(), PolicyFromYaml(Policy()));
  for (int i = 0; i < 3; ++i) h.Submit(JobBuilder("low" + std::to_string(i)).GpusPerTask(8).Build());
  h.Cycle();
  h.Submit(JobBuilder("urgent").Gang(2).GpusPerTask(8).Priority(10).Build());
  auto d = h.Cycle();
  EXPECT_TRUE(h.Running("urgent")) << h.job("urgent").pending_reason();
  ASSERT_EQ(d.evictions.size(), 1u) << "one 8-GPU job is the least sufficient victim set";
  EXPECT_EQ(d.evictions[0].kind, Eviction::Kind::kEvict);
  EXPECT_EQ(d.evictions[0].preemptor, "urgent");
  EXPECT_NE(d.evictions[0].reason.find("preempt"), std::string::npos) << d.evictions[0].reason;
  // The youngest of the equal-priority victims goes: they started together,
  // low2 was submitted last.
  EXPECT_EQ(h.state().job(d.evictions[0].job).name(), "low2");
  EXPECT_EQ(h.job("low2").phase(), JobPhase::kInqueue) << "evicted whole, waits again";
}

// A preemptor that fails short of choosing victims is not tried again in
// the action for another of its queue and rank that asks the same
// (VictimPicker::FailKey): one that asks for other tasks is still tried.
// 1 node x 8 GPUs: 6 held by a job no waiting one outranks, 2 by a
// priority-0 job. `first` (priority 5) cannot be helped by the 2 GPUs;
// `second`, of the same rank and queue but asking for less, can.
void SecondOfARankStillPreempts(const std::string& what, const scheduler::JobSpec& first,
                                const scheduler::JobSpec& second) {
  SCOPED_TRACE(what);
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), PolicyFromYaml(Policy()));
  h.Submit(JobBuilder("keep").GpusPerTask(6).Priority(10).Build());
  h.Submit(JobBuilder("low").GpusPerTask(2).Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("keep"));
  ASSERT_TRUE(h.Running("low"));
  h.Submit(first);  // submitted first: ahead of `second` in job order
  h.Submit(second);
  auto d = h.Cycle();
  EXPECT_FALSE(h.Running("first"));
  EXPECT_TRUE(h.Running("second")) << h.job("second").pending_reason();
  ASSERT_EQ(d.evictions.size(), 1u);
  EXPECT_EQ(h.state().job(d.evictions[0].job).name(), "low");
}

TEST(Preempt, AFailedPreemptorDoesNotStopOneOfItsRankThatAsksForLess) {
  SecondOfARankStillPreempts("fewer GPUs per task", JobBuilder("first").GpusPerTask(4).Priority(5).Build(),
                             JobBuilder("second").GpusPerTask(2).Priority(5).Build());
  SecondOfARankStillPreempts("fewer tasks", JobBuilder("first").Gang(2).GpusPerTask(2).Priority(5).Build(),
                             JobBuilder("second").GpusPerTask(2).Priority(5).Build());
}

TEST(Preempt, EqualPriorityNeverPreempts) {
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), PolicyFromYaml(Policy()));
  h.Submit(JobBuilder("a").Gang(2).GpusPerTask(8).Build());
  h.Cycle();
  h.Submit(JobBuilder("b").GpusPerTask(8).Build());
  for (int i = 0; i < 5; ++i) EXPECT_TRUE(h.Cycle().evictions.empty());
  EXPECT_FALSE(h.Running("b"));
}

TEST(Preempt, ThirtyTwoTaskGangStartsInOneCycleByShrinkingOnly) {
  // 16 nodes x 8 GPUs = 128 GPUs, all held by 8 elastic jobs of 16 x 1 GPU
  // (min 4): 8 x 12 = 96 surplus members. A 32 x 1 GPU gang at priority 10
  // needs 32 GPUs: shrinking alone makes room, so no job is evicted whole.
  EngineHarness h(ClusterBuilder().Racks(4).NodesPerRack(4).Gpus(8).Build(), PolicyFromYaml(Policy()));
  for (int i = 0; i < 8; ++i) {
    h.Submit(JobBuilder("el" + std::to_string(i)).Gang(16).Elastic(4, 16).GpusPerTask(1).Build());
  }
  h.Cycle();
  ASSERT_EQ(h.state().free_index().TotalFree(), 0);
  h.Submit(JobBuilder("big").Gang(32).GpusPerTask(1).Priority(10).Build());
  auto d = h.Cycle();
  EXPECT_TRUE(h.Running("big")) << h.job("big").pending_reason();
  EXPECT_EQ(Count(d, Eviction::Kind::kEvict), 0) << "zero whole-job evictions";
  EXPECT_EQ(Count(d, Eviction::Kind::kShrink), 32) << "exactly the 32 GPUs it needs";
  for (int i = 0; i < 8; ++i) {
    const auto& j = h.job("el" + std::to_string(i));
    EXPECT_EQ(j.phase(), JobPhase::kRunning);
    EXPECT_GE(j.ReadyCount(), 4) << "never below its minimum";
  }
  // Every shrunk job got a new generation without its leavers.
  std::set<std::string> shrunk;
  for (const auto& m : d.membership) {
    if (m.kind == MembershipChange::Kind::kShrink) shrunk.insert(m.job_name);
  }
  std::set<std::string> victims;
  for (const auto& e : d.evictions) victims.insert(h.state().job(e.job).name());
  EXPECT_EQ(shrunk, victims);
}

TEST(Preempt, TakingBelowTheMinimumTakesTheWholeGang) {
  // One node of 8 GPUs: an elastic job 8 x 1 GPU, min 6 (2 surplus). A
  // priority gang of 4 x 1 GPU cannot be served by shrinking (2 < 4): the
  // whole elastic job goes, never left at 4 of its minimum 6.
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), PolicyFromYaml(Policy()));
  h.Submit(JobBuilder("el").Gang(8).Elastic(6, 8).GpusPerTask(1).Build());
  h.Cycle();
  h.Submit(JobBuilder("hp").Gang(4).GpusPerTask(1).Priority(5).Build());
  auto d = h.Cycle();
  EXPECT_TRUE(h.Running("hp"));
  EXPECT_EQ(h.job("el").phase(), JobPhase::kInqueue);
  EXPECT_EQ(Count(d, Eviction::Kind::kEvict), 8);
  EXPECT_EQ(Count(d, Eviction::Kind::kShrink), 0);
}

TEST(Preempt, NothingIsEvictedWhenThePreemptorStillCannotStart) {
  // 2 nodes x 8: low-priority jobs fill them. A hard-topology gang needs 24
  // GPUs in one rack of 16: evicting everything would not help.
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), PolicyFromYaml(Policy()));
  h.Submit(JobBuilder("low").Gang(2).GpusPerTask(8).Build());
  h.Cycle();
  h.Submit(JobBuilder("huge").Gang(3).GpusPerTask(8).Priority(10).Hard(1).Build());
  for (int i = 0; i < 3; ++i) EXPECT_TRUE(h.Cycle().evictions.empty());
  EXPECT_TRUE(h.Running("low"));
}

TEST(Preempt, AJobThatFreesNoGpuTheGangLacksIsNeverTaken) {
  // One node x 8 GPUs: gpu-low holds all 8; cpu-only (no GPU, submitted
  // later, so the cheaper victim) shares the node. hp needs the 8 GPUs:
  // evicting cpu-only frees none of them, and the node's cpu is ample.
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), PolicyFromYaml(Policy()));
  h.Submit(JobBuilder("gpu-low").GpusPerTask(8).CpuPerTask(1000).Build());
  h.Submit(JobBuilder("cpu-only").CpuPerTask(1000).Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("gpu-low") && h.Running("cpu-only"));
  h.Submit(JobBuilder("hp").GpusPerTask(8).CpuPerTask(1000).Priority(10).Build());
  auto d = h.Cycle();
  EXPECT_TRUE(h.Running("hp")) << h.job("hp").pending_reason();
  ASSERT_EQ(d.evictions.size(), 1u);
  EXPECT_EQ(h.state().job(d.evictions[0].job).name(), "gpu-low");
  EXPECT_TRUE(h.Running("cpu-only")) << "it freed nothing hp lacked";
}

TEST(Preempt, AJobThatFreesOnlyCpuIsTakenWhereCpuIsWhatTheNodeLacks) {
  // One node x 8 GPUs and 8 cores: cpu-hog (no GPU, 7 cores, older: the
  // dearer victim) and gpu-low (8 GPUs, 1 core). hp needs 8 GPUs and 4
  // cores: with gpu-low gone only 1 core is idle, so cpu-hog must go too.
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).CpuPerNode(8000).Build(), PolicyFromYaml(Policy()));
  h.Submit(JobBuilder("cpu-hog").CpuPerTask(7000).Build());
  h.Submit(JobBuilder("gpu-low").GpusPerTask(8).CpuPerTask(1000).Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("gpu-low") && h.Running("cpu-hog"));
  h.Submit(JobBuilder("hp").GpusPerTask(8).CpuPerTask(4000).Priority(10).Build());
  auto d = h.Cycle();
  EXPECT_TRUE(h.Running("hp")) << h.job("hp").pending_reason();
  std::set<std::string> victims;
  for (const auto& e : d.evictions) victims.insert(h.state().job(e.job).name());
  EXPECT_EQ(victims, (std::set<std::string>{"cpu-hog", "gpu-low"}));
}

TEST(Preempt, VictimsTheLandingDoesNotNeedAreDropped) {
  // One node x 8 GPUs: el (4 x 1 GPU, elastic, min 2: two shrinks of 1 GPU
  // on offer) and low (1 x 4 GPUs, younger). hp needs one 4-GPU task.
  // Shrinking gives only 2 GPUs, so low must go; once it does, the two
  // cheaper shrinks taken on the way are not needed and must not happen.
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), PolicyFromYaml(Policy()));
  h.Submit(JobBuilder("el").Gang(4).Elastic(2, 4).GpusPerTask(1).Build());
  h.Submit(JobBuilder("low").GpusPerTask(4).Build());
  h.Cycle();
  ASSERT_EQ(h.state().free_index().TotalFree(), 0);
  h.Submit(JobBuilder("hp").GpusPerTask(4).Priority(10).Build());
  auto d = h.Cycle();
  EXPECT_TRUE(h.Running("hp")) << h.job("hp").pending_reason();
  ASSERT_EQ(d.evictions.size(), 1u) << "the least sufficient set is low alone";
  EXPECT_EQ(d.evictions[0].kind, Eviction::Kind::kEvict);
  EXPECT_EQ(h.state().job(d.evictions[0].job).name(), "low");
  EXPECT_EQ(h.job("el").ReadyCount(), 4);
}

TEST(Preempt, HardTopologyVictimsLieInTheDomainThePreemptorLandsIn) {
  // 2 racks x 2 nodes x 8 GPUs. Rack 0: two low-priority 8-GPU jobs. Rack 1:
  // one low-priority 8-GPU job and one idle node. A 2 x 8 gang that must stay
  // in one rack needs one victim, in rack 1 (where a node is idle).
  EngineHarness h(ClusterBuilder().Racks(2).NodesPerRack(2).Gpus(8).Build(), PolicyFromYaml(Policy()));
  for (int i = 0; i < 3; ++i) h.Submit(JobBuilder("low" + std::to_string(i)).GpusPerTask(8).Build());
  h.Cycle();
  std::set<uint32_t> used_racks;
  h.Submit(JobBuilder("gang").Gang(2).GpusPerTask(8).Priority(10).Hard(1).Build());
  auto d = h.Cycle();
  ASSERT_TRUE(h.Running("gang"));
  ASSERT_EQ(d.evictions.size(), 1u);
  const auto& c = h.state().cluster();
  std::set<uint32_t> racks;
  for (const auto& t : h.job("gang").tasks()) racks.insert(c.DomainOf(t.node, 1).value());
  ASSERT_EQ(racks.size(), 1u);
  EXPECT_EQ(c.DomainOf(d.evictions[0].node, 1).value(), *racks.begin());
}

TEST(Preempt, GracePeriodHoldsThePreemptorUntilVictimsRelease) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), PolicyFromYaml(Policy("30")));
  h.Submit(JobBuilder("low").GpusPerTask(8).Build());
  h.Cycle();
  h.Submit(JobBuilder("hp").GpusPerTask(8).Priority(1).Build());
  const scheduler::Timestamp t0 = h.clock().Now();
  auto d = h.Cycle();
  ASSERT_EQ(d.evictions.size(), 1u);
  EXPECT_EQ(d.evictions[0].deadline, t0 + 30'000) << "stop by the grace period's end";
  EXPECT_TRUE(d.binds.empty()) << "GPUs count as free only once released";
  EXPECT_TRUE(h.job("hp").nominated());
  EXPECT_EQ(h.job("hp").task(0).state, TaskState::kPipelined);
  EXPECT_EQ(h.job("low").task(0).state, TaskState::kReleasing);
  EXPECT_EQ(h.engine().ExpectedStart(h.engine().FindJob("hp")), t0 + 30'000);
  // A third job does not slip in while the victim releases.
  h.Submit(JobBuilder("other").GpusPerTask(8).Priority(1).Build());
  EXPECT_TRUE(h.Cycle().binds.empty());
  // The victim's process exits: the preemptor binds in the next cycle.
  ASSERT_TRUE(h.engine().TaskReleased(h.engine().FindJob("low"), 0).ok());
  d = h.Cycle();
  ASSERT_EQ(d.binds.size(), 1u);
  EXPECT_EQ(h.state().job(d.binds[0].job).name(), "hp");
  EXPECT_TRUE(h.Running("hp"));
  EXPECT_FALSE(h.Running("other"));
}

TEST(Preempt, AVictimStillThereAtItsDeadlineIsReleasedByTheEngine) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), PolicyFromYaml(Policy("5")));
  h.Submit(JobBuilder("low").GpusPerTask(8).Build());
  h.Cycle();
  h.Submit(JobBuilder("hp").GpusPerTask(8).Priority(1).Build());
  h.Cycle();
  const scheduler::Timestamp deadline = h.engine().NextDeadline();
  ASSERT_GT(deadline, 0);
  while (h.clock().Now() < deadline) {
    EXPECT_FALSE(h.Running("hp")) << "before the deadline " << deadline;
    h.Cycle();
  }
  h.Cycle();
  EXPECT_TRUE(h.Running("hp"));
}

TEST(Preempt, CooldownProtectsAJobThatJustStarted) {
  auto policy = PolicyFromYaml(R"(actions: "enqueue, allocate, preempt, backfill"
configurations:
- name: preempt
  arguments: {gracePeriod: 0, cooldown: 60}
)");
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), policy);
  h.Submit(JobBuilder("low").GpusPerTask(8).Build());
  h.Cycle();
  h.Submit(JobBuilder("hp").GpusPerTask(8).Priority(1).Build());
  int cycles = 1;
  while (!h.Running("hp") && cycles < 200) {
    h.Cycle();
    ++cycles;
  }
  EXPECT_TRUE(h.Running("hp"));
  EXPECT_GE(cycles, 59) << "the victim ran at least its 60 s cooldown";
}

TEST(Preempt, PerCycleEvictionCapBoundsTheChurn) {
  auto policy = PolicyFromYaml(R"(actions: "enqueue, allocate, preempt, backfill"
configurations:
- name: preempt
  arguments: {gracePeriod: 0, cooldown: 0, maxEvictionsPerCycle: 2}
)");
  EngineHarness h(ClusterBuilder().NodesPerRack(4).Gpus(8).Build(), policy);
  for (int i = 0; i < 4; ++i) h.Submit(JobBuilder("low" + std::to_string(i)).GpusPerTask(8).Build());
  h.Cycle();
  for (int i = 0; i < 4; ++i) h.Submit(JobBuilder("hp" + std::to_string(i)).GpusPerTask(8).Priority(1).Build());
  // The cap bounds each cycle, and preemption still happens: two low jobs
  // go in the first cycle, two in the next, and every high job starts.
  std::vector<size_t> per_cycle;
  for (int c = 0; c < 4; ++c) per_cycle.push_back(h.Cycle().evictions.size());
  EXPECT_EQ(per_cycle, (std::vector<size_t>{2, 2, 0, 0}));
  for (int i = 0; i < 4; ++i) {
    EXPECT_TRUE(h.Running("hp" + std::to_string(i))) << "hp" << i;
    EXPECT_FALSE(h.Running("low" + std::to_string(i))) << "low" << i;
  }
}

TEST(Reclaim, TwoEqualQueuesDoNotEvictEachOtherInALoop) {
  // Two equal-weight queues, each with far more 8-GPU jobs than 32 GPUs hold.
  // Queue a takes the whole cluster first; b arrives and reclaims up to its
  // deserved half (16 GPUs: 2 jobs). Then nothing moves for 10,000 cycles.
  EngineHarness h(ClusterBuilder().NodesPerRack(4).Gpus(8).Build(), PolicyFromYaml(Policy("0", R"(queues:
- {name: a, weight: 1}
- {name: b, weight: 1}
)")), /*check_invariants=*/false);
  for (int i = 0; i < 8; ++i) h.Submit(JobBuilder("a" + std::to_string(i)).Queue("a").GpusPerTask(8).Build());
  h.Cycle();
  for (int i = 0; i < 8; ++i) h.Submit(JobBuilder("b" + std::to_string(i)).Queue("b").GpusPerTask(8).Build());
  int evictions = 0;
  for (int c = 0; c < 10'000; ++c) evictions += static_cast<int>(h.Cycle().evictions.size());
  EXPECT_LE(evictions, 2) << "b takes back its share once; no ping-pong";
  const auto& st = h.state();
  EXPECT_EQ(st.queue_usage(scheduler::QueueId(*st.queues().Find("b"))).allocated.gpu_milli(), 16'000);
  EXPECT_EQ(st.queue_usage(scheduler::QueueId(*st.queues().Find("a"))).allocated.gpu_milli(), 16'000);
}

TEST(Reclaim, WhatIsAlreadyOnItsWayCountsAndNothingIsTakenTwice) {
  // 2 nodes x 8 GPUs, two equal queues (deserved 8 GPUs each). Queue a runs
  // four 4-GPU jobs (16 GPUs); b asks for three. With a 30 s grace period
  // reclaim stops two of a's jobs for b0 and b1 (pipelined onto their GPUs).
  // While those stop, a's releasing GPUs are no longer its excess and b's
  // pipelined ones are b's: b2 takes nothing (counting them the other way
  // took a third job, then a took it back from b: a swap every cooldown).
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), PolicyFromYaml(Policy("30", R"(queues:
- {name: a, weight: 1}
- {name: b, weight: 1}
)")));
  for (int i = 0; i < 4; ++i) h.Submit(JobBuilder("a" + std::to_string(i)).Queue("a").GpusPerTask(4).Build());
  h.Cycle();
  for (int i = 0; i < 3; ++i) h.Submit(JobBuilder("b" + std::to_string(i)).Queue("b").GpusPerTask(4).Build());
  int evictions = 0;
  for (int c = 0; c < 200; ++c) {
    evictions += Count(h.Cycle(), Eviction::Kind::kEvict);
    h.clock().Advance(1000);
  }
  EXPECT_EQ(evictions, 2) << "b takes back its deserved 8 GPUs once";
  const auto& st = h.state();
  EXPECT_EQ(st.queue_usage(scheduler::QueueId(*st.queues().Find("a"))).allocated.gpu_milli(), 8'000);
  EXPECT_EQ(st.queue_usage(scheduler::QueueId(*st.queues().Find("b"))).allocated.gpu_milli(), 8'000);
  EXPECT_TRUE(h.Running("b0"));
  EXPECT_TRUE(h.Running("b1"));
  EXPECT_FALSE(h.Running("b2"));
}

TEST(Reclaim, NeverTakesAQueueBelowItsGuarantee) {
  // a has a 16-GPU guarantee and holds exactly 16; b (weight 3) wants more.
  EngineHarness h(ClusterBuilder().NodesPerRack(4).Gpus(8).Build(), PolicyFromYaml(Policy("0", R"(queues:
- {name: a, weight: 1, guarantee: {gpu: 16}}
- {name: b, weight: 3}
)")));
  for (int i = 0; i < 2; ++i) h.Submit(JobBuilder("a" + std::to_string(i)).Queue("a").GpusPerTask(8).Build());
  for (int i = 0; i < 2; ++i) h.Submit(JobBuilder("b" + std::to_string(i)).Queue("b").GpusPerTask(8).Build());
  h.Cycle();
  for (int i = 2; i < 6; ++i) h.Submit(JobBuilder("b" + std::to_string(i)).Queue("b").GpusPerTask(8).Build());
  for (int c = 0; c < 20; ++c) EXPECT_TRUE(h.Cycle().evictions.empty());
  EXPECT_TRUE(h.Running("a0") && h.Running("a1"));
}

TEST(Reclaim, HierarchicalQueuesTakeOnlyAcrossTheSubtreeThatBorrows) {
  // root -> org1 (t1, t2) and org2, equal weights: 32 GPUs, 16 deserved per
  // org, 8 per team while both teams ask. org2 first takes the whole cluster.
  EngineHarness h(ClusterBuilder().NodesPerRack(4).Gpus(8).Build(), PolicyFromYaml(Policy("0", R"(queues:
- {name: org1, weight: 1}
- {name: t1, parent: org1, weight: 1}
- {name: t2, parent: org1, weight: 1}
- {name: org2, weight: 1}
)")));
  for (int i = 0; i < 4; ++i) h.Submit(JobBuilder("o" + std::to_string(i)).Queue("org2").GpusPerTask(8).Build());
  h.Cycle();
  // t1 and t2 each take back 8 GPUs from org2, which borrows (32 > 16).
  h.Submit(JobBuilder("a").Queue("t1").GpusPerTask(8).Build());
  h.Submit(JobBuilder("b").Queue("t2").GpusPerTask(8).Build());
  int evicted = 0;
  for (int c = 0; c < 3; ++c) {
    for (const auto& e : h.Cycle().evictions) {
      EXPECT_EQ(h.state().job(e.job).spec().queue, "org2");
      ++evicted;
    }
  }
  EXPECT_TRUE(h.Running("a") && h.Running("b"));
  EXPECT_EQ(evicted, 2);
  // Another t2 job: org1 would end above its 16 deserved, and t1 holds only
  // its own share: nobody is reclaimed from.
  h.Submit(JobBuilder("b2").Queue("t2").GpusPerTask(8).Build());
  for (int c = 0; c < 5; ++c) EXPECT_TRUE(h.Cycle().evictions.empty());
  EXPECT_FALSE(h.Running("b2"));
  EXPECT_TRUE(h.Running("a"));
}

TEST(Starvation, A64GpuGangIsNotStarvedByAStreamOfOneGpuJobs) {
  // 8 nodes x 8 GPUs. A new 1-GPU job (10 s walltime) arrives every second;
  // a 64-GPU gang arrives at t=5 s. The reservation keeps the small jobs from
  // refilling what the gang waits for: it starts once the running ones end.
  EngineHarness h(ClusterBuilder().NodesPerRack(8).Gpus(8).Build(), PolicyFromYaml(Policy()));
  std::map<scheduler::JobId, scheduler::Timestamp> ends;
  int next = 0;
  scheduler::Timestamp started = -1, predicted = -1;
  for (int t = 0; t < 120 && started < 0; ++t) {
    for (int k = 0; k < 8; ++k) {
      h.Submit(JobBuilder("s" + std::to_string(next++)).GpusPerTask(1).Walltime(10'000).Build());
    }
    if (t == 5) h.Submit(JobBuilder("gang").Gang(8).GpusPerTask(8).Build());
    for (auto it = ends.begin(); it != ends.end();) {
      if (it->second <= h.clock().Now()) {
        ASSERT_TRUE(h.engine().FinishJob(it->first, true).ok());
        it = ends.erase(it);
      } else {
        ++it;
      }
    }
    auto d = h.Cycle();
    for (const auto& b : d.binds) {
      if (h.state().job(b.job).name() != "gang") ends[b.job] = h.clock().Now() - 1000 + 10'000;
    }
    if (t == 6) predicted = h.engine().ExpectedStart(h.engine().FindJob("gang"));
    if (t >= 5 && h.Running("gang")) started = h.clock().Now() - 1000;
  }
  ASSERT_GE(started, 0) << "the gang starved: " << h.job("gang").pending_reason();
  EXPECT_LE(started, 5'000 + 12'000) << "bounded by the small jobs' walltime";
  ASSERT_GE(predicted, 0) << "a waiting gang gets an expected start";
  EXPECT_LE(started, predicted + 1'000) << "it started no later than the engine said";
}

TEST(ExpectedStart, FromTheWalltimesOfWhatRunsOnTheNodesItMayUse) {
  // Two 8-GPU nodes: a (walltime 100 s) and b (50 s) hold them. A 2 x 8 gang
  // needs both: it may start when a ends. One 8-GPU job needs either: when b
  // ends. A job for a GPU model the cluster lacks has no expected start.
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build());
  h.Submit(JobBuilder("a").GpusPerTask(8).Walltime(100'000).Build());
  h.Submit(JobBuilder("b").GpusPerTask(8).Walltime(50'000).Build());
  const scheduler::Timestamp t0 = h.clock().Now();
  h.Cycle();
  h.Submit(JobBuilder("gang").Gang(2).GpusPerTask(8).Build());
  h.Submit(JobBuilder("one").GpusPerTask(8).Build());
  h.Submit(JobBuilder("other-model").GpusPerTask(1).Model("no-such-gpu").Build());
  h.Cycle();
  EXPECT_EQ(h.engine().ExpectedStart(h.engine().FindJob("gang")), t0 + 100'000);
  EXPECT_EQ(h.engine().ExpectedStart(h.engine().FindJob("one")), t0 + 50'000);
  EXPECT_EQ(h.engine().ExpectedStart(h.engine().FindJob("other-model")), -1);
  EXPECT_EQ(h.engine().ExpectedStart(h.engine().FindJob("a")), t0) << "running: when it started";
}

TEST(Elastic, GrowsBackToItsMaximumAfterTheHighPriorityJobEnds) {
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), PolicyFromYaml(Policy()));
  h.Submit(JobBuilder("el").Gang(8).Elastic(2, 8).GpusPerTask(2).Build());
  h.Cycle();
  ASSERT_EQ(h.job("el").ReadyCount(), 8);
  h.Submit(JobBuilder("hp").Gang(2).GpusPerTask(4).Priority(10).Build());
  auto d = h.Cycle();
  ASSERT_TRUE(h.Running("hp"));
  EXPECT_EQ(h.job("el").ReadyCount(), 4) << "shrunk by exactly the 8 GPUs hp needs";
  EXPECT_EQ(Count(d, Eviction::Kind::kEvict), 0);
  const int64_t gen = h.job("el").generation();
  ASSERT_TRUE(h.engine().FinishJob(h.engine().FindJob("hp"), true).ok());
  d = h.Cycle();
  EXPECT_EQ(h.job("el").ReadyCount(), 8) << "grew back into the idle GPUs";
  ASSERT_EQ(d.membership.size(), 1u);
  EXPECT_EQ(d.membership[0].kind, MembershipChange::Kind::kGrow);
  EXPECT_GT(d.membership[0].generation, gen);
  EXPECT_EQ(d.membership[0].members.size(), 8u);
}

TEST(Elastic, DoesNotGrowWhileAMoreDeservingGangWaits) {
  // el (priority 0) could grow into 4 idle GPUs, but a priority-5 gang that
  // could use them waits (it needs 8): growth would starve it.
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), PolicyFromYaml(R"(actions: "enqueue, allocate, elastic, backfill"
configurations:
- name: elastic
  arguments: {growIdle: 0, cooldown: 0}
)"));
  h.Submit(JobBuilder("el").Gang(4).Elastic(2, 8).GpusPerTask(1).Build());
  h.Cycle();
  h.Submit(JobBuilder("wait").Gang(8).GpusPerTask(1).Priority(5).Build());
  for (int c = 0; c < 5; ++c) h.Cycle();
  EXPECT_EQ(h.job("el").ReadyCount(), 4);
}

TEST(Elastic, WaitsForGpusToBeIdleForGrowIdle) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), PolicyFromYaml(R"(actions: "enqueue, allocate, elastic"
configurations:
- name: elastic
  arguments: {growIdle: 10, cooldown: 0}
)"));
  h.Submit(JobBuilder("el").Gang(4).Elastic(2, 8).GpusPerTask(1).Build());
  int cycles = 0;
  while (h.job("el").ReadyCount() < 8 && cycles < 100) {
    h.Cycle();
    ++cycles;
  }
  EXPECT_EQ(h.job("el").ReadyCount(), 8);
  EXPECT_GE(cycles, 10) << "idle 10 s (one cycle per second) before growing";
}

// What an elastic job grew into while GPUs were idle is a loan: a job of
// its priority that arrives later takes it back (down to the desired size,
// never below), within the loan grace; with returnLoans off it waits.
std::string LoanPolicy(bool return_loans) {
  return std::string(R"(actions: "enqueue, allocate, elastic, backfill"
configurations:
- name: elastic
  arguments: {growIdle: 0, cooldown: 0, loanGracePeriod: 0, returnLoans: )") +
         (return_loans ? "true" : "false") + "}\n";
}

TEST(Elastic, GrowthAboveTheDesiredSizeGoesBackToAJobOfItsPriorityThatWaits) {
  for (const bool loans : {true, false}) {
    SCOPED_TRACE(loans ? "returnLoans: true" : "returnLoans: false");
    EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), PolicyFromYaml(LoanPolicy(loans)));
    h.Submit(JobBuilder("el").Gang(4).Elastic(2, 8).GpusPerTask(1).Build());
    for (int c = 0; c < 3; ++c) h.Cycle();  // started, grew, the new members run
    ASSERT_EQ(h.job("el").ReadyCount(), 8) << "grew from its desired 4 into the idle GPUs";
    ASSERT_EQ(h.job("el").Count(TaskState::kRunning), 8);
    h.Submit(JobBuilder("late").Gang(4).GpusPerTask(1).Build());
    auto d = h.Cycle();
    if (!loans) {
      EXPECT_FALSE(h.Running("late"));
      EXPECT_EQ(h.job("el").ReadyCount(), 8);
      EXPECT_TRUE(d.evictions.empty());
      continue;
    }
    EXPECT_EQ(Count(d, Eviction::Kind::kShrink), 4) << "the 4 members above the desired size; late: "
                                                    << scheduler::PhaseName(h.job("late").phase()) << " "
                                                    << h.job("late").pending_reason();
    EXPECT_EQ(Count(d, Eviction::Kind::kEvict), 0);
    ASSERT_FALSE(d.evictions.empty());
    EXPECT_NE(d.evictions[0].reason.find("above its 4 desired workers"), std::string::npos) << d.evictions[0].reason;
    EXPECT_EQ(d.evictions[0].preemptor, "late");
    h.Cycle();
    EXPECT_TRUE(h.Running("late")) << h.job("late").pending_reason();
    EXPECT_EQ(h.job("el").ReadyCount(), 4) << "back to its desired size, not below";
  }
}

TEST(Elastic, ALoanIsNotTakenBelowTheDesiredSizeNorWhenItCannotStartTheWaiter) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), PolicyFromYaml(LoanPolicy(true)));
  h.Submit(JobBuilder("el").Gang(4).Elastic(2, 8).GpusPerTask(1).Build());
  for (int c = 0; c < 3; ++c) h.Cycle();
  ASSERT_EQ(h.job("el").Count(TaskState::kRunning), 8);
  // 6 GPUs: the loans are 4; el's desired 4 are not lent.
  h.Submit(JobBuilder("big").Gang(6).GpusPerTask(1).Build());
  for (int c = 0; c < 3; ++c) {
    auto d = h.Cycle();
    EXPECT_TRUE(d.evictions.empty()) << "nothing stopped for a job the loans cannot start";
  }
  EXPECT_EQ(h.job("el").ReadyCount(), 8);
  EXPECT_FALSE(h.Running("big"));
}

TEST(Elastic, ALowerPriorityJobDoesNotTakeALoanBack) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), PolicyFromYaml(LoanPolicy(true)));
  h.Submit(JobBuilder("el").Gang(4).Elastic(2, 8).GpusPerTask(1).Priority(5).Build());
  for (int c = 0; c < 3; ++c) h.Cycle();
  ASSERT_EQ(h.job("el").Count(TaskState::kRunning), 8);
  h.Submit(JobBuilder("low").Gang(2).GpusPerTask(1).Priority(1).Build());
  for (int c = 0; c < 3; ++c) EXPECT_TRUE(h.Cycle().evictions.empty());
  EXPECT_FALSE(h.Running("low"));
}

// Rule 3 of docs/PREEMPTION.md on its own: a job that yielded to another
// never takes from it, even where priority alone would let it. Run on a bare
// State so the mark can be set directly; the control run without the mark
// must preempt, or the test proves nothing.
bool PreemptsWithMark(bool yielded) {
  scheduler::State state(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), queue::QueueTree::Default());
  scheduler::ManualClock clock(1'000'000);
  const scheduler::JobId y = state.AddJob(JobBuilder("y").GpusPerTask(8).Build(), scheduler::QueueId(0), 0);
  const scheduler::JobId x =
      state.AddJob(JobBuilder("x").GpusPerTask(8).Priority(5).Build(), scheduler::QueueId(0), 1);
  auto prio = plugins::PriorityPlugin::Create({});
  auto gang = plugins::GangPlugin::Create({});
  std::vector<std::vector<scheduler::Plugin*>> tiers = {{prio->get(), gang->get()}};
  {
    scheduler::Session s(state, clock, 1, tiers);
    scheduler::Statement st(s);
    st.Allocate(state.job(y), 0, topology::NodeId(0), {0, 1, 2, 3, 4, 5, 6, 7});
    EXPECT_TRUE(st.Commit().ok());
    s.Close();
  }
  state.SetState(state.job(y), 0, TaskState::kRunning);
  state.SetPhase(state.job(y), JobPhase::kRunning);
  state.job(y).set_started(0);
  state.SetPhase(state.job(x), JobPhase::kInqueue);
  if (yielded) state.job(x).AddYieldedTo(y);
  scheduler::PluginArgs args("preempt", "", {{"gracePeriod", {"0", 0, 0}}, {"cooldown", {"0", 0, 0}}},
                             "configurations");
  auto preempt = scheduler::MakeAction("preempt", args);
  EXPECT_TRUE(preempt.ok());
  scheduler::Session s(state, clock, 2, tiers);
  (*preempt)->Execute(s);
  return !s.Close().evictions.empty();
}

TEST(Livelock, AJobThatYieldedToAnotherNeverTakesFromIt) {
  EXPECT_TRUE(PreemptsWithMark(false)) << "control: priority 5 > 0 preempts";
  EXPECT_FALSE(PreemptsWithMark(true));
}

}  // namespace
}  // namespace ringmaster::testing
