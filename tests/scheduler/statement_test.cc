#include "scheduler/statement.h"

#include <gtest/gtest.h>

#include "tests/support/builders.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::testing {
namespace {

using scheduler::JobId;
using scheduler::Session;
using scheduler::Statement;
using scheduler::TaskState;
using topology::NodeId;

class StatementTest : public ::testing::Test {
 protected:
  StatementTest() : state_(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), queue::QueueTree::Default()) {
    job_ = state_.AddJob(JobBuilder("g").Gang(2).GpusPerTask(4).Build(), scheduler::QueueId(0), 0);
  }
  scheduler::State state_;
  scheduler::ManualClock clock_;
  std::vector<std::vector<scheduler::Plugin*>> tiers_;
  JobId job_;
};

TEST_F(StatementTest, DiscardUndoesInReverseAndIsIdempotent) {
  Session s(state_, clock_, 1, tiers_);
  auto& job = state_.job(job_);
  Statement st(s);
  st.Allocate(job, 0, NodeId(0), {0, 1, 2, 3});
  st.Allocate(job, 1, NodeId(0), {4, 5, 6, 7});
  EXPECT_EQ(state_.FreeWholeGpus(NodeId(0)), 0);
  EXPECT_EQ(job.ReadyCount(), 2);
  st.Discard();
  EXPECT_EQ(state_.FreeWholeGpus(NodeId(0)), 8);
  EXPECT_EQ(job.Count(TaskState::kPending), 2);
  st.Discard();  // again: nothing changes
  EXPECT_EQ(state_.FreeWholeGpus(NodeId(0)), 8);
  EXPECT_TRUE(state_.CheckInvariants().ok());
}

TEST_F(StatementTest, CommitRefusesAGangBelowItsMinimum) {
  Session s(state_, clock_, 1, tiers_);
  auto& job = state_.job(job_);
  Statement st(s);
  st.Allocate(job, 0, NodeId(1), {0, 1, 2, 3});
  absl::Status status = st.Commit();
  EXPECT_EQ(status.code(), absl::StatusCode::kFailedPrecondition);
  EXPECT_EQ(job.ReadyCount(), 0) << "discarded";
  EXPECT_EQ(state_.FreeWholeGpus(NodeId(1)), 8);
  EXPECT_ERROR(st.Commit(), absl::StatusCode::kFailedPrecondition, "statement already committed or discarded") << "a closed statement cannot commit";
}

TEST_F(StatementTest, CommitOfAWholeGangBecomesBinds) {
  Session s(state_, clock_, 1, tiers_);
  auto& job = state_.job(job_);
  {
    Statement st(s);
    st.Allocate(job, 0, NodeId(1), {0, 1, 2, 3});
    st.Allocate(job, 1, NodeId(1), {4, 5, 6, 7});
    ASSERT_TRUE(st.Commit().ok());
    st.Discard();  // after commit: no effect
  }
  EXPECT_EQ(job.ReadyCount(), 2);
  auto d = s.Close();
  ASSERT_EQ(d.binds.size(), 2u);
  EXPECT_EQ(d.binds[0].node_name, "node-0001");
  EXPECT_EQ(job.task(0).state, TaskState::kBinding);
}

TEST_F(StatementTest, DestroyedOpenStatementDiscards) {
  Session s(state_, clock_, 1, tiers_);
  auto& job = state_.job(job_);
  {
    Statement st(s);
    st.Allocate(job, 0, NodeId(0), {0, 1, 2, 3});
  }
  EXPECT_EQ(job.ReadyCount(), 0);
  EXPECT_EQ(state_.FreeWholeGpus(NodeId(0)), 8);
}

TEST_F(StatementTest, EvictThenDiscardRestoresRunning) {
  Session s(state_, clock_, 1, tiers_);
  auto& job = state_.job(job_);
  {
    Statement st(s);
    st.Allocate(job, 0, NodeId(0), {0, 1, 2, 3});
    st.Allocate(job, 1, NodeId(0), {4, 5, 6, 7});
    ASSERT_TRUE(st.Commit().ok());
  }
  state_.SetState(job, 0, TaskState::kRunning);
  Statement ev(s);
  ev.Evict(job, 0, "test");
  EXPECT_EQ(job.task(0).state, TaskState::kReleasing);
  EXPECT_EQ(state_.GpuFree(NodeId(0), 0, /*future=*/true), 1000);
  ev.Discard();
  EXPECT_EQ(job.task(0).state, TaskState::kRunning);
  EXPECT_EQ(state_.GpuFree(NodeId(0), 0, /*future=*/true), 0);
}

}  // namespace
}  // namespace ringmaster::testing
