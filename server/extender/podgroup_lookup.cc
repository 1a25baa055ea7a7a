// The PodGroup lookup thread (see podgroup_lookup.h).
#include "server/extender/podgroup_lookup.h"

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace ringmaster::server {

PodGroupLookup::PodGroupLookup(Binder* binder, const scheduler::Clock& clock, int64_t retry_ms,
                               absl::Mutex& engine_mu, OnAnswer on_answer)
    : binder_(binder), clock_(clock), retry_ms_(retry_ms), engine_mu_(engine_mu), on_answer_(std::move(on_answer)) {}

PodGroupLookup::~PodGroupLookup() { Stop(); }

void PodGroupLookup::Stop() {
  std::thread worker;
  {
    absl::MutexLock lock(&mu_);
    stop_ = true;
    worker = std::move(thread_);
  }
  if (worker.joinable()) worker.join();
}

std::optional<int> PodGroupLookup::MinMember(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = min_member_.find(name);
  if (it == min_member_.end()) return std::nullopt;
  return it->second;
}

bool PodGroupLookup::Looking(const std::string& name) const {
  absl::MutexLock lock(&mu_);
  return looking_.contains(name);
}

void PodGroupLookup::Set(const std::string& name, int min_member) {
  absl::MutexLock lock(&mu_);
  min_member_[name] = min_member;
  missed_.erase(name);
}

void PodGroupLookup::LookUp(const std::string& ns, const std::string& group) {
  if (binder_ == nullptr) return;
  const std::string name = absl::StrCat(ns, "/", group);
  absl::MutexLock lock(&mu_);
  if (stop_ || min_member_.contains(name) || looking_.contains(name)) return;
  if (auto miss = missed_.find(name); miss != missed_.end() && clock_.Now() < miss->second + retry_ms_) return;
  looking_.insert(name);
  queue_.emplace_back(ns, group);
  if (!thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

void PodGroupLookup::Loop() {
  while (true) {
    std::pair<std::string, std::string> next;
    {
      absl::MutexLock lock(&mu_);
      mu_.Await(absl::Condition(
          +[](PodGroupLookup* l) ABSL_EXCLUSIVE_LOCKS_REQUIRED(l->mu_) { return l->stop_ || !l->queue_.empty(); },
          this));
      if (stop_) return;
      next = std::move(queue_.front());
      queue_.pop_front();
      ++in_flight_;
    }
    const auto& [ns, group] = next;
    const std::string name = absl::StrCat(ns, "/", group);
    const absl::StatusOr<int> min = binder_->PodGroupMinMember(ns, group);
    {
      absl::MutexLock engine_lock(&engine_mu_);
      {
        absl::MutexLock lock(&mu_);
        looking_.erase(name);
        if (min.ok()) {
          common::Log(common::LogLevel::info, "pod group read", {{"gang", name}, {"min_member", std::to_string(*min)}});
          min_member_[name] = *min;
          missed_.erase(name);
        } else {
          missed_[name] = clock_.Now();
          if (!absl::IsUnimplemented(min.status())) {
            common::Log(common::LogLevel::warn, "pod group not read",
                        {{"gang", name}, {"error", min.status().message()}});
          }
        }
      }
      on_answer_(name, min);
    }
    absl::MutexLock lock(&mu_);
    --in_flight_;
  }
}

void PodGroupLookup::Wait() {
  absl::MutexLock lock(&mu_);
  mu_.Await(absl::Condition(
      +[](PodGroupLookup* l) ABSL_EXCLUSIVE_LOCKS_REQUIRED(l->mu_) { return l->queue_.empty() && l->in_flight_ == 0; },
      this));
}

}  // namespace ringmaster::server
