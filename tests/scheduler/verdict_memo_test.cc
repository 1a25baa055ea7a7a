// The verdict memo and the quiet-cycle skip (docs/ARCHITECTURE.md §7, "What
// the engine retries"): a gang whose inputs did not change since it last
// failed is not tried again and keeps its reason, and a cycle that would
// start from the state the last quiet one ended in is not run at all. Each
// test names a change and checks that it wakes what it should: the gang is
// tried again (Engine::last_cycle_work) and, where the change lets it, it
// starts. The property test (fast_paths_property_test.cc) checks that the
// memo never changes a decision or a reason.
#include "gtest/gtest.h"
#include "plugins/registry.h"
#include "scheduler/engine.h"
#include "scheduler/session.h"
#include "tests/support/builders.h"
#include "tests/support/clock_free_policy.h"

namespace ringmaster::scheduler {
namespace {

using testing::ClusterBuilder;
using testing::EngineHarness;
using testing::JobBuilder;
using testing::PolicyFromYaml;

// Adds a node like node 0 ("extra"): a node-added event with free GPUs.
void AddCopyOfNodeZero(EngineHarness& h) {
  topology::NodeSpec spec = h.state().cluster().node(NodeId(0));
  spec.name = "extra";
  ASSERT_TRUE(h.engine().AddNode(spec).ok());
}

// 2 racks x 2 nodes x 8 GPUs, each node running a 6-GPU job (fN on node
// N's order of placement): 2 GPUs free per node, 8 in all. "w", a gang of
// 4 x 2 GPUs that must share one node (hard, tier 0), fits by count (the
// count bound lets it through) but on no node: the planner tries it.
class VerdictMemo : public ::testing::Test {
 protected:
  // The clock-free policy: what a memo does when nothing changes (the
  // default policy's las reads the clock; ALasPolicyKeepsTheMemo is its case).
  void Start(Policy policy = testing::ClockFreePolicy()) {
    h_ = std::make_unique<EngineHarness>(ClusterBuilder().Racks(2).NodesPerRack(2).Gpus(8).Build(), policy);
    for (int i = 0; i < 4; ++i) h_->Submit(JobBuilder("f" + std::to_string(i)).GpusPerTask(6).Queue(queue_).Build());
    h_->Cycle();
    for (int i = 0; i < 4; ++i) ASSERT_TRUE(h_->Running("f" + std::to_string(i)));
    h_->Submit(JobBuilder("w").Gang(4).GpusPerTask(2).Hard(0).Queue(queue_).Build());
    Next();  // admits w, tries it: it fails
    ASSERT_FALSE(h_->Running("w"));
    ASSERT_TRUE(work().ran);
    ASSERT_GE(work().tried, 1);
    // It starves: allocate reserves a node for it, which changes the state
    // once more; then a cycle changes nothing, and the next is not run (for
    // a policy that reads the clock: until its next wake-up, seconds away
    // here).
    for (int i = 0; i < 5 && work().ran; ++i) Next();
    ASSERT_FALSE(work().ran);
    reason_ = h_->job("w").pending_reason();
    ASSERT_FALSE(reason_.empty());
  }
  void Next() {
    h_->clock().Advance(1000);
    h_->Cycle();
  }
  const Engine::CycleWork& work() { return h_->engine().last_cycle_work(); }

