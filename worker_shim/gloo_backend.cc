// Gloo backend; see gloo_backend.h.
#include "worker_shim/gloo_backend.h"

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/transport/tcp/device.h>

#include <signal.h>

#include <chrono>

#include "absl/strings/str_cat.h"

namespace ringmaster::shim {
namespace {

using ReduceFn = void (*)(void*, const void*, const void*, size_t);

template <typename T>
ReduceFn Pick(ReduceOp op) {
  return op == ReduceOp::kSum ? static_cast<ReduceFn>(&gloo::sum<T>)
                              : static_cast<ReduceFn>(&gloo::max<T>);
}

template <typename T>
void RunAllReduce(const std::shared_ptr<gloo::Context>& ctx, void* data,
                  size_t count, ReduceOp op, uint32_t tag) {
  gloo::AllreduceOptions opts(ctx);
  opts.setOutput(static_cast<T*>(data), count);
  opts.setReduceFunction(Pick<T>(op));
  opts.setTag(tag);
  gloo::allreduce(opts);
}

}  // namespace

absl::StatusOr<std::unique_ptr<GlooBackend>> GlooBackend::Create(
    GlooOptions options) {
  // Gloo's TCP transport writes with writev(), which raises SIGPIPE when the
  // peer has died; a dead peer must be an error we recover from, not our own
  // death. (Process-wide, as every networking library must do.)
  ::signal(SIGPIPE, SIG_IGN);
  try {
    gloo::transport::tcp::attr attr;
    attr.hostname = options.hostname;
    auto device = gloo::transport::tcp::CreateDevice(attr);
    return std::unique_ptr<GlooBackend>(
        new GlooBackend(std::move(options), std::move(device)));
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("gloo: cannot create TCP device: ", e.what()));
  }
}

absl::Status GlooBackend::Fail(const std::exception& e, const char* what) {
  context_.reset();
  return absl::UnavailableError(absl::StrCat("gloo ", what, ": ", e.what()));
}

absl::Status GlooBackend::Reform(const ReformPlan& plan,
                                 gloo::rendezvous::Store& store) {
  context_.reset();
  if (plan.rank < 0 || plan.rank >= plan.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "gloo: rank ", plan.rank, " not in a world of ", plan.world_size));
  }
  try {
    auto ctx =
        std::make_shared<gloo::rendezvous::Context>(plan.rank, plan.world_size);
    ctx->setTimeout(std::chrono::milliseconds(
        absl::ToInt64Milliseconds(options_.timeout)));
    ctx->connectFullMesh(store, device_);
    context_ = std::move(ctx);
    tag_ = 0;
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return Fail(e, "rendezvous");
  }
}

absl::Status GlooBackend::AllReduce(void* data, size_t count, DataType type,
                                    ReduceOp op) {
  if (!context_) return absl::FailedPreconditionError("gloo: no communicator");
  if (count == 0) return absl::OkStatus();
  try {
    switch (type) {
      case DataType::kFloat32:
        RunAllReduce<float>(context_, data, count, op, ++tag_);
        break;
      case DataType::kFloat64:
        RunAllReduce<double>(context_, data, count, op, ++tag_);
        break;
      case DataType::kInt64:
        RunAllReduce<int64_t>(context_, data, count, op, ++tag_);
        break;
    }
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return Fail(e, "allreduce");
  }
}

absl::Status GlooBackend::Broadcast(void* data, size_t bytes, int root) {
  if (!context_) return absl::FailedPreconditionError("gloo: no communicator");
  if (root < 0 || root >= context_->size) {
    return absl::InvalidArgumentError(absl::StrCat("gloo: bad root ", root));
  }
  if (bytes == 0) return absl::OkStatus();
  try {
    gloo::BroadcastOptions opts(context_);
    opts.setOutput(static_cast<char*>(data), bytes);
    opts.setRoot(root);
    opts.setTag(++tag_);
    gloo::broadcast(opts);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return Fail(e, "broadcast");
  }
}

absl::Status GlooBackend::Barrier() {
  if (!context_) return absl::FailedPreconditionError("gloo: no communicator");
  try {
    gloo::BarrierOptions opts(context_);
    opts.setTag(++tag_);
    gloo::barrier(opts);
    return absl::OkStatus();
  } catch (const std::exception& e) {
    return Fail(e, "barrier");
  }
}

}  // namespace ringmaster::shim
