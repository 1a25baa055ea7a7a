#include "server/loop/cycle_loop.h"

#include <algorithm>
#include <chrono>

namespace ringmaster::server {

void CycleLoop::AddSink(CycleSink* sink) {
  absl::MutexLock lock(&mu_);
  sinks_.push_back(sink);
}

void CycleLoop::RemoveSink(CycleSink* sink) {
  absl::MutexLock lock(&mu_);
  sinks_.erase(std::remove(sinks_.begin(), sinks_.end(), sink), sinks_.end());
}

void CycleLoop::SetObserver(Observer observe) {
  absl::MutexLock lock(&mu_);
  observe_ = std::move(observe);
}

scheduler::Decisions CycleLoop::RunLocked() {
  const auto start = std::chrono::steady_clock::now();
  scheduler::Decisions d = engine_.RunCycle();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  ++cycles_;
  if (observe_) observe_(took.count(), d, engine_.state());
  for (CycleSink* s : sinks_) s->OnCycle(d);
  return d;
}

void CycleLoop::Tick() {
  std::vector<CycleSink*> sinks;
  {
    absl::MutexLock lock(&mu_);
    for (CycleSink* s : sinks_) s->BeforeCycle();
    (void)RunLocked();  // the sinks have acted on its decisions
    sinks = sinks_;
  }
  for (CycleSink* s : sinks) s->AfterCycle();
}

int64_t CycleLoop::cycles() const {
  absl::MutexLock lock(&mu_);
  return cycles_;
}

}  // namespace ringmaster::server
