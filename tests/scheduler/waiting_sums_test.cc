// What the state keeps of its waiting jobs for a session to open without
// reading them (State::waiting_sums, admitted_waiting_jobs) and for
// enqueue's admission memo (State::TakeAdmissionChanges).
#include <gtest/gtest.h>

#include <algorithm>
#include <vector>

#include "scheduler/state.h"
#include "tests/support/builders.h"

namespace ringmaster::testing {
namespace {

using scheduler::JobId;
using scheduler::JobPhase;
using scheduler::QueueId;
using scheduler::State;
using scheduler::TaskState;
using topology::NodeId;

queue::QueueTree Queues(const char* first, const char* second) {
  auto tree = queue::QueueTree::Build({queue::QueueSpec{.name = first}, queue::QueueSpec{.name = second}});
  EXPECT_TRUE(tree.ok()) << tree.status();
  return *std::move(tree);
}
queue::QueueTree TwoQueues() { return Queues("a", "b"); }

class WaitingSumsTest : public ::testing::Test {
 protected:
  WaitingSumsTest() : state_(ClusterBuilder().NodesPerRack(2).Gpus(8).Build(), TwoQueues()) {}
  QueueId Queue(const char* name) { return QueueId(*state_.queues().Find(name)); }
  int64_t PendingGpus(const char* q) { return state_.waiting_sums()[Queue(q).value()].pending.gpu_milli() / 1000; }
  int64_t InqueueGpus(const char* q) { return state_.waiting_sums()[Queue(q).value()].inqueue.gpu_milli() / 1000; }
  std::vector<JobId> Changes(bool* whole) {
    std::vector<JobId> out;
    *whole = state_.TakeAdmissionChanges(out);
    std::sort(out.begin(), out.end());
    out.erase(std::unique(out.begin(), out.end()), out.end());
    return out;
  }
  State state_;
};

TEST_F(WaitingSumsTest, PerQueueSumsFollowTasksAndPhases) {
  const JobId g = state_.AddJob(JobBuilder("g").Queue("a").Gang(2).GpusPerTask(4).Build(), Queue("a"), 0);
  const JobId h = state_.AddJob(JobBuilder("h").Queue("b").GpusPerTask(2).Build(), Queue("b"), 0);
  EXPECT_EQ(PendingGpus("a"), 8);
  EXPECT_EQ(PendingGpus("b"), 2);
  EXPECT_EQ(InqueueGpus("a"), 0) << "not admitted: no minimum counted";
  EXPECT_TRUE(state_.admitted_waiting_jobs().empty());

  state_.SetPhase(state_.job(g), JobPhase::kInqueue);
  EXPECT_EQ(InqueueGpus("a"), 8) << "admitted and not running: its minimum counts";
  EXPECT_EQ(state_.admitted_waiting_jobs().count(g), 1u);

  // One task placed: half the request is still pending.
  state_.Place(state_.job(g), 0, NodeId(0), std::vector<int16_t>{0, 1, 2, 3}, TaskState::kAllocated);
  EXPECT_EQ(PendingGpus("a"), 4);
  EXPECT_TRUE(state_.CheckInvariants().ok()) << state_.CheckInvariants();
  // Both placed: it no longer waits, and adds nothing.
  state_.Place(state_.job(g), 1, NodeId(0), std::vector<int16_t>{4, 5, 6, 7}, TaskState::kAllocated);
  EXPECT_EQ(PendingGpus("a"), 0);
  EXPECT_EQ(InqueueGpus("a"), 0);
  EXPECT_EQ(state_.admitted_waiting_jobs().count(g), 0u);

  state_.FinishJob(h, JobPhase::kCompleted);
  EXPECT_EQ(PendingGpus("b"), 0) << "an ended job adds nothing";
  EXPECT_TRUE(state_.CheckInvariants().ok()) << state_.CheckInvariants();
}

TEST_F(WaitingSumsTest, TheRunningSetFollowsThePhase) {
  // State::running_jobs: the active jobs in phase Running, kept with
  // SetPhase and FinishJob (victim searches and las's expected ends walk
  // it instead of every active job).
  const JobId g = state_.AddJob(JobBuilder("g").Queue("a").GpusPerTask(4).Build(), Queue("a"), 0);
  const JobId h = state_.AddJob(JobBuilder("h").Queue("b").GpusPerTask(2).Build(), Queue("b"), 0);
  EXPECT_TRUE(state_.running_jobs().empty());
  state_.SetPhase(state_.job(g), JobPhase::kRunning);
  state_.SetPhase(state_.job(h), JobPhase::kRunning);
  EXPECT_EQ(std::vector<JobId>(state_.running_jobs().begin(), state_.running_jobs().end()), (std::vector<JobId>{g, h}));
  state_.SetPhase(state_.job(g), JobPhase::kInqueue);  // stopped, admitted again
  EXPECT_EQ(std::vector<JobId>(state_.running_jobs().begin(), state_.running_jobs().end()), (std::vector<JobId>{h}));
  state_.FinishJob(h, JobPhase::kCompleted);
  EXPECT_TRUE(state_.running_jobs().empty());
  EXPECT_TRUE(state_.CheckInvariants().ok()) << state_.CheckInvariants();
}

TEST_F(WaitingSumsTest, ReplacingTheQueuesRecountsUnderTheNewTree) {
  state_.AddJob(JobBuilder("g").Queue("b").GpusPerTask(4).Build(), Queue("b"), 0);
  const uint32_t before = Queue("b").value();
  ASSERT_TRUE(state_.ReplaceQueues(Queues("b", "a")).ok());
  ASSERT_NE(Queue("b").value(), before) << "the test needs b to move";
  EXPECT_EQ(PendingGpus("b"), 4);
  EXPECT_EQ(PendingGpus("a"), 0);
  EXPECT_TRUE(state_.CheckInvariants().ok()) << state_.CheckInvariants();
}

TEST_F(WaitingSumsTest, AdmissionChangesNameTheJobsNotYetAdmittedThatChanged) {
  bool whole = true;
  Changes(&whole);
  EXPECT_FALSE(whole) << "nothing was kept before the first reader";
  const JobId g = state_.AddJob(JobBuilder("g").Queue("a").Gang(2).GpusPerTask(4).Build(), Queue("a"), 0);
  const JobId h = state_.AddJob(JobBuilder("h").Queue("b").GpusPerTask(2).Build(), Queue("b"), 0);
  EXPECT_EQ(Changes(&whole), (std::vector<JobId>{g, h}));
  EXPECT_TRUE(whole);
  EXPECT_TRUE(Changes(&whole).empty()) << "read once";

  state_.SetPhase(state_.job(g), JobPhase::kInqueue);
  EXPECT_EQ(Changes(&whole), std::vector<JobId>{g}) << "admitted: no longer what it was";
  state_.Place(state_.job(g), 0, NodeId(0), std::vector<int16_t>{0, 1, 2, 3}, TaskState::kAllocated);
  EXPECT_TRUE(Changes(&whole).empty()) << "an admitted job's tasks are not enqueue's";

  state_.AddTask(state_.job(h), 0);
  EXPECT_EQ(Changes(&whole), std::vector<JobId>{h}) << "a refused job's tasks changed: asked again";
  state_.FinishJob(h, JobPhase::kCompleted);
  EXPECT_EQ(Changes(&whole), std::vector<JobId>{h});

  for (size_t i = 0; i <= State::kMaxAdmissionChanges; ++i) {
    state_.AddJob(JobBuilder("x" + std::to_string(i)).Queue("b").GpusPerTask(1).Build(), Queue("b"), 0);
  }
  EXPECT_TRUE(Changes(&whole).empty());
  EXPECT_FALSE(whole) << "more than kept: any may have changed";
  Changes(&whole);
  EXPECT_TRUE(whole);
  ASSERT_TRUE(state_.ReplaceQueues(TwoQueues()).ok());
  Changes(&whole);
  EXPECT_FALSE(whole) << "jobs may have moved queues";
}

}  // namespace
}  // namespace ringmaster::testing
