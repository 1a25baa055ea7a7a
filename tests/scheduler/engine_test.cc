// The Engine's event API: what drivers feed it between cycles.
#include "scheduler/engine.h"

#include <gtest/gtest.h>

#include "tests/support/builders.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::testing {
namespace {

using scheduler::JobPhase;
using scheduler::TaskState;

TEST(Engine, BindsAreConfirmedTaskByTaskWhenTheDriverSaysSo) {
  scheduler::ManualClock clock;
  auto registry = plugins::BuiltinRegistry();
  scheduler::EngineOptions opts;
  opts.auto_confirm_binds = false;
  auto e = *scheduler::Engine::Create(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(),
                                      scheduler::DefaultPolicy(), registry, clock, opts);
  auto id = *e->SubmitJob(JobBuilder("g").Gang(2).GpusPerTask(8).Build());
  auto d = e->RunCycle();
  ASSERT_EQ(d.binds.size(), 2u);
  const auto& job = e->state().job(id);
  EXPECT_EQ(job.task(0).state, TaskState::kBinding);
  ASSERT_TRUE(e->ConfirmBind(id, 0, true).ok());
  EXPECT_EQ(job.task(0).state, TaskState::kBound);
  ASSERT_TRUE(e->TaskStarted(id, 0).ok());
  EXPECT_EQ(job.task(0).state, TaskState::kRunning);
  EXPECT_ERROR(e->TaskStarted(id, 0), absl::StatusCode::kFailedPrecondition, "task g-worker-0 is Running, not Bound") << "already running";
  // The second bind fails: the gang is released whole and waits again.
  ASSERT_TRUE(e->ConfirmBind(id, 1, false).ok());
  EXPECT_EQ(job.ReadyCount(), 0);
  EXPECT_EQ(job.phase(), JobPhase::kInqueue);
  d = e->RunCycle();
  ASSERT_EQ(d.evictions.size(), 1u) << "the running member is evicted";
  EXPECT_EQ(d.binds.size(), 2u) << "and the gang is placed again";
  EXPECT_TRUE(e->CheckInvariants().ok());
}

// 2 nodes x 4 GPUs, the driver confirming binds by hand: a running 2 x 4-GPU
// gang holds every GPU. What BrokenGang and CancelledGang share.
struct FullClusterGang {
  scheduler::ManualClock clock{1'000'000};
  scheduler::PluginRegistry registry = plugins::BuiltinRegistry();
  std::unique_ptr<scheduler::Engine> e;
  scheduler::JobId gang;
  explicit FullClusterGang(scheduler::EngineOptions opts) {
    opts.auto_confirm_binds = false;
    e = *scheduler::Engine::Create(ClusterBuilder().NodesPerRack(2).Gpus(4).Build(), scheduler::DefaultPolicy(),
                                   registry, clock, opts);
    gang = *e->SubmitJob(JobBuilder("gang").Gang(2).GpusPerTask(4).Build());
    Start(e->RunCycle());
  }
  void Start(const scheduler::Decisions& d) {
    for (const auto& b : d.binds) {
      EXPECT_TRUE(e->ConfirmBind(b.job, b.task, true).ok());
      EXPECT_TRUE(e->TaskStarted(b.job, b.task).ok());
    }
  }
  const scheduler::Job& job(scheduler::JobId id) const { return e->state().job(id); }
  int64_t FreeGpus() const {
    int64_t n = 0;
    for (uint32_t i = 0; i < e->state().num_nodes(); ++i) n += e->state().FreeWholeGpus(topology::NodeId(i));
    return n;
  }
};

scheduler::EngineOptions WithRestartGrace(int64_t ms) {
  scheduler::EngineOptions o;
  o.restart_grace_ms = ms;
  return o;
}
scheduler::EngineOptions WithCancelGrace(int64_t ms) {
  scheduler::EngineOptions o;
  o.cancel_grace_ms = ms;
  return o;
}

// A gang a failure takes below its minimum: its survivors still run, so
// their GPUs are not free (no one else is placed on them) until the driver
// reports them gone; then the gang restarts whole.
struct BrokenGang : FullClusterGang {
  scheduler::JobId other;
  BrokenGang() : FullClusterGang(WithRestartGrace(5000)) {
    // "other" (a 4-GPU job) waits.
    other = *e->SubmitJob(JobBuilder("other").GpusPerTask(4).Build());
  }
  // The survivor's eviction comes with the next cycle, which must not place
  // anyone on the survivor's GPUs nor restart the gang while it runs.
  void CheckSurvivorHeld(uint32_t survivor) {
    EXPECT_EQ(job(gang).task(survivor).state, TaskState::kReleasing) << "stopped with a deadline, not Pending";
    EXPECT_EQ(job(gang).task(survivor).release_deadline, clock.Now() + 5000);
    EXPECT_EQ(FreeGpus(), 4) << "the survivor's 4 GPUs are not free while its process runs";
    auto d = e->RunCycle();
    ASSERT_EQ(d.evictions.size(), 1u);
    EXPECT_EQ(d.evictions[0].task, survivor);
    EXPECT_EQ(d.evictions[0].kind, scheduler::Eviction::Kind::kEvict);
    EXPECT_EQ(d.evictions[0].deadline, clock.Now() + 5000);
    // "other" takes the free node; nothing lands on the survivor's node and
    // the gang does not start again.
    ASSERT_EQ(d.binds.size(), 1u);
    EXPECT_EQ(d.binds[0].job, other);
    EXPECT_NE(d.binds[0].node, job(gang).task(survivor).node);
    Start(d);
    EXPECT_EQ(job(gang).phase(), JobPhase::kInqueue);
    EXPECT_TRUE(e->CheckInvariants().ok());
    d = e->RunCycle();
    EXPECT_TRUE(d.binds.empty()) << "still held by the survivor";
    // The survivor is gone: its GPUs are free; "other" finishes and the
    // gang restarts whole.
    ASSERT_TRUE(e->TaskReleased(gang, survivor).ok());
    EXPECT_EQ(job(gang).task(survivor).state, TaskState::kPending);
    ASSERT_TRUE(e->FinishJob(other, true).ok());
    d = e->RunCycle();
    EXPECT_EQ(d.binds.size(), 2u);
    Start(d);
    EXPECT_EQ(job(gang).phase(), JobPhase::kRunning);
    EXPECT_TRUE(e->CheckInvariants().ok());
  }
};

TEST(Engine, EndedJobRecordsAreBoundedAndAReaderKeepsItsPlace) {
  // Kept 3: the records are held until 6, then the oldest 3 go; indices
  // count from the first record ever, so a reader's cursor stays valid.
  scheduler::ManualClock clock;
  auto registry = plugins::BuiltinRegistry();
  scheduler::EngineOptions opts;
  opts.ended_jobs_kept = 3;
  auto e = *scheduler::Engine::Create(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), scheduler::DefaultPolicy(),
                                      registry, clock, opts);
  std::vector<std::string> read;  // what a reader that reads after every end saw
  uint64_t cursor = 0;
  for (int i = 0; i < 10; ++i) {
    auto id = *e->SubmitJob(JobBuilder("j" + std::to_string(i)).GpusPerTask(1).Build());
    e->RunCycle();
    clock.Advance(1000);
    ASSERT_TRUE(e->FinishJob(id, true).ok());
    const scheduler::State& st = e->state();
    EXPECT_EQ(st.ended_end(), static_cast<uint64_t>(i + 1));
    EXPECT_LE(st.ended_end() - st.ended_begin(), 5u) << "never more than twice the bound, less one";
    EXPECT_GE(st.ended_end() - st.ended_begin(), std::min<uint64_t>(3, i + 1)) << "at least the bound";
    for (cursor = std::max(cursor, st.ended_begin()); cursor < st.ended_end(); ++cursor) {
      read.push_back(st.ended_job(cursor).name);
    }
  }
  EXPECT_EQ(read.size(), 10u) << "a reader after every end misses none";
  EXPECT_EQ(read.front(), "j0");
  EXPECT_EQ(read.back(), "j9");
  const scheduler::State& st = e->state();
  EXPECT_EQ(st.ended_job(st.ended_end() - 1).name, "j9");
  EXPECT_EQ(st.ended_begin(), 6u) << "the oldest went three at a time, at the 6th and the 9th record";
}

