// Gloo collective backend: CPU memory over TCP. Gloo has no shrink, so every
// generation builds a new full-mesh context over the generation-scoped store;
// the TCP device (listening socket and event loop) is kept across
// generations.
#ifndef RINGMASTER_WORKER_SHIM_GLOO_BACKEND_H_
#define RINGMASTER_WORKER_SHIM_GLOO_BACKEND_H_

#include <memory>
#include <string>

#include <gloo/context.h>
#include <gloo/transport/device.h>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker_shim/collective.h"

namespace ringmaster::shim {

struct GlooOptions {
  std::string hostname = "127.0.0.1";  // interface to listen on
  // Bound on rendezvous and on each collective; a dead peer usually shows up
  // much sooner as a closed connection.
  absl::Duration timeout = absl::Seconds(10);
};

class GlooBackend final : public CollectiveBackend {
 public:
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
  void Abort() override { context_.reset(); }
  bool healthy() const override { return context_ != nullptr; }

 private:
  GlooBackend(GlooOptions options,
              std::shared_ptr<gloo::transport::Device> device)
      : options_(std::move(options)), device_(std::move(device)) {}
  absl::Status Fail(const std::exception& e, const char* what);

  GlooOptions options_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::Context> context_;
  uint32_t tag_ = 0;
};

}  // namespace ringmaster::shim

#endif  // RINGMASTER_WORKER_SHIM_GLOO_BACKEND_H_
