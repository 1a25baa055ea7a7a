// Where the queues in force come from: the policy (the --policy file, the
// journal's, an UpdatePolicy) and, with `serve --volcano-queues`, Volcano's
// Queue objects read from the API server (server/extender/volcano_queues.h).
// The engine runs one queue tree made of both; AdminService composes it again
// whenever either side changes.
#ifndef RINGMASTER_SERVER_ADMIN_QUEUE_SOURCES_H_
#define RINGMASTER_SERVER_ADMIN_QUEUE_SOURCES_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "queue/queue.h"
#include "scheduler/policy.h"

namespace ringmaster::server {

// Queues defined outside the policy.
struct ExternalQueues {
  // How errors and logs name them: queue 'ml' is "<kind> 'ml'".
  std::string kind = "Volcano Queue";
  std::vector<queue::QueueSpec> specs;
  bool operator==(const ExternalQueues& o) const;
};

// The policy `base` with `external`'s queues added to its own. A queue that
// both define is an error that names both sources (the policy's file and the
// external object); so is a tree they make together that does not hold
// (unknown parent, a cycle, a guarantee above a capability), each error
// naming the queue's source. When the policy declares no queues (its
// implicit single "default" queue), the tree is `external`'s alone; when
// neither declares any, the implicit "default".
absl::StatusOr<scheduler::Policy> ComposeQueues(scheduler::Policy base, const ExternalQueues& external);

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_ADMIN_QUEUE_SOURCES_H_