TEST(EngineBrokenGang, ACrashedTaskLeavesItsSurvivorsReleasingUntilTheyAreGone) {
  BrokenGang h;
  ASSERT_EQ(h.job(h.gang).phase(), JobPhase::kRunning);
  ASSERT_TRUE(h.e->TaskFailed(h.gang, 0, "exited with code 1").ok());
  EXPECT_EQ(h.job(h.gang).task(0).state, TaskState::kPending) << "the crashed task's process is gone";
  h.CheckSurvivorHeld(1);
}

TEST(EngineBrokenGang, ALostNodeLeavesTheSurvivorsReleasing) {
  BrokenGang h;
  const auto node = h.job(h.gang).task(1).node;
  ASSERT_TRUE(h.e->FailNode(h.e->state().cluster().node(node).name).ok());
  // One node left: "other" cannot run until the survivor is gone.
  const auto survivor_node = h.job(h.gang).task(0).node;
  EXPECT_EQ(h.job(h.gang).task(0).state, TaskState::kReleasing);
  EXPECT_EQ(h.e->state().FreeWholeGpus(survivor_node), 0);
  auto d = h.e->RunCycle();
  EXPECT_TRUE(d.binds.empty()) << "nothing placed on the survivor's GPUs";
  ASSERT_EQ(d.evictions.size(), 1u);
  EXPECT_EQ(d.evictions[0].task, 0u);
  // Its deadline passes without a report: the GPUs are free then.
  h.clock.Advance(5000);
  d = h.e->RunCycle();
  EXPECT_EQ(h.job(h.gang).task(0).state, TaskState::kPending);
  EXPECT_TRUE(h.e->CheckInvariants().ok());
  bool other_placed = false;
  for (const auto& b : d.binds) other_placed |= b.job == h.other && b.node == survivor_node;
  EXPECT_TRUE(other_placed) << "the gang cannot fit on one node; the 4-GPU job takes it";
}

