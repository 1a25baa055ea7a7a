// What the extender asks of the API server (the Binder), and the pods it
// asks about: bindings and evictions of the pods it places, and reads of
// PodGroups, Nodes, bound Pods and Volcano Queues. KubeBinder
// (kube_binder.h) is the real one; tests have their own.
#ifndef RINGMASTER_SERVER_EXTENDER_BINDER_H_
#define RINGMASTER_SERVER_EXTENDER_BINDER_H_

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "server/extender/extender_wire.h"
#include "topology/resources.h"

namespace ringmaster::server {

// A pod bound to a node, as the API server lists it.
struct BoundPod {
  std::string key;  // "namespace/name"
  std::string uid;
  std::string node;
  topology::Resources request;  // cpu milli and memory bytes
  int gpus = 0;                 // whole nvidia.com/gpu devices
};

// A pod the engine decided to stop (scheduler::Eviction), for the Binder.
struct PodEviction {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;  // a precondition: a recreated pod of the same name is left alone
  // Seconds the pod has to stop (the eviction's deadline, rounded up); -1:
  // the pod's own terminationGracePeriodSeconds.
  int64_t grace_period_seconds = -1;
  std::string node;
  std::string reason;  // the engine's, for logs
  bool operator==(const PodEviction&) const = default;
};

// Carries bindings and evictions to the API server (the Binding and Eviction
// subresources). The extender calls Bind under its lock and Evict outside
// it, possibly from two threads at once; each should answer within seconds.
class Binder {
 public:
  virtual ~Binder() = default;
  virtual absl::Status Bind(const ExtenderBindingArgs& binding) = 0;
  // OK when the pod is evicted or already gone; Unavailable when the API
  // server asks to try again later (a PodDisruptionBudget: 429).
  virtual absl::Status Evict(const PodEviction& eviction) = 0;
  // The minMember of the PodGroup object `ns`/`group` (scheduler-plugins'
  // scheduling.x-k8s.io or Volcano's scheduling.volcano.sh), read when a gang's
  // pods do not carry the min-member annotation. NotFound when neither API
  // group has it; Unimplemented when the binder cannot ask (the default).
  virtual absl::StatusOr<int> PodGroupMinMember(const std::string& ns, const std::string& group) {
    (void)ns;
    (void)group;
    return absl::UnimplementedError("no API server to read PodGroups from");
  }
  // The API server's Nodes, name -> UID, against which Node objects sent in
  // requests are checked before they are learned. Unimplemented when the
  // binder cannot ask (the default: nodes are not checked).
  virtual absl::StatusOr<std::map<std::string, std::string>> ListNodes() {
    return absl::UnimplementedError("no API server to list Nodes from");
  }
  // The pods bound to a node that have not ended (phase neither Succeeded
  // nor Failed), whoever scheduled them. Unimplemented when the binder
  // cannot ask (the default: only what ringmaster placed is counted).
  virtual absl::StatusOr<std::vector<BoundPod>> ListBoundPods() {
    return absl::UnimplementedError("no API server to list Pods from");
  }
  // The API server's Volcano Queue objects (a scheduling.volcano.sh/v1beta1
  // QueueList, server/extender/volcano_queues.h reads it). Unimplemented when
  // the binder cannot ask (the default).
  virtual absl::StatusOr<nlohmann::json> ListVolcanoQueues() {
    return absl::UnimplementedError("no API server to list Volcano Queues from");
  }
};

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_EXTENDER_BINDER_H_
