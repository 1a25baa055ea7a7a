// Builders for tests and benchmarks:
//   ClusterBuilder().Racks(2).NodesPerRack(4).Gpus(8).Build()
//   JobBuilder("j1").Gang(4).GpusPerTask(8).Build()
//   EngineHarness h(cluster); h.Submit(job); h.Cycle();
#ifndef RINGMASTER_TESTS_SUPPORT_BUILDERS_H_
#define RINGMASTER_TESTS_SUPPORT_BUILDERS_H_

#include <memory>
#include <string>
#include <vector>

#include "plugins/registry.h"
#include "scheduler/engine.h"
#include "topology/uniform_cluster.h"

namespace ringmaster::testing {

class ClusterBuilder {
 public:
  ClusterBuilder& Racks(int n) { racks_ = n; return *this; }
  ClusterBuilder& NodesPerRack(int n) { spec_.nodes_per_rack = n; return *this; }
  ClusterBuilder& RacksPerSpine(int n) { spec_.racks_per_spine = n; return *this; }
  ClusterBuilder& Gpus(int n) { spec_.gpus_per_node = n; return *this; }
  ClusterBuilder& GpusPerIsland(int n) { spec_.gpus_per_island = n; return *this; }
  ClusterBuilder& Model(std::string m) { spec_.gpu_model = std::move(m); return *this; }
  ClusterBuilder& CpuPerNode(topology::Quantity milli) { spec_.cpu_milli_per_node = milli; return *this; }
  // Labels / taints for node i, applied after the shape is built.
  ClusterBuilder& Label(int node, std::string k, std::string v);
  ClusterBuilder& Taint(int node, std::string k, std::string v);
  topology::Cluster Build() const;

 private:
  int racks_ = 1;
  topology::UniformClusterSpec spec_{.nodes = 4, .nodes_per_rack = 4};
  std::vector<std::tuple<int, std::string, std::string, bool>> marks_;
};

class JobBuilder {
 public:
  explicit JobBuilder(std::string name) { spec_.name = std::move(name); spec_.roles.push_back({}); }
  JobBuilder& Gang(int n) { spec_.roles[0].replicas = n; return *this; }
  JobBuilder& MinMember(int n) { spec_.size.min = n; return *this; }  // of a rigid gang: call without Elastic
  JobBuilder& GpusPerTask(int n) { spec_.roles[0].gpu = {n, topology::kMilliPerGpu}; return *this; }
  JobBuilder& GpuShare(topology::Quantity milli) { spec_.roles[0].gpu = {1, milli}; return *this; }
  JobBuilder& CpuPerTask(topology::Quantity milli) { spec_.roles[0].request.set_cpu_milli(milli); return *this; }
  JobBuilder& Queue(std::string q) { spec_.queue = std::move(q); return *this; }
  JobBuilder& Priority(int p) { spec_.priority = p; return *this; }
  JobBuilder& Elastic(int min, int max) { spec_.size = {min, max}; return *this; }
  JobBuilder& Hard(int tier) { spec_.topology_mode = scheduler::TopologyMode::kHard; spec_.highest_tier = tier; return *this; }
  JobBuilder& Soft() { spec_.topology_mode = scheduler::TopologyMode::kSoft; return *this; }
  JobBuilder& Model(std::string m) { spec_.gpu_models = {std::move(m)}; return *this; }
  JobBuilder& Selector(std::string k, std::string v) { spec_.node_selector[k] = v; return *this; }
  JobBuilder& Tolerate(std::string k, std::string v) {
    spec_.tolerations.push_back({std::move(k), scheduler::TolerationOp::kEqual, std::move(v), ""});
    return *this;
  }
  JobBuilder& Walltime(int64_t ms) { spec_.walltime_ms = ms; return *this; }
  scheduler::JobSpec Build() const { return spec_; }

 private:
  scheduler::JobSpec spec_;
};

// An engine on a manual clock with the built-in plugins and a policy.
class EngineHarness {
 public:
  explicit EngineHarness(topology::Cluster cluster,
                         scheduler::Policy policy = scheduler::DefaultPolicy(),
                         bool check_invariants = true, bool admission_groups = true);
  scheduler::Engine& engine() { return *engine_; }
  const scheduler::State& state() const { return engine_->state(); }
  scheduler::ManualClock& clock() { return clock_; }
  scheduler::JobId Submit(const scheduler::JobSpec& spec);
  scheduler::Decisions Cycle();
  const scheduler::Job& job(const std::string& name) const;
  bool Running(const std::string& name) const;
  // Whole GPUs held by the job.
  int64_t GpusOf(const std::string& name) const;

 private:
  scheduler::ManualClock clock_;
  scheduler::PluginRegistry registry_;
  std::unique_ptr<scheduler::Engine> engine_;
};

// For jobs that each take the whole cluster: finishes `running`, runs a
// cycle a second later, and notes which of `waiting` runs now; again until
// none does. Returns the order in which the waiting jobs started.
std::vector<std::string> StartOrder(EngineHarness& h, std::string running, const std::vector<std::string>& waiting);

// Parses policy YAML with the built-in registry; aborts the test on error.
scheduler::Policy PolicyFromYaml(const std::string& yaml);

}  // namespace ringmaster::testing

#endif  // RINGMASTER_TESTS_SUPPORT_BUILDERS_H_