TEST(EngineBrokenGang, AFailedBindStopsTheStartedMembersWithADeadline) {
  scheduler::ManualClock clock{1'000'000};
  auto registry = plugins::BuiltinRegistry();
  scheduler::EngineOptions opts;
  opts.auto_confirm_binds = false;
  opts.restart_grace_ms = 5000;
  auto e = *scheduler::Engine::Create(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), scheduler::DefaultPolicy(),
                                      registry, clock, opts);
  auto id = *e->SubmitJob(JobBuilder("g").Gang(2).GpusPerTask(8).Build());
  e->RunCycle();
  ASSERT_TRUE(e->ConfirmBind(id, 0, true).ok());
  ASSERT_TRUE(e->TaskStarted(id, 0).ok());
  ASSERT_TRUE(e->ConfirmBind(id, 1, false).ok());
  const auto& job = e->state().job(id);
  EXPECT_EQ(job.task(0).state, TaskState::kReleasing);
  EXPECT_EQ(job.task(1).state, TaskState::kPending);
  auto d = e->RunCycle();
  ASSERT_EQ(d.evictions.size(), 1u);
  EXPECT_TRUE(d.binds.empty()) << "the gang waits for its started member to stop";
  ASSERT_TRUE(e->TaskReleased(id, 0).ok());
  d = e->RunCycle();
  EXPECT_EQ(d.binds.size(), 2u);
  EXPECT_TRUE(e->CheckInvariants().ok());
}

