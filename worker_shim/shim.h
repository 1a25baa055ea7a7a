// The in-process shim (Horovod-style, no restart): joins the coordinator,
// builds the communicator for each membership generation, and carries the
// worker's elastic state across changes.
//
// The training loop, per step:
//   1. compute, then AllReduce() through the shim;
//      on error -> Recover(): report the failure, wait for the next
//      generation, roll back to the last commit (see the rollback rule
//      below), re-form, sync; redo the step;
//   2. every few steps Commit(step, position);
//   3. StepBoundary(): the members all-reduce (max) the newest generation any
//      of them has heard of, so that all of them switch at the same step; on a
//      planned change the communicator is re-formed without rollback and the
//      state synced from the lowest rank that held state. kRemoved means this
//      worker was shrunk away and should exit.
// Overlap (backends with can_prepare(), i.e. Gloo): when a member whose
// communicator is healthy hears of a planned generation it is also a member
// of (no failure published since its own), a thread of the shim starts that
// generation's rendezvous at once, while the training thread finishes its
// step on the old communicator; the step boundary then waits for the
// prepared communicator (if not ready yet) and swaps it in. A newer
// generation interrupts a prepared rendezvous (and is prepared in its
// place); a failed one falls back to the synchronous re-form at the
// boundary, over a store namespace of its own. Departing workers prepare
// nothing and keep serving the old communicator until the boundary.
// Rollback rule: a re-form restores the last commit when the coordinator
// published a failure generation since the communicator this rank holds
// (MembershipUpdate.last_failure_generation); a newcomer never does. A
// collective, rendezvous or sync that fails here is reported, and is a
// failure only if such a generation follows: a planned one means a newer
// generation superseded this rank's, with the state still the boundary's.
#ifndef RINGMASTER_WORKER_SHIM_SHIM_H_
#define RINGMASTER_WORKER_SHIM_SHIM_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/coordinator.pb.h"
#include "worker_shim/collective.h"
#include "worker_shim/coordinator_client.h"
#include "worker_shim/elastic_state.h"

namespace ringmaster::shim {

struct ShimOptions {
  ClientOptions client;
  // How long to wait for a generation this worker is a member of: at
  // Start() (to be admitted: the gang must form) and at every change
  // (Recover, a step boundary's re-formation). The C API also takes it from
  // RINGMASTER_MEMBERSHIP_TIMEOUT.
  absl::Duration membership_timeout = absl::Seconds(60);
  // Bound on one rendezvous attempt.
  absl::Duration rendezvous_timeout = absl::Seconds(20);
  std::string commit_file;  // optional, see ElasticState
  // Called when a re-formation into a generation this worker is a member of
  // begins (before the rendezvous): on the training thread, or on the shim's
  // preparing thread for a prepared one (see the top); for logs and tests.
  // May be empty.
  std::function<void(const api::MembershipUpdate&)> on_reform_start;
};

// One completed re-formation, for logs and benchmarks.
struct ReformRecord {
  int64_t generation = 0;
  api::Reason reason = api::REASON_UNSPECIFIED;
  int rank = -1;
  int world_size = 0;
  bool rolled_back = false;
  int sync_root = -1;             // rank the state was synced from (the
                                  // lowest member with state; -1 = none)
  int64_t published_unix_us = 0;  // coordinator published the generation
  int64_t received_unix_us = 0;   // this rank's watcher received it
  int64_t boundary_unix_us = 0;   // this rank began moving to it (the step
                                  // boundary, or the failed collective)
  int64_t rendezvous_unix_us = 0;  // this rank began its (last) rendezvous
  int64_t formed_unix_us = 0;     // this rank holds a working communicator
  int64_t synced_unix_us = 0;     // state synced
  bool prepared = false;          // the rendezvous ran ahead of the boundary
                                  // (then rendezvous_unix_us may precede
                                  // boundary_unix_us)
  int64_t prepared_unix_us = 0;   // the prepared communicator was ready
                                  // (0 unless prepared)
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
  // (a newcomer receives it). kRemoved is impossible here; errors, after
  // membership_timeout: UNAVAILABLE (the coordinator was never reached, or
  // is lost: the message names its address and why), DEADLINE_EXCEEDED
  // (never admitted: the message says what the job has), and
  // FAILED_PRECONDITION (job finished).
  absl::Status Start();

