// The PodGroup lookup (extender.h, step 2): the minMember of a PodGroup
// whose pods carry no min-member annotation (scheduler-plugins keeps it only
// on the PodGroup object), read from the API server through the Binder on a
// thread of its own, so that a filter never waits for the API server. Owns
// that thread and its queue, and what it learned: each PodGroup's minMember
// (read, or given), the reads queued or in flight, and the reads that
// failed (not asked again for a while).
//
// Every change to what it learned is made with the engine lock held (the
// caller's, or the lookup thread's when it records an answer), so a caller
// that holds it sees the lookup and its gangs change together.
#ifndef RINGMASTER_SERVER_EXTENDER_PODGROUP_LOOKUP_H_
#define RINGMASTER_SERVER_EXTENDER_PODGROUP_LOOKUP_H_

#include <deque>
#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/clock.h"
#include "server/extender/binder.h"

namespace ringmaster::server {

class PodGroupLookup {
 public:
  // Called on the lookup thread with each answer for PodGroup "ns/group"
  // (its minMember, or why it was not read), once recorded, with the engine
  // lock held.
  using OnAnswer = std::function<void(const std::string& name, const absl::StatusOr<int>& min_member)>;

  // `binder` (null: nothing is read), `clock` and `engine_mu` must outlive
  // the lookup. A PodGroup not read is asked for again only `retry_ms`
  // after.
  PodGroupLookup(Binder* binder, const scheduler::Clock& clock, int64_t retry_ms, absl::Mutex& engine_mu,
                 OnAnswer on_answer);
  // Stop().
  ~PodGroupLookup();
  // Waits for the read in flight (the Binder's timeout at most) and ends the
  // thread; nothing is read after.
  void Stop() ABSL_LOCKS_EXCLUDED(mu_, engine_mu_);

  // With the engine lock held: ---------------------------------------------
  // The PodGroup's minMember, when read or given.
  std::optional<int> MinMember(const std::string& name) const ABSL_LOCKS_EXCLUDED(mu_);
  // Whether a read of the PodGroup is queued or in flight.
  bool Looking(const std::string& name) const ABSL_LOCKS_EXCLUDED(mu_);
  // The PodGroup's minMember, given (tests): known from now on.
  void Set(const std::string& name, int min_member) ABSL_LOCKS_EXCLUDED(mu_);
  // Queues a read of PodGroup `ns`/`group`, unless there is no binder, its
  // minMember is known, a read of it is queued or in flight, or the last one
  // failed within retry_ms.
  void LookUp(const std::string& ns, const std::string& group) ABSL_LOCKS_EXCLUDED(mu_);

  // Blocks until no read is queued or in flight (tests).
  void Wait() ABSL_LOCKS_EXCLUDED(mu_);

 private:
  // The lookup thread: one request to the API server at a time, outside
  // every lock; the answer is recorded under the engine lock.
  void Loop() ABSL_LOCKS_EXCLUDED(mu_, engine_mu_);

  Binder* const binder_;
  const scheduler::Clock& clock_;
  const int64_t retry_ms_;
  absl::Mutex& engine_mu_;
  const OnAnswer on_answer_;

  mutable absl::Mutex mu_ ABSL_ACQUIRED_AFTER(engine_mu_);
  std::map<std::string, int> min_member_ ABSL_GUARDED_BY(mu_);
  // PodGroups read in vain, and when: not asked again for a while.
  std::map<std::string, scheduler::Timestamp> missed_ ABSL_GUARDED_BY(mu_);
  // PodGroups ("ns/group") queued or in flight.
  std::set<std::string> looking_ ABSL_GUARDED_BY(mu_);
  std::deque<std::pair<std::string, std::string>> queue_ ABSL_GUARDED_BY(mu_);  // (ns, group)
  int in_flight_ ABSL_GUARDED_BY(mu_) = 0;
  bool stop_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_ ABSL_GUARDED_BY(mu_);  // started with the first read
};

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_EXTENDER_PODGROUP_LOOKUP_H_