// enqueue + allocate; binpack weighted on CPU; nodesToScore n.
scheduler::Policy CpuBinpackPolicy(int nodes_to_score) {
  return PolicyFromYaml("actions: \"enqueue, allocate\"\nnodesToScore: " + std::to_string(nodes_to_score) + R"(
tiers:
- plugins:
  - name: gang
- plugins:
  - name: predicates
  - name: binpack
    arguments: {cpu: 10, gpu: 1}
)");
}

// Node 0 has 1 free GPU and idle CPUs, node 1 two free GPUs and busy CPUs.
// Best-fit order puts node 0 first; binpack weighted on CPU prefers node 1.
// nodesToScore 1 takes the first candidate, 0 (all) the best score.
TEST(Engine, NodesToScoreBoundsTheCandidatesScored) {
  for (int n : {1, 0}) {
    EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(2).CpuPerNode(16000).Label(0, "host", "0").Label(1, "host", "1").Build(),
                    CpuBinpackPolicy(n));
    h.Submit(JobBuilder("gpu-filler").GpusPerTask(1).CpuPerTask(1000).Selector("host", "0").Build());
    h.Submit(JobBuilder("cpu-filler").CpuPerTask(12000).Selector("host", "1").Build());
    h.Cycle();
    h.Submit(JobBuilder("t").GpusPerTask(1).CpuPerTask(1000).Build());
    h.Cycle();
    ASSERT_TRUE(h.Running("t"));
    EXPECT_EQ(h.job("t").task(0).node, topology::NodeId(n == 1 ? 0 : 1)) << "nodesToScore " << n;
  }
}

// Ten empty nodes in the same state, then node 10 with busy CPUs. All have
// two free GPUs, so best-fit order is by id. With nodesToScore 2 the window
// holds one node per state: node 0 and node 10, and binpack (CPU) picks 10.
TEST(Engine, NodesInTheSameStateTakeOnePlaceInTheWindow) {
  ClusterBuilder cb;
  cb.NodesPerRack(11).Gpus(2).CpuPerNode(16000).Label(10, "host", "10");
  EngineHarness h(cb.Build(), CpuBinpackPolicy(2));
  h.Submit(JobBuilder("cpu-filler").CpuPerTask(12000).Selector("host", "10").Build());
  h.Cycle();
  h.Submit(JobBuilder("t").GpusPerTask(1).CpuPerTask(1000).Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("t"));
  EXPECT_EQ(h.job("t").task(0).node, topology::NodeId(10));
}

TEST(Engine, CancelReleasesEverythingAndFreesForOthers) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  auto a = h.Submit(JobBuilder("a").GpusPerTask(8).Build());
  h.Submit(JobBuilder("b").GpusPerTask(8).Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("a"));
  ASSERT_TRUE(h.engine().CancelJob(a).ok());
  EXPECT_EQ(h.job("a").phase(), JobPhase::kAborted);
  EXPECT_ERROR(h.engine().CancelJob(a), absl::StatusCode::kFailedPrecondition, "job 'a' already ended") << "cannot cancel twice";
  auto d = h.Cycle();
  EXPECT_EQ(d.evictions.size(), 1u);
  EXPECT_TRUE(h.Running("b"));
  EXPECT_ERROR(h.engine().FinishJob(scheduler::JobId(99), true), absl::StatusCode::kNotFound, "no such job");
}

