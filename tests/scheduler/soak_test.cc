// The soak (docs/TESTING.md): 10^6 engine cycles in all (RINGMASTER_SOAK_CYCLES
// to change it), 250 per scenario, over random clusters (racks, spines,
// NVLink islands, labels, taints), random policies (a shipped one or random
// actions with grace periods, cooldowns and eviction caps), random queue
// trees with capabilities, random engine options (restart and cancel grace,
// fast paths), and a random stream of events: arrivals of gangs on whole
// GPUs, GPU shares or CPU only (elastic, min-member, hard and soft topology,
// selectors, tolerations, two roles), finishes, cancels, task failures,
// releases of leaving tasks, lost and added nodes, time passing. After every
// cycle the decision oracle (tests/support/decision_oracle.h) checks the
// decisions on their own, the engine's state must agree with it, and
// State::CheckInvariants must hold.
//
// Not in the default run: without RINGMASTER_SOAK=1 it skips.
//   RINGMASTER_SOAK=1 ctest --test-dir build/ci -L soak --output-on-failure
// Every scenario has its seed (fixed 1-20, then drawn); a failure names it,
// RINGMASTER_TEST_SEED=N replays that scenario alone.
#include <gtest/gtest.h>

#include <chrono>
#include <cstdlib>
#include <random>
#include <string>
#include <vector>

#include "plugins/registry.h"
#include "scheduler/engine.h"
#include "tests/support/builders.h"
#include "tests/support/decision_oracle.h"
#include "tests/support/seeds.h"
#include "tests/support/source_dir.h"

namespace ringmaster::testing {
namespace {

using scheduler::JobId;
using scheduler::JobPhase;
using scheduler::TaskState;
using scheduler::Timestamp;
using topology::Resources;

constexpr int kCyclesPerScenario = 250;

struct Totals {
  int64_t cycles = 0, binds = 0, share_binds = 0, evictions = 0, shrinks = 0, graced = 0;
  int64_t nodes_lost = 0, nodes_added = 0, task_failures = 0, cancels = 0, finishes = 0;
  int64_t shared_gpu_peak = 0;
};

class Rng {
 public:
  explicit Rng(uint32_t seed) : rng_(seed) {}
  int operator()(int lo, int hi) { return std::uniform_int_distribution<int>(lo, hi)(rng_); }
  bool OneIn(int n) { return (*this)(1, n) == 1; }

