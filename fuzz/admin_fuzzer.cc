// Fuzzes the admin API's requests (api/admin.proto) as the daemon's admin
// service (server/admin/admin_service.h) receives them, in-process on an engine
// with a small cluster: the input is a sequence of requests, each a selector
// byte (which RPC), a length (2 bytes, little-endian) and that many bytes of
// protobuf. Requests
// that do not parse as protobuf are dropped (gRPC would not deliver them);
// the rest go to the service's handler, and a cycle runs after each one.
// Properties: no crash or hang; a refused request says why (a non-empty
// message); the engine's invariants hold after every cycle.
#include <grpcpp/grpcpp.h>

#include <algorithm>
#include <string>

#include "absl/synchronization/mutex.h"
#include "api/admin.grpc.pb.h"
#include "fuzz/fuzz_engine.h"
#include "fuzz/fuzz_input.h"
#include "plugins/registry.h"
#include "scheduler/clock.h"
#include "scheduler/engine.h"
#include "scheduler/policy.h"
#include "server/admin/admin_service.h"
#include "server/admin/event_log.h"

namespace {

void Check(const grpc::Status& s, const char* rpc) {
  if (!s.ok() && s.error_message().empty()) ringmaster::fuzz::Fail("refused without a reason", rpc);
}

// Parses `bytes` as T; false when they are not a T.
template <class T>
bool Parse(std::string_view bytes, T* msg) {
  return msg->ParseFromArray(bytes.data(), static_cast<int>(bytes.size()));
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringmaster;
  static const scheduler::PluginRegistry registry = plugins::BuiltinRegistry();
  scheduler::ManualClock clock(1'000);
  scheduler::EngineOptions eo;
  eo.auto_confirm_binds = false;
  auto engine = scheduler::Engine::Create(fuzz::SmallCluster(), scheduler::DefaultPolicy(), registry, clock, eo);
  if (!engine.ok()) fuzz::Fail("the engine does not start", engine.status().ToString());
  absl::Mutex mu;
  server::EventLog events;
  server::AdminService admin(**engine, mu, clock, registry, /*journal=*/nullptr, events, server::AdminOptions{});
  grpc::ServerContext ctx;
  const std::string_view in = fuzz::AsText(data, size);
  size_t at = 0;
  for (int n = 0; n < 32 && at + 3 <= in.size(); ++n) {
    const uint8_t rpc = static_cast<uint8_t>(in[at]) % 7;
    const size_t want = static_cast<uint8_t>(in[at + 1]) | (size_t{static_cast<uint8_t>(in[at + 2])} << 8);
    const size_t len = std::min(want, in.size() - at - 3);
    const std::string_view bytes = in.substr(at + 3, len);
    at += 3 + len;
    switch (rpc) {
      case 0: {
        admin::SubmitJobRequest req;
        admin::SubmitJobResponse resp;
        if (Parse(bytes, &req)) Check(admin.SubmitJob(&ctx, &req, &resp), "SubmitJob");
        break;
      }
      case 1: {
        admin::CancelJobRequest req;
        admin::CancelJobResponse resp;
        if (Parse(bytes, &req)) Check(admin.CancelJob(&ctx, &req, &resp), "CancelJob");
        break;
      }
      case 2: {
        admin::GetJobRequest req;
        admin::Job resp;
        if (Parse(bytes, &req)) Check(admin.GetJob(&ctx, &req, &resp), "GetJob");
        break;
      }
      case 3: {
        admin::ListJobsRequest req;
        admin::ListJobsResponse resp;
        if (Parse(bytes, &req)) Check(admin.ListJobs(&ctx, &req, &resp), "ListJobs");
        break;
      }
      case 4: {
        admin::ListQueuesRequest req;
        admin::ListQueuesResponse resp;
        if (Parse(bytes, &req)) Check(admin.ListQueues(&ctx, &req, &resp), "ListQueues");
        break;
      }
      case 5: {
        admin::ListNodesRequest req;
        admin::ListNodesResponse resp;
        if (Parse(bytes, &req)) Check(admin.ListNodes(&ctx, &req, &resp), "ListNodes");
        break;
      }
      default: {
        admin::UpdatePolicyRequest req;
        admin::UpdatePolicyResponse resp;
        if (Parse(bytes, &req)) Check(admin.UpdatePolicy(&ctx, &req, &resp), "UpdatePolicy");
        break;
      }
    }
    absl::MutexLock lock(&mu);
    clock.Advance(1'000);
    admin.OnCycle((*engine)->RunCycle());
    if (absl::Status s = (*engine)->CheckInvariants(); !s.ok()) fuzz::Fail("engine invariant broken", s.ToString());
  }
  events.Close();
  return 0;
}