  std::string queue_ = "default";
  std::unique_ptr<EngineHarness> h_;
  std::string reason_;
};

TEST_F(VerdictMemo, NothingChangedRunsNoCycleAndKeepsTheReason) {
  Start();
  Next();
  EXPECT_FALSE(work().ran) << "a quiet cycle, then nothing happened: nothing to run";
  EXPECT_EQ(h_->engine().NextWakeup(), Engine::kNever);
  EXPECT_EQ(h_->job("w").pending_reason(), reason_);
  Next();
  EXPECT_FALSE(work().ran);
}

TEST_F(VerdictMemo, ASubmissionThatFreesNothingRecallsTheVerdict) {
  Start();
  // A gang that cannot fit either: an event, so the cycle runs, but what w
  // depends on (free GPUs, the reservation, the policy, the shares: the
  // cluster is over-asked already) did not change.
  h_->Submit(JobBuilder("x").GpusPerTask(8).Build());
  Next();
  EXPECT_TRUE(work().ran);
  EXPECT_EQ(work().recalled, 1) << "w's verdict stands (allocate; backfill passes over the reservation's gang)";
  EXPECT_EQ(work().tried, 2) << "only x is tried (allocate, then backfill)";
  EXPECT_EQ(h_->job("w").pending_reason(), reason_);
}

TEST_F(VerdictMemo, AReleaseOnANodeItCanUseWakesIt) {
  Start();
  ASSERT_TRUE(h_->engine().FinishJob(h_->engine().FindJob("f0"), true).ok());
  Next();
  EXPECT_TRUE(work().ran);
  EXPECT_EQ(work().recalled, 0);
  EXPECT_TRUE(h_->Running("w")) << "8 GPUs free on one node: w starts";
}

TEST_F(VerdictMemo, ANodeAddedWakesIt) {
  Start();
  AddCopyOfNodeZero(*h_);
  Next();
  EXPECT_EQ(work().recalled, 0);
  EXPECT_TRUE(h_->Running("w")) << "it starts on the new node";
}

TEST_F(VerdictMemo, APolicyReloadWakesIt) {
  Start();
  ASSERT_TRUE(h_->engine().SetPolicy(DefaultPolicy(), plugins::BuiltinRegistry()).ok());
  Next();
  EXPECT_TRUE(work().ran);
  EXPECT_EQ(work().recalled, 0) << "every verdict was the old policy's";
  EXPECT_GE(work().tried, 1);
}

TEST_F(VerdictMemo, AQueueShareCrossingWakesIt) {
  // Two queues of equal weight; w's queue asks for the whole cluster.
  Policy p = DefaultPolicy();
  queue::QueueSpec a;
  a.name = "a";
  queue::QueueSpec b;
  b.name = "b";
  p.queues = {a, b};
  queue_ = "a";
  Start(p);
  // A submission to b changes no free GPU, but b now asks for its share:
  // a's deserved share falls below the whole cluster. w is tried again.
  const std::vector<Resources> before = h_->engine().deserved();
  h_->Submit(JobBuilder("bx").GpusPerTask(8).Queue("b").Build());
  Next();
  ASSERT_NE(h_->engine().deserved(), before) << "the shares moved";
  EXPECT_EQ(work().recalled, 0) << "w's verdict was for other shares";
}

TEST_F(VerdictMemo, ALasPolicyKeepsTheMemo) {
  // las reads the clock (its thresholds), so a cycle runs when a running
  // job crosses one (time may reorder the gangs,
  // Wakeup.ALasThresholdWakesItAtTheCrossing); but only for job order and
  // preemption ranks, which never decide whether a gang fits: w's verdict
  // is recalled while nothing it reads changed. The f jobs (6 GPUs) cross
  // 600, 1200, 1800 GPU-s 100, 200, 300 s after they started.
  Start(PolicyFromYaml("actions: \"enqueue, allocate\"\n"
                       "tiers:\n- plugins: [{name: priority}, {name: gang}, "
                       "{name: las, arguments: {thresholds: \"600, 1200, 1800, 2400\"}}]\n"
                       "- plugins: [{name: predicates}, {name: proportion}]\n"));
  for (int i = 0; i < 3; ++i) {
    Next();
    EXPECT_FALSE(work().ran) << "before the next crossing: not run";
    const Timestamp wake = h_->engine().NextWakeup();
    ASSERT_NE(wake, Engine::kNever);
    ASSERT_GT(wake, h_->clock().Now());
    h_->clock().Set(wake);
    h_->Cycle();
    EXPECT_TRUE(work().ran) << "a threshold crossed";
    EXPECT_EQ(work().recalled, 1);
    EXPECT_EQ(work().tried, 0);
    EXPECT_EQ(h_->job("w").pending_reason(), reason_);
  }
  // A release on a node it can use still wakes it, and it starts.
  ASSERT_TRUE(h_->engine().FinishJob(h_->engine().FindJob("f0"), true).ok());
  Next();
  EXPECT_EQ(work().recalled, 0);
  EXPECT_TRUE(h_->Running("w")) << "8 GPUs free on one node: w starts";
}

// Plugins for the classification below: a predicate or only a job order,
// reading the clock or not.
class HookPlugin : public Plugin {
 public:
  HookPlugin(bool uses_time, bool predicate) : uses_time_(uses_time), predicate_(predicate) {}
  std::string_view name() const override { return "hook"; }
  bool UsesTime() const override { return uses_time_; }
  void OnSessionOpen(Session& s) override {
    if (predicate_) {
      s.AddPredicateFn(name(), [](const TaskRef&, NodeId) { return Verdict::Abstain(); });
    } else {
      s.AddJobOrderFn(name(), [](const Job&, const Job&) { return 0; });
    }
  }

