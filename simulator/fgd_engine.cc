// The FGD protocol driven through scheduler::Engine (see fgd_protocol.h).
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "plugins/registry.h"
#include "scheduler/clock.h"
#include "scheduler/engine.h"
#include "scheduler/gpu_view.h"
#include "scheduler/policy.h"
#include "simulator/fgd_protocol.h"

namespace ringmaster::simulator {
namespace {

// The task classes FGD measures against (and gpu-share's given workload).
std::vector<topology::TaskClass> MeasuredClasses(const std::vector<OpenbPod>& pods, const FgdOptions& options) {
  return options.typical_pct > 0 ? TypicalTaskClasses(pods, options.typical_pct) : TaskClassesOf(pods);
}

}  // namespace

FgdOptions AuthorsLoop(FgdOptions options) {
  options.nodes_to_score = 0;
  options.ties = "lowest";
  options.score = "exact";
  options.typical_pct = 100;
  return options;
}

std::string FgdPolicyYaml(const std::vector<OpenbPod>& pods, const FgdOptions& options) {
  std::string args = absl::StrCat("      policy: ", std::string(topology::SharePolicyName(options.policy)),
                                  "\n      seed: ", options.seed, "\n      score: ", options.score,
                                  "\n      ties: ", options.ties, "\n");
  if (options.typical_pct > 0) {
    absl::StrAppend(&args, "      workload: \"", topology::FormatTaskClasses(MeasuredClasses(pods, options)),
                    "\"\n");
  } else {
    absl::StrAppend(&args, "      halfLife: ", options.half_life, "\n      relearnPct: ", options.relearn_pct,
                    "\n");
  }
  return absl::StrCat("actions: \"enqueue, allocate\"\nnodesToScore: ", options.nodes_to_score,
                      "\ntiers:\n- plugins:\n  - name: gang\n- plugins:\n  - name: predicates\n"
                      "  - name: gpu-share\n    arguments:\n",
                      args);
}

absl::StatusOr<FgdResult> RunFgdProtocol(const std::vector<topology::NodeSpec>& nodes,
                                         const std::vector<OpenbPod>& pods, const FgdOptions& options) {
  if (nodes.empty()) return absl::InvalidArgumentError("FGD protocol: no nodes");
  if (pods.empty()) return absl::InvalidArgumentError("FGD protocol: no pods");
  RM_ASSIGN_OR_RETURN(auto model, topology::FragmentationModel::Create(MeasuredClasses(pods, options)));
  RM_ASSIGN_OR_RETURN(auto cluster, topology::Cluster::Build({}, nodes));

  const scheduler::PluginRegistry registry = plugins::BuiltinRegistry();
  std::vector<queue::ConfigError> errors;
  RM_ASSIGN_OR_RETURN(auto policy,
                      scheduler::ParsePolicy(FgdPolicyYaml(pods, options), "fgd-protocol-policy", registry, &errors));
  scheduler::ManualClock clock;
  RM_ASSIGN_OR_RETURN(auto engine, scheduler::Engine::Create(std::move(cluster), policy, registry, clock));
  scheduler::Engine& e = *engine;
  const topology::Cluster& c = e.state().cluster();

  FgdResult r;
  r.nodes = static_cast<int64_t>(c.num_nodes());
  for (const topology::NodeSpec& n : c.nodes()) r.capacity_milli += static_cast<int64_t>(n.gpus.size()) * 1000;
  if (r.capacity_milli == 0) return absl::InvalidArgumentError("FGD protocol: the cluster has no GPUs");

  // Expected fragmentation per node, from the engine's state.
  auto frag_of = [&](topology::NodeId n) {
    return model.NodeFragmentation(scheduler::NodeGpuView(e.state(), n).get());
  };
  std::vector<double> frag(c.num_nodes());
  double total_frag = 0;
  for (uint32_t i = 0; i < c.num_nodes(); ++i) total_frag += frag[i] = frag_of(topology::NodeId(i));
  auto record = [&] {
    const double cap = static_cast<double>(r.capacity_milli);
    r.curve.push_back({100.0 * static_cast<double>(r.arrived_milli) / cap,
                       100.0 * static_cast<double>(r.allocated_milli) / cap, 100.0 * total_frag / cap});
  };

  const std::vector<uint32_t> order = SampleArrivals(pods, r.capacity_milli, options);
  if (order.empty()) return absl::InvalidArgumentError("FGD protocol: no pod requests a GPU");
  int next_pct = 0;
  for (uint32_t k : order) {
    const OpenbPod& pod = pods[k];
    scheduler::JobSpec spec;
    spec.name = absl::StrCat("pod-", r.pods);
    scheduler::RoleSpec role;
    role.request = topology::Resources(pod.cpu_milli, pod.memory, 0);
    role.gpu = {pod.num_gpu, pod.num_gpu > 0 ? pod.gpu_milli : topology::kMilliPerGpu};
    spec.roles.push_back(role);
    spec.gpu_models = pod.gpu_models;
    RM_ASSIGN_OR_RETURN(auto id, e.SubmitJob(std::move(spec)));
    clock.Advance(1);
    e.RunCycle();
    const scheduler::Job& job = e.state().job(id);
    r.arrived_milli += pod.num_gpu * pod.gpu_milli;
    ++r.pods;
    const topology::NodeId node = job.task(0).node;
    if (job.phase() == scheduler::JobPhase::kRunning && node.valid()) {
      r.allocated_milli += pod.num_gpu * pod.gpu_milli;
      total_frag -= frag[node.value()];
      frag[node.value()] = frag_of(node);
      total_frag += frag[node.value()];
    } else {
      ++r.failed_pods;
      RM_RETURN_IF_ERROR(e.CancelJob(id));
    }
    while (100 * r.arrived_milli >= static_cast<int64_t>(next_pct) * r.capacity_milli) {
      record();
      ++next_pct;
    }
  }
  record();
  r.gpu_alloc_ratio = r.curve.back().alloc_pct;
  r.arrived_ratio = r.curve.back().arrived_pct;
  r.frag_pct = r.curve.back().frag_pct;
  return r;
}

}  // namespace ringmaster::simulator
