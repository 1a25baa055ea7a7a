// The shim's connection to the coordinator: a membership watcher that keeps
// the newest generation (and reconnects, re-joining with its last generation
// so that a restarted coordinator can re-adopt the job), a heartbeat thread,
// and thin typed wrappers over the key-value store, progress, failure
// reports and leave.
//
// The watcher also tracks whether the coordinator can be reached, and says
// so in the log (docs/SHIM.md, "What the shim logs"): an error when the
// first connection attempt fails (refused, or no answer within
// `unreachable_after`), a warning when a coordinator it was connected to is
// lost, a reminder every `unreachable_log_interval` while it stays away, and
// an info line when it is reached (again). It keeps retrying all the while;
// WaitForGeneration's error then names the coordinator and what went wrong.
#ifndef RINGMASTER_WORKER_SHIM_COORDINATOR_CLIENT_H_
#define RINGMASTER_WORKER_SHIM_COORDINATOR_CLIENT_H_

#include <atomic>
#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/coordinator.grpc.pb.h"

namespace ringmaster::shim {

struct ClientOptions {
  std::string address;  // "127.0.0.1:PORT"
  std::string job;
  std::string worker_id;
  std::string host = "127.0.0.1";
  std::vector<int32_t> gpus;
  int32_t desired_workers = 0;  // used when this Join creates the job
  absl::Duration heartbeat_interval = absl::Milliseconds(500);
  absl::Duration rpc_timeout = absl::Seconds(5);
  absl::Duration reconnect_backoff = absl::Milliseconds(100);
  // A connection attempt that neither connects nor fails within this is
  // reported as "no answer" (and goes on).
  absl::Duration unreachable_after = absl::Seconds(2);
  // While the coordinator stays unreachable, the log says so again this
  // often.
  absl::Duration unreachable_log_interval = absl::Seconds(10);
};

// Whether the coordinator can be reached, as the watcher last saw it.
struct Reachability {
  bool connected = false;       // a connection to it is up now
  bool ever_connected = false;  // it was reached at least once
  absl::Time since;             // when the current state began
  std::string reason;           // unreachable: "connection refused", ...
  std::string error;            // unreachable: gRPC's own message
};

// `d` for people: "60 s", "1.5 s", "250 ms" (whole or tenths of seconds from
// 1 s up, whole milliseconds below).
std::string FormatSeconds(absl::Duration d);

// A short cause for a failed connection from gRPC's message: "connection
// refused", "no route to host", "name not resolved", "no answer" or
// "unreachable".
std::string ConnectFailureReason(std::string_view grpc_message);

class CoordinatorClient {
 public:
  // Starts the watcher and heartbeat threads; does not wait for the first
  // generation. Errors: INVALID_ARGUMENT for missing address, job or worker.
  static absl::StatusOr<std::unique_ptr<CoordinatorClient>> Connect(
      ClientOptions options);
  ~CoordinatorClient();
  CoordinatorClient(const CoordinatorClient&) = delete;
  CoordinatorClient& operator=(const CoordinatorClient&) = delete;

  const ClientOptions& options() const { return options_; }

  // Newest generation received so far (0 = none).
  int64_t LatestGeneration() const;
  // The newest failure generation the latest update names (0: none yet):
  // a generation published because a member failed, not a planned change.
  int64_t LatestFailureGeneration() const;
  // Unix time (us) at which the newest generation arrived (0 = none); for
  // re-formation timing.
  int64_t LatestReceivedUnixMicros() const;
  // Waits until an update with generation >= min_generation has arrived and
  // returns the newest one. On timeout: UNAVAILABLE naming the coordinator's
  // address, why it cannot be reached and since when, if it cannot be now;
  // else DEADLINE_EXCEEDED (the coordinator is there, the generation did
  // not come). The message reports `waited_before + timeout` as the time
  // waited (a caller that waits in several calls passes what it already
  // waited). FAILED_PRECONDITION when the coordinator refused the join for
  // good (job finished).
  absl::StatusOr<api::MembershipUpdate> WaitForGeneration(
      int64_t min_generation, absl::Duration timeout,
      absl::Duration waited_before = absl::ZeroDuration());

  // The coordinator's reachability (see the top).
  Reachability reachability() const;
  // One sentence on the job as the coordinator sees it (members, standbys,
  // target), for an error message; empty when the coordinator does not
  // answer within a second.
  std::string DescribeJob() const;