// Cancel with a grace period: the cancelled gang's processes still run, so
// nothing is bound onto its GPUs until the driver reports them gone (or the
// deadline passes); then the job is Aborted.
struct CancelledGang : FullClusterGang {
  scheduler::JobId other;
  explicit CancelledGang(int64_t grace_ms = 5000) : FullClusterGang(WithCancelGrace(grace_ms)) {
    // "other" (8 GPUs as 2 x 4) waits.
    other = *e->SubmitJob(JobBuilder("other").Gang(2).GpusPerTask(4).Build());
    EXPECT_TRUE(e->RunCycle().binds.empty());
  }
  // Cancels the gang and checks the cycle after binds nothing.
  void Cancel() {
    ASSERT_EQ(job(gang).phase(), JobPhase::kRunning);
    ASSERT_TRUE(e->CancelJob(gang).ok());
    EXPECT_EQ(job(gang).phase(), JobPhase::kCancelling);
    EXPECT_TRUE(e->state().active_jobs().count(gang)) << "not ended while its processes run";
    EXPECT_NE(job(gang).pending_reason().find("cancelling: 2 task(s) stopping"), std::string::npos)
        << job(gang).pending_reason();
    for (uint32_t t = 0; t < 2; ++t) {
      EXPECT_EQ(job(gang).task(t).state, TaskState::kReleasing);
      EXPECT_EQ(job(gang).task(t).release_deadline, clock.Now() + 5000);
    }
    EXPECT_EQ(FreeGpus(), 0) << "the cancelled gang's GPUs are not free while its processes run";
    EXPECT_EQ(e->ExpectedStart(gang), -1);
    EXPECT_TRUE(e->CancelJob(gang).ok()) << "cancelling again changes nothing";
    auto d = e->RunCycle();
    ASSERT_EQ(d.evictions.size(), 2u) << "each running task is told to stop, once";
    for (const auto& ev : d.evictions) {
      EXPECT_EQ(ev.kind, scheduler::Eviction::Kind::kCancel);
      EXPECT_EQ(ev.deadline, clock.Now() + 5000);
    }
    EXPECT_TRUE(d.binds.empty()) << "nothing bound onto GPUs whose processes still run";
    EXPECT_TRUE(d.membership.empty()) << "no action resizes or restarts a cancelling job";
    EXPECT_TRUE(e->CheckInvariants().ok());
  }
};

TEST(EngineCancel, ARunningJobsGpusAreFreeOnlyOnceItsTasksAreReportedGone) {
  CancelledGang h;
  h.Cancel();
  ASSERT_TRUE(h.e->TaskReleased(h.gang, 0).ok());
  EXPECT_EQ(h.job(h.gang).task(0).state, TaskState::kFailed) << "a cancelled task does not wait again";
  EXPECT_EQ(h.job(h.gang).phase(), JobPhase::kCancelling) << "one task still stopping";
  EXPECT_EQ(h.FreeGpus(), 4);
  auto d = h.e->RunCycle();
  EXPECT_TRUE(d.binds.empty()) << "other needs both nodes; one is still held";
  ASSERT_TRUE(h.e->TaskReleased(h.gang, 1).ok());
  EXPECT_EQ(h.job(h.gang).phase(), JobPhase::kAborted);
  EXPECT_FALSE(h.e->state().active_jobs().count(h.gang));
  EXPECT_ERROR(h.e->CancelJob(h.gang), absl::StatusCode::kFailedPrecondition, "job 'gang' already ended") << "already ended";
  d = h.e->RunCycle();
  EXPECT_EQ(d.binds.size(), 2u);
  for (const auto& b : d.binds) EXPECT_EQ(b.job, h.other);
  EXPECT_TRUE(h.e->CheckInvariants().ok());
}

TEST(EngineCancel, TheDeadlineFreesTheGpusWithoutAReport) {
  CancelledGang h;
  h.Cancel();
  h.clock.Advance(4999);
  EXPECT_TRUE(h.e->RunCycle().binds.empty()) << "before the deadline";
  EXPECT_EQ(h.e->NextDeadline(), h.clock.Now() + 1);
  h.clock.Advance(1);
  auto d = h.e->RunCycle();
  EXPECT_EQ(h.job(h.gang).phase(), JobPhase::kAborted);
  EXPECT_EQ(d.binds.size(), 2u) << "the deadline passed: the GPUs are free";
  EXPECT_TRUE(h.e->CheckInvariants().ok());
}

