// The daemon `ringmaster serve` runs: one engine on the wall clock, the
// Kubernetes scheduler extender (HTTP), the admin API (gRPC), the journal,
// the membership coordinator the worker shims join (fed by the engine's
// MembershipChange decisions through server/membership_bridge.h) and,
// with --local-executor, the processes of the jobs (server/local_executor.h).
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
//     the extender's learned nodes and gangs); refuses a directory it cannot
//     write, and a journal that is damaged, empty, or missing beside other
//     state (server/journal.h), unless fresh_state.
//  2. Picks the policy: the --policy file, else the last one set through
//     UpdatePolicy (journaled), else the built-in default.
//  3. Builds the engine, re-adopts the journal's jobs (running ones where
//     they ran) and the extender's gangs (reservations and bound pods where
//     they were), then starts the HTTP and gRPC servers. The coordinator
//     is served on the admin API's gRPC port, or on its own plaintext
//     address (coordinator_address).
// Run: a cycle every period (wall clock) until SIGTERM or SIGINT; SIGHUP
// re-reads the --policy file (an invalid one is rejected, the old stays).
// A second thread ticks the coordinator (heartbeat timeouts) and polls the
// local executor's processes every 100 ms.
// Shutdown: the executor's processes get SIGTERM (SIGKILL after
// shutdown_grace_ms), the coordinator ends every shim's membership stream
// (UNAVAILABLE "coordinator shutting down": a shim re-joins a restarted
// daemon), then the servers stop and the journal is flushed.
#ifndef RINGMASTER_SERVER_DAEMON_H_
#define RINGMASTER_SERVER_DAEMON_H_

#include <signal.h>

#include <memory>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "scheduler/clock.h"
#include "scheduler/engine.h"
#include "server/coordinator.h"
#include "server/extender.h"
#include "server/local_executor.h"
#include "server/http_server.h"
#include "server/metrics.h"
#include "server/serve_metrics.h"

namespace grpc {
class Server;
class Service;
}

namespace ringmaster::server {

class AdminService;
class MembershipBridge;
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
  // Start with an empty journal on purpose (serve --fresh-state): the
  // journal files in state_dir are set aside first (JournalOpenOptions).
  bool fresh_state = false;
  HttpServerOptions http;  // its TLS files (http.tls) serve the admin API too
  std::string grpc_address = "127.0.0.1:7070";  // HOST:PORT (port 0: any free port); empty: no admin API
  std::string admin_token;  // mutations need it when set
  int period_ms = 1000;
  ExtenderOptions extender;
  std::unique_ptr<Binder> binder;  // null: bindings only recorded
  // The coordinator: HOST:PORT of its own plaintext gRPC server; empty: on
  // the admin API's port (none when grpc_address is empty too).
  std::string coordinator_address;
  CoordinatorOptions coordinator;
  // Run jobs that have a command as local processes.
  bool local_executor = false;
  LocalExecutorOptions executor;  // its `coordinator` is filled in by Start
  int64_t shutdown_grace_ms = 5000;
  // The survivors of a gang broken by a failure are stopped within this
  // long; their GPUs count as free once they are gone
  // (scheduler::EngineOptions::restart_grace_ms).
  int64_t restart_grace_ms = 10'000;
  // A running job cancelled (CancelJob, an expired reservation) is stopped
  // within this long; its GPUs count as free once its tasks are gone
  // (scheduler::EngineOptions::cancel_grace_ms). Jobs no executor runs are
  // released at once.
  int64_t cancel_grace_ms = 10'000;
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
  // "HOST:PORT" the shims join; empty when the coordinator is not served.
  const std::string& coordinator_address() const { return coordinator_address_; }
  Coordinator& coordinator() { return *coordinator_; }
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
  void OnCycle(const scheduler::Decisions& d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(engine_mu_);
  void Background();  // the coordinator/executor thread

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
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<grpc::Service> coordinator_service_;
  std::unique_ptr<grpc::Server> coordinator_grpc_;  // with coordinator_address only
  std::string coordinator_address_;
  std::unique_ptr<MembershipBridge> bridge_;
  std::unique_ptr<ProcessLauncher> launcher_;
  std::unique_ptr<LocalExecutor> executor_ ABSL_GUARDED_BY(engine_mu_);
  std::thread background_;
  absl::Notification stop_background_;
  int64_t started_processes_ = 0;  // by the executor, set at Shutdown
  int grpc_port_ = 0;
  std::string grpc_host_;
  size_t recovered_ = 0;
  bool stopped_ = false;
};

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_DAEMON_H_