  // Calls `listener` (on the watcher thread, never concurrently with itself)
  // with each update newer than any before; an empty function removes it.
  // Returns only when no call to a previous listener is running.
  using GenerationListener = std::function<void(const api::MembershipUpdate&)>;
  void SetGenerationListener(GenerationListener listener);

  // The generation this worker now works in; sent on every re-join so a
  // restarted coordinator continues the numbering.
  void SetCurrent(int64_t generation, int32_t rank, int32_t world_size);

  absl::Status KvSet(int64_t generation, const std::string& key,
                     const std::string& value);
  absl::StatusOr<std::optional<std::string>> KvGet(int64_t generation,
                                                   const std::string& key);
  absl::Status KvWait(int64_t generation, const std::vector<std::string>& keys,
                      absl::Duration timeout);
  // Waits for `key` and returns its value, in one round trip.
  absl::StatusOr<std::string> KvWaitGet(int64_t generation,
                                        const std::string& key,
                                        absl::Duration timeout);
  // Waits for every key and returns their values in key order, in one round
  // trip.
  absl::StatusOr<std::vector<std::string>> KvWaitGet(
      int64_t generation, const std::vector<std::string>& keys,
      absl::Duration timeout);
  // With the generation's measured speed since the last commit (seconds
  // and global samples per step; 0: not measured).
  absl::Status CommitProgress(int64_t generation, int64_t step,
                              int64_t position, double step_seconds = 0,
                              double step_samples = 0);
  // Returns the coordinator's current generation.
  absl::StatusOr<int64_t> ReportFailure(int64_t generation,
                                        const std::string& suspect,
                                        const std::string& detail);
  // Leaves the job (finished = the whole job is done) and stops watching.
  absl::Status Leave(bool finished);

  // Times the membership stream was (re)established.
  int64_t connects() const { return connects_.load(); }

 private:
  explicit CoordinatorClient(ClientOptions options);
  void WatchLoop();
  void HeartbeatLoop();
  std::unique_ptr<grpc::ClientContext> MakeContext(absl::Duration timeout) const;
  // The current stub; Reconnect() swaps in a fresh channel.
  std::shared_ptr<api::Coordinator::Stub> Stub() const;
  void Reconnect();
  std::shared_ptr<grpc::Channel> Channel() const;
  // Waits (slices of 20 ms, for stopping) until the channel is connected,
  // has failed, or `unreachable_after` passed.
  enum class ConnectResult { kReady, kFailed, kNoAnswer, kStopping };
  ConnectResult AwaitConnected(grpc::Channel& channel);
  // The watcher's reachability transitions, each logged (see the top).
  void NoteConnected();
  void NoteUnreachable(const std::string& reason, const std::string& error);

  const ClientOptions options_;
  mutable absl::Mutex stub_mu_;
  std::shared_ptr<api::Coordinator::Stub> stub_ ABSL_GUARDED_BY(stub_mu_);
  std::shared_ptr<grpc::Channel> channel_ ABSL_GUARDED_BY(stub_mu_);

  absl::Mutex listener_mu_;
  GenerationListener listener_ ABSL_GUARDED_BY(listener_mu_);

  mutable absl::Mutex mu_;
  std::optional<api::MembershipUpdate> latest_ ABSL_GUARDED_BY(mu_);
  int64_t latest_received_us_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Status terminal_ ABSL_GUARDED_BY(mu_);
  int64_t current_generation_ ABSL_GUARDED_BY(mu_) = 0;
  int32_t current_rank_ ABSL_GUARDED_BY(mu_) = -1;
  int32_t current_world_ ABSL_GUARDED_BY(mu_) = 0;
  bool stopping_ ABSL_GUARDED_BY(mu_) = false;
  Reachability reach_ ABSL_GUARDED_BY(mu_);
  bool reach_reported_ ABSL_GUARDED_BY(mu_) = false;  // unreachable, logged
  absl::Time reach_logged_ ABSL_GUARDED_BY(mu_);      // last such line
  grpc::ClientContext* stream_ctx_ ABSL_GUARDED_BY(mu_) = nullptr;
  std::atomic<int64_t> connects_{0};
  std::thread watcher_;
  std::thread heartbeat_;
};

// Converts a gRPC status into the absl::Status with the same code.
absl::Status FromGrpc(const grpc::Status& status);

}  // namespace ringmaster::shim

#endif  // RINGMASTER_WORKER_SHIM_COORDINATOR_CLIENT_H_