 private:
  bool uses_time_;
  bool predicate_;
};

TEST(VerdictReadsClock, OnlyAClockReadingPluginsPlacementHookTurnsTheMemoOff) {
  State state(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), queue::QueueTree::Default());
  ManualClock clock;
  auto reads = [&](bool uses_time, bool predicate) {
    HookPlugin p(uses_time, predicate);
    std::vector<std::vector<Plugin*>> tiers = {{&p}};
    Session s(state, clock, 1, tiers);
    const bool r = s.verdict_reads_clock();
    s.Close();
    return r;
  };
  EXPECT_TRUE(reads(true, true)) << "a predicate that reads the clock";
  EXPECT_FALSE(reads(true, false)) << "a job order that reads the clock";
  EXPECT_FALSE(reads(false, true)) << "a predicate that does not";
  EXPECT_FALSE(reads(false, false));
}

// The count memo (GangPlacer::Recall): a gang the free-GPU count rules out
// (no node has the GPUs one of its tasks needs) keeps its verdict and its
// reason across a release that makes no room for its tasks, though the
// state's epoch moved; a release that makes room wakes it. One node of 8
// GPUs per rack, 4 racks: f0..f3 hold 6 GPUs each, s holds 1 beside f1; "big"
// waits for 2 x 8 GPUs, "one" for 1 x 8.
class CountMemo : public ::testing::Test {
 protected:
  void Start() {
    h_ = std::make_unique<EngineHarness>(ClusterBuilder().Racks(4).NodesPerRack(1).Gpus(8).Build(),
                                         testing::ClockFreePolicy());
    for (int i = 0; i < 4; ++i) h_->Submit(JobBuilder("f" + std::to_string(i)).GpusPerTask(6).Build());
    h_->Cycle();
    h_->Submit(JobBuilder("s").GpusPerTask(1).Build());
    h_->Cycle();
    for (const char* j : {"f0", "f1", "f2", "f3", "s"}) ASSERT_TRUE(h_->Running(j)) << j;
    h_->Submit(JobBuilder("big").Gang(2).GpusPerTask(8).Build());
    h_->Submit(JobBuilder("one").GpusPerTask(8).Build());
    for (int i = 0; i < 6; ++i) Next();
    ASSERT_FALSE(work().ran) << "settled: a quiet cycle, then nothing to run";
    ASSERT_FALSE(h_->Running("big"));
    ASSERT_FALSE(h_->Running("one"));
    big_ = h_->job("big").pending_reason();
    one_ = h_->job("one").pending_reason();
  }
  Decisions Next() {
    h_->clock().Advance(1000);
    return h_->Cycle();
  }
  const Engine::CycleWork& work() { return h_->engine().last_cycle_work(); }
  bool Lists(const Decisions& d, const std::string& name) {
    for (const auto& p : d.pending) {
      if (p.job_name == name) return true;
    }
    return false;
  }

