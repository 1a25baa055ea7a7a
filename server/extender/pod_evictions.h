// The engine's evictions of the extender's bound pods (extender.h, step 7),
// carried out through the Binder: queued as the cycles decide them, sent
// outside the engine lock (the API server's calls never hold up the
// engine), and, when the API server asks to wait (a PodDisruptionBudget:
// 429), tried again on each Send until the eviction's deadline. Owns the
// queue and the record of those carried out.
#ifndef RINGMASTER_SERVER_EXTENDER_POD_EVICTIONS_H_
#define RINGMASTER_SERVER_EXTENDER_POD_EVICTIONS_H_

#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/clock.h"
#include "server/extender/binder.h"

namespace ringmaster::server {

class PodEvictions {
 public:
  // `binder` null: evictions are only recorded. `binder` and `clock` must
  // outlive the queue.
  PodEvictions(Binder* binder, const scheduler::Clock& clock) : binder_(binder), clock_(clock) {}

  // Queues `eviction`, due by `deadline` (-1: none, and the pod's own grace
  // period; else the grace period left until it, and no retry after it).
  void Queue(PodEviction eviction, scheduler::Timestamp deadline) ABSL_LOCKS_EXCLUDED(mu_);
  // Sends the queued evictions through the Binder, one by one, holding no
  // lock while it calls (two threads may send at once, each its own batch).
  void Send() ABSL_LOCKS_EXCLUDED(mu_);
  // Those carried out so far (the Binder's OK, or recorded without one), in
  // order.
  std::vector<PodEviction> done() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  Binder* const binder_;
  const scheduler::Clock& clock_;
  mutable absl::Mutex mu_;
  std::vector<std::pair<PodEviction, scheduler::Timestamp>> queue_ ABSL_GUARDED_BY(mu_);  // with deadlines
  std::vector<PodEviction> done_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_EXTENDER_POD_EVICTIONS_H_
