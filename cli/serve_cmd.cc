// `ringmaster serve`: the daemon (server/daemon/daemon.h). Runs the engine on the
// wall clock, one cycle every --period-ms; serves the Kubernetes scheduler
// extender (filter, prioritize, preempt, bind, healthz) over HTTP and the
// admin API over gRPC (--grpc); journals what it accepts in --state DIR.
// Stops cleanly on SIGTERM or SIGINT; SIGHUP re-reads --policy. The nodes
// come from the CLUSTER options, or, without them, from the Node objects
// kube-scheduler sends (nodeCacheCapable false). Bindings go to the API
// server (--api-server) or are only recorded (--no-bind). This file only
// turns flags into DaemonOptions. The membership coordinator the shims join
// runs in the same process, on the --grpc port or on --coordinator; with
// --local-executor the jobs that have a command run as local processes.
#include <malloc.h>
#include <signal.h>

#include <chrono>
#include <cmath>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "plugins/registry.h"
#include "server/daemon/daemon.h"
#include "server/executor/local_executor.h"
#include "server/extender/extender.h"
#include "server/extender/kube_binder.h"
#include "server/http/serve_metrics.h"

namespace ringmaster::cli {
namespace {

struct ServeFlags {
  std::string policy;
  ClusterFlags cluster;
  std::string http = "127.0.0.1:8080";
  std::string metrics;  // the health port: /healthz and /metrics only
  std::string scheduler_name = "ringmaster";
  int max_learned_nodes = 5000;
  double foreign_pods_s = 5;
  bool volcano_queues = false;
  double volcano_queues_s = 10;
  std::string grpc = "127.0.0.1:7070";
  std::string state;
  bool fresh_state = false;
  int period_ms = 1000;
  int reservation_timeout_s = 60;
  std::string topology_labels;
  bool no_bind = false;
  std::string api_server;
  std::string api_token_file;
  std::string api_ca_file;
  std::string token_file;
  int threads = 2;
  int max_body_mib = 64;
  server::TlsFiles tls;
  std::string log_level;
  std::string coordinator;
  bool local_executor = false;
  std::string executor_logs;
  int shutdown_grace_ms = 5000;
  int restart_grace_ms = 10'000;
  double queue_usage_every_s = 30;
  int64_t ended_jobs_kept = server::EndedJobHistory::kDefaultKeep;
  int cancel_grace_ms = 10'000;
};

bool HasCluster(const ClusterFlags& f) { return !f.cluster_file.empty() || !f.nodes.empty(); }

absl::StatusOr<topology::Cluster> ServeCluster(const ServeFlags& f, const server::TopologyLabels& labels) {
  if (!HasCluster(f.cluster)) return topology::Cluster::Build(server::TierSpecs(labels), {});
  std::string notes;
  auto c = BuildCluster(f.cluster, &notes);
  std::cerr << notes;
  return c;
}

// A token file's first line, without its line end.
absl::StatusOr<std::string> ReadToken(const std::string& flag, const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  std::string token = text.str();
  if (auto nl = token.find_first_of("\r\n"); nl != std::string::npos) token.resize(nl);
  if (!in || token.empty()) return absl::InvalidArgumentError(flag + ": cannot read a token from " + path);
  return token;
}

// The binder --api-server and --api-token-file describe; null with --no-bind.
absl::StatusOr<std::unique_ptr<server::Binder>> MakeBinder(const ServeFlags& f) {
  if (f.no_bind) return nullptr;
  if (f.api_server.empty()) {
    return absl::InvalidArgumentError(
        "give --api-server http://127.0.0.1:8001 (kubectl proxy) to bind pods, or --no-bind to record bindings only");
  }
  server::ApiServerOptions o;
  if (f.api_server == "in-cluster") {
    RM_ASSIGN_OR_RETURN(o, server::InClusterApiServer());
  } else {
    o.url = f.api_server;
  }
  if (!f.api_token_file.empty()) o.token_file = f.api_token_file;  // re-read per request (rotated tokens)
  if (!f.api_ca_file.empty()) o.ca_file = f.api_ca_file;
  return server::MakeApiServerBinder(std::move(o));
}

absl::StatusOr<server::DaemonOptions> Options(const ServeFlags& f) {
  server::DaemonOptions o;
  RM_ASSIGN_OR_RETURN(o.binder, MakeBinder(f));
  RM_ASSIGN_OR_RETURN(auto labels, f.topology_labels.empty() ? server::DefaultTopologyLabels()
                                                             : server::ParseTopologyLabels(f.topology_labels));
  if (f.tls.cert_file.empty() != f.tls.key_file.empty() || (!f.tls.client_ca_file.empty() && f.tls.cert_file.empty())) {
    return absl::InvalidArgumentError("--tls-cert and --tls-key go together (and --tls-client-ca needs them)");
  }
  RM_ASSIGN_OR_RETURN(auto address, server::ParseHostPort(f.http));
  RM_ASSIGN_OR_RETURN(o.cluster, ServeCluster(f, labels));
  if (!f.token_file.empty()) {
    RM_ASSIGN_OR_RETURN(o.admin_token, ReadToken("--token-file", f.token_file));
  }
  o.policy_file = f.policy;
  o.state_dir = f.state;
  o.fresh_state = f.fresh_state;
  o.grpc_address = f.grpc;
  o.period_ms = f.period_ms;
  o.http.address = address.first;
  o.http.port = address.second;
  o.http.threads = f.threads;
  o.http.body_limit = uint64_t(f.max_body_mib) << 20;
  o.http.tls = f.tls;
  o.extender.reservation_timeout_ms = int64_t{f.reservation_timeout_s} * 1000;
  o.extender.topology = labels;
  o.extender.learn_nodes = !HasCluster(f.cluster);
  o.extender.scheduler_name = f.scheduler_name;
  o.extender.max_learned_nodes = f.max_learned_nodes;
  // The pods others placed are read only where there is an API server.
  if (!f.api_server.empty() && !f.no_bind) {
    o.extender.foreign_pods_refresh_ms = static_cast<int64_t>(f.foreign_pods_s * 1000);
  }
  if (f.volcano_queues && (f.api_server.empty() || f.no_bind)) {
    return absl::InvalidArgumentError("--volcano-queues reads Volcano's Queue objects from the API server: give --api-server");
  }
  o.volcano_queues = f.volcano_queues;
  o.volcano_queues_refresh_ms = static_cast<int64_t>(f.volcano_queues_s * 1000);
  if (!f.metrics.empty()) {
    auto health = server::ParseHostPort(f.metrics);
    if (!health.ok()) return absl::InvalidArgumentError(absl::StrCat("--metrics: ", health.status().message()));
    o.health_http.address = health->first;
    o.health_http.port = health->second;
    o.health_http.threads = 1;
  }
  o.coordinator_address = f.coordinator;
  if (o.coordinator_address.empty() && !f.tls.cert_file.empty() && f.local_executor) {
    return absl::InvalidArgumentError(
        "--local-executor with --tls-cert: give --coordinator HOST:PORT (the shims speak plaintext gRPC)");
  }
  o.local_executor = f.local_executor;
  o.executor.log_dir = f.executor_logs;
  o.shutdown_grace_ms = f.shutdown_grace_ms;
  o.restart_grace_ms = f.restart_grace_ms;
  o.queue_usage_every_ms = std::llround(f.queue_usage_every_s * 1000);
  o.ended_jobs_kept = f.ended_jobs_kept;
  o.cancel_grace_ms = f.cancel_grace_ms;
  return o;
}

int Run(const ServeFlags& f) {
  if (!StartLogging(f.log_level, "serve")) return 2;
  auto options = Options(f);
  if (!options.ok()) {
    std::cerr << "serve: " << options.status().message() << "\n";
    return 2;
  }
  // Request bodies up to the body limit (a filter with 1,000 Node objects is
  // about 224 KB, 5,000 about 1.1 MB) stay in the heap and freed memory stays
  // mapped: with glibc's defaults each such body came from fresh pages
  // (mmap, or a heap that free() had handed back with madvise), and faulting
  // them in cost more than reading the request (docs/BENCHMARKS.md).
  mallopt(M_MMAP_THRESHOLD, 32 << 20);
  mallopt(M_TRIM_THRESHOLD, 128 << 20);
  // Block the signals the loop waits for before any server thread exists.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGINT);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGHUP);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);
  const std::string http_host = options->http.address;
  auto registry = plugins::BuiltinRegistry();
  const auto started = std::chrono::steady_clock::now();
  auto daemon = server::Daemon::Start(*std::move(options), registry);
  const auto ms = std::chrono::duration_cast<std::chrono::milliseconds>(std::chrono::steady_clock::now() - started);
  if (!daemon.ok()) {
    std::cerr << "serve: " << daemon.status().message() << "\n";
    return 2;
  }
  server::Daemon& d = **daemon;
  if (f.state.empty()) std::cerr << "serve: no --state: accepted jobs will not survive a restart" << std::endl;
  if (d.recovered_jobs() > 0) {
    std::cout << "recovered " << d.recovered_jobs() << " jobs from " << f.state << " (started in " << ms.count()
              << " ms)" << std::endl;
  }
  std::cout << "extender listening on " << http_host << ":" << d.http_port() << (f.tls.cert_file.empty() ? "" : " (TLS)")
            << std::endl;
  if (d.health_port() > 0) {
    std::cout << "health and metrics listening on " << server::ParseHostPort(f.metrics)->first << ":" << d.health_port()
              << std::endl;
  }
  common::Log(common::LogLevel::info, "serving",
              {{"http", absl::StrCat(http_host, ":", d.http_port())}, {"grpc_port", d.grpc_port()},
               {"period_ms", f.period_ms}, {"policy", f.policy}});
  if (d.grpc_port() > 0) std::cout << "admin API listening on " << d.grpc_host() << ":" << d.grpc_port() << std::endl;
  if (!d.coordinator_address().empty()) {
    std::cout << "coordinator listening on " << d.coordinator_address()
              << (f.local_executor ? " (local executor on)" : "") << std::endl;
  }
  d.Run(signals);
  absl::Status flushed = d.Shutdown();
  std::cout << d.Summary() << std::endl;
  if (!flushed.ok()) {
    std::cerr << "serve: " << flushed.message() << "\n";
    return 1;
  }
  return 0;
}

}  // namespace

void RegisterServeCommand(CLI::App& app, int* exit_code) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "run the engine on the wall clock; serve the Kubernetes scheduler extender (docs/EXTENDER.md) and the "
               "admin API (docs/ADMIN.md)");
  cmd->add_option("--policy", f->policy, "policy file (default: the built-in policy; SIGHUP re-reads it)")
      ->check(CLI::ExistingFile);
  AddClusterFlags(*cmd, f->cluster);
  cmd->add_option("--http", f->http, "extender address HOST:PORT (loopback by default; port 0: any free port)");
  cmd->add_option("--metrics", f->metrics,
                  "a second port HOST:PORT serving only GET /healthz and /metrics (for a Service and probes; the "
                  "extender's --http stays on loopback)");
  cmd->add_option("--scheduler-name", f->scheduler_name,
                  "the kube-scheduler profile whose pods ringmaster places: a pod whose spec.schedulerName differs is "
                  "refused (ringmaster)");
  cmd->add_option("--max-learned-nodes", f->max_learned_nodes,
                  "learn at most this many nodes from the Node objects of requests; more are refused (5000; 0: no "
                  "limit)")
      ->check(CLI::Range(0, 1'000'000));
  cmd->add_option("--foreign-pods-interval", f->foreign_pods_s,
                  "with --api-server: read the pods bound to nodes this often (seconds) and count what the pods "
                  "ringmaster did not place hold as used (5; 0: never)")
      ->check(CLI::Range(0.0, 3600.0));
  cmd->add_flag("--volcano-queues", f->volcano_queues,
                "with --api-server: Volcano's Queue objects (scheduling.volcano.sh/v1beta1) are queues too, beside "
                "the policy's; a queue both define is an error naming both (docs/LAUNCHERS.md)");
  cmd->add_option("--volcano-queues-interval", f->volcano_queues_s,
                  "with --volcano-queues: re-read the Queue objects this often (seconds; 10)")
      ->check(CLI::Range(0.1, 3600.0));
  cmd->add_option("--grpc", f->grpc,
                  "admin API address HOST:PORT (127.0.0.1:7070; port 0: any free port; empty: no admin API)");
  cmd->add_option("--state", f->state, "journal directory: accepted jobs survive a crash or restart")
      ->check(CLI::ExistingDirectory);
  cmd->add_flag("--fresh-state", f->fresh_state,
                "start with an empty journal on purpose: the journal files in --state are moved into "
                "DIR/set-aside-TIME/ (never deleted); without it serve refuses a damaged, empty or missing journal")
      ->needs("--state");
  cmd->add_option("--token-file", f->token_file, "admin mutations (submit, cancel, policy) need this bearer token")
      ->check(CLI::ExistingFile);
  cmd->add_option("--period-ms", f->period_ms, "one engine cycle every this many ms (1000)")->check(CLI::Range(10, 3'600'000));
  cmd->add_option("--reservation-timeout", f->reservation_timeout_s,
                  "seconds a placed gang's pods have to bind before its reservations are released (60)")
      ->check(CLI::Range(1, 86'400));
  cmd->add_option("--topology-labels", f->topology_labels,
                  "node labels of the network tiers, lowest first: TIER=KEY,... (default rack=topology.ringmaster.io/"
                  "rack,spine=topology.ringmaster.io/spine,zone=topology.kubernetes.io/zone)");
  cmd->add_flag("--no-bind", f->no_bind, "record bindings only; do not call the API server");
  cmd->add_option("--api-server", f->api_server,
                  "bind pods through this API server: https://HOST:PORT, http://HOST:PORT (kubectl proxy), or in-cluster (the pod's service account)");
  cmd->add_option("--api-token-file", f->api_token_file, "bearer token for --api-server")->check(CLI::ExistingFile);
  cmd->add_option("--api-ca-file", f->api_ca_file,
                  "https --api-server: PEM CA that signed the API server's certificate (default: the system's CAs)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-cert", f->tls.cert_file,
                  "PEM certificate: the extender (https) and the admin API (gRPC) serve TLS; needs --tls-key")
      ->check(CLI::ExistingFile);
  cmd->add_option("--tls-key", f->tls.key_file, "PEM private key of --tls-cert")->check(CLI::ExistingFile);
  cmd->add_option("--tls-client-ca", f->tls.client_ca_file,
                  "PEM CA: clients of both servers must present a certificate it signed (mutual TLS)")
      ->check(CLI::ExistingFile);
  cmd->add_option("--threads", f->threads, "HTTP threads (2)")->check(CLI::Range(1, 64));
  cmd->add_option("--max-body-mib", f->max_body_mib, "largest request body, MiB (64)")->check(CLI::Range(1, 1024));
  cmd->add_option("--coordinator", f->coordinator,
                  "the membership coordinator's own plaintext address HOST:PORT (default: on the --grpc port)");
  cmd->add_flag("--local-executor", f->local_executor,
                "run each bound task of a job with a command as a local process under `ringmaster shim run`");
  cmd->add_option("--executor-logs", f->executor_logs,
                  "--local-executor: one log file per process in this directory (default: serve's own output)")
      ->check(CLI::ExistingDirectory);
  cmd->add_option("--shutdown-grace-ms", f->shutdown_grace_ms,
                  "on SIGTERM, the executor's processes get this long after SIGTERM before SIGKILL (5000)")
      ->check(CLI::Range(0, 600'000));
  cmd->add_option("--restart-grace-ms", f->restart_grace_ms,
                  "a gang a failure took below its minimum: its survivors are stopped within this long, and their "
                  "GPUs count as free only once they are gone (10000)")
      ->check(CLI::Range(1, 600'000));
  cmd->add_option("--cancel-grace-ms", f->cancel_grace_ms,
                  "a running job cancelled: its tasks are stopped within this long (Cancelling), and their GPUs "
                  "count as free only once they are gone; then it is Aborted (10000)")
      ->check(CLI::Range(1, 600'000));
  cmd->add_option("--queue-usage-every", f->queue_usage_every_s,
                  "--state: with proportion's usageHalfLife, each queue's decayed usage is journaled this often, in "
                  "seconds, and at shutdown; a kill -9 loses at most this long of it (30)")
      ->check(CLI::Range(0.1, 3600.0))
      ->needs("--state");
  cmd->add_option("--ended-jobs-kept", f->ended_jobs_kept,
                  "--state: the journal keeps the last this many jobs seen to end that gittins and backfill's "
                  "learned walltimes learn from, and a restart learns them again; older ones are deleted as new "
                  "ones end; 0: none (100000)")
      ->check(CLI::Range(int64_t{0}, int64_t{100'000'000}))
      ->needs("--state");
  AddLogLevelOption(*cmd, f->log_level);
  cmd->callback([f, exit_code] { *exit_code = Run(*f); });

  // serve --local-executor --state starts each task under this (hidden):
  // it records how the command ended, for a restarted daemon that re-adopts
  // the process (server/executor/local_executor.h).
  auto status_file = std::make_shared<std::string>();
  auto argv = std::make_shared<std::vector<std::string>>();
  CLI::App* sup = app.add_subcommand("supervise", "run CMD; write how it ended to --status-file (serve's executor)");
  sup->group("");
  sup->add_option("--status-file", *status_file, "where \"exit N\" or \"signal N\" is written")->required();
  sup->add_option("command", *argv, "CMD ARGS (after --)")->required();
  sup->callback([status_file, argv, exit_code] { *exit_code = server::RunSupervisor(*status_file, *argv); });
}

}  // namespace ringmaster::cli
