// The daemon `ringmaster serve` runs: one engine on the wall clock, the
// Kubernetes scheduler extender (HTTP), the admin API (gRPC), the journal,
// the membership coordinator the worker shims join (fed by the engine's
// MembershipChange decisions through server/coordinator/membership_bridge.h) and,
// with --local-executor, the processes of the jobs (server/executor/local_executor.h).
// cli/serve_cmd.cc only turns flags into DaemonOptions.
//
// The cycles: one CycleLoop (server/loop/cycle_loop.h) owns Engine::RunCycle
// and hands every cycle's decisions to its sinks, in order: the extender
// (reservations, pod evictions), then the daemon's (the coordinator's target
// memberships, the local executor's processes, the admin API's journal and
// watchers). The surfaces only translate their callers' requests into
// engine calls: a job submitted through the admin API and a gang of pods
// are scheduled by the same loop.
//
// Threads and the one lock: the engine is not thread-safe, so every call on
// it — the extender's handlers, the cycle loop's Tick, every admin RPC —
// takes `engine_mu_` (one mutex rather than a strand: calls are short, and
// a reader such as ListJobs needs a consistent view). Journal fsyncs happen
// outside it (server/admin/admin_service.h).
//
// Start (Daemon::Start, one step per function):
//  1. Opens the journal in --state DIR and reads it (admin jobs, policy, and
//     the extender's learned nodes and gangs); refuses a directory it cannot
//     write, and a journal that is damaged, empty, or missing beside other
//     state (server/journal/journal.h), unless fresh_state.
//  2. Builds the engine with the policy in force: the --policy file, else
//     the last one set through UpdatePolicy (journaled), else the built-in
//     default, with Volcano's Queue objects added to its queues when asked
//     (volcano_queues); and the cycle loop on it.
//  3. Makes the surfaces on the engine: the admin service, the coordinator
//     and its bridge, the extender; adds the sinks to the loop.
//  4. Re-adopts the journal's jobs (running ones where they ran), then the
//     extender's gangs (reservations and bound pods where they were), then
//     the jobs' learned speed models (server/daemon/speed_learner.h) and
//     the queues' decayed past use (server/daemon/fair_share_history.h)
//     and what each active job accumulated that the policy reads
//     (server/daemon/job_history.h); before them all, the jobs seen to end
//     that the learners read (server/daemon/ended_job_history.h), so that
//     they come first in the engine's end order.
//  5. Starts the HTTP servers (the extender's, the health port's) and the
//     gRPC servers: the admin API, and the coordinator on the admin API's
//     port or on its own plaintext address (coordinator_address).
//  6. With --local-executor, the executor, which re-adopts the processes of
//     the jobs re-adopted in step 4.
//  7. Starts the background thread (and, with volcano_queues, the thread
//     that re-reads Volcano's Queue objects).
// Run: a cycle every period (wall clock) until SIGTERM or SIGINT; SIGHUP
// re-reads the --policy file (an invalid one is rejected, the old stays).
// A second thread ticks the coordinator (heartbeat timeouts) and polls the
// local executor's processes every 100 ms, and once a second turns the
// workers' speed reports into the jobs' speed models, and every
// queue_usage_every_ms journals the queues' decayed past use; every 100 ms
// it journals the jobs that ended since and the active jobs' histories that
// changed.
// Shutdown: the executor's processes get SIGTERM (SIGKILL after
// shutdown_grace_ms), the coordinator ends every shim's membership stream
// (UNAVAILABLE "coordinator shutting down": a shim re-joins a restarted
// daemon), then the servers stop, the queues' decayed past use, the
// jobs that ended since the last write and the active jobs' histories (the
// executor's jobs as stopped now) are written and the journal is flushed.
#ifndef RINGMASTER_SERVER_DAEMON_DAEMON_H_
#define RINGMASTER_SERVER_DAEMON_DAEMON_H_

#include <signal.h>

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/synchronization/notification.h"
#include "scheduler/clock.h"
#include "scheduler/engine.h"
#include "server/admin/queue_sources.h"
#include "server/coordinator/coordinator.h"
#include "server/daemon/ended_job_history.h"
#include "server/daemon/job_history.h"
#include "server/daemon/speed_learner.h"
#include "server/extender/extender.h"
#include "server/executor/local_executor.h"
#include "server/http/http_server.h"
#include "server/http/metrics.h"
#include "server/http/serve_metrics.h"
#include "server/loop/cycle_loop.h"

namespace grpc {
class Server;
class Service;
}

namespace ringmaster::server {

class AdminService;
class MembershipBridge;
class EventLog;
class Journal;
struct Recovered;

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
  // A second HTTP server with only GET /healthz and /metrics (the port a
  // Service may expose while the extender stays on loopback); its TLS
  // files unused (plain HTTP). Empty address: none.
  HttpServerOptions health_http{.address = ""};
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
  // Queues from Volcano's Queue objects too (serve --volcano-queues; needs
  // the binder, i.e. --api-server): listed at start (serve refuses to start
  // when they cannot be read or conflict with the policy's), then every
  // volcano_queues_refresh_ms, a change applied (server/admin/queue_sources.h).
  bool volcano_queues = false;
  int64_t volcano_queues_refresh_ms = 10'000;
  // With state_dir: the queues' decayed past use (proportion's
  // usageHalfLife) is journaled this often (and at shutdown): a kill -9
  // loses at most this long of it (server/daemon/fair_share_history.h).
  int64_t queue_usage_every_ms = 30'000;
  // With state_dir: the journal keeps the last this many jobs seen to end
  // that the learners read (gittins, backfill's learned walltimes), and a
  // restart gives them back (server/daemon/ended_job_history.h); 0: none.
  int64_t ended_jobs_kept = EndedJobHistory::kDefaultKeep;
};

