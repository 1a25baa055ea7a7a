// The engine's fast paths (EngineOptions::fast_paths: the planner's count
// bound, exact wake-ups) change what a cycle costs, never what it decides.
// Two engines, fast paths on and off, get the same random contended events
// (gangs of mixed sizes and topology modes, two queues with capabilities,
// priorities, elastic jobs, walltimes, finishes and cancels) under every
// shipped policy; every cycle's decisions must be equal, pending reasons
// included. And NextWakeup's promise is checked against the engine without
// fast paths: a cycle before the wake-up it named, with no event since,
// decides nothing. The decision oracle (tests/support/decision_oracle.h)
// checks the fast twin's decisions on their own after every cycle. Seeds 1-6
// plus one drawn each run (tests/support/seeds.h).
#include <random>
#include <sstream>
#include <string>

#include "gtest/gtest.h"
#include "plugins/registry.h"
#include "scheduler/engine.h"
#include "tests/support/builders.h"
#include "tests/support/decision_oracle.h"
#include "tests/support/seeds.h"
#include "tests/support/source_dir.h"

namespace ringmaster::scheduler {
namespace {

using testing::ClusterBuilder;
using testing::DecisionOracle;
using testing::JobBuilder;

std::string Format(const Decisions& d) {
  std::ostringstream o;
  for (const Bind& b : d.binds) {
    o << "bind " << b.task_name << " " << b.node_name << " [";
    for (int16_t g : b.gpus) o << g << ",";
    o << "]\n";
  }
  for (const Eviction& e : d.evictions) {
    o << "evict " << e.task_name << " " << e.node_name << " kind " << static_cast<int>(e.kind) << "\n";
  }
  for (const PendingReason& p : d.pending) o << "pending " << p.job_name << ": " << p.reason << "\n";
  for (const MembershipChange& m : d.membership) {
    o << "member " << m.job_name << " gen " << m.generation << " kind " << static_cast<int>(m.kind) << " (" << m.reason
      << ")";
    for (const Member& x : m.members) o << " " << x.task_name << "@" << x.node_name;
    o << "\n";
  }
  return o.str();
}

Policy WithQueues(Policy p) {
  queue::QueueSpec a;
  a.name = "research";
  a.weight = 1;
  queue::QueueSpec b;
  b.name = "product";
  b.weight = 2;
  b.capability = Resources();
  b.capability->set_gpu_milli(24 * topology::kMilliPerGpu);
  b.capability->set_cpu_milli(1'000'000'000);
  b.capability->set_memory(int64_t{1} << 50);
  p.queues = {a, b};
  return p;
}

Policy Shipped(const std::string& name) {
  if (name == "default") return WithQueues(DefaultPolicy());
  if (name == "default+usageHalfLife") {
    // The default with time-decayed fair share between the two queues
    // (proportion's usageHalfLife, 10 min: several half-lives per scenario).
    Policy p = DefaultPolicy();
    for (auto& tier : p.tiers) {
      for (PluginConfig& c : tier) {
        if (c.name == "proportion") c.args = PluginArgs("proportion", "test", {{"usageHalfLife", {"600", 0, 0}}});
      }
    }
    return WithQueues(std::move(p));
  }
  if (name == "default+usageWeight") {
    // ... and deserved shares that read it (usageWeight 4: levels move
    // within a scenario, so deserved shares change between events).
    Policy p = DefaultPolicy();
    for (auto& tier : p.tiers) {
      for (PluginConfig& c : tier) {
        if (c.name == "proportion") {
          c.args = PluginArgs("proportion", "test", {{"usageHalfLife", {"600", 0, 0}}, {"usageWeight", {"4", 0, 0}}});
        }
      }
    }
    return WithQueues(std::move(p));
  }
  if (name == "default+learnedWalltime") {
    // The default with backfill on learned walltimes (a low bar: estimates
    // after 2 ended jobs, so scenarios reach them).
    Policy p = DefaultPolicy();
    p.action_args["backfill"] = PluginArgs("backfill", "test",
                                           {{"learnedWalltimePercentile", {"80", 0, 0}},
                                            {"learnedWalltimeMinSamples", {"2", 0, 0}}},
                                           "configurations");
    return WithQueues(std::move(p));
  }
  if (name == "default+stoppedAhead" || name == "default+freeHorizon" || name == "default+freeByNode" ||
      name == "default+freeGangCharge") {
    // The default's las on a scenario's time scale (levels at 1, 10 and 60
    // min, preemptAfter 2 min, levelCooldown 10 min) with the ways back for
    // stopped jobs (victimGpuExponent, stoppedPreempts, stoppedAhead), or the
    // preemption wait that reads expected ends (freeHorizon 10 min after 2
    // ended jobs: it reads the clock on the minute) with victims that serve
    // several (victimFill 4); with freeByNode, a gang's hold counts whole
    // nodes over its own horizon (freeGangHorizon 20 min); with
    // freeGangCharge, that hold ends once the jobs behind it waited 30 s per
    // GPU of it (read on the minute).
    std::map<std::string, PluginArgs::Value> las = {{"thresholds", {"60, 600, 3600", 0, 0}},
                                                    {"byTime", {"true", 0, 0}},
                                                    {"preemptAfter", {"120", 0, 0}},
                                                    {"levelCooldown", {"600", 0, 0}},
                                                    {"shrinkInCooldown", {"true", 0, 0}}};
    if (name == "default+stoppedAhead") {
      las.insert({{"victimGpuExponent", {"1", 0, 0}},
                  {"stoppedPreempts", {"false", 0, 0}},
                  {"stoppedAhead", {"true", 0, 0}}});
    } else {
      las.insert({{"freeHorizon", {"600", 0, 0}}, {"freeMinSamples", {"2", 0, 0}}, {"victimFill", {"4", 0, 0}}});
      if (name == "default+freeByNode" || name == "default+freeGangCharge") {
        las.insert({{"freeByNode", {"expected", 0, 0}}, {"freeGangHorizon", {"1200", 0, 0}}});
      }
      if (name == "default+freeGangCharge") las.insert({"freeGangCharge", {"30", 0, 0}});
    }
    Policy p = DefaultPolicy();
    for (auto& tier : p.tiers) {
      for (PluginConfig& c : tier) {
        if (c.name == "las") c.args = PluginArgs("las", "test", las);
      }
    }
    return WithQueues(std::move(p));
  }
  std::vector<queue::ConfigError> errors;
  auto p = LoadPolicyFile(testing::SourceDir() + "/examples/policies/" + name, plugins::BuiltinRegistry(), &errors);
  EXPECT_TRUE(p.ok()) << name << ": " << p.status();
  return WithQueues(p.ok() ? *std::move(p) : DefaultPolicy());
}

struct Twin {
  ManualClock clock;
  PluginRegistry registry = plugins::BuiltinRegistry();
  std::unique_ptr<Engine> engine;
  EngineOptions options;
  Twin(const topology::Cluster& cluster, const Policy& policy, bool fast, bool groups = true) {
    EngineOptions& o = options;
    o.check_invariants = true;
    o.fast_paths = fast;
    o.admission_groups = groups;
    auto e = Engine::Create(cluster, policy, registry, clock, o);
    EXPECT_TRUE(e.ok()) << e.status();
    engine = *std::move(e);
  }
};

JobSpec RandomJob(std::mt19937_64& rng, int i) {
  const int shapes[][2] = {{1, 1}, {1, 2}, {1, 4}, {1, 8}, {2, 8}, {4, 8}, {2, 4}, {3, 2}, {6, 8}};
  const auto& s = shapes[rng() % 9];
  JobBuilder b("j" + std::to_string(i));
  b.Gang(s[0]).GpusPerTask(s[1]);
  if (rng() % 5 == 0) b.Gang(2 + static_cast<int>(rng() % 3)).GpusPerTask(1).Elastic(1, 6);
  const int topo = static_cast<int>(rng() % 4);
  if (topo == 1) b.Hard(static_cast<int>(rng() % 2) + 1);
  if (topo == 2) b.Soft();
  b.Queue(rng() % 3 == 0 ? "product" : "research");
  if (rng() % 4 == 0) b.Priority(static_cast<int>(rng() % 3) * 5);
  if (rng() % 2 == 0) b.Walltime(static_cast<int64_t>(60'000 + rng() % 600'000));
  return b.Build();
}

// Runs `steps` steps of random events and cycles on both twins. Returns the
// number of cycles the fast twin's wake-ups would have skipped.
int64_t RunScenario(const std::string& policy_name, uint64_t seed, int steps) {
  const Policy policy = Shipped(policy_name);
  const topology::Cluster cluster = ClusterBuilder().Racks(2).NodesPerRack(2).Gpus(8).Build();
  // `fast` with enqueue's groups where the policy allows them, `ungrouped`
  // with the per-job admission memo only: both must decide as `slow`.
  Twin fast(cluster, policy, true), slow(cluster, policy, false), ungrouped(cluster, policy, true, false);
  DecisionOracle oracle(cluster, policy.queues, DecisionOracle::OptionsFor(policy, fast.options));
  std::mt19937_64 rng(seed);
  int next_job = 0;
  int64_t skipped = 0;
  std::string last;
  const std::string where = "policy " + policy_name + ", seed " + std::to_string(seed);
  for (int step = 0; step < steps; ++step) {
    // Time goes on by 1 s to 2 min; an event happens or not.
    const Timestamp dt = 1000 + static_cast<Timestamp>(rng() % 120'000);
    const Timestamp wake = fast.engine->NextWakeup();
    const int what = static_cast<int>(rng() % 6);
    std::vector<std::string> finish;
    if (what <= 1) {
      for (JobId id : fast.engine->state().active_jobs()) {
        const Job& j = fast.engine->state().job(id);
        if (j.phase() == JobPhase::kRunning && rng() % 3 == 0) finish.push_back(j.spec().name);
      }
    }
    std::vector<JobSpec> submit;
    if (what == 2 || what == 3) {
      const int n = 1 + static_cast<int>(rng() % 4);
      for (int k = 0; k < n; ++k) submit.push_back(RandomJob(rng, next_job++));
    }
    std::string cancel;
    if (what == 4 && next_job > 0) cancel = "j" + std::to_string(rng() % next_job);
    const bool event = !finish.empty() || !submit.empty() || !cancel.empty();
    for (Twin* t : {&fast, &slow, &ungrouped}) {
      t->clock.Advance(dt);
      for (const std::string& n : finish) {
        EXPECT_TRUE(t->engine->FinishJob(t->engine->FindJob(n), true).ok());
        if (t == &fast) oracle.JobFinished(t->engine->FindJob(n));
      }
      for (const JobSpec& s : submit) {
        auto id = t->engine->SubmitJob(s);
        EXPECT_TRUE(id.ok()) << id.status();
        if (id.ok() && t == &fast) oracle.Submitted(*id, s);
      }
      if (!cancel.empty() && t->engine->FindJob(cancel).valid()) (void)t->engine->CancelJob(t->engine->FindJob(cancel));
    }
    const Timestamp now = fast.clock.Now();
    const Decisions a = fast.engine->RunCycle();
    const Decisions b = slow.engine->RunCycle();
    const Decisions c = ungrouped.engine->RunCycle();
    absl::Status s = oracle.Apply(a, now);
    if (s.ok()) s = oracle.CompareWithState(fast.engine->state());
    EXPECT_TRUE(s.ok()) << where << ", step " << step << ": " << s.message();
    if (!s.ok()) return skipped;
    // Decisions list the reasons a cycle changed; every waiting job's
    // current one must match too (a remembered verdict keeps its reason).
    for (JobId id : slow.engine->state().active_jobs()) {
      const Job& js = slow.engine->state().job(id);
      const Job& jf = fast.engine->state().job(fast.engine->FindJob(js.name()));
      const Job& ju = ungrouped.engine->state().job(ungrouped.engine->FindJob(js.name()));
      EXPECT_EQ(jf.pending_reason(), js.pending_reason()) << where << ", step " << step << ", job " << js.name();
      EXPECT_EQ(ju.pending_reason(), js.pending_reason()) << where << ", step " << step << ", job " << js.name();
      if (jf.pending_reason() != js.pending_reason() || ju.pending_reason() != js.pending_reason()) return skipped;
    }
    const std::string fa = Format(a), fb = Format(b), fc = Format(c);
    EXPECT_EQ(fa, fb) << where << ", step " << step << " at " << now;
    EXPECT_EQ(fc, fb) << where << ", step " << step << " at " << now << " (without admission groups)";
    if (fa != fb || fc != fb) return skipped;
    if (!event && now < wake) {
      // The fast twin said nothing could be decided before `wake`.
      EXPECT_TRUE(b.empty()) << where << ", step " << step << ": NextWakeup said " << wake << ", but at " << now
                             << " the engine decided:\n"
                             << fb << "the cycle before decided:\n"
                             << last;
      ++skipped;
    }
    last = fb;
  }
  return skipped;
}

class FastPathsProperty : public ::testing::TestWithParam<std::string> {};

TEST_P(FastPathsProperty, RandomContendedEventsDecideTheSameWithAndWithout) {
  int64_t skipped = 0;
  for (uint32_t seed : testing::TestSeeds(testing::SeedRange(1, 6), 1)) {
    SCOPED_TRACE(testing::SeedTrace(seed));
    skipped += RunScenario(GetParam(), seed, 300);
    if (HasFailure()) return;
  }
  // Not a speed check: that NextWakeup's promise was put to the test.
  if (!testing::ReplayingOneSeed()) {
    EXPECT_GT(skipped, 0) << "no quiet cycle before a named wake-up";
  }
}

INSTANTIATE_TEST_SUITE_P(Shipped, FastPathsProperty,
                         ::testing::Values("fifo-gang.yaml", "sjf.yaml", "las.yaml", "ringmaster.yaml",
                                           "elastic.yaml", "tiresias-tuned.yaml", "las-tail.yaml", "default",
                                           "default+usageHalfLife", "default+usageWeight", "default+learnedWalltime",
                                           "default+stoppedAhead", "default+freeHorizon", "default+freeByNode",
                                           "default+freeGangCharge", "gittins.yaml"),
                         [](const auto& info) {
                           std::string n = info.param;
                           for (char& c : n) {
                             if (c == '.' || c == '-' || c == '+') c = '_';
                           }
                           return n;
                         });

}  // namespace
}  // namespace ringmaster::scheduler
