// The in-process shim (Horovod-style, no restart): joins the coordinator,
// builds the communicator for each membership generation, and carries the
// worker's elastic state across changes.
//
// The training loop, per step:
//   1. compute, then AllReduce() through the shim;
//      on error -> Recover(): report the failure, wait for the next
//      generation, roll back to the last commit, re-form, sync; redo the step;
//   2. every few steps Commit(step, position);
//   3. StepBoundary(): the members all-reduce (max) the newest generation any
//      of them has heard of, so that all of them switch at the same step; on a
//      planned change the communicator is re-formed without rollback and the
//      state synced from the lowest rank that held state. kRemoved means this
//      worker was shrunk away and should exit.
// Rollback rule: a re-form restores the last commit when this rank saw a
// collective fail or when the coordinator published a failure generation
// since the one this rank was in (MembershipUpdate.last_failure_generation).
#ifndef RINGMASTER_WORKER_SHIM_SHIM_H_
#define RINGMASTER_WORKER_SHIM_SHIM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "api/coordinator.pb.h"
#include "worker_shim/collective.h"
#include "worker_shim/coordinator_client.h"
#include "worker_shim/elastic_state.h"

namespace ringmaster::shim {

struct ShimOptions {
  ClientOptions client;
  // How long to wait for a generation this worker is a member of.
  absl::Duration membership_timeout = absl::Seconds(60);
  // Bound on one rendezvous attempt.
  absl::Duration rendezvous_timeout = absl::Seconds(20);
  std::string commit_file;  // optional, see ElasticState
  // Called on the training thread when a re-formation into a generation this
  // worker is a member of begins (before the rendezvous); for logs and
  // tests. May be empty.
  std::function<void(const api::MembershipUpdate&)> on_reform_start;
};

// One completed re-formation, for logs and benchmarks.
struct ReformRecord {
  int64_t generation = 0;
  api::Reason reason = api::REASON_UNSPECIFIED;
  int rank = -1;
  int world_size = 0;
  bool rolled_back = false;
  int64_t published_unix_us = 0;  // coordinator published the generation
  int64_t received_unix_us = 0;   // this rank's watcher received it
  int64_t boundary_unix_us = 0;   // this rank began moving to it (the step
                                  // boundary, or the failed collective)
  int64_t rendezvous_unix_us = 0;  // this rank began its (last) rendezvous
  int64_t formed_unix_us = 0;     // this rank holds a working communicator
  int64_t synced_unix_us = 0;     // state synced
  int64_t kv_rpcs = 0;            // coordinator round trips of the rendezvous
  int64_t kv_rpc_us = 0;          // time spent in them
};

class Shim {
 public:
  enum class Boundary { kContinue, kReformed, kRemoved };

  // Connects to the coordinator; takes ownership of the backend.
  static absl::StatusOr<std::unique_ptr<Shim>> Create(
      ShimOptions options, std::unique_ptr<CollectiveBackend> backend);
  ~Shim();

  // Register state buffers before Start().
  ElasticState& state() { return state_; }

  // Waits to be a member, forms the first communicator and syncs the state
  // (a newcomer receives it). kRemoved is impossible here; errors:
  // DEADLINE_EXCEEDED (never admitted), FAILED_PRECONDITION (job finished).
  absl::Status Start();

  absl::Status AllReduce(void* data, size_t count, DataType type, ReduceOp op);
  absl::Status Broadcast(void* data, size_t bytes, int root);
  absl::Status Barrier();

  // Commits the state and reports progress (rank 0 only reports).
  absl::Status Commit(int64_t step, int64_t position);
  absl::StatusOr<Boundary> StepBoundary();
  // After a failed collective. Returns kReformed, or kRemoved when the
  // coordinator dropped this worker.
  absl::StatusOr<Boundary> Recover(const std::string& detail);

  // Leaves the job (finished: the whole job is complete).
  absl::Status Leave(bool finished);

  int rank() const { return rank_; }
  int world_size() const { return static_cast<int>(members_.size()); }
  int64_t generation() const { return generation_; }
  const std::vector<ReformRecord>& reforms() const { return reforms_; }
  CoordinatorClient& client() { return *client_; }
  CollectiveBackend& backend() { return *backend_; }

 private:
  Shim(ShimOptions options, std::unique_ptr<CoordinatorClient> client,
       std::unique_ptr<CollectiveBackend> backend);
  // Moves to the newest generation >= min_generation this worker is a
  // member of (re-forming as often as needed).
  absl::StatusOr<Boundary> ReformTo(int64_t min_generation, bool local_failure);

  ShimOptions options_;
  std::unique_ptr<CoordinatorClient> client_;
  std::unique_ptr<CollectiveBackend> backend_;
  ElasticState state_;
  int64_t generation_ = 0;
  int rank_ = -1;
  std::vector<std::string> members_;
  std::vector<ReformRecord> reforms_;
};

}  // namespace ringmaster::shim

#endif  // RINGMASTER_WORKER_SHIM_SHIM_H_