  // Changes membership_timeout for the waits that begin after the call.
  void set_membership_timeout(absl::Duration timeout) {
    options_.membership_timeout = timeout;
  }
  absl::Duration membership_timeout() const {
    return options_.membership_timeout;
  }

  absl::Status AllReduce(void* data, size_t count, DataType type, ReduceOp op);
  absl::Status Broadcast(void* data, size_t bytes, int root);
  absl::Status Barrier();

  // Commits the state and reports progress (rank 0 only reports), with the
  // speed last given to ReportStep in this generation.
  absl::Status Commit(int64_t step, int64_t position);
  // The training loop's measured speed: seconds per optimizer step and
  // global samples per step (0: unknown). Kept until the next Commit of this
  // generation sends it (a re-formation drops it: it measured the old
  // size). InvalidArgument for a negative, infinite or NaN value.
  absl::Status ReportStep(double seconds, double samples);
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
  // A wait for a generation that timed out, with what the coordinator says
  // of the job when it is reachable (DEADLINE_EXCEEDED); else as it is.
  absl::Status ExplainWaitFailure(const absl::Status& status) const;

  // The background preparation of planned re-formations (see the top).
  struct PrepareResult {
    int64_t generation = 0;
    absl::Status status;
    int64_t started_unix_us = 0;
    int64_t done_unix_us = 0;
    int64_t kv_rpcs = 0;
    int64_t kv_rpc_us = 0;
  };
  // Watcher thread: queues `update` for preparation when it qualifies.
  void MaybePrepare(const api::MembershipUpdate& update);
  void PrepareLoop();
  // Training thread: stops queueing, drops a queued one, waits for the
  // preparation in flight and returns the last result, if any.
  std::optional<PrepareResult> PausePrepare();
  // Training thread, after a re-formation: prepares again from the
  // communicator now held (and queues a generation that came meanwhile).
  void ResumePrepare();
  void StopPrepare();

  ShimOptions options_;
  std::unique_ptr<CoordinatorClient> client_;
  std::unique_ptr<CollectiveBackend> backend_;
  ElasticState state_;
  int64_t generation_ = 0;
  int rank_ = -1;
  // ReportStep's measurement and the generation it was made in.
  double step_seconds_ = 0;
  double step_samples_ = 0;
  int64_t step_generation_ = -1;
  std::vector<std::string> members_;
  std::vector<ReformRecord> reforms_;

  absl::Mutex prep_mu_;
  bool prep_enabled_ ABSL_GUARDED_BY(prep_mu_) = false;
  bool prep_stop_ ABSL_GUARDED_BY(prep_mu_) = false;
  // The communicator held while enabled: its generation and members.
  int64_t prep_from_generation_ ABSL_GUARDED_BY(prep_mu_) = 0;
  std::vector<std::string> prep_from_members_ ABSL_GUARDED_BY(prep_mu_);
  std::optional<api::MembershipUpdate> prep_queued_ ABSL_GUARDED_BY(prep_mu_);
  int64_t prep_last_queued_ ABSL_GUARDED_BY(prep_mu_) = 0;
  int64_t prep_running_ ABSL_GUARDED_BY(prep_mu_) = 0;  // generation, 0 = none
  std::optional<PrepareResult> prep_result_ ABSL_GUARDED_BY(prep_mu_);
  std::thread prep_thread_;
};

}  // namespace ringmaster::shim

#endif  // RINGMASTER_WORKER_SHIM_SHIM_H_
