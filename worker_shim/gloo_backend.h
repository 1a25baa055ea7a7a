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
//   4. Interrupt() from another thread abandons steps 2-3 (the store wait
//      fails, no further pair is connected, and the one pair waiting for
//      its peer's dial is closed), for a rendezvous that a newer generation
//      made pointless.
// A communicator in use cannot be broken the same way; Revoke() does it
// through the transport wrapper of gloo_transport.h (RevocableContext), which
// also holds the loop poker of step 3 and the reaper that closes old
// communicators off the training thread.
#ifndef RINGMASTER_WORKER_SHIM_GLOO_BACKEND_H_
#define RINGMASTER_WORKER_SHIM_GLOO_BACKEND_H_

#include <memory>
#include <string>
#include <vector>

#include <gloo/context.h>
#include <gloo/transport/device.h>
#include <gloo/transport/tcp/device.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "worker_shim/collective.h"
#include "worker_shim/gloo_transport.h"

namespace ringmaster::shim {

struct GlooOptions {
  std::string hostname = "127.0.0.1";  // interface to listen on
  // Bound on rendezvous and on each collective; a dead peer usually shows up
  // much sooner as a closed connection.
  absl::Duration timeout = absl::Seconds(10);
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
  // The preamble of every collective: OK when a communicator is in use and
  // not revoked; else the error to return (a revoked one is dropped, to
  // the reaper, urgently).
  absl::Status Usable();
  // Every collective: the preamble, then `body` (Gloo calls, which throw),
  // a Gloo exception turned into UNAVAILABLE ("gloo <what>: ...") with the
  // communicator dropped. Defined in the .cc (used only there).
  template <typename Body>
  absl::Status Collective(const char* what, Body&& body);
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
  // Step 3: the peer whose dial the pair about to connect waits for (-1:
  // this rank dials it), the only pair Interrupt() may close. False, as
  // SetForming(), when interrupted.
  bool SetAwaited(int peer);
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
  // The rendezvous in progress (0 = none), its transport context once its
  // pairs exist, and the peer whose dial it waits for (-1 = none);
  // Interrupt() closes that pair.
  int64_t forming_generation_ ABSL_GUARDED_BY(forming_mu_) = 0;
  gloo::transport::Context* forming_ ABSL_GUARDED_BY(forming_mu_) = nullptr;
  int forming_awaited_ ABSL_GUARDED_BY(forming_mu_) = -1;
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