TEST(EngineCancel, ALostNodeTakesItsStoppingTaskWithIt) {
  CancelledGang h;
  h.Cancel();
  ASSERT_TRUE(h.e->TaskReleased(h.gang, 0).ok());
  ASSERT_TRUE(h.e->FailNode(h.e->state().cluster().node(h.job(h.gang).task(1).node).name).ok());
  EXPECT_EQ(h.job(h.gang).phase(), JobPhase::kAborted);
  EXPECT_TRUE(h.e->CheckInvariants().ok());
}

TEST(EngineCancel, WithoutAGracePeriodOrAStartedTaskItIsImmediate) {
  CancelledGang h(/*grace_ms=*/0);
  ASSERT_TRUE(h.e->CancelJob(h.gang).ok());
  EXPECT_EQ(h.job(h.gang).phase(), JobPhase::kAborted);
  EXPECT_EQ(h.FreeGpus(), 8);
  // With a grace period, a job none of whose tasks started ends at once.
  CancelledGang g;
  ASSERT_TRUE(g.e->CancelJob(g.other).ok()) << "pending";
  EXPECT_EQ(g.job(g.other).phase(), JobPhase::kAborted);
  EXPECT_TRUE(g.e->CheckInvariants().ok());
}

TEST(EngineCancel, BindingTasksAreReleasedAtOnceAndStartedOnesStop) {
  scheduler::ManualClock clock{1'000'000};
  auto registry = plugins::BuiltinRegistry();
  scheduler::EngineOptions opts;
  opts.auto_confirm_binds = false;
  opts.cancel_grace_ms = 5000;
  auto e = *scheduler::Engine::Create(ClusterBuilder().NodesPerRack(2).Gpus(4).Build(), scheduler::DefaultPolicy(),
                                      registry, clock, opts);
  auto id = *e->SubmitJob(JobBuilder("g").Gang(2).GpusPerTask(4).Build());
  auto d = e->RunCycle();
  ASSERT_EQ(d.binds.size(), 2u);
  ASSERT_TRUE(e->ConfirmBind(id, 0, true).ok());  // task 0 Bound, task 1 still Binding
  ASSERT_TRUE(e->CancelJob(id).ok());
  const auto& job = e->state().job(id);
  EXPECT_EQ(job.task(0).state, TaskState::kReleasing);
  EXPECT_EQ(job.task(1).state, TaskState::kFailed);
  EXPECT_EQ(job.phase(), JobPhase::kCancelling);
  EXPECT_ERROR(e->ConfirmBind(id, 1, true), absl::StatusCode::kFailedPrecondition, "task g-worker-1 is Failed, not Binding") << "a late bind of a cancelled task is refused";
  ASSERT_TRUE(e->TaskReleased(id, 0).ok());
  EXPECT_EQ(job.phase(), JobPhase::kAborted);
  EXPECT_TRUE(e->CheckInvariants().ok());
}

TEST(Engine, AddedNodeTakesWaitingGang) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  h.Submit(JobBuilder("two").Gang(2).GpusPerTask(8).Build());
  h.Cycle();
  EXPECT_FALSE(h.Running("two"));
  topology::NodeSpec n = h.state().cluster().node(topology::NodeId(0));
  n.name = "node-new";
  ASSERT_TRUE(h.engine().AddNode(n).ok());
  EXPECT_ERROR(h.engine().AddNode(n), absl::StatusCode::kInvalidArgument, "node 'node-new': duplicate name") << "duplicate name";
  h.Cycle();
  EXPECT_TRUE(h.Running("two"));
  EXPECT_ERROR(h.engine().RemoveNode("no-such-node"), absl::StatusCode::kNotFound, "node 'no-such-node' is not in the cluster");
}

