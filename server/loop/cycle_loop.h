// The daemon's scheduling loop: the one owner of Engine::RunCycle on the
// wall clock. Every cycle, whoever asks for it, hands its Decisions to the
// sinks that act on them, in the order they were added: in `serve` the
// extender (reservations and pod evictions), then the daemon's own sink (the
// coordinator's target memberships, the local executor's processes, the
// admin API's journal and watchers). No surface runs a cycle of its own: the
// extender asks the loop for one when a gang completes (RunLocked), the
// daemon's timer calls Tick.
//
// Locking: the engine is not thread-safe; every call on it takes `engine_mu`
// (shared with the extender's handlers and every admin RPC). Sinks are
// called with it held, except AfterCycle, which Tick calls after releasing
// it (for slow calls such as the API server's evictions).
#ifndef RINGMASTER_SERVER_LOOP_CYCLE_LOOP_H_
#define RINGMASTER_SERVER_LOOP_CYCLE_LOOP_H_

#include <functional>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/decisions.h"
#include "scheduler/engine.h"
#include "scheduler/state.h"

namespace ringmaster::server {

// Something that acts on the engine's decisions.
class CycleSink {
 public:
  virtual ~CycleSink() = default;
  // Under the engine lock, before a periodic cycle (Tick): changes the
  // cycle should see (expired reservations).
  virtual void BeforeCycle() {}
  // Under the engine lock, with every cycle's decisions (Tick's and those
  // run by RunLocked).
  virtual void OnCycle(const scheduler::Decisions& decisions) = 0;
  // After a periodic cycle, with the engine lock released (it may take it).
  virtual void AfterCycle() {}
};

class CycleLoop {
 public:
  // `engine` and `engine_mu` must outlive the loop.
  CycleLoop(scheduler::Engine& engine, absl::Mutex& engine_mu) : engine_(engine), mu_(engine_mu) {}

  absl::Mutex& mutex() ABSL_LOCK_RETURNED(mu_) { return mu_; }
  scheduler::Engine& engine() { return engine_; }

  // Sinks are called in the order they were added; a sink must outlive the
  // loop or be removed first. Call before serving (not from a sink).
  void AddSink(CycleSink* sink) ABSL_LOCKS_EXCLUDED(mu_);
  void RemoveSink(CycleSink* sink) ABSL_LOCKS_EXCLUDED(mu_);

  // Called after every cycle, before the sinks, with the cycle's wall time
  // in seconds, its decisions and the engine's state after it, under the
  // lock (metrics). It must not call the loop.
  using Observer =
      std::function<void(double seconds, const scheduler::Decisions& decisions, const scheduler::State& state)>;
  void SetObserver(Observer observe) ABSL_LOCKS_EXCLUDED(mu_);

  // One period: every sink's BeforeCycle, one cycle (RunLocked), then, with
  // the lock released, every sink's AfterCycle.
  void Tick() ABSL_LOCKS_EXCLUDED(mu_);
  // One engine cycle now, by a caller that holds the lock: the observer and
  // every sink's OnCycle see its decisions, which are returned too. The
  // caller does what AfterCycle would (or leaves it to the next Tick).
  scheduler::Decisions RunLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // Cycles run so far.
  int64_t cycles() const ABSL_LOCKS_EXCLUDED(mu_);

 private:
  scheduler::Engine& engine_;
  absl::Mutex& mu_;
  std::vector<CycleSink*> sinks_ ABSL_GUARDED_BY(mu_);
  Observer observe_ ABSL_GUARDED_BY(mu_);
  int64_t cycles_ ABSL_GUARDED_BY(mu_) = 0;
};

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_LOOP_CYCLE_LOOP_H_
