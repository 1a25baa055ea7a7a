// Helpers for the worker_shim tests: run one function per simulated rank on
// its own thread, and the per-backend traits the collective contract test is
// typed over.
#ifndef RINGMASTER_TESTS_WORKER_SHIM_TEST_WORLD_H_
#define RINGMASTER_TESTS_WORKER_SHIM_TEST_WORLD_H_

#include <unistd.h>

#include <chrono>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gloo/rendezvous/hash_store.h>

#include "tests/support/blocked.h"
#include "worker_shim/collective.h"
#include "worker_shim/gloo_backend.h"
#if RINGMASTER_HAVE_NCCL
#include "tests/worker_shim/fake_nccl.h"
#include "worker_shim/nccl_backend.h"
#endif

namespace ringmaster::shim::testing {

// Runs fns[i] on thread i and joins them all.
inline void RunRanks(const std::vector<std::function<void()>>& fns) {
  std::vector<std::thread> threads;
  for (const auto& f : fns) threads.emplace_back(f);
  for (auto& t : threads) t.join();
}

struct GlooTraits {
  struct World {
    gloo::rendezvous::HashStore store;
  };
  static std::unique_ptr<CollectiveBackend> Make(World&, const std::string&) {
    GlooOptions o;
    o.timeout = absl::Seconds(15);
    return *GlooBackend::Create(o);
  }
  // A crash as peers see it: the sockets close, the process is gone.
  static void Kill(World&, const std::string&, CollectiveBackend& b) {
    b.Abort();
  }
  // Collectives wait for every rank: a rank that does not call is enough.
  static void Silence(World&, bool) {}
  // Until the threads `tids` (of this process) are blocked in their
  // collectives; false after 10 s.
  static bool WaitInCollective(World&, const std::vector<pid_t>& tids) {
    return ringmaster::testing::WaitUntilBlocked(
        ::getpid(), tids, std::chrono::milliseconds(50), std::chrono::seconds(10));
  }
};

#if RINGMASTER_HAVE_NCCL
struct FakeNcclTraits {
  struct World {
    gloo::rendezvous::HashStore store;
    FakeNccl nccl;
  };
  static std::unique_ptr<CollectiveBackend> Make(World& w,
                                                 const std::string& name) {
    NcclOptions o;
    o.timeout = absl::Seconds(15);
    return std::make_unique<NcclBackend>(w.nccl.Api(name), o);
  }
  static void Kill(World& w, const std::string& name, CollectiveBackend&) {
    w.nccl.Kill(name);
  }
  // The fake's collectives complete in the call: make them hang instead.
  static void Silence(World& w, bool on) {
    w.nccl.faults().collectives_hang = on;
  }
  // The backend polls a hanging collective: until `tids.size()` of them hang
  // in the fake; false after 10 s.
  static bool WaitInCollective(World& w, const std::vector<pid_t>& tids) {
    const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(10);
    while (w.nccl.HangingComms() < static_cast<int>(tids.size())) {
      if (std::chrono::steady_clock::now() >= deadline) return false;
      std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    return true;
  }
};
#endif

}  // namespace ringmaster::shim::testing

#endif  // RINGMASTER_TESTS_WORKER_SHIM_TEST_WORLD_H_