TEST(Engine, MembershipRanksFollowTheTopology) {
  // Two racks of two nodes; a 4 x 8 gang spans both racks: ranks of one rack
  // are consecutive, so the ring crosses the spine only twice.
  EngineHarness h(ClusterBuilder().Racks(2).NodesPerRack(2).Gpus(8).Build());
  h.Submit(JobBuilder("ring").Gang(4).GpusPerTask(8).Build());
  auto d = h.Cycle();
  ASSERT_EQ(d.membership.size(), 1u);
  const auto& m = d.membership[0];
  EXPECT_EQ(m.kind, scheduler::MembershipChange::Kind::kStart);
  EXPECT_EQ(m.generation, 1);
  ASSERT_EQ(m.members.size(), 4u);
  int crossings = 0;
  const auto& c = h.state().cluster();
  for (size_t r = 0; r < 4; ++r) {
    const auto a = c.FindNode(m.members[r].node_name), b = c.FindNode(m.members[(r + 1) % 4].node_name);
    crossings += c.CommonTier(a, b) > 1;
    EXPECT_EQ(m.members[r].rank, static_cast<int>(r));
  }
  EXPECT_EQ(crossings, 2);
}

}  // namespace
}  // namespace ringmaster::testing

namespace ringmaster::testing {
namespace {

// The daemon's journal re-adopts a running gang after a restart: its tasks
// are Running on the nodes they held, the job Running at its generation, and
// the GPUs they hold are not given again.
TEST(EngineRestore, RunningGangIsReadoptedWhereItWas) {
  scheduler::ManualClock clock(5000);
  auto registry = plugins::BuiltinRegistry();
  auto e = *scheduler::Engine::Create(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), scheduler::DefaultPolicy(),
                                      registry, clock);
  const std::string n0 = e->state().cluster().node(topology::NodeId(0)).name;
  const std::string n1 = e->state().cluster().node(topology::NodeId(1)).name;
  std::vector<scheduler::Engine::RestoredTask> placed = {{0, 0, n1, {0, 1, 2, 3, 4, 5, 6, 7}},
                                                         {1, 0, n0, {0, 1, 2, 3, 4, 5, 6, 7}}};
  auto id = *e->RestoreJob(JobBuilder("old").Gang(2).GpusPerTask(8).Build(), 1000, placed, 7);
  const auto& job = e->state().job(id);
  EXPECT_EQ(job.phase(), JobPhase::kRunning);
  EXPECT_EQ(job.created(), 1000);
  EXPECT_EQ(job.generation(), 7);
  EXPECT_EQ(job.task(0).state, TaskState::kRunning);
  EXPECT_EQ(e->state().cluster().node(job.task(0).node).name, n1);
  EXPECT_EQ(e->state().FreeWholeGpus(topology::NodeId(0)), 0);
  EXPECT_TRUE(e->CheckInvariants().ok());
  // A newcomer of 8 GPUs finds no room: both nodes are held.
  auto other = *e->SubmitJob(JobBuilder("new").Gang(1).GpusPerTask(8).Build());
  EXPECT_TRUE(e->RunCycle().binds.empty());
  EXPECT_EQ(e->state().job(other).phase(), JobPhase::kInqueue);
  EXPECT_ERROR(e->RestoreJob(JobBuilder("old").Build(), 0, {}, 0), absl::StatusCode::kAlreadyExists, "job 'old': name: already submitted") << "a name is taken once";
}

// A placement that no longer fits (a GPU given twice, an unknown node) is not
// restored half: the job waits again, whole.
TEST(EngineRestore, PlacementThatNoLongerFitsWaitsAgain) {
  scheduler::ManualClock clock;
  auto registry = plugins::BuiltinRegistry();
  auto e = *scheduler::Engine::Create(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), scheduler::DefaultPolicy(),
                                      registry, clock);
  const std::string n0 = e->state().cluster().node(topology::NodeId(0)).name;
  std::vector<scheduler::Engine::RestoredTask> twice = {{0, 0, n0, {0, 1, 2, 3}}, {1, 0, n0, {3, 4, 5, 6}}};
  auto a = *e->RestoreJob(JobBuilder("a").Gang(2).GpusPerTask(4).Build(), 0, twice, 1);
  EXPECT_EQ(e->state().job(a).phase(), JobPhase::kPending);
  EXPECT_EQ(e->state().job(a).ReadyCount(), 0);
  std::vector<scheduler::Engine::RestoredTask> gone = {{0, 0, "no-such-node", {0}}};
  auto b = *e->RestoreJob(JobBuilder("b").Gang(1).GpusPerTask(1).Build(), 0, gone, 1);
  EXPECT_EQ(e->state().job(b).ReadyCount(), 0);
  EXPECT_TRUE(e->CheckInvariants().ok());
  EXPECT_EQ(e->RunCycle().binds.size(), 3u) << "both wait and are placed by the next cycle";
}

