#include "server/admin/event_log.h"

namespace ringmaster::server {

void EventLog::Publish(int64_t time_ms, std::string kind, std::string job, std::string detail) {
  absl::MutexLock lock(&mu_);
  events_.push_back({next_++, time_ms, std::move(kind), std::move(job), std::move(detail)});
  while (events_.size() > capacity_) events_.pop_front();
}

int64_t EventLog::last() const {
  absl::MutexLock lock(&mu_);
  return next_ - 1;
}

std::vector<LoggedEvent> EventLog::After(int64_t after, absl::Duration timeout) const {
  absl::MutexLock lock(&mu_);
  auto ready = [&]() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { return closed_ || next_ - 1 > after; };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  std::vector<LoggedEvent> out;
  if (closed_) return out;
  for (const LoggedEvent& e : events_) {
    if (e.sequence > after) out.push_back(e);
  }
  return out;
}

bool EventLog::closed() const {
  absl::MutexLock lock(&mu_);
  return closed_;
}

void EventLog::Close() {
  absl::MutexLock lock(&mu_);
  closed_ = true;
}

}  // namespace ringmaster::server
