// The daemon `ringmaster serve` runs: one engine on the wall clock, the
// Kubernetes scheduler extender (HTTP), the admin API (gRPC) and the journal.
// cli/serve_cmd.cc only turns flags into DaemonOptions.
//
// Threads and the one lock: the engine is not thread-safe, so every call on
// it — the extender's handlers, the cycle loop's Tick, every admin RPC —
// takes `engine_mu_` (one mutex rather than a strand: calls are short, and
// a reader such as ListJobs needs a consistent view). Journal fsyncs happen
// outside it (server/admin_service.h).
//
// Start:
//  1. Opens the journal in --state DIR and reads it (admin jobs, policy, and
//     the extender's learned nodes and gangs).
//  2. Picks the policy: the --policy file, else the last one set through
//     UpdatePolicy (journaled), else the built-in default.
//  3. Builds the engine, re-adopts the journal's jobs (running ones where
//     they ran) and the extender's gangs (reservations and bound pods where
//     they were), then starts the HTTP and gRPC servers.
// Run: a cycle every period (wall clock) until SIGTERM or SIGINT; SIGHUP
// re-reads the --policy file (an invalid one is rejected, the old stays).
// Shutdown: stops the servers, then flushes the journal.
#ifndef RINGMASTER_SERVER_DAEMON_H_
#define RINGMASTER_SERVER_DAEMON_H_

#include <signal.h>

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/clock.h"
#include "scheduler/engine.h"
#include "server/extender.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/serve_metrics.h"

namespace grpc {
class Server;
}

namespace ringmaster::server {

class AdminService;
class EventLog;
class Journal;

// Milliseconds since the Unix epoch.
class WallClock : public scheduler::Clock {
 public:
  scheduler::Timestamp Now() const override;
};

struct DaemonOptions {
  topology::Cluster cluster;
  std::string policy_file;  // empty: the journal's policy, else the built-in one
  std::string state_dir;    // empty: no journal (nothing survives a restart)
  HttpServerOptions http;  // its TLS files (http.tls) serve the admin API too
  std::string grpc_address = "127.0.0.1:7070";  // HOST:PORT (port 0: any free port); empty: no admin API
  std::string admin_token;  // mutations need it when set
  int period_ms = 1000;
  ExtenderOptions extender;
  std::unique_ptr<Binder> binder;  // null: bindings only recorded
};

class Daemon {
 public:
  // Every step of Start in the class comment; the error says which failed.
  // Block the stop signals (and SIGHUP) before calling: the servers' threads
  // start here.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(DaemonOptions options,
                                                       const scheduler::PluginRegistry& registry);
  ~Daemon();

  uint16_t http_port() const;
  int grpc_port() const { return grpc_port_; }
  std::string grpc_host() const { return grpc_host_; }
  size_t recovered_jobs() const { return recovered_; }

  // The cycle loop; returns on SIGTERM or SIGINT. `signals` holds SIGTERM,
  // SIGINT and SIGHUP, blocked in every thread.
  void Run(const sigset_t& signals);
  // One period's work: expired reservations, one engine cycle.
  void Tick();
  // Re-reads the --policy file (SIGHUP). The errors, one per line, if it was
  // rejected.
  absl::Status ReloadPolicyFile();
  // Stops the servers and flushes the journal. Idempotent.
  absl::Status Shutdown();
  // "serve stopped after N cycles, M bindings, K jobs accepted"
  std::string Summary() const;

 private:
  Daemon() = default;

  DaemonOptions options_;
  const scheduler::PluginRegistry* registry_ = nullptr;
  WallClock clock_;
  absl::Mutex engine_mu_;
  std::unique_ptr<Journal> journal_;
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<scheduler::Engine> engine_;
  std::unique_ptr<AdminService> admin_;
  std::unique_ptr<ExtenderStore> extender_store_;  // the journal's, for the extender
  std::unique_ptr<Extender> extender_;
  // GET /metrics: every engine cycle (observed through the extender, which
  // runs them all) and every HTTP request.
  MetricsRegistry metrics_registry_;
  std::unique_ptr<ServeMetrics> metrics_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<grpc::Server> grpc_;
  int grpc_port_ = 0;
  std::string grpc_host_;
  size_t recovered_ = 0;
  bool stopped_ = false;
};

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_DAEMON_H_