scheduler::Policy TwoQueues(int research_weight) {
  return PolicyFromYaml(R"(actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
- plugins:
  - name: proportion
  - name: predicates
queues:
- name: research
  weight: )" + std::to_string(research_weight) + R"(
- name: prod
  weight: 1
)");
}

// Hot reload keeps jobs in their queues by name and recounts usage; the
// deserved shares follow the new weights from the next cycle.
TEST(EngineSetPolicy, NewWeightsApplyFromTheNextCycle) {
  scheduler::ManualClock clock;
  auto registry = plugins::BuiltinRegistry();
  auto e = *scheduler::Engine::Create(ClusterBuilder().NodesPerRack(4).Gpus(8).Build(), TwoQueues(1), registry, clock);
  EXPECT_TRUE(e->deserved().empty()) << "nothing computed before the first cycle";
  ASSERT_TRUE(e->SubmitJob(JobBuilder("r").Queue("research").Gang(4).GpusPerTask(8).Build()).ok());
  ASSERT_TRUE(e->SubmitJob(JobBuilder("p").Queue("prod").Gang(4).GpusPerTask(8).Build()).ok());
  e->RunCycle();
  const uint32_t research = *e->state().queues().Find("research");
  // 32 GPUs, both queues ask for all of them: 1:1 gives 16 each.
  EXPECT_EQ(e->deserved()[research].gpu_milli(), 16000);
  ASSERT_TRUE(e->SetPolicy(TwoQueues(3), registry).ok());
  e->RunCycle();
  const uint32_t research2 = *e->state().queues().Find("research");
  // 3:1 of 32 = 24 for research.
  EXPECT_EQ(e->deserved()[research2].gpu_milli(), 24000);
  EXPECT_TRUE(e->CheckInvariants().ok());
}

TEST(EngineSetPolicy, RejectedPolicyLeavesTheOldOne) {
  scheduler::ManualClock clock;
  auto registry = plugins::BuiltinRegistry();
  auto e = *scheduler::Engine::Create(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), TwoQueues(1), registry, clock);
  ASSERT_TRUE(e->SubmitJob(JobBuilder("r").Queue("research").Gang(1).GpusPerTask(8).Build()).ok());
  e->RunCycle();
  // The default policy has only the "default" queue: research still holds a job.
  absl::Status s = e->SetPolicy(scheduler::DefaultPolicy(), registry);
  EXPECT_EQ(s.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_NE(s.message().find("'research' is missing"), std::string::npos) << s;
  EXPECT_TRUE(e->state().queues().Find("research").has_value());
  EXPECT_NE(e->plugin("proportion"), nullptr) << "the old plugins stay";
  EXPECT_TRUE(e->CheckInvariants().ok());
}

}  // namespace
}  // namespace ringmaster::testing
