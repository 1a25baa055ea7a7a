// The Gloo backend's transport layer (gloo_backend.h builds the mesh and
// runs the collectives over it): a transport context whose collectives can
// be failed from another thread (RevocableContext), the gloo::Context that
// carries one (MeshContext), a waker of the TCP device's event loop
// (LoopPoker), and the thread that closes old communicators off the
// training thread (ContextReaper).
//
// Why revocation: closing a pair does not wake a collective waiting on it.
// Worse, this Gloo (2022-05) leaves some waits unwoken even when a peer
// dies: a pair that fails signals the receives still queued on it, but not
// the one whose payload it was reading, nor sends still in its transmit
// queue, so a survivor of a kill -9 could wait out the whole timeout (seen in
// about 1 of 140 trials). RevocableContext tracks the waits of the unbound
// buffers the collectives create; revoking closes the pairs and then ends
// those waits, so the collective throws at once.
#ifndef RINGMASTER_WORKER_SHIM_GLOO_TRANSPORT_H_
#define RINGMASTER_WORKER_SHIM_GLOO_TRANSPORT_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gloo/context.h>
#include <gloo/transport/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/loop.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ringmaster::shim {

// Destroys communicators on a thread of its own: closing a Gloo pair from a
// user thread waits for the next tick of the device's event loop (up to
// 10 ms), so dropping a 16-rank communicator on the training thread cost
// about 150 ms of every re-formation. An urgent communicator (dropped after a
// failure, when peers may be blocked on this rank) has its pairs closed from
// a thread each, so that one tick serves them all and the blocked peers see
// the reset at once (at 16 ranks kill -9 re-formed in 165 instead of 740 ms);
// a healthy one being replaced is closed pair by pair (closing 15 pairs in
// parallel on every rank at once slowed the planned 16-rank re-formation
// from about 95-115 to 180-195 ms on 2 cores, the new rendezvous competing
// with 225 closing threads). Destroys what is left when destroyed.
class ContextReaper {
 public:
  ContextReaper();
  ~ContextReaper();
  ContextReaper(const ContextReaper&) = delete;
  ContextReaper& operator=(const ContextReaper&) = delete;
  // Takes the context (nullptr is ignored); thread-safe.
  void Add(std::shared_ptr<gloo::Context> context, bool urgent);

 private:
  struct Doomed {
    std::shared_ptr<gloo::Context> context;
    bool urgent = false;
  };
  void Run();
  absl::Mutex mu_;
  std::vector<Doomed> doomed_ ABSL_GUARDED_BY(mu_);
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  std::thread thread_;
};

// Wakes the TCP device's event loop on demand: an eventfd registered with
// the loop, drained by it. Gloo's loop sleeps in epoll_wait for up to 10 ms,
// and closing a descriptor from another thread waits for its next turn.
//
// The descriptor is guarded: the destructor closes it while the loop thread
// may be draining it. Gloo's unregisterDescriptor waits for the loop's next
// tick on a condition variable with no predicate, notified without its mutex
// (a wake-up of that wait proves nothing, and ThreadSanitizer sees no order
// either: it reported the close against the loop's read).
class LoopPoker final : public gloo::transport::tcp::Handler {
 public:
  // Throws gloo::IoException when the eventfd cannot be made.
  explicit LoopPoker(std::shared_ptr<gloo::transport::tcp::Device> device);
  ~LoopPoker() override;
  LoopPoker(const LoopPoker&) = delete;
  LoopPoker& operator=(const LoopPoker&) = delete;
  // Makes the loop run one more iteration soon; thread-safe.
  void Poke();
  void handleEvents(int events) override;

 private:
  std::shared_ptr<gloo::transport::tcp::Device> device_;
  absl::Mutex mu_;
  int fd_ ABSL_GUARDED_BY(mu_) = -1;  // -1 once closed
};

// A transport context whose collectives can be failed from another thread
// (see the top). It wraps Gloo's TCP context: pairs are the inner context's;
// every unbound buffer the collectives create is wrapped, and its waits are
// tracked, so that Revoke() can end them. Thread-safe.
class RevocableContext final : public gloo::transport::Context {
 public:
  explicit RevocableContext(std::shared_ptr<gloo::transport::Context> inner);
  ~RevocableContext() override;
  std::unique_ptr<gloo::transport::Pair>& getPair(int rank) override;
  std::unique_ptr<gloo::transport::Pair>& createPair(int rank) override;
  std::unique_ptr<gloo::transport::UnboundBuffer> createUnboundBuffer(
      void* ptr, size_t size) override;
  // Closes every pair (under its lock: no transfer into a buffer is in
  // progress afterwards, as on Gloo's own timeout path), then ends every
  // buffer's wait in progress, and every later one, with an IoException
  // saying `why`. Idempotent.
  void Revoke(const std::string& why);
  bool revoked() const { return revoked_.load(std::memory_order_acquire); }

 private:
  class Buffer;
  // A buffer's wait begins (throws when revoked) and ends.
  void BeginWait(Buffer* buffer);
  void EndWait(Buffer* buffer);
  // Throws the revocation if there was one.
  void ThrowIfRevoked() const;

  std::shared_ptr<gloo::transport::Context> inner_;
  mutable absl::Mutex mu_;
  std::atomic<bool> revoked_{false};  // written under mu_
  std::string why_ ABSL_GUARDED_BY(mu_);
  std::vector<Buffer*> waiting_ ABSL_GUARDED_BY(mu_);
};

// A gloo::Context whose transport context is set from outside (gloo::Context
// keeps it protected; gloo::rendezvous::Context sets it the same way): the
// Gloo backend's communicator, over a RevocableContext.
class MeshContext final : public gloo::Context {
 public:
  MeshContext(int rank, int size) : gloo::Context(rank, size) {}
  void Adopt(std::shared_ptr<gloo::transport::Device> device,
             std::shared_ptr<RevocableContext> transport) {
    device_ = std::move(device);
    transportContext_ = transport;
    revocable_ = std::move(transport);
  }
  const std::shared_ptr<RevocableContext>& revocable() const {
    return revocable_;
  }

 private:
  std::shared_ptr<RevocableContext> revocable_;
};

// The transport of `ctx`, which must be an adopted MeshContext.
RevocableContext& TransportOf(const std::shared_ptr<gloo::Context>& ctx);

// Closes every pair of `t` from a thread a pair: each close waits for a tick
// of the device loop, and this way one tick serves them all (peers blocked on
// this rank also learn at once).
void ClosePairsAtOnce(gloo::transport::Context& t);

}  // namespace ringmaster::shim

#endif  // RINGMASTER_WORKER_SHIM_GLOO_TRANSPORT_H_
