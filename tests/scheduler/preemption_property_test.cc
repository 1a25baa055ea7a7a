// Property test for preempt, reclaim, shrink and grow: seeded random clusters,
// queues, policies and a stream of jobs, node failures and releases. After
// every cycle the decision oracle (tests/support/decision_oracle.h), which
// knows only the specs, the Decisions (binds, evictions with their
// deadlines) and the events the test itself caused, recounts every GPU, GPU
// share, node, queue and gang, and the engine's state must equal it; it does
// not use State::CheckInvariants. Jobs take whole GPUs or GPU shares. Seeds
// 1-300 plus a few drawn each run (tests/support/seeds.h). Also checked: GPUs per task, hard-topology domains, running gangs whole,
// generations strictly increasing, every eviction letting its preemptor
// start, no job ever taking from one it yielded to, every victim sharing a
// node with where its preemptor landed, and no GPU-less task stopped (cpu is
// never short here, so such a victim would free nothing a preemptor lacks).
#include <gtest/gtest.h>

#include <map>
#include <random>
#include <set>
#include <vector>

#include "tests/support/builders.h"
#include "tests/support/decision_oracle.h"
#include "tests/support/seeds.h"

namespace ringmaster::testing {
namespace {

using scheduler::Eviction;
using scheduler::JobId;
using scheduler::JobPhase;
using scheduler::TaskState;
using scheduler::Timestamp;
using topology::NodeId;

std::string RandomPolicy(std::mt19937& rng) {
  auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
  const int grace = pick(0, 2) * 2;  // 0, 2 or 4 s
  const int cooldown = pick(0, 1) * 3;
  const int cap = pick(0, 1) * pick(1, 8);
  std::string args = "{gracePeriod: " + std::to_string(grace) + ", cooldown: " + std::to_string(cooldown) +
                     ", maxEvictionsPerCycle: " + std::to_string(cap) + "}";
  return R"(actions: "enqueue, allocate, preempt, reclaim, elastic, backfill"
configurations:
- {name: preempt, arguments: )" + args + R"(}
- {name: reclaim, arguments: )" + args + R"(}
- {name: elastic, arguments: {growIdle: )" + std::to_string(pick(0, 3)) + R"(, cooldown: )" +
         std::to_string(pick(0, 3)) + R"(}}
queues:
- {name: a, weight: 2, guarantee: {gpu: 4}}
- {name: b, weight: 1}
- {name: c, weight: 1, capability: {gpu: 24}}
)";
}

TEST(PreemptionProperty, DecisionsAloneAccountForEveryGpu) {
  int evictions = 0, shrinks = 0, grows = 0, held = 0;
  int64_t share_binds = 0;
  std::vector<uint32_t> fixed = SeedRange(1, 300);
  fixed.push_back(4132502620);  // grew past its elastic max (docs/TESTING.md, "What the oracle found", 3)
  for (uint32_t seed : TestSeeds(fixed, 20)) {
    SCOPED_TRACE(SeedTrace(seed));
    std::mt19937 rng(seed);
    auto pick = [&](int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng); };
    ClusterBuilder cb;
    cb.Racks(pick(1, 3)).NodesPerRack(pick(1, 4)).Gpus(pick(1, 2) * 4);
    if (pick(0, 1)) cb.RacksPerSpine(pick(1, 2));
    const topology::Cluster cluster = cb.Build();
    const scheduler::Policy policy = PolicyFromYaml(RandomPolicy(rng));
    EngineHarness h(cluster, policy, /*check_invariants=*/false);
    DecisionOracle oracle(cluster, policy.queues, DecisionOracle::OptionsFor(policy));
    std::map<JobId, int64_t> generation;
    std::set<std::pair<JobId, JobId>> yielded;  // (victim, preemptor)
    const char* queues[] = {"a", "b", "c"};
    int next = 0;
    for (int cycle = 0; cycle < 14; ++cycle) {
      // Arrivals.
      for (int k = pick(0, 3); k > 0; --k) {
        JobBuilder jb("j" + std::to_string(next++));
        if (pick(0, 7) == 0) {  // a CPU-only job beside the GPU work
          const auto spec = jb.Gang(pick(1, 2)).Queue(queues[pick(0, 2)]).Priority(pick(0, 1)).CpuPerTask(1000).Build();
          oracle.Submitted(h.Submit(spec), spec);
          continue;
        }
        const int gang = pick(1, 6);
        jb.Gang(gang).Queue(queues[pick(0, 2)]).Priority(pick(0, 3)).GpusPerTask(pick(1, 2) == 1 ? 1 : pick(2, 8));
        if (pick(0, 4) == 0) jb.GpuShare(pick(1, 9) * 100);  // a GPU share instead
        if (gang > 1 && pick(0, 1)) jb.Elastic(pick(1, gang), gang + pick(0, 3));
        if (pick(0, 3) == 0) jb.Hard(pick(0, 1));
        const auto spec = jb.Build();
        oracle.Submitted(h.Submit(spec), spec);
      }
      const Timestamp now = h.clock().Now();
      auto d = h.Cycle();
      const auto& st = h.state();
      // Per (preemptor, victim job): whether one of the stopped tasks was on
      // a node the preemptor now holds or is held on.
      std::map<std::pair<JobId, JobId>, bool> shares_node;
      for (const auto& e : d.evictions) {
        if (e.preemptor.empty()) continue;
        const JobId p = h.engine().FindJob(e.preemptor);
        ASSERT_GT(st.job(e.job).gpu(e.task).count, 0)
            << "seed " << seed << " cycle " << cycle << ": " << st.job(e.job).name() << " holds no GPU, yet was stopped for "
            << e.preemptor;
        bool on = false;
        for (const auto& t : st.job(p).tasks()) {
          on = on || ((scheduler::HoldsNode(t.state) || t.state == TaskState::kPipelined) && t.node == e.node);
        }
        shares_node[{p, e.job}] |= on;
      }
      for (const auto& [pv, on] : shares_node) {
        ASSERT_TRUE(on) << "seed " << seed << " cycle " << cycle << ": " << st.job(pv.second).name()
                        << " was stopped for " << st.job(pv.first).name() << " on no node it landed on";
      }
      for (const auto& e : d.evictions) {
        evictions += e.kind == Eviction::Kind::kEvict;
        shrinks += e.kind == Eviction::Kind::kShrink;
        if (e.preemptor.empty()) continue;
        const JobId p = h.engine().FindJob(e.preemptor);
        ASSERT_FALSE(yielded.count({p, e.job}))
            << "seed " << seed << ": " << e.preemptor << " took from " << st.job(e.job).name()
            << ", a job it had yielded to";
        yielded.insert({e.job, p});
        // The preemptor starts now, or is held on the victims' GPUs.
        const auto& pj = st.job(p);
        ASSERT_TRUE(pj.phase() == JobPhase::kRunning || pj.nominated())
            << "seed " << seed << " cycle " << cycle << ": evicted for " << e.preemptor << " which did not start";
        held += pj.nominated();
      }
      for (const auto& b : d.binds) {
        const auto& j = st.job(b.job);
        ASSERT_EQ(static_cast<int>(b.gpus.size()), j.gpu(b.task).count) << "seed " << seed << " " << b.task_name;
      }
      absl::Status s = oracle.Apply(d, now);
      ASSERT_TRUE(s.ok()) << s.message();
      for (const auto& m : d.membership) {
        auto [it, first] = generation.try_emplace(m.job, m.generation);
        if (!first) {
          ASSERT_GT(m.generation, it->second) << "seed " << seed << " job " << m.job_name;
          it->second = m.generation;
        }
        grows += m.kind == scheduler::MembershipChange::Kind::kGrow;
      }
      s = oracle.CompareWithState(st);
      ASSERT_TRUE(s.ok()) << "cycle " << cycle << ": the state disagrees with the decisions: " << s.message();
      for (JobId id : st.active_jobs()) {
        const auto& j = st.job(id);
        if (j.phase() != JobPhase::kRunning) continue;
        ASSERT_GE(j.ReadyCount(), j.min_member()) << "seed " << seed << " job " << j.name();
      }  // hard-topology domains: the oracle's check 6
      // Queue capabilities: the oracle's check 4, recounted from the decisions.
      // Events between cycles: a job ends, a leaver exits, a node fails.
      std::vector<JobId> running;
      std::vector<std::pair<JobId, uint32_t>> leaving;
      for (JobId id : st.active_jobs()) {
        const auto& j = st.job(id);
        if (j.phase() == JobPhase::kRunning) running.push_back(id);
        for (const auto& t : j.tasks()) {
          if (t.state == TaskState::kReleasing) leaving.push_back({id, t.index});
        }
      }
      if (!running.empty() && pick(0, 2) == 0) {
        const JobId j = running[pick(0, static_cast<int>(running.size()) - 1)];
        ASSERT_TRUE(h.engine().FinishJob(j, true).ok());
        oracle.JobFinished(j);
      }
      if (!leaving.empty() && pick(0, 1)) {
        const auto [j, t] = leaving[pick(0, static_cast<int>(leaving.size()) - 1)];
        if (st.job(j).task(t).state == TaskState::kReleasing) {
          ASSERT_TRUE(h.engine().TaskReleased(j, t).ok());
          oracle.TaskReleased(j, t);
        }
      }
      if (pick(0, 9) == 0) {
        const NodeId n(static_cast<uint32_t>(pick(0, static_cast<int>(st.num_nodes()) - 1)));
        if (st.node(n).schedulable) {
          const std::string name = st.cluster().node(n).name;
          ASSERT_TRUE(h.engine().FailNode(name).ok());
          oracle.NodeLost(name);
        }
      }
    }
    share_binds += oracle.stats().share_binds;
  }
  // The mixes must exercise what this test is about.
  if (ReplayingOneSeed()) return;
  EXPECT_GT(share_binds, 100);
  EXPECT_GT(evictions, 50);
  EXPECT_GT(shrinks, 50);
  EXPECT_GT(grows, 20);
  EXPECT_GT(held, 10);
  std::printf("whole-job evictions %d, shrinks %d, grows %d, preemptors held on releasing victims %d\n",
              evictions, shrinks, grows, held);
}

}  // namespace
}  // namespace ringmaster::testing
