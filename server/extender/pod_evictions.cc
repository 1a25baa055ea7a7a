// Carrying out the engine's evictions (see pod_evictions.h).
#include "server/extender/pod_evictions.h"

#include <algorithm>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace ringmaster::server {

void PodEvictions::Queue(PodEviction eviction, scheduler::Timestamp deadline) {
  absl::MutexLock lock(&mu_);
  queue_.push_back({std::move(eviction), deadline});
}

void PodEvictions::Send() {
  std::vector<std::pair<PodEviction, scheduler::Timestamp>> batch;
  {
    absl::MutexLock lock(&mu_);
    batch.swap(queue_);
  }
  if (batch.empty()) return;
  std::vector<std::pair<PodEviction, scheduler::Timestamp>> retry;
  std::vector<PodEviction> done;
  for (auto& [ev, deadline] : batch) {
    const std::string pod = absl::StrCat(ev.pod_namespace, "/", ev.pod_name);
    // The grace period left until the deadline, rounded up (a retry asks
    // for less than the first try).
    if (deadline >= 0) ev.grace_period_seconds = std::max<int64_t>(0, (deadline - clock_.Now() + 999) / 1000);
    const absl::Status s = binder_ ? binder_->Evict(ev) : absl::OkStatus();
    if (s.ok()) {
      common::Log(common::LogLevel::info, binder_ ? "pod evicted" : "pod eviction recorded",
                  {{"pod", pod}, {"node", ev.node}, {"grace_s", ev.grace_period_seconds}, {"reason", ev.reason}});
      done.push_back(std::move(ev));
      continue;
    }
    // Past its deadline the engine counts the GPUs free anyway: retrying
    // longer would only stop a pod that may have been placed again.
    const bool again = s.code() == absl::StatusCode::kUnavailable && deadline >= 0 && clock_.Now() < deadline;
    common::Log(common::LogLevel::err, again ? "eviction refused, trying again" : "eviction failed",
                {{"pod", pod}, {"node", ev.node}, {"error", s.message()}});
    if (again) retry.push_back({std::move(ev), deadline});
  }
  absl::MutexLock lock(&mu_);
  for (PodEviction& ev : done) done_.push_back(std::move(ev));
  for (auto& r : retry) queue_.push_back(std::move(r));
}

std::vector<PodEviction> PodEvictions::done() const {
  absl::MutexLock lock(&mu_);
  return done_;
}

}  // namespace ringmaster::server
