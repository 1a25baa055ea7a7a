// See fuzz_engine.h.
#include "fuzz/fuzz_engine.h"

#include <string>

#include "fuzz/fuzz_input.h"
#include "plugins/registry.h"
#include "scheduler/engine.h"
#include "tests/support/decision_oracle.h"
#include "topology/uniform_cluster.h"

namespace ringmaster::fuzz {

topology::Cluster SmallCluster() {
  topology::UniformClusterSpec spec;
  spec.nodes = 4;
  spec.gpus_per_node = 8;
  spec.nodes_per_rack = 2;
  auto cluster = topology::MakeUniformCluster(spec);
  if (!cluster.ok()) Fail("uniform cluster", cluster.status().ToString());
  return *std::move(cluster);
}

std::vector<scheduler::JobSpec> SampleJobs(const std::vector<std::string>& queues) {
  struct Shape {
    int replicas, gpus, size_min, size_max, priority;  // size: GangSize (0, 0: rigid)
    topology::Quantity milli;  // per GPU: < 1000 shares one
  };
  static constexpr Shape kShapes[] = {{2, 8, 0, 0, 0, 1000}, {4, 2, 2, 6, 0, 1000}, {1, 1, 0, 0, 5, 1000},
                                      {3, 8, 0, 0, 10, 1000}, {3, 1, 0, 0, 0, 500}, {2, 1, 1, 4, 5, 300}};
  std::vector<scheduler::JobSpec> jobs;
  int i = 0;
  for (const Shape& s : kShapes) {
    scheduler::JobSpec j;
    j.name = "job-" + std::to_string(i);
    j.queue = queues.empty() ? "default" : queues[i % queues.size()];
    j.priority = s.priority;
    j.size = {s.size_min, s.size_max};
    scheduler::RoleSpec role;
    role.name = "worker";
    role.replicas = s.replicas;
    role.gpu.count = s.gpus;
    role.gpu.milli = s.milli;
    role.request.set_cpu_milli(1000);
    j.roles.push_back(role);
    jobs.push_back(std::move(j));
    ++i;
  }
  return jobs;
}

void RunEngine(topology::Cluster cluster, const scheduler::Policy& policy,
               const std::vector<scheduler::JobSpec>& jobs) {
  static const scheduler::PluginRegistry registry = plugins::BuiltinRegistry();
  scheduler::ManualClock clock(0);
  scheduler::EngineOptions options;
  options.check_invariants = true;
  // The oracle recounts from the decisions alone (tests/support/decision_oracle.h).
  testing::DecisionOracle oracle(cluster, policy.queues, testing::DecisionOracle::OptionsFor(policy, options));
  auto engine = scheduler::Engine::Create(std::move(cluster), policy, registry, clock, options);
  if (!engine.ok()) return;
  std::vector<scheduler::JobId> ids;
  for (const scheduler::JobSpec& spec : jobs) {
    if (auto id = (*engine)->SubmitJob(spec); id.ok()) {
      ids.push_back(*id);
      oracle.Submitted(*id, spec);
    }
  }
  auto cycle = [&] {
    const scheduler::Timestamp now = clock.Now();
    const scheduler::Decisions d = (*engine)->RunCycle();
    if (absl::Status s = (*engine)->CheckInvariants(); !s.ok()) Fail("engine invariants", s.ToString());
    if (absl::Status s = oracle.Apply(d, now); !s.ok()) Fail("decision oracle", std::string(s.message()));
    if (absl::Status s = oracle.CompareWithState((*engine)->state()); !s.ok()) {
      Fail("engine state against the decisions", std::string(s.message()));
    }
    clock.Advance(10'000);
  };
  for (int i = 0; i < 3; ++i) cycle();
  if (!ids.empty()) (void)(*engine)->CancelJob(ids.front());
  if (ids.size() > 1 && (*engine)->FinishJob(ids[1], /*succeeded=*/true).ok()) oracle.JobFinished(ids[1]);
  for (int i = 0; i < 2; ++i) cycle();
}

}  // namespace ringmaster::fuzz
