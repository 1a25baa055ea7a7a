// gRPC glue for the coordinator; see coordinator_service.h.
#include "server/coordinator/coordinator_service.h"

#include <utility>

#include "absl/strings/str_cat.h"

namespace ringmaster::server {

grpc::Status ToGrpc(const absl::Status& status) {
  if (status.ok()) return grpc::Status::OK;
  return grpc::Status(static_cast<grpc::StatusCode>(status.code()),
                      std::string(status.message()));
}

grpc::Status CoordinatorService::Join(
    grpc::ServerContext* ctx, const api::JoinRequest* req,
    grpc::ServerWriter<api::MembershipUpdate>* out) {
  auto sub = core_.Join(*req);
  if (!sub.ok()) return ToGrpc(sub.status());
  grpc::Status result = grpc::Status::OK;
  // Poll for cancellation: a dropped stream (a killed worker) shows up here.
  while (!ctx->IsCancelled()) {
    auto next = core_.NextUpdate(*sub, absl::Milliseconds(50));
    if (!next.ok()) {
      result = ToGrpc(next.status());
      break;
    }
    if (next->has_value() && !out->Write(**next)) break;
  }
  core_.Disconnect(*sub);
  return result;
}

grpc::Status CoordinatorService::Heartbeat(grpc::ServerContext*,
                                           const api::HeartbeatRequest* req,
                                           api::HeartbeatReply* out) {
  auto gen = core_.Heartbeat(*req);
  if (!gen.ok()) return ToGrpc(gen.status());
  out->set_current_generation(*gen);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::KvSet(grpc::ServerContext*,
                                       const api::KvSetRequest* req,
                                       api::KvSetReply*) {
  return ToGrpc(core_.KvSet(*req));
}

grpc::Status CoordinatorService::KvGet(grpc::ServerContext*,
                                       const api::KvGetRequest* req,
                                       api::KvGetReply* out) {
  auto value = core_.KvGet(*req);
  if (!value.ok()) return ToGrpc(value.status());
  out->set_found(value->has_value());
  if (value->has_value()) out->set_value(**value);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::KvWait(grpc::ServerContext*,
                                        const api::KvWaitRequest* req,
                                        api::KvWaitReply* out) {
  auto values = core_.KvWait(*req);
  if (!values.ok()) return ToGrpc(values.status());
  for (auto& v : *values) out->add_values(std::move(v));
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::CommitProgress(
    grpc::ServerContext*, const api::CommitProgressRequest* req,
    api::CommitProgressReply*) {
  return ToGrpc(core_.CommitProgress(*req));
}

grpc::Status CoordinatorService::ReportFailure(
    grpc::ServerContext*, const api::ReportFailureRequest* req,
    api::ReportFailureReply* out) {
  auto gen = core_.ReportFailure(*req);
  if (!gen.ok()) return ToGrpc(gen.status());
  out->set_current_generation(*gen);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::Leave(grpc::ServerContext*,
                                       const api::LeaveRequest* req,
                                       api::LeaveReply*) {
  return ToGrpc(core_.Leave(*req));
}

grpc::Status CoordinatorService::Resize(grpc::ServerContext*,
                                        const api::ResizeRequest* req,
                                        api::ResizeReply* out) {
  auto gen = core_.Resize(*req);
  if (!gen.ok()) return ToGrpc(gen.status());
  out->set_generation(*gen);
  return grpc::Status::OK;
}

grpc::Status CoordinatorService::GetJob(grpc::ServerContext*,
                                        const api::GetJobRequest* req,
                                        api::JobStatus* out) {
  auto job = core_.GetJob(req->job());
  if (!job.ok()) return ToGrpc(job.status());
  *out = *std::move(job);
  return grpc::Status::OK;
}

absl::StatusOr<std::unique_ptr<CoordinatorServer>> CoordinatorServer::Start(
    const std::string& address, CoordinatorOptions options,
    absl::Duration tick_interval) {
  std::unique_ptr<CoordinatorServer> s(new CoordinatorServer());
  s->core_ = std::make_unique<Coordinator>(std::move(options));
  s->service_ = std::make_unique<CoordinatorService>(*s->core_);
  grpc::ServerBuilder builder;
  int port = 0;
  builder.AddListeningPort(address, grpc::InsecureServerCredentials(), &port);
  builder.RegisterService(s->service_.get());
  // Two coordinators must never share a port (SO_REUSEPORT would let a
  // restarted one silently split connections with a dying listener).
  builder.AddChannelArgument(GRPC_ARG_ALLOW_REUSEPORT, 0);
  // Keep many blocked streams and waits from starving each other.
  builder.SetSyncServerOption(grpc::ServerBuilder::SyncServerOption::MAX_POLLERS,
                              4);
  s->server_ = builder.BuildAndStart();
  if (!s->server_ || port == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", address));
  }
  const auto colon = address.rfind(':');
  s->address_ = absl::StrCat(address.substr(0, colon), ":", port);
  CoordinatorServer* raw = s.get();
  s->ticker_ = std::thread([raw, tick_interval] {
    while (!raw->stop_.WaitForNotificationWithTimeout(tick_interval)) {
      raw->core_->Tick();
    }
  });
  return s;
}

void CoordinatorServer::Stop() {
  if (stopped_) return;
  stopped_ = true;
  if (!stop_.HasBeenNotified()) stop_.Notify();
  core_->Shutdown();
  server_->Shutdown(std::chrono::system_clock::now() +
                    std::chrono::milliseconds(500));
  if (ticker_.joinable()) ticker_.join();
}

void CoordinatorServer::Wait() { stop_.WaitForNotification(); }

CoordinatorServer::~CoordinatorServer() { Stop(); }

}  // namespace ringmaster::server
