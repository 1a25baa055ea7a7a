// Scenarios users of other gang schedulers report going wrong, each written
// as the scenario.
#include <gtest/gtest.h>

#include "tests/support/builders.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::testing {
namespace {

using scheduler::JobPhase;

TEST(GangScenario, TwoLargeGangsExactlyOneStartsTheOtherWaitsWhole) {
  // 4 nodes x 8 GPUs = 32 GPUs. Each gang wants 3 x 8 = 24: either fits alone,
  // both together need 48. Half-placing both would deadlock.
  EngineHarness h(ClusterBuilder().NodesPerRack(4).Gpus(8).Build());
  h.Submit(JobBuilder("a").Gang(3).GpusPerTask(8).Build());
  h.Submit(JobBuilder("b").Gang(3).GpusPerTask(8).Build());
  h.Cycle();
  h.Cycle();
  const int running = h.Running("a") + h.Running("b");
  EXPECT_EQ(running, 1);
  const std::string waiting = h.Running("a") ? "b" : "a";
  EXPECT_EQ(h.job(waiting).ReadyCount(), 0) << "the waiting gang holds nothing";
  EXPECT_EQ(h.GpusOf(waiting), 0);
  // It could place 1 of its 3 workers in what is left: "1 of 3 members placeable".
  EXPECT_NE(h.job(waiting).pending_reason().find("1 of 3 members placeable: needs 3 × 8 GPUs"), std::string::npos)
      << h.job(waiting).pending_reason();
}

TEST(GangScenario, FragmentedBigJobDoesNotBlockSmallJobsAndRunsWhenNodeDrains) {
  // 4 nodes x 8 GPUs, each half used by a 4-GPU job pinned to it: 16 free
  // GPUs, but no node has 8 free. The queue admits an 8-GPU single task that
  // fragmentation makes unplaceable; 1-GPU jobs behind it must still run.
  ClusterBuilder cb;
  cb.NodesPerRack(4).Gpus(8);
  for (int i = 0; i < 4; ++i) cb.Label(i, "slot", std::to_string(i));
  EngineHarness h(cb.Build());
  for (int i = 0; i < 4; ++i) {
    h.Submit(JobBuilder("half" + std::to_string(i)).GpusPerTask(4).Selector("slot", std::to_string(i)).Build());
  }
  h.Cycle();
  for (uint32_t n = 0; n < 4; ++n) ASSERT_EQ(h.state().FreeWholeGpus(topology::NodeId(n)), 4);
  h.Submit(JobBuilder("big").GpusPerTask(8).Build());
  for (int i = 0; i < 3; ++i) h.Submit(JobBuilder("small" + std::to_string(i)).GpusPerTask(1).Build());
  h.Cycle();
  EXPECT_EQ(h.job("big").phase(), JobPhase::kInqueue) << "admitted by its queue";
  EXPECT_FALSE(h.Running("big"));
  for (int i = 0; i < 3; ++i) {
    EXPECT_TRUE(h.Running("small" + std::to_string(i))) << "small jobs must not wait behind the big one";
  }
  ASSERT_TRUE(h.state().reservation().has_value());
  EXPECT_EQ(h.state().reservation()->job, h.engine().FindJob("big"));
  // Small jobs kept off the reserved node.
  const topology::NodeId reserved = h.state().reservation()->nodes.front();
  EXPECT_EQ(h.state().FreeWholeGpus(reserved), 4);
  // The pinned job on the reserved node ends: the big job starts there.
  for (const auto& [jid, task] : h.state().TasksOn(reserved)) {
    if (h.state().job(jid).phase() == JobPhase::kRunning) {
      ASSERT_TRUE(h.engine().FinishJob(jid, true).ok());
    }
  }
  h.Cycle();
  EXPECT_TRUE(h.Running("big")) << h.job("big").pending_reason();
  EXPECT_FALSE(h.state().reservation().has_value());
}

TEST(GangScenario, GangNeverRunsBelowMinimumAfterNodeRemoved) {
  EngineHarness h(ClusterBuilder().NodesPerRack(4).Gpus(8).Build());
  h.Submit(JobBuilder("rigid").Gang(2).GpusPerTask(8).Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("rigid"));
  const auto node = h.job("rigid").task(0).node;
  ASSERT_TRUE(h.engine().RemoveNode(h.state().cluster().node(node).name).ok());
  EXPECT_NE(h.job("rigid").phase(), JobPhase::kRunning);
  EXPECT_EQ(h.job("rigid").ReadyCount(), 0) << "the survivor is released too";
  auto d = h.Cycle();
  EXPECT_FALSE(d.evictions.empty());
  // Two nodes remain free: it restarts whole on them.
  h.Cycle();
  EXPECT_TRUE(h.Running("rigid"));
  EXPECT_EQ(h.job("rigid").ReadyCount(), 2);
  EXPECT_TRUE(h.engine().CheckInvariants().ok());
}

TEST(GangScenario, ElasticGangKeepsRunningSmallerAboveItsMinimum) {
  EngineHarness h(ClusterBuilder().NodesPerRack(4).Gpus(8).Build());
  h.Submit(JobBuilder("elastic").Gang(4).GpusPerTask(8).Elastic(2, 4).Build());
  auto d = h.Cycle();
  ASSERT_TRUE(h.Running("elastic"));
  ASSERT_EQ(d.membership.size(), 1u);
  EXPECT_EQ(d.membership[0].members.size(), 4u);
  const auto node = h.job("elastic").task(3).node;
  ASSERT_TRUE(h.engine().FailNode(h.state().cluster().node(node).name).ok());
  EXPECT_TRUE(h.Running("elastic"));
  EXPECT_EQ(h.job("elastic").ReadyCount(), 3);
  d = h.Cycle();
  ASSERT_FALSE(d.membership.empty());
  EXPECT_EQ(d.membership[0].kind, scheduler::MembershipChange::Kind::kFailure);
  EXPECT_EQ(d.membership[0].members.size(), 3u);
  EXPECT_EQ(d.membership[0].generation, 2);
}

TEST(GangScenario, HardTopologyReasonNamesTheLargestFreeDomain) {
  // 2 spines x 2 racks x 2 nodes x 8 GPUs; a 5 x 8 gang inside one spine
  // (16 x 2 = 32 GPUs per spine) can never fit.
  EngineHarness h(ClusterBuilder().Racks(4).NodesPerRack(2).RacksPerSpine(2).Gpus(8).Build());
  h.Submit(JobBuilder("huge").Gang(5).GpusPerTask(8).Hard(2).Build());
  h.Cycle();
  EXPECT_FALSE(h.Running("huge"));
  EXPECT_EQ(h.job("huge").pending_reason(),
            "0 of 5 members placeable: needs 5 × 8 GPUs within one tier-2 domain (spine); the largest free has 32 GPUs; "
            "it can never fit: the biggest such domain has 32 GPUs in all");
}

TEST(GangScenario, HardTopologyKeepsGangInsideOneRack) {
  EngineHarness h(ClusterBuilder().Racks(2).NodesPerRack(2).Gpus(8).Build());
  h.Submit(JobBuilder("one").GpusPerTask(8).Build());  // takes a node of rack 0
  h.Submit(JobBuilder("pair").Gang(2).GpusPerTask(8).Hard(1).Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("pair"));
  const auto& c = h.state().cluster();
  EXPECT_EQ(c.CommonTier(h.job("pair").task(0).node, h.job("pair").task(1).node), 1);
}

TEST(GangScenario, HigherPriorityJobGoesFirst) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  h.Submit(JobBuilder("low").GpusPerTask(8).Priority(1).Build());
  h.Submit(JobBuilder("high").GpusPerTask(8).Priority(9).Build());
  h.Cycle();
  EXPECT_TRUE(h.Running("high"));
  EXPECT_FALSE(h.Running("low"));
}

