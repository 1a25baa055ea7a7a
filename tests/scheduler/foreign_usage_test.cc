// What others hold on a node (Engine::SetForeignUsage: the extender's count
// of pods kube-scheduler placed without ringmaster) is used like a task's
// holding: placement, free counts and the invariants see it; it never takes
// a GPU a task of ringmaster's holds.
#include <gtest/gtest.h>

#include "tests/support/builders.h"

namespace ringmaster::testing {
namespace {

topology::Resources Cpu(int64_t milli) {
  topology::Resources r;
  r.set_cpu_milli(milli);
  return r;
}

TEST(ForeignUsage, GpusOthersHoldAreNotGivenAndComeBackWhenTheyGo) {
  EngineHarness h(ClusterBuilder().Racks(1).NodesPerRack(2).Gpus(8).Build());
  const scheduler::State& st = h.state();
  const scheduler::NodeId n0(0);
  const std::string name0 = st.cluster().node(n0).name;
  auto short_by = h.engine().SetForeignUsage(name0, Cpu(4'000), 3);
  ASSERT_TRUE(short_by.ok()) << short_by.status();
  EXPECT_EQ(*short_by, 0);
  EXPECT_EQ(st.FreeWholeGpus(n0), 5);
  EXPECT_EQ(st.node(n0).used.cpu_milli(), 4'000);
  ASSERT_TRUE(st.CheckInvariants().ok()) << st.CheckInvariants();
  // Two 8-GPU tasks do not fit while 3 GPUs of one node are others'.
  h.Submit(JobBuilder("big").Gang(2).GpusPerTask(8).Build());
  h.Cycle();
  EXPECT_FALSE(h.Running("big"));
  ASSERT_TRUE(h.engine().CancelJob(h.engine().FindJob("big")).ok());
  // A 5-GPU task fits beside them, on GPUs none of the others' holds (the
  // harness checks the invariants after every cycle).
  h.Submit(JobBuilder("five").Gang(1).GpusPerTask(5).Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("five"));
  // Others' pods leave: their GPUs are free again (the 5-GPU job keeps its own).
  ASSERT_TRUE(h.engine().SetForeignUsage(name0, {}, 0).ok());
  EXPECT_TRUE(st.node(n0).foreign.IsZero());
  ASSERT_TRUE(st.CheckInvariants().ok()) << st.CheckInvariants();
  int64_t free_total = 0;
  for (uint32_t n = 0; n < st.num_nodes(); ++n) free_total += st.FreeWholeGpus(scheduler::NodeId(n));
  EXPECT_EQ(free_total, 16 - 5);
}

TEST(ForeignUsage, OthersCountedOnlyWhereRingmasterHoldsNothing) {
  EngineHarness h(ClusterBuilder().Racks(1).NodesPerRack(1).Gpus(8).Build());
  const scheduler::State& st = h.state();
  const scheduler::NodeId n0(0);
  const std::string name0 = st.cluster().node(n0).name;
  h.Submit(JobBuilder("six").Gang(1).GpusPerTask(6).Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("six"));
  // Others claim 4 GPUs: 2 are free, the other 2 the two schedulers disagree on.
  auto short_by = h.engine().SetForeignUsage(name0, Cpu(1'000'000'000), 4);
  ASSERT_TRUE(short_by.ok());
  EXPECT_EQ(*short_by, 2);
  EXPECT_EQ(st.node(n0).foreign.gpu_milli(), 2'000);
  EXPECT_EQ(st.FreeWholeGpus(n0), 0);
  // cpu up to what is idle: the node is never over-committed.
  EXPECT_TRUE(st.node(n0).used.LessEqual(st.cluster().node(n0).allocatable));
  ASSERT_TRUE(st.CheckInvariants().ok()) << st.CheckInvariants();
  // The job ends: its GPUs are free; the next count takes all 4.
  ASSERT_TRUE(h.engine().FinishJob(h.engine().FindJob("six"), true).ok());
  EXPECT_EQ(st.FreeWholeGpus(n0), 6);
  ASSERT_TRUE(h.engine().SetForeignUsage(name0, {}, 4).ok());
  EXPECT_EQ(st.FreeWholeGpus(n0), 4);
  ASSERT_TRUE(st.CheckInvariants().ok()) << st.CheckInvariants();
  EXPECT_EQ(h.engine().SetForeignUsage("no-such-node", {}, 1).status().code(), absl::StatusCode::kNotFound);
}

}  // namespace
}  // namespace ringmaster::testing
