// Volcano's Queue objects (scheduling.volcano.sh/v1beta1, cluster-scoped) as
// ringmaster queues, for an admin who keeps their queues in Kubernetes.
//
// What each Queue's spec becomes (queue/queue.h):
//   weight       weight (Volcano's default, 1, when absent)
//   capability   capability: cpu, memory, nvidia.com/gpu (whole GPUs or a
//                fraction of one), any other key a named scalar; a dimension
//                it does not name stays unlimited
//   guarantee    guarantee, from `guarantee.resource`
//   reclaimable  reclaimable (default true)
//   priority     priority (Volcano 1.9+; default 0)
//   parent       parent; "root" or absent: a child of ringmaster's root
// Volcano's own "root" queue (hierarchical queues, Volcano 1.10+) is the
// root of the tree ringmaster already has and is not a queue of its own.
// What has no counterpart is listed in `notes`, one line per Queue and field,
// never dropped silently: `deserved` (the capacity plugin's share:
// ringmaster's proportion plugin computes deserved shares from weights and
// guarantees), `affinity`, `extendClusters`, `type`, the root's
// capability, and a Closed or Closing state (ringmaster keeps accepting
// jobs into it; close it by removing the Queue once it is empty).
#ifndef RINGMASTER_SERVER_EXTENDER_VOLCANO_QUEUES_H_
#define RINGMASTER_SERVER_EXTENDER_VOLCANO_QUEUES_H_

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"
#include "queue/queue.h"

namespace ringmaster::server {

inline constexpr char kVolcanoQueuesPath[] = "/apis/scheduling.volcano.sh/v1beta1/queues";

struct VolcanoQueues {
  std::vector<queue::QueueSpec> specs;  // in the list's order, "root" left out
  std::vector<std::string> notes;       // what was not carried over, and why
};

// Reads a QueueList as the API server sends it. Every error names the Queue
// and the field ("Volcano Queue 'ml': spec.capability.memory: '-1Gi' is
// negative ..."); one bad Queue fails the whole list (a partial set of
// queues would move jobs' limits without anyone asking).
absl::StatusOr<VolcanoQueues> ReadVolcanoQueueList(const nlohmann::json& list);

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_EXTENDER_VOLCANO_QUEUES_H_
