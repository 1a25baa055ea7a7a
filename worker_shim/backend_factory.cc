// Backend selection; see backend_factory.h.
#include "worker_shim/backend_factory.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "worker_shim/gloo_backend.h"
#if RINGMASTER_HAVE_NCCL
#include "worker_shim/nccl_backend.h"
#endif

namespace ringmaster::shim {

bool HaveNccl() { return RINGMASTER_HAVE_NCCL != 0; }

absl::StatusOr<std::unique_ptr<CollectiveBackend>> MakeBackend(
    std::string_view name, absl::Duration timeout) {
  if (name == "gloo") {
    GlooOptions options;
    options.timeout = timeout;
    RM_ASSIGN_OR_RETURN(auto b, GlooBackend::Create(options));
    return std::unique_ptr<CollectiveBackend>(std::move(b));
  }
  if (name == "nccl") {
#if RINGMASTER_HAVE_NCCL
    NcclOptions options;
    options.timeout = timeout;
    return std::unique_ptr<CollectiveBackend>(
        std::make_unique<NcclBackend>(RealNcclApi(), options));
#else
    return absl::UnimplementedError("this build has no NCCL backend");
#endif
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown backend '", std::string(name), "' (gloo or nccl)"));
}

}  // namespace ringmaster::shim
