// What the scheduler reads from Kubernetes Pod and Node objects (JSON as the
// API server writes them): a pod's identity, gang labels, requests and
// constraints; a node's allocatable resources, GPUs and place in the network.
//
// Gang membership follows the conventions people already use:
//   scheduler-plugins  label      scheduling.x-k8s.io/pod-group (older: pod-group.scheduling.sigs.k8s.io)
//   Volcano            annotation scheduling.k8s.io/group-name, scheduling.volcano.sh/group-name
//   min member         annotation scheduling.volcano.sh/group-min-member
// Each key is looked up in both the labels and the annotations.
//
// A pod's rank within its gang, for launchers that rank by it (PodInfo::rank),
// from the first of these that the pod carries (labels before annotations):
//   Kubeflow training operator  training.kubeflow.org/replica-index, with
//                               training.kubeflow.org/replica-type: master,
//                               chief and launcher rank before worker, worker
//                               before the other types (ps, evaluator)
//   Indexed Job, JobSet         batch.kubernetes.io/job-completion-index
//                               (older: the annotation of that name)
//   MPI Operator                the pod name's "-worker-N" suffix
// The index is a decimal count in [0, 1000000).
#ifndef RINGMASTER_SERVER_EXTENDER_KUBE_OBJECTS_H_
#define RINGMASTER_SERVER_EXTENDER_KUBE_OBJECTS_H_

#include <map>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "scheduler/job.h"
#include "topology/cluster.h"

namespace ringmaster::server {

inline constexpr std::string_view kGpuResource = "nvidia.com/gpu";
inline constexpr std::string_view kGpuProductLabel = "nvidia.com/gpu.product";
inline constexpr std::string_view kGpuMemoryLabel = "nvidia.com/gpu.memory";  // MiB
inline constexpr std::string_view kZoneLabel = "topology.kubernetes.io/zone";
inline constexpr std::string_view kVolcanoMinMember = "scheduling.volcano.sh/group-min-member";
inline constexpr std::string_view kVolcanoQueue = "scheduling.volcano.sh/queue-name";
inline constexpr std::string_view kReplicaIndex = "training.kubeflow.org/replica-index";
inline constexpr std::string_view kReplicaType = "training.kubeflow.org/replica-type";
inline constexpr std::string_view kCompletionIndex = "batch.kubernetes.io/job-completion-index";

struct PodInfo {
  std::string uid;
  std::string ns = "default";
  std::string name;
  std::map<std::string, std::string> labels;
  std::map<std::string, std::string> annotations;
  topology::Resources request;  // cpu milli and memory bytes, summed over containers
  int gpus = 0;                 // whole nvidia.com/gpu devices
  int32_t priority = 0;
  std::string scheduler_name;  // spec.schedulerName ("" when absent)
  std::map<std::string, std::string> node_selector;
  std::vector<scheduler::Toleration> tolerations;
  // The gang: group name ("" when the pod names none) and its min member
  // (0 when no annotation gives it).
  std::string group;
  int min_member = 0;
  std::string queue;  // Volcano queue annotation; "" means the default queue
  // Where a launcher ranks the pod (the header comment): (replica type
  // order, index), or -1 when the pod carries no index.
  int64_t rank = -1;

  // "namespace/name".
  std::string Key() const { return ns + "/" + name; }
};

// Reads a v1.Pod. Errors name the field ("Pod.spec.containers[0].resources...").
absl::StatusOr<PodInfo> ReadPod(const nlohmann::json& pod);

// Network tiers read from node labels, lowest tier first: e.g. rack, spine,
// zone. A node without one of the labels sits in a domain named "-" there.
struct TopologyLabels {
  struct Tier {
    std::string name;       // "rack"
    std::string label_key;  // "topology.ringmaster.io/rack"
  };
  std::vector<Tier> tiers;
};
// rack: topology.ringmaster.io/rack, spine: topology.ringmaster.io/spine,
// zone: topology.kubernetes.io/zone.
TopologyLabels DefaultTopologyLabels();
// Parses "rack=KEY,spine=KEY,zone=KEY" (lowest tier first; "" gives no tiers).
absl::StatusOr<TopologyLabels> ParseTopologyLabels(std::string_view text);
std::vector<topology::TierSpec> TierSpecs(const TopologyLabels& labels);

// Reads a v1.Node: allocatable cpu, memory and nvidia.com/gpu, the GPU model
// from nvidia.com/gpu.product, taints, and its domain at each tier. A domain's
// name carries its parents' ("zone-a/spine-1/rack-3"), so parents always agree.
absl::StatusOr<topology::NodeSpec> ReadNode(const nlohmann::json& node, const TopologyLabels& labels);

// A Kubernetes resource quantity ("500m", "2", "16Gi", "1.5G", "1e3") in
// units (milli = false) or thousandths (milli = true), rounded up. A
// negative amount is an error that says it is negative. (nvidia.com/gpu is
// read in thousandths by ReadPod and ReadNode: a fraction, "0.5" or "500m",
// is refused rather than rounded up to a device.)
absl::StatusOr<topology::Quantity> ParseKubeQuantity(std::string_view text, bool milli);

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_EXTENDER_KUBE_OBJECTS_H_