TEST(GangScenario, QueueCapabilityHoldsJobsPending) {
  auto policy = PolicyFromYaml(R"(
queues:
- name: small
  capability: {gpu: 8}
)");
  EngineHarness h(ClusterBuilder().NodesPerRack(4).Gpus(8).Build(), policy);
  h.Submit(JobBuilder("fits").Queue("small").GpusPerTask(8).Build());
  h.Submit(JobBuilder("over").Queue("small").GpusPerTask(1).Build());
  h.Cycle();
  EXPECT_TRUE(h.Running("fits"));
  EXPECT_EQ(h.job("over").phase(), JobPhase::kPending);
  EXPECT_NE(h.job("over").pending_reason().find("exceeds its capability gpu=8"), std::string::npos)
      << h.job("over").pending_reason();
}

TEST(GangScenario, BackfillUsesReservedNodeWhenItEndsBeforeTheReservation) {
  // 2 nodes x 8: a 12-GPU... simpler: one node 8 GPUs fully used for 100 s by
  // a job with a walltime; a 2 x 8 gang reserves both nodes; a 1-GPU job of 10 s
  // may backfill on the free node, one of 1000 s may not.
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build());
  h.Submit(JobBuilder("running").GpusPerTask(8).Walltime(100'000).Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("running"));
  h.Submit(JobBuilder("gang").Gang(2).GpusPerTask(8).Build());
  h.Submit(JobBuilder("short").GpusPerTask(1).Walltime(10'000).Build());
  h.Submit(JobBuilder("long").GpusPerTask(1).Walltime(1'000'000).Build());
  h.Cycle();
  EXPECT_FALSE(h.Running("gang"));
  ASSERT_TRUE(h.state().reservation().has_value());
  EXPECT_TRUE(h.Running("short")) << h.job("short").pending_reason();
  EXPECT_FALSE(h.Running("long"));
  EXPECT_NE(h.job("long").pending_reason().find("reserved for a waiting gang"), std::string::npos)
      << h.job("long").pending_reason();
}

TEST(Engine, RejectsBadJobsWithTheField) {
  EngineHarness h(ClusterBuilder().Build());
  auto bad = JobBuilder("x").Gang(2).MinMember(3).Build();
  auto s = h.engine().SubmitJob(bad);
  ASSERT_ERROR(s, absl::StatusCode::kInvalidArgument, "job 'x': min_member: 3 is more than the job's 2 tasks");
  EXPECT_NE(s.status().message().find("min_member"), std::string::npos);
  auto q = JobBuilder("y").Queue("nope").Build();
  s = h.engine().SubmitJob(q);
  ASSERT_ERROR(s, absl::StatusCode::kInvalidArgument, "job 'y': queue: unknown queue 'nope'");
  EXPECT_NE(s.status().message().find("unknown queue 'nope'"), std::string::npos);
  EXPECT_EQ(h.state().num_jobs(), 0u) << "nothing half-accepted";
}

TEST(Engine, SameInputsSameDecisions) {
  auto run = [] {
    EngineHarness h(ClusterBuilder().Racks(2).NodesPerRack(4).Gpus(8).Build());
    for (int i = 0; i < 20; ++i) {
      h.Submit(JobBuilder("j" + std::to_string(i)).Gang(1 + i % 3).GpusPerTask(1 + i % 8).Build());
    }
    std::string out;
    for (int c = 0; c < 3; ++c) {
      auto d = h.Cycle();
      for (const auto& b : d.binds) {
        out += b.task_name + "@" + b.node_name + ":";
        for (auto g : b.gpus) out += std::to_string(g) + ",";
        out += ";";
      }
    }
    return out;
  };
  EXPECT_EQ(run(), run());
}

}  // namespace
}  // namespace ringmaster::testing
