// Picks a collective backend by name: "gloo" (always built) or "nccl"
// (only when the build found NCCL).
#ifndef RINGMASTER_WORKER_SHIM_BACKEND_FACTORY_H_
#define RINGMASTER_WORKER_SHIM_BACKEND_FACTORY_H_

#include <memory>
#include <string_view>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker_shim/collective.h"

namespace ringmaster::shim {

// True when this build has the NCCL backend.
bool HaveNccl();

// INVALID_ARGUMENT for an unknown name, UNIMPLEMENTED for "nccl" in a build
// without NCCL. `timeout` bounds rendezvous and each collective.
absl::StatusOr<std::unique_ptr<CollectiveBackend>> MakeBackend(
    std::string_view name, absl::Duration timeout);

}  // namespace ringmaster::shim

#endif  // RINGMASTER_WORKER_SHIM_BACKEND_FACTORY_H_
