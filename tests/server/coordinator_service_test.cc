// Tests for server/coordinator/coordinator_service.h over real gRPC on 127.0.0.1 with a
// port chosen by the OS.
#include "server/coordinator/coordinator_service.h"

#include <grpcpp/grpcpp.h>
#include <gtest/gtest.h>

namespace ringmaster::server {
namespace {

TEST(CoordinatorService, StreamsGenerationsAndMapsErrors) {
  auto server = CoordinatorServer::Start("127.0.0.1:0", CoordinatorOptions());
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_NE((*server)->address(), "127.0.0.1:0");
  auto channel = grpc::CreateChannel((*server)->address(),
                                     grpc::InsecureChannelCredentials());
  auto stub = api::Coordinator::NewStub(channel);

  grpc::ClientContext join_ctx;
  api::JoinRequest join;
  join.set_job("j");
  join.set_worker_id("w0");
  join.set_desired_workers(1);
  auto reader = stub->Join(&join_ctx, join);
  api::MembershipUpdate update;
  ASSERT_TRUE(reader->Read(&update));
  EXPECT_EQ(update.generation(), 1);
  EXPECT_EQ(update.rank(), 0);

  grpc::ClientContext ctx;
  api::KvSetRequest set;
  set.set_job("missing");
  set.set_generation(1);
  set.set_key("k");
  api::KvSetReply reply;
  grpc::Status s = stub->KvSet(&ctx, set, &reply);
  EXPECT_EQ(s.error_code(), grpc::StatusCode::NOT_FOUND);
  EXPECT_NE(s.error_message().find("unknown job"), std::string::npos);

  // A resize through the service reaches the open stream.
  grpc::ClientContext rctx;
  api::ResizeRequest resize;
  resize.set_job("j");
  resize.set_workers(1);
  resize.add_ring_order("w0");
  api::ResizeReply rreply;
  ASSERT_TRUE(stub->Resize(&rctx, resize, &rreply).ok());

  // Dropping the stream while a member makes the coordinator drop the worker.
  join_ctx.TryCancel();
  reader->Finish();
  for (int i = 0; i < 100; ++i) {
    auto job = (*server)->core().GetJob("j");
    if (job.ok() && job->members_size() == 0) break;
    absl::SleepFor(absl::Milliseconds(20));
  }
  EXPECT_EQ((*server)->core().GetJob("j")->members_size(), 0);
  (*server)->Stop();
}

}  // namespace
}  // namespace ringmaster::server

namespace ringmaster::server {
namespace {

TEST(CoordinatorService, RestartsOnTheSamePortAndServesAgain) {
  auto first = CoordinatorServer::Start("127.0.0.1:0", CoordinatorOptions());
  ASSERT_TRUE(first.ok());
  const std::string address = (*first)->address();
  auto channel =
      grpc::CreateChannel(address, grpc::InsecureChannelCredentials());
  auto stub = api::Coordinator::NewStub(channel);
  {
    grpc::ClientContext ctx;
    api::GetJobRequest req;
    req.set_job("none");
    api::JobStatus out;
    EXPECT_EQ(stub->GetJob(&ctx, req, &out).error_code(),
              grpc::StatusCode::NOT_FOUND);
  }
  // A member's stream is open while the coordinator goes down.
  grpc::ClientContext join_ctx;
  api::JoinRequest join;
  join.set_job("j");
  join.set_worker_id("w");
  auto reader = stub->Join(&join_ctx, join);
  api::MembershipUpdate update;
  ASSERT_TRUE(reader->Read(&update));
  (*first)->Stop();
  EXPECT_FALSE(reader->Read(&update));
  EXPECT_EQ(reader->Finish().error_code(), grpc::StatusCode::CANCELLED);
  first->reset();
  absl::StatusOr<std::unique_ptr<CoordinatorServer>> second;
  for (int i = 0; i < 50 && !second.ok(); ++i) {
    second = CoordinatorServer::Start(address, CoordinatorOptions());
    if (!second.ok()) absl::SleepFor(absl::Milliseconds(50));
  }
  ASSERT_TRUE(second.ok()) << second.status();
  EXPECT_EQ((*second)->address(), address);
  grpc::StatusCode code = grpc::StatusCode::UNAVAILABLE;
  for (int i = 0; i < 100 && code == grpc::StatusCode::UNAVAILABLE; ++i) {
    grpc::ClientContext ctx;
    ctx.set_deadline(std::chrono::system_clock::now() +
                     std::chrono::seconds(1));
    api::GetJobRequest req;
    req.set_job("none");
    api::JobStatus out;
    code = stub->GetJob(&ctx, req, &out).error_code();
    if (code == grpc::StatusCode::UNAVAILABLE) absl::SleepFor(absl::Milliseconds(50));
  }
  EXPECT_EQ(code, grpc::StatusCode::NOT_FOUND);  // served by the new one
}

}  // namespace
}  // namespace ringmaster::server
