// Gloo collective backend: CPU memory over TCP. Gloo has no shrink, so every
// generation builds a new full-mesh context over the generation-scoped store;
// the TCP device (event loop) is kept across generations.
//
// The full mesh is built here rather than by Gloo's connectFullMesh, which
// makes one store round trip per peer and connects the pairs in rank order
// (a rank can stall on a peer that is still busy with its own earlier
// pairs). Each rank:
//   1. creates a pair (a listening socket) per peer and sets its key (its
//      rank) to their addresses, in Gloo's layout;
//   2. waits for all peers' keys in one store wait (the coordinator's store
//      returns the values with it: two round trips per rank in all);
//   3. dials the pairs it is the connecting side of (poking the device loop
//      every millisecond meanwhile, see LoopPoker), then waits for the pairs
//      its peers dial, so every pair connects in one wave;
//   4. Interrupt() from another thread abandons steps 2-3 (closing the
//      pairs), for a rendezvous that a newer generation made pointless.
// A communicator in use cannot be broken the same way: closing a pair does
// not wake a collective waiting on it. Worse, this Gloo (2022-05) leaves some
// waits unwoken even when a peer dies: a pair that fails signals the receives
// still queued on it, but not the one whose payload it was reading, nor sends
// still in its transmit queue, so a survivor of a kill -9 could wait out the
// whole timeout (seen in about 1 of 140 trials). Revoke() is the cure: the
// transport context (RevocableContext) tracks the waits of the unbound
// buffers the collectives create, and revoking closes the pairs and then ends
// those waits, so the collective throws at once.
#ifndef RINGMASTER_WORKER_SHIM_GLOO_BACKEND_H_
#define RINGMASTER_WORKER_SHIM_GLOO_BACKEND_H_

#include <atomic>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include <gloo/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/tcp/device.h>
#include <gloo/transport/tcp/loop.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker_shim/collective.h"

namespace ringmaster::shim {

struct GlooOptions {
  std::string hostname = "127.0.0.1";  // interface to listen on
  // Bound on rendezvous and on each collective; a dead peer usually shows up
  // much sooner as a closed connection.
  absl::Duration timeout = absl::Seconds(10);
};

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
  int fd_ = -1;
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

class GlooBackend final : public CollectiveBackend {
 public:
  // All-reduces of at most this many bytes use Gloo's bcube algorithm
  // (log2(n) exchange steps, or one direct exchange when n is odd) instead
  // of the ring (2(n-1) steps, each a process wake-up): the step's gradient
  // buffer and the step boundary's generation agreement are this small, and
  // at 16 ranks on 2 cores bcube halved the wait for the step boundary.
  static constexpr size_t kSmallAllReduceBytes = 4096;

  // Also sets SIGPIPE to be ignored in this process (see the .cc).
  static absl::StatusOr<std::unique_ptr<GlooBackend>> Create(
      GlooOptions options);

  std::string_view name() const override { return "gloo"; }
  absl::Status Reform(const ReformPlan& plan,
                      gloo::rendezvous::Store& store) override;
  absl::Status AllReduce(void* data, size_t count, DataType type,
                         ReduceOp op) override;
  absl::Status Broadcast(void* data, size_t bytes, int root) override;
  absl::Status Barrier() override;
  void Abort() override;
  // False once revoked (rule 7), until the next Reform().
  bool healthy() const override;
  void Interrupt(int64_t newer_generation) override;
  void Revoke(int64_t failure_generation) override;
  // The full mesh of a planned change built on the same device while the
  // current communicator keeps serving the step (collective.h, rule 6).
  bool can_prepare() const override { return true; }
  absl::Status Prepare(const ReformPlan& plan,
                       gloo::rendezvous::Store& store) override;
  bool AdoptPrepared(int64_t generation) override;
  void DropPrepared() override;

 private:
  GlooBackend(GlooOptions options,
              std::shared_ptr<gloo::transport::Device> device,
              std::unique_ptr<LoopPoker> poker)
      : options_(std::move(options)),
        device_(std::move(device)),
        poker_(std::move(poker)),
        reaper_(std::make_unique<ContextReaper>()) {}
  absl::Status Fail(const std::exception& e, const char* what);
  // Builds and connects the context of `plan` (registering it for
  // Interrupt()); throws on failure or interruption.
  std::shared_ptr<gloo::Context> Connect(const ReformPlan& plan,
                                         gloo::rendezvous::Store& store);
  // Steps 1-3 of the class comment; throws on failure or interruption.
  void ConnectFullMesh(gloo::Context& ctx, const ReformPlan& plan,
                       gloo::rendezvous::Store& store);
  // Publishes (or, with nullptr, withdraws) the transport context being
  // connected, for Interrupt(). False when Interrupt() was called since
  // Reform() began.
  bool SetForming(gloo::transport::Context* forming);
  // Replaces the communicator in use (nullptr drops it; to the reaper, urgent
  // or not) and records it for Revoke().
  void Install(std::shared_ptr<gloo::Context> context, int64_t generation,
               bool urgent_drop);

  GlooOptions options_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::unique_ptr<LoopPoker> poker_;
  std::shared_ptr<gloo::Context> context_;
  uint32_t tag_ = 0;
  std::unique_ptr<ContextReaper> reaper_;

  absl::Mutex forming_mu_;
  // The rendezvous in progress (0 = none) and its transport context once its
  // pairs exist; Interrupt() closes those pairs.
  int64_t forming_generation_ ABSL_GUARDED_BY(forming_mu_) = 0;
  gloo::transport::Context* forming_ ABSL_GUARDED_BY(forming_mu_) = nullptr;
  bool interrupted_ ABSL_GUARDED_BY(forming_mu_) = false;
  // The newest generation Interrupt() was called with: a rendezvous into an
  // older one that starts after the call is interrupted from the start.
  int64_t newest_interrupt_ ABSL_GUARDED_BY(forming_mu_) = 0;

  absl::Mutex active_mu_;
  // The transport of context_ and its generation, for Revoke().
  std::shared_ptr<RevocableContext> active_ ABSL_GUARDED_BY(active_mu_);
  int64_t active_generation_ ABSL_GUARDED_BY(active_mu_) = 0;

  absl::Mutex prepared_mu_;
  // What Prepare() built, for AdoptPrepared().
  std::shared_ptr<gloo::Context> prepared_ ABSL_GUARDED_BY(prepared_mu_);
  int64_t prepared_generation_ ABSL_GUARDED_BY(prepared_mu_) = 0;
};

}  // namespace ringmaster::shim

#endif  // RINGMASTER_WORKER_SHIM_GLOO_BACKEND_H_
