// The FGD experiment protocol (Weng et al., USENIX ATC'23, on the Alibaba
// openb cluster), as its authors ran it:
//   1. The cluster is a node list (openb_node_list_gpu_node.csv: 1213 nodes,
//      6212 GPUs).
//   2. Pods are drawn uniformly WITH replacement from a pod list until the
//      next one would push the summed GPU request past `tune` x the
//      cluster's GPU capacity; then their order is shuffled.
//   3. Pods are placed one by one and never depart; a pod that fits nowhere
//      is counted as failed and skipped.
//   4. After each pod: GPU allocation ratio and expected fragmentation (of
//      the pod list's task-size distribution) against the arrived GPU
//      request, all in percent of GPU capacity.
//
// Placement goes through scheduler::Engine: every pod is a one-task job,
// with its allowed GPU models, submitted with the policy "enqueue,
// allocate" and the plugins gang, predicates and gpu-share (plugins/
// gpu_share.h: the placement policies of topology/fragmentation.h, FGD,
// BestFit, DotProd, GpuClustering, GpuPacking, Random); one cycle per pod;
// a pod the cycle leaves pending is cancelled and counted as failed. GPUs of
// an openb node are interchangeable (the list has no link data). The policy
// (FgdPolicyYaml) is ringmaster's scheduler by default: the planner scores
// the first nodesToScore feasible nodes in best-fit order and gpu-share
// learns the workload from the pods submitted so far (it is not told the
// pod list). AuthorsLoop() turns it into the FGD authors' scheduler loop, a
// fidelity replay of the published measure: every node scored
// (nodesToScore 0), ties to the lowest node index (gpu-share's ties), the
// pod list's task classes as the workload; their runs also had the integer
// FGD score (score "authors") and the classes covering 95 % of the pods
// (typical_pct 95). Deterministic: the same inputs and seed give the same
// output.
#ifndef RINGMASTER_SIMULATOR_FGD_PROTOCOL_H_
#define RINGMASTER_SIMULATOR_FGD_PROTOCOL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/session.h"
#include "topology/cluster.h"
#include "topology/fragmentation.h"

namespace ringmaster::simulator {

// One pod (task) of an openb pod list.
struct OpenbPod {
  std::string name;
  topology::Quantity cpu_milli = 0;
  topology::Quantity memory = 0;  // bytes
  int num_gpu = 0;
  topology::Quantity gpu_milli = 0;     // per GPU
  std::vector<std::string> gpu_models;  // allowed models (gpu_spec); empty = any
};

// Parses an openb pod list: the columns name, cpu_milli, memory_mib, num_gpu,
// gpu_milli are required (found by header name), gpu_spec is optional, the
// rest is ignored. Errors name file:line, the column and the text.
absl::StatusOr<std::vector<OpenbPod>> ParseOpenbPodList(std::string_view text, std::string_view filename);
absl::StatusOr<std::vector<OpenbPod>> ReadOpenbPodList(const std::string& path);

// The workload's task classes (popularity = frequency in the pod list).
std::vector<topology::TaskClass> TaskClassesOf(const std::vector<OpenbPod>& pods);

struct FgdOptions {
  topology::SharePolicy policy = topology::SharePolicy::kFgd;
  double tune = 1.3;  // arrived GPU request / capacity at which arrivals stop
  uint64_t seed = 42;
  // gpu-share's `ties`: planner (the earlier candidate in best-fit order),
  // lowest (node index) or random (seeded uniform draw, what upstream
  // Kubernetes' selectHost does).
  std::string ties = "planner";
  // gpu-share's `score`: normalized, exact, or authors (fgd only: the FGD
  // authors' integer score, AuthorsFgdScore of the fragmentation drop).
  std::string score = "normalized";
  // > 0: gpu-share's `workload` is given: the most popular task classes of
  // the pod list that together cover this share (%) of its pods (the
  // authors' runs: 95, their "typical pods"; 100 = every class), also the
  // measure's; 0: gpu-share learns it (halfLife, relearnPct) and the measure
  // uses every class.
  double typical_pct = 0;
  // gpu-share's relearnPct (how often the plugin rebuilds its model of a
  // learned workload; 0 = on every new pod).
  int relearn_pct = 0;
  // gpu-share's halfLife (tasks; 0 = never forget), for a learned workload.
  int half_life = 1;
  // The policy's nodesToScore (0 = every feasible node).
  int nodes_to_score = scheduler::kDefaultNodesToScore;
};

// The FGD authors' scheduler loop (the former `--driver direct`): every node
// scored, ties to the lowest node index, the exact score, the workload given
// as every task class of the pod list. Policy, tune and seed are kept.
FgdOptions AuthorsLoop(FgdOptions options);

// The pod list's task classes, popularity = pod count, most popular first,
// cut after the classes covering `typical_pct` % of the pods.
std::vector<topology::TaskClass> TypicalTaskClasses(const std::vector<OpenbPod>& pods, double typical_pct);

// The engine policy (YAML) the protocol runs with these options.
std::string FgdPolicyYaml(const std::vector<OpenbPod>& pods, const FgdOptions& options);

struct FgdCurvePoint {
  double arrived_pct = 0;  // arrived GPU request / capacity
  double alloc_pct = 0;    // allocated GPU milli / capacity
  double frag_pct = 0;     // expected fragmented GPU milli / capacity
};

struct FgdResult {
  int64_t nodes = 0;
  int64_t capacity_milli = 0;
  int64_t pods = 0;         // pods that arrived
  int64_t failed_pods = 0;  // pods that fit nowhere
  int64_t arrived_milli = 0;
  int64_t allocated_milli = 0;
  double gpu_alloc_ratio = 0;  // percent, at the end
  double arrived_ratio = 0;    // percent, at the end
  double frag_pct = 0;         // percent, at the end
  // One point per whole percent of arrived load (the first pod at or past
  // it), plus the final state.
  std::vector<FgdCurvePoint> curve;
};

// Step 2 of the protocol: indices into `pods`, drawn with replacement until
// the next would pass options.tune x capacity_milli, then shuffled.
std::vector<uint32_t> SampleArrivals(const std::vector<OpenbPod>& pods, int64_t capacity_milli,
                                     const FgdOptions& options);

// Runs the protocol through the engine with FgdPolicyYaml's policy. Fails
// on an empty cluster or pod list, or bad options (the policy's error).
absl::StatusOr<FgdResult> RunFgdProtocol(const std::vector<topology::NodeSpec>& nodes,
                                         const std::vector<OpenbPod>& pods, const FgdOptions& options);

}  // namespace ringmaster::simulator

#endif  // RINGMASTER_SIMULATOR_FGD_PROTOCOL_H_
