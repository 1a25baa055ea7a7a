// The coordinator's gRPC surface: api::Coordinator served over a Coordinator
// core (coordinator.h), plus a small server wrapper that listens on an
// address and drives the core's periodic Tick().
#ifndef RINGMASTER_SERVER_COORDINATOR_COORDINATOR_SERVICE_H_
#define RINGMASTER_SERVER_COORDINATOR_COORDINATOR_SERVICE_H_

#include <memory>
#include <string>
#include <thread>

#include <grpcpp/grpcpp.h>

#include "absl/status/statusor.h"
#include "absl/synchronization/notification.h"
#include "api/coordinator.grpc.pb.h"
#include "server/coordinator/coordinator.h"

namespace ringmaster::server {

// Maps an absl::Status onto the gRPC status with the same code and message.
grpc::Status ToGrpc(const absl::Status& status);

// api::Coordinator implemented over a borrowed Coordinator core. Thread-safe
// (the core is); each Join stream holds one server thread.
class CoordinatorService final : public api::Coordinator::Service {
 public:
  explicit CoordinatorService(Coordinator& core) : core_(core) {}

  grpc::Status Join(grpc::ServerContext* ctx, const api::JoinRequest* req,
                    grpc::ServerWriter<api::MembershipUpdate>* out) override;
  grpc::Status Heartbeat(grpc::ServerContext* ctx,
                         const api::HeartbeatRequest* req,
                         api::HeartbeatReply* out) override;
  grpc::Status KvSet(grpc::ServerContext* ctx, const api::KvSetRequest* req,
                     api::KvSetReply* out) override;
  grpc::Status KvGet(grpc::ServerContext* ctx, const api::KvGetRequest* req,
                     api::KvGetReply* out) override;
  grpc::Status KvWait(grpc::ServerContext* ctx, const api::KvWaitRequest* req,
                      api::KvWaitReply* out) override;
  grpc::Status CommitProgress(grpc::ServerContext* ctx,
                              const api::CommitProgressRequest* req,
                              api::CommitProgressReply* out) override;
  grpc::Status ReportFailure(grpc::ServerContext* ctx,
                             const api::ReportFailureRequest* req,
                             api::ReportFailureReply* out) override;
  grpc::Status Leave(grpc::ServerContext* ctx, const api::LeaveRequest* req,
                     api::LeaveReply* out) override;
  grpc::Status Resize(grpc::ServerContext* ctx, const api::ResizeRequest* req,
                      api::ResizeReply* out) override;
  grpc::Status GetJob(grpc::ServerContext* ctx, const api::GetJobRequest* req,
                      api::JobStatus* out) override;

 private:
  Coordinator& core_;
};

// A running coordinator: core + service + grpc::Server + tick thread.
class CoordinatorServer {
 public:
  // Listens on `address` ("127.0.0.1:0" picks a free port). Errors:
  // UNAVAILABLE when the address cannot be bound.
  static absl::StatusOr<std::unique_ptr<CoordinatorServer>> Start(
      const std::string& address, CoordinatorOptions options,
      absl::Duration tick_interval = absl::Milliseconds(100));
  ~CoordinatorServer();

  // "127.0.0.1:PORT" with the port actually bound.
  const std::string& address() const { return address_; }
  Coordinator& core() { return *core_; }
  // Stops accepting, ends every stream, joins the tick thread. Idempotent.
  void Stop();
  // Blocks until Stop() (from another thread or a signal handler's helper).
  void Wait();

 private:
  CoordinatorServer() = default;
  std::unique_ptr<Coordinator> core_;
  std::unique_ptr<CoordinatorService> service_;
  std::unique_ptr<grpc::Server> server_;
  std::string address_;
  absl::Notification stop_;
  std::thread ticker_;
  bool stopped_ = false;
};

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_COORDINATOR_COORDINATOR_SERVICE_H_
