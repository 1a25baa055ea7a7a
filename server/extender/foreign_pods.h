// What others hold (extender.h, step 9): the pods bound to nodes that
// ringmaster did not admit (another scheduler's, or pods bound directly),
// read from the API server through the Binder, every refresh_ms on a thread
// of their own, and counted in the engine as used on their nodes
// (Engine::SetForeignUsage), so that its free counts agree with
// kube-scheduler's. Owns that thread and the counts last applied.
#ifndef RINGMASTER_SERVER_EXTENDER_FOREIGN_PODS_H_
#define RINGMASTER_SERVER_EXTENDER_FOREIGN_PODS_H_

#include <cstdint>
#include <functional>
#include <map>
#include <string>
#include <thread>
#include <utility>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/engine.h"
#include "server/extender/binder.h"
#include "topology/resources.h"

namespace ringmaster::server {

class ForeignPods {
 public:
  // Whether ringmaster admitted the pod (the engine counts what it holds
  // already). Called with the engine lock held.
  using Admitted = std::function<bool(const BoundPod& pod)>;

  // `engine`, `engine_mu` (the lock every call on the engine takes) and
  // `binder` (null: nothing is read) must outlive the poller.
  ForeignPods(scheduler::Engine& engine, absl::Mutex& engine_mu, Binder* binder, int64_t refresh_ms,
              Admitted admitted);
  // Stop().
  ~ForeignPods();
  // Starts the thread, with a binder and refresh_ms > 0 (else nothing).
  void Start();
  // Ends the thread (a read in flight finishes first).
  void Stop() ABSL_LOCKS_EXCLUDED(stop_mu_);

  // Reads the bound pods through the Binder (outside the engine lock) and
  // counts on each node what the pods ringmaster did not admit hold.
  // Unimplemented when the binder cannot list pods (or there is none).
  absl::Status Refresh() ABSL_LOCKS_EXCLUDED(engine_mu_);
  // What the last Refresh counted on `node` as held by others: (whole GPUs,
  // pods).
  std::pair<int64_t, int> On(const std::string& node) const ABSL_LOCKS_EXCLUDED(engine_mu_);

 private:
  // What others hold on a node.
  struct Held {
    topology::Resources request;
    int64_t gpus = 0;
    int pods = 0;
  };
  void Loop() ABSL_LOCKS_EXCLUDED(engine_mu_, stop_mu_);

  scheduler::Engine& engine_;
  absl::Mutex& engine_mu_;
  Binder* const binder_;
  const int64_t refresh_ms_;
  const Admitted admitted_;
  // Per node, as last applied to the engine.
  std::map<std::string, Held> held_ ABSL_GUARDED_BY(engine_mu_);
  absl::Mutex stop_mu_;
  bool stop_ ABSL_GUARDED_BY(stop_mu_) = false;
  std::thread thread_;
};

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_EXTENDER_FOREIGN_PODS_H_
