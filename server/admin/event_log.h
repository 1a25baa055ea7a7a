// The daemon's recent events (submit, cancel, bind, evict, shrink, grow,
// failure, policy) for the admin API's WatchEvents: a bounded log with
// strictly increasing sequence numbers that watchers wait on. Thread-safe.
#ifndef RINGMASTER_SERVER_ADMIN_EVENT_LOG_H_
#define RINGMASTER_SERVER_ADMIN_EVENT_LOG_H_

#include <cstdint>
#include <deque>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"

namespace ringmaster::server {

struct LoggedEvent {
  int64_t sequence = 0;
  int64_t time_ms = 0;
  std::string kind;
  std::string job;
  std::string detail;
};

class EventLog {
 public:
  // Keeps the last `capacity` events; a watcher slower than that misses the
  // oldest ones (it sees the gap in the sequence numbers).
  explicit EventLog(size_t capacity = 4096) : capacity_(capacity) {}

  void Publish(int64_t time_ms, std::string kind, std::string job, std::string detail);
  // The sequence number of the newest event (0 before the first).
  int64_t last() const;
  // Events after `after`, waiting up to `timeout` for one; empty on timeout
  // or once Close() was called.
  std::vector<LoggedEvent> After(int64_t after, absl::Duration timeout) const;
  // Wakes every waiter; After returns at once from now on.
  void Close();
  bool closed() const;

 private:
  const size_t capacity_;
  mutable absl::Mutex mu_;
  std::deque<LoggedEvent> events_ ABSL_GUARDED_BY(mu_);
  int64_t next_ ABSL_GUARDED_BY(mu_) = 1;
  bool closed_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_ADMIN_EVENT_LOG_H_
