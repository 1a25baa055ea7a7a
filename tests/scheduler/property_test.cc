// Property test: 1,000 seeded random clusters and job mixes. After every
// cycle: no GPU (or GPU share) given twice, no running gang below its
// minimum, no queue above its capability, every bind fits its node.
#include <gtest/gtest.h>

#include <random>

#include "queue/queue.h"
#include "tests/support/builders.h"

namespace ringmaster::testing {
namespace {

using scheduler::JobPhase;

void CheckCycle(const scheduler::Engine& e, const scheduler::Decisions& d, uint32_t seed, int cycle) {
  const auto& st = e.state();
  // Invariants 1-6 of state.h (GPU given twice, node over-commit, counters,
  // running gang below minimum).
  absl::Status s = st.CheckInvariants();
  ASSERT_TRUE(s.ok()) << "seed " << seed << " cycle " << cycle << ": " << s.message();
  // No queue above its capability.
  for (uint32_t q = 0; q < st.queues().size(); ++q) {
    const auto& cap = st.queues().spec(q).capability;
    if (cap) {
      EXPECT_TRUE(queue::WithinCapability(st.queue_usage(scheduler::QueueId(q)).allocated, *cap))
          << "seed " << seed << " queue " << st.queues().spec(q).name;
    }
  }
  // Every bind is to a present node and fits it.
  for (const auto& b : d.binds) {
    ASSERT_TRUE(st.node(b.node).schedulable) << "seed " << seed;
    ASSERT_TRUE(st.node(b.node).used.LessEqual(st.cluster().node(b.node).allocatable)) << "seed " << seed;
  }
  // A running gang is whole.
  for (scheduler::JobId id : st.active_jobs()) {
    const auto& j = st.job(id);
    if (j.phase() == JobPhase::kRunning) {
      ASSERT_GE(j.ReadyCount(), j.min_member()) << "seed " << seed << " job " << j.name();
    }
  }
}

TEST(SchedulingProperty, InvariantsHoldOnRandomClustersAndJobs) {
  int started = 0;
  for (uint32_t seed = 1; seed <= 1000; ++seed) {
    std::mt19937 rng(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    ClusterBuilder cb;
    cb.Racks(pick(1, 3)).NodesPerRack(pick(1, 5)).Gpus(pick(1, 2) * 4).GpusPerIsland(pick(0, 1) * 2);
    if (pick(0, 1)) cb.RacksPerSpine(pick(1, 2));
    cb.CpuPerNode(pick(8, 64) * 1000);
    auto policy = PolicyFromYaml(R"(
queues:
- name: a
  weight: 2
  capability: {gpu: 12}
- name: b
  weight: 1
- name: c
  weight: 1
  capability: {cpu: 40, gpu: 20}
)");
    EngineHarness h(cb.Build(), policy, /*check_invariants=*/false);
    const char* queues[] = {"a", "b", "c"};
    const int jobs = pick(1, 14);
    for (int i = 0; i < jobs; ++i) {
      JobBuilder jb("j" + std::to_string(i));
      const int gang = pick(1, 4);
      jb.Gang(gang).Queue(queues[pick(0, 2)]).Priority(pick(0, 3)).CpuPerTask(pick(0, 8) * 1000);
      switch (pick(0, 3)) {
        case 0: jb.GpuShare(pick(1, 9) * 100); break;
        case 1: break;  // CPU only
        default: jb.GpusPerTask(pick(1, 8)); break;
      }
      if (gang > 1 && pick(0, 2) == 0) jb.Elastic(pick(1, gang), gang);
      else if (gang > 1 && pick(0, 1)) jb.MinMember(pick(1, gang));
      const int topo = pick(0, 3);
      if (topo == 1) jb.Hard(pick(0, 2));
      if (topo == 2) jb.Soft();
      if (pick(0, 4) == 0) jb.Walltime(pick(1, 100) * 1000);
      h.Submit(jb.Build());
    }
    for (int cycle = 0; cycle < 6; ++cycle) {
      auto d = h.Cycle();
      CheckCycle(h.engine(), d, seed, cycle);
      if (::testing::Test::HasFatalFailure()) return;
      // Random events between cycles.
      const auto& st = h.state();
      std::vector<scheduler::JobId> running;
      for (auto id : st.active_jobs()) {
        if (st.job(id).phase() == JobPhase::kRunning) running.push_back(id);
      }
      started += static_cast<int>(running.size());
      if (!running.empty() && pick(0, 1)) {
        ASSERT_TRUE(h.engine().FinishJob(running[pick(0, static_cast<int>(running.size()) - 1)], true).ok());
      }
      if (pick(0, 5) == 0) {
        const uint32_t n = static_cast<uint32_t>(pick(0, static_cast<int>(st.num_nodes()) - 1));
        if (st.node(topology::NodeId(n)).schedulable) {
          ASSERT_TRUE(h.engine().FailNode(st.cluster().node(topology::NodeId(n)).name).ok());
          absl::Status s = st.CheckInvariants();
          ASSERT_TRUE(s.ok()) << "seed " << seed << " after node loss: " << s.message();
        }
      }
    }
  }
  EXPECT_GT(started, 1000) << "the random mixes must actually run jobs";
}

}  // namespace
}  // namespace ringmaster::testing