  std::unique_ptr<EngineHarness> h_;
  std::string big_, one_;
};

TEST_F(CountMemo, TheReasonNamesOnlyWhatTheCountRead) {
  Start();
  EXPECT_NE(big_.find("0 of 2 members placeable: needs 2 × 8 GPUs; no node has 8 GPUs free"), std::string::npos)
      << big_;
  EXPECT_EQ(big_.find("the cluster has"), std::string::npos) << "no cluster-wide figure that any release changes: " << big_;
}

TEST_F(CountMemo, AReleaseThatMakesNoRoomForItsTasksRecallsTheVerdict) {
  Start();
  const uint64_t epoch = h_->state().epoch();
  ASSERT_TRUE(h_->engine().FinishJob(h_->engine().FindJob("s"), true).ok());  // 2 GPUs free on f1's node: no 8
  const Decisions d = Next();
  EXPECT_TRUE(work().ran);
  EXPECT_NE(h_->state().epoch(), epoch) << "the release changed the state";
  EXPECT_EQ(work().tried, 0) << "neither gang is tried again";
  EXPECT_GE(work().recalled, 2);
  EXPECT_EQ(h_->job("big").pending_reason(), big_);
  EXPECT_EQ(h_->job("one").pending_reason(), one_);
  EXPECT_FALSE(Lists(d, "big")) << "an unchanged reason is no decision";
  EXPECT_FALSE(Lists(d, "one"));
}

TEST_F(CountMemo, AReleaseThatMakesRoomForOneTaskWakesWhatItCouldHelp) {
  Start();
  ASSERT_TRUE(h_->engine().FinishJob(h_->engine().FindJob("f2"), true).ok());  // node 2: 8 GPUs free
  const Decisions d = Next();
  EXPECT_TRUE(work().ran);
  EXPECT_GE(work().tried, 1);
  // Whoever comes first in job order takes the node; big (first) could hold
  // one task of two there, so it is tried, and its reason says so, unless it
  // keeps the node for itself as the reservation's gang.
  EXPECT_TRUE(h_->Running("one") || h_->job("big").pending_reason() != big_)
      << "one: " << h_->job("one").pending_reason() << " | big: " << h_->job("big").pending_reason();
}

TEST_F(CountMemo, ANodeAddedWakesIt) {
  Start();
  AddCopyOfNodeZero(*h_);
  Next();
  EXPECT_EQ(work().recalled, 0);
  EXPECT_TRUE(h_->Running("big") || h_->Running("one")) << "the new node's 8 GPUs start a gang";
}

// The admission memo (scheduler/actions/enqueue.cc): a job its queue's
// capability refuses keeps its refusal, unasked, while its queue's use is
// the same. One node of 8 GPUs per rack, 4 racks; queue "small" may use 8
// GPUs: "fits" (8) runs, "over" (4) waits for it; "other" is unlimited.
class AdmissionMemo : public ::testing::Test {
 protected:
  static Policy WithCapability(int gpus) {
    return PolicyFromYaml(std::string("actions: \"enqueue, allocate, backfill\"\n") + testing::kClockFreeTiers +
                          "queues:\n- {name: small, capability: {gpu: " + std::to_string(gpus) +
                          "}}\n- {name: other}\n");
  }
  // Capability 8: "fits" (8) runs, "over" (4) exceeds the capability.
  void Start() { StartWith(8, 4, "exceeds its capability gpu=8"); }
  // Capability 12: "fits" (8) runs, "over" (8) is refused on top of 8.
  void StartAt12() { StartWith(12, 8, "exceeds its capability gpu=12"); }
  // The per-job memo (enqueue's groups off: AdmissionGroups tests those).
  void StartWith(int capability, int over_gpus, const std::string& refused) {
    h_ = std::make_unique<EngineHarness>(ClusterBuilder().NodesPerRack(4).Gpus(8).Build(), WithCapability(capability),
                                         /*check_invariants=*/true, /*admission_groups=*/false);
    h_->Submit(JobBuilder("fits").Queue("small").GpusPerTask(8).Build());
    h_->Submit(JobBuilder("over").Queue("small").GpusPerTask(over_gpus).Build());
    h_->Cycle();
    ASSERT_TRUE(h_->Running("fits"));
    ASSERT_EQ(h_->job("over").phase(), JobPhase::kPending);
    reason_ = h_->job("over").pending_reason();
    ASSERT_NE(reason_.find(refused), std::string::npos) << reason_;
  }
  // An event elsewhere: a job of the other queue arrives (the cycle runs).
  const Engine::CycleWork& Arrival(const std::string& name) {
    h_->Submit(JobBuilder(name).Queue("other").GpusPerTask(1).Build());
    h_->Cycle();
    return h_->engine().last_cycle_work();
  }
  std::unique_ptr<EngineHarness> h_;
  std::string reason_;
};

TEST_F(AdmissionMemo, AnUnchangedQueueRecallsTheRefusalWithItsReason) {
  Start();
  const Engine::CycleWork& w = Arrival("o1");
  EXPECT_TRUE(w.ran);
  EXPECT_GE(w.recalled, 1) << "the refusal of 'over' is recalled, not asked again";
  EXPECT_EQ(h_->job("over").phase(), JobPhase::kPending);
  EXPECT_EQ(h_->job("over").pending_reason(), reason_);
  EXPECT_EQ(h_->job("over").pending_from(), h_->job("over").admit_memo().reason_gen)
      << "the reason is known as the memo's text: a recall compares no text";
  EXPECT_TRUE(h_->Running("o1")) << "the other queue's job is admitted and starts";
}

TEST_F(AdmissionMemo, AUseThatComesBackIsTheSameUse) {
  // The queue's use goes 8 -> 12 -> 8 ("short" admitted, then ended). A use
  // has one id however often it comes back: at 8 again, "over"'s memo names
  // the id of its first refusal (a fresh id per change would never match a
  // memo made before, and a queue near its capability goes back and forth).
  StartAt12();
  const uint64_t memo_at_8 = h_->job("over").admit_memo().chain_use;
  ASSERT_NE(memo_at_8, 0u);
  h_->Submit(JobBuilder("short").Queue("small").GpusPerTask(4).Priority(5).Build());
  h_->Cycle();
  ASSERT_TRUE(h_->Running("short"));
  EXPECT_NE(h_->job("over").admit_memo().chain_use, memo_at_8) << "asked again at 12";
  ASSERT_TRUE(h_->engine().FinishJob(h_->engine().FindJob("short"), true).ok());
  h_->Cycle();
  EXPECT_EQ(h_->job("over").admit_memo().chain_use, memo_at_8) << "8 again: the id of 8";
  Arrival("o1");
  EXPECT_GE(h_->engine().last_cycle_work().recalled, 1);
  EXPECT_EQ(h_->job("over").phase(), JobPhase::kPending);
}

TEST_F(AdmissionMemo, ItsQueuesUseChangingAsksAgain) {
  Start();
  Arrival("o1");
  ASSERT_TRUE(h_->engine().FinishJob(h_->engine().FindJob("fits"), true).ok());
  h_->Cycle();
  EXPECT_EQ(h_->engine().last_cycle_work().recalled, 0) << "the queue's use moved: asked again";
  EXPECT_TRUE(h_->Running("over")) << "within the capability now";
}

TEST_F(AdmissionMemo, APolicyReloadAsksAgain) {
  Start();
  Arrival("o1");
  ASSERT_TRUE(h_->engine().SetPolicy(WithCapability(16), plugins::BuiltinRegistry()).ok());
  Arrival("o2");
  EXPECT_TRUE(h_->Running("over")) << "the new capability lets it in";
}

TEST_F(AdmissionMemo, AJobAdmittedAheadInTheSameCycleAsksAgain) {
  // The capability allows 12: "fits" (8) runs, "over" (8) is refused on top
  // of 8. A 4-GPU job of the queue with a higher priority arrives: enqueue
  // admits it first in job order, which moves the queue's use inside the
  // action, so "over" is asked again in that cycle and refused on top of 12
  // (a use computed before the admission would recall the old memo). The
  // reason's text names no use, so it stays.
  StartAt12();
  const std::string before = reason_;
  Arrival("o1");
  ASSERT_GE(h_->engine().last_cycle_work().recalled, 1) << "unchanged: recalled";
  ASSERT_EQ(h_->job("over").pending_reason(), before);
  const uint64_t memo_at_8 = h_->job("over").admit_memo().chain_use;
  h_->Submit(JobBuilder("ahead").Queue("small").GpusPerTask(4).Priority(5).Build());
  h_->Cycle();
  EXPECT_TRUE(h_->Running("ahead"));
  EXPECT_EQ(h_->job("over").phase(), JobPhase::kPending);
  EXPECT_NE(h_->job("over").admit_memo().chain_use, memo_at_8) << "asked again on top of the new use";
  EXPECT_EQ(h_->job("over").pending_reason(), before);
}

TEST_F(AdmissionMemo, ANewcomerRefusedAloneLeavesTheOthersRecalled) {
  // Nothing is admitted: the newcomer is the only job asked, the refused
  // backlog is recalled (without the job order), reasons as before.
  Start();
  h_->Submit(JobBuilder("late").Queue("small").GpusPerTask(4).Build());
  h_->Cycle();
  EXPECT_EQ(h_->engine().last_cycle_work().recalled, 1) << "'over' recalled, 'late' asked";
  EXPECT_EQ(h_->job("over").pending_reason(), reason_);
  EXPECT_EQ(h_->job("late").phase(), JobPhase::kPending);
  EXPECT_NE(h_->job("late").pending_reason().find("exceeds its capability gpu=8"), std::string::npos)
      << h_->job("late").pending_reason();
}

TEST_F(AdmissionMemo, AnAdmissionAmongTheAskedWalksEveryJobInJobOrder) {
  // The capability allows 12; "fits" (8) runs, "over" (8, priority 0) is
  // refused on top of 8. In one cycle "big" (8, priority 5) and "tiny" (4,
  // priority 1) arrive: in job order big is refused on top of 8, tiny is
  // admitted (12), then over is asked again and refused on top of 12. The
  // unordered pass finds tiny admissible and gives way to the ordered walk.
  StartAt12();
  const uint64_t memo_at_8 = h_->job("over").admit_memo().chain_use;
  h_->Submit(JobBuilder("big").Queue("small").GpusPerTask(8).Priority(5).Build());
  h_->Submit(JobBuilder("tiny").Queue("small").GpusPerTask(4).Priority(1).Build());
  h_->Cycle();
  EXPECT_TRUE(h_->Running("tiny"));
  EXPECT_EQ(h_->job("big").phase(), JobPhase::kPending);
  EXPECT_EQ(h_->job("big").admit_memo().chain_use, memo_at_8) << "asked before tiny's admission, at 8";
  EXPECT_NE(h_->job("over").admit_memo().chain_use, memo_at_8) << "asked after it, at 12";
  EXPECT_NE(h_->job("over").pending_reason().find("exceeds its capability gpu=12"), std::string::npos)
      << h_->job("over").pending_reason();
}

// Enqueue's groups (scheduler/actions/enqueue.cc, step 6): under a policy
// whose admission reads only a job's queue and minimum and whose pending
// order reads only the spec (kClockFreeTiers), alike pending jobs are one
// group, asked once per use of their queue; the walk takes the groups that
// fit in job order, each until its first refusal.
class AdmissionGroups : public ::testing::Test {
 protected:
  // Queue "small" may use 8 GPUs; "fits" (8) runs in it.
  void Start(int capability = 8) {
    h_ = std::make_unique<EngineHarness>(ClusterBuilder().NodesPerRack(4).Gpus(8).Build(),
                                         AdmissionMemo_WithCapability(capability));
    h_->Submit(JobBuilder("fits").Queue("small").GpusPerTask(8).Build());
    h_->Cycle();
    ASSERT_TRUE(h_->Running("fits"));
  }
  static Policy AdmissionMemo_WithCapability(int gpus) {
    return PolicyFromYaml(std::string("actions: \"enqueue, allocate, backfill\"\n") + testing::kClockFreeTiers +
                          "queues:\n- {name: small, capability: {gpu: " + std::to_string(gpus) +
                          "}}\n- {name: other}\n");
  }
  std::unique_ptr<EngineHarness> h_;
};

TEST_F(AdmissionGroups, ABacklogOfAlikeJobsIsAskedOnceWhenItsQueuesUseMoves) {
  Start(12);
  for (int i = 0; i < 20; ++i) h_->Submit(JobBuilder("w" + std::to_string(i)).Queue("small").GpusPerTask(8).Build());
  h_->Cycle();
  EXPECT_EQ(h_->engine().last_cycle_work().recalled, 19) << "one of the twenty asked (8 + 8 > 12)";
  // "s" (2) is admitted: the twenty's memo at 8 holds at the cycle's start.
  h_->Submit(JobBuilder("s").Queue("small").GpusPerTask(2).Build());
  h_->Cycle();
  ASSERT_TRUE(h_->Running("s"));
  EXPECT_EQ(h_->engine().last_cycle_work().recalled, 20);
  // An arrival elsewhere: the queue's use is 10 now, a use the group was
  // not asked at; one of the twenty is asked, the others recalled.
  h_->Submit(JobBuilder("o").Queue("other").GpusPerTask(1).Build());
  h_->Cycle();
  ASSERT_TRUE(h_->Running("o"));
  EXPECT_EQ(h_->engine().last_cycle_work().recalled, 19) << "one of the group asked";
  for (int i = 0; i < 20; ++i) {
    const Job& j = h_->job("w" + std::to_string(i));
    EXPECT_EQ(j.phase(), JobPhase::kPending);
    EXPECT_NE(j.pending_reason().find("'small': minimum gpu=8 on top of what is in use or admitted exceeds its "
                                      "capability gpu=12"),
              std::string::npos)
        << j.pending_reason();
  }
}

TEST_F(AdmissionGroups, TheFirstInJobOrderIsAdmittedAndTheRestKeepTheirReason) {
  Start(16);
  // Three 8-GPU jobs wait behind "fits" (8 of 16): w0 first by creation,
  // w2 ahead of both by priority. When room for one opens, w2 goes.
  h_->Submit(JobBuilder("block").Queue("small").GpusPerTask(8).Build());
  h_->Cycle();
  ASSERT_TRUE(h_->Running("block"));
  h_->Submit(JobBuilder("w0").Queue("small").GpusPerTask(8).Build());
  h_->Submit(JobBuilder("w1").Queue("small").GpusPerTask(8).Build());
  h_->Submit(JobBuilder("w2").Queue("small").GpusPerTask(8).Priority(5).Build());
  h_->Cycle();
  const std::string reason = h_->job("w0").pending_reason();
  ASSERT_NE(reason.find("exceeds its capability gpu=16"), std::string::npos) << reason;
  ASSERT_TRUE(h_->engine().FinishJob(h_->engine().FindJob("block"), true).ok());
  h_->Cycle();
  EXPECT_TRUE(h_->Running("w2")) << "the highest priority first";
  EXPECT_EQ(h_->job("w0").phase(), JobPhase::kPending);
  EXPECT_EQ(h_->job("w1").phase(), JobPhase::kPending);
  EXPECT_EQ(h_->job("w0").pending_reason(), reason);
  EXPECT_EQ(h_->job("w1").pending_reason(), reason);
  ASSERT_TRUE(h_->engine().FinishJob(h_->engine().FindJob("fits"), true).ok());
  h_->Cycle();
  EXPECT_TRUE(h_->Running("w0")) << "then the first come";
  EXPECT_EQ(h_->job("w1").phase(), JobPhase::kPending);
}

TEST_F(AdmissionGroups, GroupsThatFitAreMergedInJobOrder) {
  // 8 of 12 in use. "big" (8, priority 5) is ahead of "tiny" (4, priority
  // 1), which is ahead of "tiny2" (4, priority 0): big's group is refused,
  // tiny is admitted (12), then tiny2's turn comes in the same group and
  // is refused. A group that fits is walked in job order across groups.
  Start(12);
  h_->Submit(JobBuilder("big").Queue("small").GpusPerTask(8).Priority(5).Build());
  h_->Submit(JobBuilder("tiny2").Queue("small").GpusPerTask(4).Build());
  h_->Submit(JobBuilder("tiny").Queue("small").GpusPerTask(4).Priority(1).Build());
  h_->Cycle();
  EXPECT_TRUE(h_->Running("tiny"));
  EXPECT_EQ(h_->job("tiny2").phase(), JobPhase::kPending);
  EXPECT_EQ(h_->job("big").phase(), JobPhase::kPending);
  EXPECT_NE(h_->job("tiny2").pending_reason().find("minimum gpu=4"), std::string::npos)
      << h_->job("tiny2").pending_reason();
  EXPECT_NE(h_->job("big").pending_reason().find("minimum gpu=8"), std::string::npos)
      << h_->job("big").pending_reason();
}

TEST_F(AdmissionGroups, AJobThatJoinsARefusedGroupGetsItsReason) {
  Start(8);
  h_->Submit(JobBuilder("a").Queue("small").GpusPerTask(4).Build());
  h_->Cycle();
  const std::string reason = h_->job("a").pending_reason();
  ASSERT_NE(reason.find("exceeds its capability gpu=8"), std::string::npos) << reason;
  h_->Submit(JobBuilder("b").Queue("small").GpusPerTask(4).Build());
  h_->Cycle();
  EXPECT_EQ(h_->job("b").phase(), JobPhase::kPending);
  EXPECT_EQ(h_->job("b").pending_reason(), reason);
  EXPECT_EQ(h_->engine().last_cycle_work().recalled, 2) << "the queue's use did not move: no job asked";
}

TEST_F(AdmissionGroups, ACapabilityOnTheQueuesPathIsNamedAndAJobAsLargeAsItsQueuesStarts) {
  h_ = std::make_unique<EngineHarness>(
      ClusterBuilder().NodesPerRack(4).Gpus(8).Build(),
      PolicyFromYaml(std::string("actions: \"enqueue, allocate, backfill\"\n") + testing::kClockFreeTiers +
                     "queues:\n- {name: org, capability: {gpu: 12}}\n"
                     "- {name: team, parent: org, capability: {gpu: 8}}\n"));
  // "fits" takes all of team's 8 (placement counts what org holds, not
  // what it admitted: fits' own minimum is in org's admitted figure).
  h_->Submit(JobBuilder("fits").Queue("team").GpusPerTask(8).Build());
  h_->Submit(JobBuilder("over").Queue("team").GpusPerTask(4).Build());
  h_->Cycle();
  ASSERT_TRUE(h_->Running("fits")) << h_->job("fits").pending_reason();
  EXPECT_NE(h_->job("over").pending_reason().find("a capability on its path: 'team' gpu=8, 'org' gpu=12"),
            std::string::npos)
      << h_->job("over").pending_reason();
}

// A plugin that breaks AdmissionReadsOnlyMinimum's promise on purpose: while
// `closed`, it refuses every job of queue "small" with a text naming
// `notice`, which the test changes. Enqueue's groups keep one text per
// group and write it only to the jobs that joined since; when a group's
// text changes all the same, every job of it must get the new one.
class NoticePlugin : public Plugin {
 public:
  NoticePlugin(const bool* closed, const int* notice) : closed_(closed), notice_(notice) {}
  std::string_view name() const override { return "notice"; }
  bool AdmissionReadsOnlyJobAndQueues() const override { return true; }
  bool AdmissionReadsOnlyMinimum() const override { return true; }
  void OnSessionOpen(Session& s) override {
    s.AddJobEnqueueableFn("notice", [this, &s](const Job& job) {
      if (!*closed_ || s.state().queues().spec(job.queue().value()).name != "small") return Verdict::Abstain();
      return Verdict::Because(Verdict::Code::kWait, "small is closed (notice " + std::to_string(*notice_) + ")");
    });
  }

