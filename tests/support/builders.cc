#include "tests/support/builders.h"

#include <cstdlib>
#include <iostream>

namespace ringmaster::testing {

ClusterBuilder& ClusterBuilder::Label(int node, std::string k, std::string v) {
  marks_.emplace_back(node, std::move(k), std::move(v), false);
  return *this;
}

ClusterBuilder& ClusterBuilder::Taint(int node, std::string k, std::string v) {
  marks_.emplace_back(node, std::move(k), std::move(v), true);
  return *this;
}

topology::Cluster ClusterBuilder::Build() const {
  topology::UniformClusterSpec s = spec_;
  s.nodes = racks_ * (s.nodes_per_rack > 0 ? s.nodes_per_rack : 1);
  auto c = topology::MakeUniformCluster(s);
  if (!c.ok()) {
    std::cerr << c.status() << "\n";
    std::abort();
  }
  if (marks_.empty()) return *std::move(c);
  std::vector<topology::NodeSpec> nodes = c->nodes();
  for (const auto& [i, k, v, taint] : marks_) {
    if (taint) {
      nodes[i].taints.push_back({k, v, topology::TaintEffect::kNoSchedule});
    } else {
      nodes[i].labels[k] = v;
    }
  }
  return *topology::Cluster::Build(c->tiers(), std::move(nodes));
}

EngineHarness::EngineHarness(topology::Cluster cluster, scheduler::Policy policy, bool check, bool groups)
    : registry_(plugins::BuiltinRegistry()) {
  scheduler::EngineOptions opts;
  opts.check_invariants = check;
  opts.admission_groups = groups;
  auto e = scheduler::Engine::Create(std::move(cluster), policy, registry_, clock_, opts);
  if (!e.ok()) {
    std::cerr << e.status() << "\n";
    std::abort();
  }
  engine_ = *std::move(e);
}

scheduler::JobId EngineHarness::Submit(const scheduler::JobSpec& spec) {
  auto id = engine_->SubmitJob(spec);
  if (!id.ok()) {
    std::cerr << id.status() << "\n";
    std::abort();
  }
  clock_.Advance(1);
  return *id;
}

scheduler::Decisions EngineHarness::Cycle() {
  auto d = engine_->RunCycle();
  clock_.Advance(1000);
  return d;
}

const scheduler::Job& EngineHarness::job(const std::string& name) const {
  return engine_->state().job(engine_->FindJob(name));
}

bool EngineHarness::Running(const std::string& name) const {
  return job(name).phase() == scheduler::JobPhase::kRunning;
}

int64_t EngineHarness::GpusOf(const std::string& name) const {
  return job(name).allocated().gpu_milli() / topology::kMilliPerGpu;
}

std::vector<std::string> StartOrder(EngineHarness& h, std::string running, const std::vector<std::string>& waiting) {
  std::vector<std::string> order;
  while (order.size() < waiting.size()) {
    if (!h.engine().FinishJob(h.job(running).id(), true).ok()) break;
    h.clock().Advance(1'000);
    h.Cycle();
    running.clear();
    for (const std::string& n : waiting) {
      if (h.Running(n)) running = n;
    }
    if (running.empty()) break;
    order.push_back(running);
  }
  return order;
}

scheduler::Policy PolicyFromYaml(const std::string& yaml) {
  std::vector<queue::ConfigError> errors;
  auto p = scheduler::ParsePolicy(yaml, "test.yaml", plugins::BuiltinRegistry(), &errors);
  if (!p.ok()) {
    std::cerr << p.status() << "\n";
    std::abort();
  }
  return *std::move(p);
}

}  // namespace ringmaster::testing
