// NCCL collective backend (GPU memory), re-formed per generation with NCCL
// 2.28's fault-tolerance calls. Communicators are non-blocking
// (config.blocking = 0) so they can be revoked or aborted at any time; every
// call that may return ncclInProgress is polled with ncclCommGetAsyncError
// under a timeout.
//
// Re-formation, given the ReformPlan every rank computed alike:
//  1. Planned shrink (only removals, old communicator healthy):
//     ncclCommShrink(old, excluded, NCCL_SHRINK_DEFAULT), then abort the old.
//  2. Failure with only removals: ncclCommRevoke(old), then
//     ncclCommShrink(old, excluded, NCCL_SHRINK_ABORT), then abort the old.
//  3. Anything else (growth: 2.28 has no grow; newcomers; a failed shrink;
//     no old communicator): abort the old one, rank 0 makes a fresh unique id
//     and publishes it in the generation's store, everyone
//     ncclCommInitRankConfig.
//  4. Same members, no failure (e.g. a coordinator restart): keep it.
// Revoke() (another thread, when a failure generation is published) only
// raises a flag: NCCL calls must not race with the thread inside one, so the
// training thread's poll of the collective sees the flag and returns
// UNAVAILABLE; the re-formation that follows then revokes and shrinks the
// communicator (2) on the training thread.
// Abort, never Destroy: after a peer died Destroy is an intra-node
// collective that could hang.
#ifndef RINGMASTER_WORKER_SHIM_NCCL_BACKEND_H_
#define RINGMASTER_WORKER_SHIM_NCCL_BACKEND_H_

#include <atomic>
#include <memory>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker_shim/collective.h"
#include "worker_shim/nccl_api.h"

namespace ringmaster::shim {

struct NcclOptions {
  absl::Duration timeout = absl::Seconds(30);  // per init/shrink/collective
  absl::Duration poll_interval = absl::Microseconds(50);
};

class NcclBackend final : public CollectiveBackend {
 public:
  NcclBackend(NcclApi api, NcclOptions options);
  ~NcclBackend() override;

  std::string_view name() const override { return "nccl"; }
  absl::Status Reform(const ReformPlan& plan,
                      gloo::rendezvous::Store& store) override;
  // `data` is device memory.
  absl::Status AllReduce(void* data, size_t count, DataType type,
                         ReduceOp op) override;
  absl::Status Broadcast(void* data, size_t bytes, int root) override;
  absl::Status Barrier() override;
  void Abort() override;
  // False once Revoke() names a newer generation (rule 7).
  bool healthy() const override {
    return comm_ != nullptr && healthy_ && !Revoked();
  }
  void Revoke(int64_t failure_generation) override;

 private:
  // Polls until `comm` leaves ncclInProgress (and `stream`, when given, is
  // done). On error or timeout returns non-OK; the caller decides to abort.
  // `revocable`: a collective, which Revoke() ends.
  absl::Status Await(ncclComm_t comm, cudaStream_t stream, const char* what,
                     bool revocable = false);
  // Revoke() was called with a generation newer than the communicator's.
  bool Revoked() const;
  absl::Status RevokedError() const;
  absl::Status Check(ncclResult_t r, const char* what);
  absl::Status Fresh(const ReformPlan& plan, gloo::rendezvous::Store& store);
  absl::Status Shrink(const ReformPlan& plan);
  ncclConfig_t Config() const;

  NcclApi api_;
  NcclOptions options_;
  ncclComm_t comm_ = nullptr;
  bool healthy_ = false;
  int world_size_ = 0;
  int64_t generation_ = 0;  // of comm_
  std::atomic<int64_t> revoke_generation_{0};
  cudaStream_t stream_ = nullptr;
  void* scratch_ = nullptr;  // one float on the device, for Barrier()
};

}  // namespace ringmaster::shim

#endif  // RINGMASTER_WORKER_SHIM_NCCL_BACKEND_H_
