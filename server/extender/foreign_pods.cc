// The poller of what others hold (see foreign_pods.h).
#include "server/extender/foreign_pods.h"

#include <algorithm>
#include <vector>

#include "common/logging.h"
#include "common/status_macros.h"

namespace ringmaster::server {

ForeignPods::ForeignPods(scheduler::Engine& engine, absl::Mutex& engine_mu, Binder* binder, int64_t refresh_ms,
                         Admitted admitted)
    : engine_(engine), engine_mu_(engine_mu), binder_(binder), refresh_ms_(refresh_ms),
      admitted_(std::move(admitted)) {}

ForeignPods::~ForeignPods() { Stop(); }

void ForeignPods::Start() {
  if (binder_ != nullptr && refresh_ms_ > 0 && !thread_.joinable()) thread_ = std::thread([this] { Loop(); });
}

void ForeignPods::Stop() {
  if (!thread_.joinable()) return;
  {
    absl::MutexLock lock(&stop_mu_);
    stop_ = true;
  }
  thread_.join();
}

absl::Status ForeignPods::Refresh() {
  if (binder_ == nullptr) return absl::UnimplementedError("no binder to list pods with");
  RM_ASSIGN_OR_RETURN(const std::vector<BoundPod> pods, binder_->ListBoundPods());
  absl::MutexLock lock(&engine_mu_);
  std::map<std::string, Held> now;
  for (const BoundPod& p : pods) {
    if (admitted_(p)) continue;
    Held& h = now[p.node];
    h.request += p.request;
    h.gpus += std::max(p.gpus, 0);
    ++h.pods;
  }
  const topology::Cluster& cluster = engine_.state().cluster();
  // Nodes whose count changed, and those no longer holding anything of others'.
  std::vector<std::string> changed;
  for (const auto& [node, h] : now) {
    auto old = held_.find(node);
    if (old == held_.end() || !(old->second.request == h.request) || old->second.gpus != h.gpus) {
      changed.push_back(node);
    }
  }
  for (const auto& [node, h] : held_) {
    if (!now.contains(node)) changed.push_back(node);
  }
  for (const std::string& node : changed) {
    if (!cluster.FindNode(node).valid()) continue;  // not (yet) learned: counted once it is
    const Held h = now.contains(node) ? now.at(node) : Held{};
    auto short_by = engine_.SetForeignUsage(node, h.request, h.gpus);
    if (!short_by.ok()) continue;
    if (*short_by > 0) {
      common::Log(common::LogLevel::warn, "GPUs held twice",
                  {{"node", node}, {"gpus", *short_by}, {"foreign_pods", h.pods},
                   {"why", "pods ringmaster did not admit hold GPUs that ringmaster gave to its own tasks"}});
    }
  }
  // Nodes not learned yet keep their count for when they are (the next
  // refresh applies it: they are "changed" until then).
  for (auto it = now.begin(); it != now.end();) {
    if (!cluster.FindNode(it->first).valid()) {
      it = now.erase(it);
    } else {
      ++it;
    }
  }
  held_ = std::move(now);
  return absl::OkStatus();
}

std::pair<int64_t, int> ForeignPods::On(const std::string& node) const {
  absl::MutexLock lock(&engine_mu_);
  auto it = held_.find(node);
  return it == held_.end() ? std::pair<int64_t, int>{0, 0} : std::pair<int64_t, int>{it->second.gpus, it->second.pods};
}

void ForeignPods::Loop() {
  std::string last_error;
  while (true) {
    const absl::Status s = Refresh();
    if (s.code() == absl::StatusCode::kUnimplemented) return;
    if (!s.ok() && std::string(s.message()) != last_error) {
      common::Log(common::LogLevel::warn, "pods not listed", {{"error", s.message()},
                  {"effect", "the GPUs of pods ringmaster did not place are counted as last read"}});
    }
    last_error = s.ok() ? "" : std::string(s.message());
    absl::MutexLock lock(&stop_mu_);
    if (stop_mu_.AwaitWithTimeout(absl::Condition(&stop_), absl::Milliseconds(refresh_ms_))) return;
  }
}

}  // namespace ringmaster::server
