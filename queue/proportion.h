// Deserved shares: how much of the cluster each queue deserves right now.
//
// Algorithm (per level of the queue tree, starting with the whole cluster as
// the root's share):
//   1. Each child first gets min(guarantee, request), capped by capability.
//   2. What is left of the parent's share is water-filled: every child still
//      short of min(request, capability) gets remaining * weight / sum of
//      weights of such children (integer floor, per resource dimension),
//      capped at min(request, capability); repeat until nothing moves.
//   3. Children then split their own share the same way.
// A queue never deserves more than it requests, so idle capacity flows to the
// queues that can use it, in proportion to their weights.
#ifndef RINGMASTER_QUEUE_PROPORTION_H_
#define RINGMASTER_QUEUE_PROPORTION_H_

#include <vector>

#include "queue/queue.h"

namespace ringmaster::queue {

// `request[q]` is queue q's own demand (allocated + pending) including its
// descendants'. Returns deserved[q] for every queue.
std::vector<Resources> ComputeDeserved(const QueueTree& tree, const Resources& total,
                                       const std::vector<Resources>& request);
// The same with `weights[q]` (> 0, one per queue) in place of each queue's
// spec weight in step 2 (proportion's usageWeight: weights adjusted by
// decayed past use). Only ratios between siblings matter.
std::vector<Resources> ComputeDeserved(const QueueTree& tree, const Resources& total,
                                       const std::vector<Resources>& request, const std::vector<int64_t>& weights);

// Dominant resource share of `allocated` in `total`: max over dimensions of
// allocated/total (dimensions with total 0 are ignored). In [0, +inf).
double DominantShare(const Resources& allocated, const Resources& total);

}  // namespace ringmaster::queue

#endif  // RINGMASTER_QUEUE_PROPORTION_H_