class Daemon : private CycleSink {
 public:
  // Every step of Start in the class comment; the error says which failed.
  // Block the stop signals (and SIGHUP) before calling: the servers' threads
  // start here.
  static absl::StatusOr<std::unique_ptr<Daemon>> Start(DaemonOptions options,
                                                       const scheduler::PluginRegistry& registry);
  ~Daemon() override;

  uint16_t http_port() const;
  // The health port (DaemonOptions::health_http); 0 when there is none.
  uint16_t health_port() const;
  int grpc_port() const { return grpc_port_; }
  // "HOST:PORT" the shims join; empty when the coordinator is not served.
  const std::string& coordinator_address() const { return coordinator_address_; }
  Coordinator& coordinator() { return *coordinator_; }
  std::string grpc_host() const { return grpc_host_; }
  size_t recovered_jobs() const { return recovered_; }
  // Calls `read` with the engine, under its lock (tests, diagnostics).
  void ReadEngine(const std::function<void(const scheduler::Engine&)>& read) {
    absl::MutexLock lock(&engine_mu_);
    read(*engine_);
  }

  // The cycle loop; returns on SIGTERM or SIGINT. `signals` holds SIGTERM,
  // SIGINT and SIGHUP, blocked in every thread.
  void Run(const sigset_t& signals);
  // One period's work (CycleLoop::Tick): expired reservations, one engine
  // cycle, the sinks' work.
  void Tick() { loop_->Tick(); }
  // Re-reads the --policy file (SIGHUP). The errors, one per line, if it was
  // rejected.
  absl::Status ReloadPolicyFile();
  // Stops the servers and flushes the journal. Idempotent.
  absl::Status Shutdown();
  // "serve stopped after N cycles, M bindings, K jobs accepted"
  std::string Summary() const;

 private:
  Daemon() = default;
  // The steps of Start, in order (the class comment).
  absl::Status OpenJournal(Recovered* recovered);
  absl::Status MakeEngine(const Recovered& recovered);
  void MakeSurfaces();
  absl::Status Readopt(Recovered recovered);
  absl::Status StartHttpServers();
  absl::Status StartGrpcServers();
  absl::Status StartExecutor();
  // The daemon's sink of the loop: the coordinator's target memberships,
  // the local executor's processes, the admin API's journal and watchers.
  void OnCycle(const scheduler::Decisions& d) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(engine_mu_);
  void Background();  // the coordinator/executor thread
  // The engine's queue usage to the journal, once step 4 restored it.
  void SaveQueueUsageLocked() ABSL_EXCLUSIVE_LOCKS_REQUIRED(engine_mu_);
  // serve --volcano-queues: the Queue objects read and checked (the notes
  // logged), and the re-read thread.
  absl::StatusOr<ExternalQueues> ReadVolcanoQueues();
  void VolcanoQueuesLoop();

  DaemonOptions options_;
  const scheduler::PluginRegistry* registry_ = nullptr;
  WallClock clock_;
  absl::Mutex engine_mu_;
  std::unique_ptr<Journal> journal_;
  std::unique_ptr<EventLog> events_;
  std::unique_ptr<scheduler::Engine> engine_;
  std::unique_ptr<CycleLoop> loop_;  // on engine_, under engine_mu_
  std::unique_ptr<AdminService> admin_;
  std::unique_ptr<ExtenderStore> extender_store_;  // the journal's, for the extender
  std::unique_ptr<Extender> extender_;
  // GET /metrics: every engine cycle (the loop's observer) and every HTTP
  // request.
  MetricsRegistry metrics_registry_;
  std::unique_ptr<ServeMetrics> metrics_;
  std::unique_ptr<HttpServer> http_;
  std::unique_ptr<HttpServer> health_http_;
  std::unique_ptr<grpc::Server> grpc_;
  std::unique_ptr<Coordinator> coordinator_;
  std::unique_ptr<grpc::Service> coordinator_service_;
  std::unique_ptr<grpc::Server> coordinator_grpc_;  // with coordinator_address only
  std::string coordinator_address_;
  std::unique_ptr<MembershipBridge> bridge_;
  // The jobs' speed models learned from their workers' reports (step 4
  // restores them from the journal; the background thread refits).
  std::unique_ptr<SpeedLearner> speeds_ ABSL_GUARDED_BY(engine_mu_);
  // Step 4 gave the journal's queue usage to the engine: from then on the
  // engine's is written back (before, a failed start would erase it).
  bool queue_usage_restored_ ABSL_GUARDED_BY(engine_mu_) = false;
  // The jobs seen to end, to and from the journal (step 4 restores them; the
  // background thread and Shutdown write those that ended since).
  std::unique_ptr<EndedJobHistory> ended_ ABSL_GUARDED_BY(engine_mu_);
  // What the active jobs accumulated, to and from the journal (step 4
  // restores it once the jobs are back; the background thread and Shutdown
  // write what changed).
  std::unique_ptr<ActiveJobHistory> history_ ABSL_GUARDED_BY(engine_mu_);
  std::unique_ptr<ProcessLauncher> launcher_;
  std::unique_ptr<LocalExecutor> executor_ ABSL_GUARDED_BY(engine_mu_);
  std::thread background_;
  absl::Notification stop_background_;
  // The policy as given and the external queues composed with it at start
  // (handed to the admin service, which owns them from then on).
  std::optional<scheduler::Policy> base_policy_;
  ExternalQueues start_queues_;
  std::thread volcano_thread_;
  int64_t started_processes_ = 0;  // by the executor, set at Shutdown
  int grpc_port_ = 0;
  std::string grpc_host_;
  size_t recovered_ = 0;
  bool stopped_ = false;
};

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_DAEMON_DAEMON_H_