 private:
  std::mt19937 rng_;
};

Resources Capability(int64_t gpus) {
  Resources r(topology::kUnlimited, topology::kUnlimited, gpus * topology::kMilliPerGpu);
  return r;
}

// Leaf queues a, b, c; sometimes a and b under a parent "org" with a
// capability of its own.
std::vector<queue::QueueSpec> RandomQueues(Rng& pick) {
  std::vector<queue::QueueSpec> qs;
  const bool tree = pick.OneIn(3);
  if (tree) {
    queue::QueueSpec org;
    org.name = "org";
    org.weight = pick(1, 3);
    if (pick(0, 1)) org.capability = Capability(pick(4, 24));
    qs.push_back(org);
  }
  for (const char* name : {"a", "b", "c"}) {
    queue::QueueSpec q;
    q.name = name;
    q.weight = pick(1, 3);
    if (tree && name[0] != 'c') q.parent = "org";
    if (pick.OneIn(3)) {
      q.capability = Capability(pick(2, 32));
      if (pick.OneIn(3)) q.capability->set_cpu_milli(pick(8, 64) * 1000);
    }
    if (!tree && pick.OneIn(4)) {
      q.guarantee.set_gpu_milli(pick(1, 2) * topology::kMilliPerGpu);
      if (q.capability && !q.guarantee.LessEqual(*q.capability)) q.guarantee = Resources();
    }
    q.reclaimable = !pick.OneIn(5);
    qs.push_back(q);
  }
  return qs;
}

scheduler::Policy RandomPolicy(Rng& pick) {
  scheduler::Policy p;
  if (pick.OneIn(3)) {
    static const char* kShipped[] = {"fifo-gang.yaml", "sjf.yaml",           "las.yaml",     "ringmaster.yaml",
                                     "elastic.yaml",   "tiresias-tuned.yaml", "las-tail.yaml"};
    std::vector<queue::ConfigError> errors;
    auto loaded = scheduler::LoadPolicyFile(SourceDir() + "/examples/policies/" + kShipped[pick(0, 6)],
                                            plugins::BuiltinRegistry(), &errors);
    EXPECT_TRUE(loaded.ok()) << loaded.status();
    if (loaded.ok()) p = *std::move(loaded);
  } else {
    std::string actions = "enqueue, allocate", configurations;
    const std::string evict = "{gracePeriod: " + std::to_string(pick(0, 2) * 2) +
                              ", cooldown: " + std::to_string(pick(0, 1) * 3) +
                              ", maxEvictionsPerCycle: " + std::to_string(pick(0, 1) * pick(1, 8)) + "}";
    const std::string elastic = "{growIdle: " + std::to_string(pick(0, 3)) + ", cooldown: " + std::to_string(pick(0, 3)) + "}";
    for (const char* a : {"preempt", "reclaim", "elastic", "backfill"}) {
      if (!pick(0, 1)) continue;
      actions += std::string(", ") + a;
      const std::string name = a;
      if (name == "preempt" || name == "reclaim") configurations += "- {name: " + name + ", arguments: " + evict + "}\n";
      if (name == "elastic") configurations += "- {name: elastic, arguments: " + elastic + "}\n";
    }
    p = PolicyFromYaml("actions: \"" + actions + "\"\n" + (configurations.empty() ? "" : "configurations:\n" + configurations));
  }
  p.queues = RandomQueues(pick);
  return p;
}

topology::Cluster RandomCluster(Rng& pick) {
  ClusterBuilder cb;
  const int racks = pick(1, 4), per_rack = pick(1, 6);
  static const int kGpus[] = {1, 2, 4, 8};
  cb.Racks(racks).NodesPerRack(per_rack).Gpus(kGpus[pick(0, 3)]).GpusPerIsland(pick(0, 1) * 2);
  if (pick(0, 1)) cb.RacksPerSpine(pick(1, 2));
  cb.CpuPerNode(pick(16, 128) * 1000);
  for (int n = 0; n < racks * per_rack; ++n) {
    if (pick.OneIn(4)) cb.Label(n, "pool", pick(0, 1) ? "x" : "y");
    if (pick.OneIn(8)) cb.Taint(n, "dedicated", "infer");
  }
  return cb.Build();
}

scheduler::JobSpec RandomJob(Rng& pick, const std::string& name) {
  JobBuilder jb(name);
  const int gang = pick(1, 6);
  static const char* kLeaves[] = {"a", "b", "c"};
  jb.Gang(gang).Queue(kLeaves[pick(0, 2)]).Priority(pick(0, 3)).CpuPerTask(pick(0, 8) * 1000);
  switch (pick(0, 5)) {
    case 0:
    case 1: jb.GpuShare(pick(1, 9) * 100); break;
    case 2: break;  // CPU only
    default: {
      static const int kWhole[] = {1, 1, 2, 4, 8};
      jb.GpusPerTask(kWhole[pick(0, 4)]);
    }
  }
  const bool elastic = gang > 1 && pick.OneIn(3);
  if (elastic) {
    jb.Elastic(pick(1, gang), gang + pick(0, 3));
  } else if (gang > 1 && pick.OneIn(4)) {
    jb.MinMember(pick(1, gang));
  }
  const int topo = pick(0, 5);
  if (topo == 0) jb.Hard(pick(0, 3));
  if (topo == 1) jb.Soft();
  if (pick.OneIn(10)) jb.Selector("pool", pick(0, 1) ? "x" : "y");
  if (pick.OneIn(8)) jb.Tolerate("dedicated", "infer");
  if (pick.OneIn(3)) jb.Walltime(pick(1, 120) * 1000);
  scheduler::JobSpec spec = jb.Build();
  if (!elastic && spec.size.min == 0 && pick.OneIn(10)) {
    scheduler::RoleSpec ps;  // a second role: a CPU-only parameter server
    ps.name = "ps";
    ps.replicas = pick(1, 2);
    ps.request.set_cpu_milli(1000);
    ps.gpu.count = 0;
    spec.roles.push_back(ps);
  }
  return spec;
}

// One scenario of kCyclesPerScenario cycles; stops at the first broken check.
void RunScenario(uint32_t seed, Totals& totals) {
  Rng pick(seed);
  const topology::Cluster cluster = RandomCluster(pick);
  const scheduler::Policy policy = RandomPolicy(pick);
  scheduler::EngineOptions options;
  options.check_invariants = false;  // checked below, with a message instead of an abort
  options.restart_grace_ms = pick(0, 1) * 3000;
  options.cancel_grace_ms = pick(0, 1) * 2000;
  options.fast_paths = !pick.OneIn(4);
  scheduler::ManualClock clock(0);
  const scheduler::PluginRegistry registry = plugins::BuiltinRegistry();
  auto created = scheduler::Engine::Create(cluster, policy, registry, clock, options);
  ASSERT_TRUE(created.ok()) << created.status();
  scheduler::Engine& engine = **created;
  DecisionOracle oracle(cluster, policy.queues, DecisionOracle::OptionsFor(policy, options));
  int next_job = 0, next_node = 0;
  for (int cycle = 0; cycle < kCyclesPerScenario; ++cycle) {
    SCOPED_TRACE("cycle " + std::to_string(cycle));
    for (int k = pick.OneIn(2) ? pick(1, 3) : 0; k > 0; --k) {
      const scheduler::JobSpec spec = RandomJob(pick, "j" + std::to_string(next_job++));
      auto id = engine.SubmitJob(spec);
      ASSERT_TRUE(id.ok()) << id.status();
      oracle.Submitted(*id, spec);
    }
    const Timestamp now = clock.Now();
    const scheduler::Decisions d = engine.RunCycle();
    const scheduler::State& st = engine.state();
    absl::Status s = oracle.Apply(d, now);
    ASSERT_TRUE(s.ok()) << s.message();
    s = oracle.CompareWithState(st);
    ASSERT_TRUE(s.ok()) << "the state disagrees with the decisions: " << s.message();
    s = st.CheckInvariants();
    ASSERT_TRUE(s.ok()) << s.message();
    ++totals.cycles;

    // Events until the next cycle.
    clock.Advance(pick.OneIn(10) ? pick(5, 30) * 1000 : pick(1, 3000));
    std::vector<JobId> running, active;
    std::vector<std::pair<JobId, uint32_t>> started, leaving;
    for (JobId id : st.active_jobs()) {
      const scheduler::Job& j = st.job(id);
      active.push_back(id);
      if (j.phase() == JobPhase::kRunning) running.push_back(id);
      for (const scheduler::Task& t : j.tasks()) {
        if (t.state == TaskState::kRunning || t.state == TaskState::kBound) started.push_back({id, t.index});
        if (t.state == TaskState::kReleasing) leaving.push_back({id, t.index});
      }
    }
    auto any = [&](const auto& v) { return v[pick(0, static_cast<int>(v.size()) - 1)]; };
    if (!running.empty() && pick.OneIn(3)) {
      const JobId j = any(running);
      ASSERT_TRUE(engine.FinishJob(j, !pick.OneIn(5)).ok());
      oracle.JobFinished(j);
      ++totals.finishes;
    }
    if (!active.empty() && pick.OneIn(12)) {
      const JobId j = any(active);
      if (st.active_jobs().count(j)) {
        ASSERT_TRUE(engine.CancelJob(j).ok());
        ++totals.cancels;
      }
    }
    if (!started.empty() && pick.OneIn(15)) {
      const auto [j, t] = any(started);
      const TaskState ts = st.active_jobs().count(j) ? st.job(j).task(t).state : TaskState::kFailed;
      if (ts == TaskState::kRunning || ts == TaskState::kBound) {
        ASSERT_TRUE(engine.TaskFailed(j, t, "exited 1").ok());
        oracle.TaskFailed(j, t);
        ++totals.task_failures;
      }
    }
    if (!leaving.empty() && pick(0, 1)) {
      const auto [j, t] = any(leaving);
      if (st.active_jobs().count(j) && st.job(j).task(t).state == TaskState::kReleasing) {
        ASSERT_TRUE(engine.TaskReleased(j, t).ok());
        oracle.TaskReleased(j, t);
      }
    }
    if (pick.OneIn(40)) {
      const topology::NodeId n(static_cast<uint32_t>(pick(0, static_cast<int>(st.num_nodes()) - 1)));
      if (st.node(n).schedulable) {
        const std::string name = st.cluster().node(n).name;
        ASSERT_TRUE(engine.FailNode(name).ok());
        oracle.NodeLost(name);
        ++totals.nodes_lost;
      }
    }
    if (pick.OneIn(40)) {
      // A node like an existing one, in its domains, under a new name.
      topology::NodeSpec spec =
          st.cluster().node(topology::NodeId(static_cast<uint32_t>(pick(0, static_cast<int>(st.num_nodes()) - 1))));
      spec.name = "added-" + std::to_string(next_node++);
      auto id = engine.AddNode(spec);
      ASSERT_TRUE(id.ok()) << id.status();
      oracle.NodeAdded(spec);
      ++totals.nodes_added;
    }
  }
  const DecisionOracle::Stats& os = oracle.stats();
  totals.binds += os.binds;
  totals.share_binds += os.share_binds;
  totals.evictions += os.evictions;
  totals.shrinks += os.shrinks;
  totals.graced += os.graced;
  totals.shared_gpu_peak = std::max(totals.shared_gpu_peak, os.shared_gpu_peak);
}

TEST(SchedulingSoak, MillionCyclesAgainstTheDecisionOracle) {
  if (std::getenv("RINGMASTER_SOAK") == nullptr) {
    GTEST_SKIP() << "the soak runs with RINGMASTER_SOAK=1 (ctest -L soak; docs/TESTING.md)";
  }
  int64_t cycles = 1'000'000;
  if (const char* c = std::getenv("RINGMASTER_SOAK_CYCLES")) cycles = std::atoll(c);
  const int scenarios = static_cast<int>((cycles + kCyclesPerScenario - 1) / kCyclesPerScenario);
  const auto start = std::chrono::steady_clock::now();
  Totals totals;
  std::vector<uint32_t> failed;
  for (uint32_t seed : TestSeeds(SeedRange(1, 20), std::max(scenarios - 20, 0))) {
    SCOPED_TRACE(SeedTrace(seed));
    const ::testing::TestResult* result = ::testing::UnitTest::GetInstance()->current_test_info()->result();
    const int parts = result->total_part_count();  // failures so far (nothing else records parts here)
    RunScenario(seed, totals);
    if (result->total_part_count() > parts) failed.push_back(seed);
    if (failed.size() >= 5) break;  // enough to go on with
  }
  const double s = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  std::printf(
      "soak: %lld cycles in %.1f s (%.1f us/cycle); binds %lld (GPU shares %lld, up to %lld tasks on one GPU), "
      "evictions %lld (shrinks %lld, with grace %lld), finishes %lld, cancels %lld, task failures %lld, nodes lost "
      "%lld, added %lld; failing seeds: %zu\n",
      static_cast<long long>(totals.cycles), s, 1e6 * s / std::max<int64_t>(totals.cycles, 1),
      static_cast<long long>(totals.binds), static_cast<long long>(totals.share_binds),
      static_cast<long long>(totals.shared_gpu_peak), static_cast<long long>(totals.evictions),
      static_cast<long long>(totals.shrinks), static_cast<long long>(totals.graced),
      static_cast<long long>(totals.finishes), static_cast<long long>(totals.cancels),
      static_cast<long long>(totals.task_failures), static_cast<long long>(totals.nodes_lost),
      static_cast<long long>(totals.nodes_added), failed.size());
  for (uint32_t f : failed) std::printf("soak: failing seed %u\n", f);
}

}  // namespace
}  // namespace ringmaster::testing
