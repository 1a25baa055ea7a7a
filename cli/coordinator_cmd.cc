// `ringmaster coordinator` (run the standalone coordinator) and
// `ringmaster resize` (standalone-mode membership change).
#include <signal.h>

#include <iostream>
#include <string>
#include <vector>

#include <grpcpp/grpcpp.h>

#include "api/coordinator.grpc.pb.h"
#include "cli/commands.h"
#include "server/coordinator/coordinator_service.h"

namespace ringmaster::cli {
namespace {

struct CoordinatorFlags {
  std::string listen = "127.0.0.1:7070";
  int heartbeat_timeout_ms = 5000;
  int max_value_bytes = 1 << 20;
  std::string log_level;
};

struct ResizeFlags {
  std::string job;
  int workers = 0;
  std::string coordinator = "127.0.0.1:7070";
  std::vector<std::string> ring_order;
};

int RunCoordinator(const CoordinatorFlags& f) {
  if (!StartLogging(f.log_level, "coordinator")) return 2;
  // Block the stop signals before any server thread exists, then wait.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  server::CoordinatorOptions o;
  o.heartbeat_timeout = absl::Milliseconds(f.heartbeat_timeout_ms);
  o.max_value_bytes = static_cast<size_t>(f.max_value_bytes);
  auto s = server::CoordinatorServer::Start(f.listen, o);
  if (!s.ok()) {
    std::cerr << "coordinator: " << s.status() << "\n";
    return 1;
  }
  std::cout << "coordinator listening on " << (*s)->address() << std::endl;
  int sig = 0;
  sigwait(&stop, &sig);
  (*s)->Stop();
  std::cout << "coordinator stopped" << std::endl;
  return 0;
}

int RunResize(const ResizeFlags& f) {
  auto stub = api::Coordinator::NewStub(
      grpc::CreateChannel(f.coordinator, grpc::InsecureChannelCredentials()));
  grpc::ClientContext ctx;
  ctx.set_deadline(std::chrono::system_clock::now() + std::chrono::seconds(10));
  api::ResizeRequest req;
  req.set_job(f.job);
  req.set_workers(f.workers);
  for (const auto& w : f.ring_order) req.add_ring_order(w);
  api::ResizeReply reply;
  grpc::Status st = stub->Resize(&ctx, req, &reply);
  if (!st.ok()) {
    std::cerr << "resize: " << st.error_message() << "\n";
    return 1;
  }
  std::cout << "job " << f.job << " at generation " << reply.generation()
            << std::endl;
  return 0;
}

}  // namespace

void RegisterCoordinatorCommand(CLI::App& app, int* exit_code) {
  auto flags = std::make_shared<CoordinatorFlags>();
  CLI::App* c = app.add_subcommand(
      "coordinator", "run the elastic-membership coordinator (standalone)");
  c->add_option("--listen", flags->listen, "address to serve on (PORT 0: any)");
  c->add_option("--heartbeat-timeout-ms", flags->heartbeat_timeout_ms,
                "a member silent this long is declared failed")
      ->check(CLI::PositiveNumber);
  c->add_option("--max-value-bytes", flags->max_value_bytes,
                "largest key-value store value")
      ->check(CLI::PositiveNumber);
  AddLogLevelOption(*c, flags->log_level);
  c->callback([flags, exit_code] { *exit_code = RunCoordinator(*flags); });

  auto rflags = std::make_shared<ResizeFlags>();
  CLI::App* r = app.add_subcommand(
      "resize", "change an elastic job's size (standalone mode)");
  r->add_option("job", rflags->job, "job name")->required();
  r->add_option("--workers", rflags->workers, "new number of workers")
      ->required()
      ->check(CLI::PositiveNumber);
  r->add_option("--coordinator", rflags->coordinator, "coordinator address");
  r->add_option("--ring-order", rflags->ring_order,
                "worker ids in rank order (placement ring order)")
      ->delimiter(',');
  r->callback([rflags, exit_code] { *exit_code = RunResize(*rflags); });
}

}  // namespace ringmaster::cli
