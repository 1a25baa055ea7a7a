// `ringmaster serve`: the daemon. Runs the engine on the wall clock, one cycle
// every --period-ms, and serves the Kubernetes scheduler extender (filter,
// prioritize, preempt, bind, healthz) over HTTP. Stops cleanly on SIGTERM or
// SIGINT. The nodes come from the CLUSTER options, or, without them, from the
// Node objects kube-scheduler sends (nodeCacheCapable false). Bindings go to
// the API server (--api-server) or are only recorded (--no-bind).
#include <signal.h>
#include <time.h>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "cli/cluster_flags.h"
#include "cli/commands.h"
#include "common/logging.h"
#include "plugins/registry.h"
#include "scheduler/engine.h"
#include "scheduler/policy.h"
#include "server/extender.h"
#include "server/extender_http.h"
#include "server/http_server.h"
#include "server/kube_binder.h"
#include "server/serve_metrics.h"

namespace ringmaster::cli {
namespace {

struct ServeFlags {
  std::string policy;
  ClusterFlags cluster;
  std::string http = "127.0.0.1:8080";
  int period_ms = 1000;
  int reservation_timeout_s = 60;
  std::string topology_labels;
  bool no_bind = false;
  std::string api_server;
  std::string token_file;
  int threads = 2;
  int max_body_mib = 64;
  std::string log_level;
};

// Milliseconds since the Unix epoch.
class WallClock : public scheduler::Clock {
 public:
  scheduler::Timestamp Now() const override {
    using namespace std::chrono;
    return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
  }
};

bool HasCluster(const ClusterFlags& f) { return !f.cluster_file.empty() || !f.nodes.empty(); }

absl::StatusOr<topology::Cluster> ServeCluster(const ServeFlags& f, const server::TopologyLabels& labels) {
  if (!HasCluster(f.cluster)) return topology::Cluster::Build(server::TierSpecs(labels), {});
  std::string notes;
  auto c = BuildCluster(f.cluster, &notes);
  std::cerr << notes;
  return c;
}

// Waits for SIGTERM / SIGINT (blocked in `stop`), ticking the extender every period.
void Loop(server::Extender& extender, const sigset_t& stop, int period_ms) {
  timespec period{period_ms / 1000, (period_ms % 1000) * 1'000'000L};
  while (true) {
    const int sig = sigtimedwait(&stop, nullptr, &period);
    if (sig == SIGTERM || sig == SIGINT) return;
    extender.Tick();
  }
}

// The binder --api-server and --token-file describe; null with --no-bind.
absl::StatusOr<std::unique_ptr<server::Binder>> MakeBinder(const ServeFlags& f) {
  if (f.no_bind) return nullptr;
  if (f.api_server.empty()) {
    return absl::InvalidArgumentError(
        "give --api-server http://127.0.0.1:8001 (kubectl proxy) to bind pods, or --no-bind to record bindings only");
  }
  server::ApiServerOptions o;
  o.url = f.api_server;
  if (!f.token_file.empty()) {
    std::ifstream in(f.token_file);
    std::stringstream text;
    text << in.rdbuf();
    o.token = text.str();
    while (!o.token.empty() && (o.token.back() == '\n' || o.token.back() == '\r')) o.token.pop_back();
    if (!in || o.token.empty()) return absl::InvalidArgumentError("--token-file: cannot read a token from " + f.token_file);
  }
  return server::MakeApiServerBinder(std::move(o));
}

// GET /metrics: the engine's cycles (observed by the extender after each
// one) and the HTTP requests (timed around `handler`).
server::HttpHandler WithMetrics(server::ServeMetrics& metrics, server::Extender& extender,
                                server::HttpHandler handler) {
  extender.SetCycleObserver([&metrics](double seconds, const scheduler::Decisions& d, const scheduler::State& s) {
    metrics.ObserveCycle(seconds, d, s);
  });
  return server::WithMetricsRoutes(metrics, std::move(handler));
}

int Run(const ServeFlags& f) {
  if (!StartLogging(f.log_level, "serve")) return ExitCode();
  auto binder = MakeBinder(f);
  if (!binder.ok()) {
    std::cerr << "serve: " << binder.status().message() << "\n";
    return 2;
  }
  auto registry = plugins::BuiltinRegistry();
  auto loaded = scheduler::LoadPolicyOrDefault(f.policy, registry);
  if (!loaded.ok()) {
    std::cerr << loaded.status().message() << "\n";
    return 2;
  }
  scheduler::Policy policy = *std::move(loaded);
  auto labels = f.topology_labels.empty() ? server::DefaultTopologyLabels()
                                          : server::ParseTopologyLabels(f.topology_labels);
  auto address = server::ParseHostPort(f.http);
  auto cluster = labels.ok() ? ServeCluster(f, *labels) : labels.status();
  for (const absl::Status& s : {labels.status(), address.status(), cluster.status()}) {
    if (!s.ok()) {
      std::cerr << "serve: " << s.message() << "\n";
      return 2;
    }
  }
  WallClock clock;
  scheduler::EngineOptions opts;
  opts.auto_confirm_binds = false;
  opts.check_invariants = false;
  auto engine = scheduler::Engine::Create(*std::move(cluster), policy, registry, clock, opts);
  if (!engine.ok()) {
    std::cerr << "serve: " << engine.status().message() << "\n";
    return 2;
  }
  server::ExtenderOptions eo;
  eo.reservation_timeout_ms = int64_t{f.reservation_timeout_s} * 1000;
  eo.topology = *labels;
  eo.learn_nodes = !HasCluster(f.cluster);
  server::Extender extender(**engine, clock, eo, binder->get());

  // Block the stop signals before any server thread exists, then wait for them.
  sigset_t stop;
  sigemptyset(&stop);
  sigaddset(&stop, SIGINT);
  sigaddset(&stop, SIGTERM);
  pthread_sigmask(SIG_BLOCK, &stop, nullptr);
  server::HttpServerOptions ho;
  ho.address = address->first;
  ho.port = address->second;
  ho.threads = f.threads;
  ho.body_limit = uint64_t(f.max_body_mib) << 20;
  server::MetricsRegistry metrics_registry;
  server::ServeMetrics metrics(metrics_registry);
  auto http = server::HttpServer::Start(
      ho, WithMetrics(metrics, extender,
                      [&extender](const server::HttpRequest& r) { return server::HandleExtenderRequest(extender, r); }));
  if (!http.ok()) {
    std::cerr << "serve: " << http.status().message() << "\n";
    return 1;
  }
  std::cout << "extender listening on " << ho.address << ":" << (*http)->port() << std::endl;
  common::Log(common::LogLevel::info, "serving", {{"http", absl::StrCat(ho.address, ":", (*http)->port())},
                                                  {"period_ms", f.period_ms}, {"policy", f.policy}});
  Loop(extender, stop, f.period_ms);
  (*http)->Stop();
  std::cout << "serve stopped after " << (*engine)->cycles() << " cycles, " << extender.bindings().size()
            << " bindings" << std::endl;
  return 0;
}

}  // namespace

void RegisterServeCommand(CLI::App& app) {
  auto f = std::make_shared<ServeFlags>();
  CLI::App* cmd = app.add_subcommand(
      "serve", "run the engine on the wall clock and serve the Kubernetes scheduler extender (docs/EXTENDER.md)");
  cmd->add_option("--policy", f->policy, "policy file (default: the built-in policy)")->check(CLI::ExistingFile);
  AddClusterFlags(*cmd, f->cluster);
  cmd->add_option("--http", f->http, "extender address HOST:PORT (loopback by default; port 0: any free port)");
  cmd->add_option("--period-ms", f->period_ms, "one engine cycle every this many ms (1000)")->check(CLI::Range(10, 3'600'000));
  cmd->add_option("--reservation-timeout", f->reservation_timeout_s,
                  "seconds a placed gang's pods have to bind before its reservations are released (60)")
      ->check(CLI::Range(1, 86'400));
  cmd->add_option("--topology-labels", f->topology_labels,
                  "node labels of the network tiers, lowest first: TIER=KEY,... (default rack=topology.ringmaster.io/"
                  "rack,spine=topology.ringmaster.io/spine,zone=topology.kubernetes.io/zone)");
  cmd->add_flag("--no-bind", f->no_bind, "record bindings only; do not call the API server");
  cmd->add_option("--api-server", f->api_server,
                  "bind pods through this API server: http://IP:PORT, e.g. kubectl proxy's http://127.0.0.1:8001");
  cmd->add_option("--token-file", f->token_file, "bearer token for --api-server")->check(CLI::ExistingFile);
  cmd->add_option("--threads", f->threads, "HTTP threads (2)")->check(CLI::Range(1, 64));
  cmd->add_option("--max-body-mib", f->max_body_mib, "largest request body, MiB (64)")->check(CLI::Range(1, 1024));
  AddLogLevelOption(*cmd, f->log_level);
  cmd->callback([f] { ExitCode() = Run(*f); });
}

}  // namespace ringmaster::cli
