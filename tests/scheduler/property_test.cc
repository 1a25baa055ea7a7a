// Property test: seeded random clusters and job mixes (whole GPUs, GPU
// shares, CPU-only; gangs, elastic, hard and soft topology), seeds 1-1000
// plus a few drawn each run (tests/support/seeds.h). After every cycle the
// decision oracle (tests/support/decision_oracle.h), which knows only the
// cluster, the queues, the job specs, the Decisions and the events this test
// caused, recounts: no GPU (or GPU share) given twice, no node over its
// allocatable, no queue above its capability, no running gang below its
// minimum, hard topology kept; and the engine's state must agree with it.
// State::CheckInvariants runs too, as a second opinion.
#include <gtest/gtest.h>

#include <random>

#include "tests/support/builders.h"
#include "tests/support/decision_oracle.h"
#include "tests/support/seeds.h"

namespace ringmaster::testing {
namespace {

using scheduler::JobPhase;

TEST(SchedulingProperty, InvariantsHoldOnRandomClustersAndJobs) {
  int started = 0;
  int64_t share_binds = 0, shared_gpu_peak = 0;
  const std::vector<uint32_t> seeds = TestSeeds(SeedRange(1, 1000), 50);
  for (uint32_t seed : seeds) {
    SCOPED_TRACE(SeedTrace(seed));
    std::mt19937 rng(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    ClusterBuilder cb;
    cb.Racks(pick(1, 3)).NodesPerRack(pick(1, 5)).Gpus(pick(1, 2) * 4).GpusPerIsland(pick(0, 1) * 2);
    if (pick(0, 1)) cb.RacksPerSpine(pick(1, 2));
    cb.CpuPerNode(pick(8, 64) * 1000);
    const auto policy = PolicyFromYaml(R"(
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
    const topology::Cluster cluster = cb.Build();
    DecisionOracle oracle(cluster, policy.queues, DecisionOracle::OptionsFor(policy));
    EngineHarness h(cluster, policy, /*check_invariants=*/false);
    const char* queues[] = {"a", "b", "c"};
    const int jobs = pick(1, 14);
    for (int i = 0; i < jobs; ++i) {
      JobBuilder jb("j" + std::to_string(i));
      const int gang = pick(1, 4);
      jb.Gang(gang).Queue(queues[pick(0, 2)]).Priority(pick(0, 3)).CpuPerTask(pick(0, 8) * 1000);
      switch (pick(0, 4)) {
        case 0: jb.GpuShare(pick(1, 9) * 100); break;
        case 1: jb.GpuShare(pick(1, 4) * 250); break;  // 1000: a whole GPU asked for as a share
        case 2: break;  // CPU only
        default: jb.GpusPerTask(pick(1, 8)); break;
      }
      if (gang > 1 && pick(0, 2) == 0) jb.Elastic(pick(1, gang), gang);
      else if (gang > 1 && pick(0, 1)) jb.MinMember(pick(1, gang));
      const int topo = pick(0, 3);
      if (topo == 1) jb.Hard(pick(0, 2));
      if (topo == 2) jb.Soft();
      if (pick(0, 4) == 0) jb.Walltime(pick(1, 100) * 1000);
      const scheduler::JobSpec spec = jb.Build();
      oracle.Submitted(h.Submit(spec), spec);
    }
    for (int cycle = 0; cycle < 6; ++cycle) {
      const scheduler::Timestamp now = h.clock().Now();
      const auto d = h.Cycle();
      const auto& st = h.state();
      absl::Status s = oracle.Apply(d, now);
      ASSERT_TRUE(s.ok()) << s.message();
      s = oracle.CompareWithState(st);
      ASSERT_TRUE(s.ok()) << "cycle " << cycle << ": the state disagrees with the decisions: " << s.message();
      s = st.CheckInvariants();
      ASSERT_TRUE(s.ok()) << "cycle " << cycle << ": " << s.message();
      // Random events between cycles.
      std::vector<scheduler::JobId> running;
      for (auto id : st.active_jobs()) {
        if (st.job(id).phase() == JobPhase::kRunning) running.push_back(id);
      }
      started += static_cast<int>(running.size());
      if (!running.empty() && pick(0, 1)) {
        const scheduler::JobId j = running[pick(0, static_cast<int>(running.size()) - 1)];
        ASSERT_TRUE(h.engine().FinishJob(j, true).ok());
        oracle.JobFinished(j);
      }
      if (pick(0, 5) == 0) {
        const uint32_t n = static_cast<uint32_t>(pick(0, static_cast<int>(st.num_nodes()) - 1));
        if (st.node(topology::NodeId(n)).schedulable) {
          const std::string name = st.cluster().node(topology::NodeId(n)).name;
          ASSERT_TRUE(h.engine().FailNode(name).ok());
          oracle.NodeLost(name);
          s = st.CheckInvariants();
          ASSERT_TRUE(s.ok()) << "after node loss: " << s.message();
        }
      }
    }
    share_binds += oracle.stats().share_binds;
    shared_gpu_peak = std::max(shared_gpu_peak, oracle.stats().shared_gpu_peak);
  }
  if (ReplayingOneSeed()) return;
  EXPECT_GT(started, 1000) << "the random mixes must actually run jobs";
  EXPECT_GT(share_binds, 500) << "GPU-share tasks must be bound, not only whole GPUs";
  EXPECT_GE(shared_gpu_peak, 2) << "some GPU must be shared by two tasks at once";
}

}  // namespace
}  // namespace ringmaster::testing