 private:
  const bool* closed_;
  const int* notice_;
};

TEST(AdmissionGroupsText, AGroupWhoseRefusalTextChangesGivesItToEveryJob) {
  bool closed = false;
  int notice = 1;
  PluginRegistry registry = plugins::BuiltinRegistry();
  registry.Add("notice", [&](const PluginArgs&) -> absl::StatusOr<std::unique_ptr<Plugin>> {
    return std::make_unique<NoticePlugin>(&closed, &notice);
  });
  std::vector<queue::ConfigError> errors;
  const absl::StatusOr<Policy> policy = ParsePolicy(
      "actions: \"enqueue, allocate, backfill\"\n"
      "tiers:\n- plugins: [{name: priority}, {name: gang}, {name: notice}]\n"
      "- plugins: [{name: drf}, {name: predicates}, {name: proportion}, {name: binpack}]\n"
      "queues:\n- {name: small}\n- {name: other}\n",
      "notice.yaml", registry, &errors);
  ASSERT_TRUE(policy.ok()) << policy.status();
  ManualClock clock(1'000'000);
  auto e = Engine::Create(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), *policy, registry, clock, EngineOptions());
  ASSERT_TRUE(e.ok()) << e.status();
  Engine& engine = **e;
  const JobId fits = *engine.SubmitJob(JobBuilder("fits").Queue("small").GpusPerTask(8).Build());
  engine.RunCycle();
  ASSERT_EQ(engine.state().job(fits).phase(), JobPhase::kRunning);
  closed = true;
  const JobId a = *engine.SubmitJob(JobBuilder("a").Queue("small").GpusPerTask(4).Build());
  const JobId b = *engine.SubmitJob(JobBuilder("b").Queue("small").GpusPerTask(4).Build());
  clock.Advance(1000);
  engine.RunCycle();
  ASSERT_EQ(engine.state().job(a).pending_reason(), engine.state().job(b).pending_reason());
  ASSERT_NE(engine.state().job(a).pending_reason().find("notice 1"), std::string::npos)
      << engine.state().job(a).pending_reason();
  // The queue's use moves (fits ends): the group is asked again, and its
  // text is another.
  notice = 2;
  ASSERT_TRUE(engine.FinishJob(fits, true).ok());
  clock.Advance(1000);
  engine.RunCycle();
  for (JobId id : {a, b}) {
    const Job& j = engine.state().job(id);
    EXPECT_EQ(j.phase(), JobPhase::kPending);
    EXPECT_NE(j.pending_reason().find("notice 2"), std::string::npos) << j.name() << ": " << j.pending_reason();
  }
}

TEST(VerdictMemoOff, WithoutFastPathsEveryCycleRunsAndTriesEveryGang) {
  ManualClock clock;
  EngineOptions o;
  o.fast_paths = false;
  auto e = Engine::Create(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), DefaultPolicy(),
                          plugins::BuiltinRegistry(), clock, o);
  ASSERT_TRUE(e.ok()) << e.status();
  Engine& engine = **e;
  ASSERT_TRUE(engine.SubmitJob(JobBuilder("a").GpusPerTask(6).Build()).ok());
  ASSERT_TRUE(engine.SubmitJob(JobBuilder("w").Gang(2).GpusPerTask(2).Hard(0).Build()).ok());
  engine.RunCycle();
  for (int i = 0; i < 3; ++i) {
    clock.Advance(1000);
    engine.RunCycle();
    EXPECT_TRUE(engine.last_cycle_work().ran);
    EXPECT_EQ(engine.last_cycle_work().recalled, 0);
    EXPECT_EQ(engine.last_cycle_work().tried, 1);
  }
}

}  // namespace
}  // namespace ringmaster::scheduler
