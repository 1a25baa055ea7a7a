#include "server/daemon.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <time.h>

#include <cerrno>
#include <cstring>

#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "scheduler/policy.h"
#include "server/admin_service.h"
#include "server/event_log.h"
#include "server/extender_http.h"
#include "server/coordinator_service.h"
#include "server/journal.h"
#include "server/membership_bridge.h"

namespace ringmaster::server {

scheduler::Timestamp WallClock::Now() const {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

namespace {

absl::StatusOr<std::string> ReadFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// The policy in force at start (see the class comment, step 2).
absl::StatusOr<scheduler::Policy> StartPolicy(const std::string& file, const Recovered& recovered,
                                              const scheduler::PluginRegistry& registry) {
  if (!file.empty() || recovered.policy_yaml.empty()) return scheduler::LoadPolicyOrDefault(file, registry);
  std::vector<queue::ConfigError> errors;
  auto p = scheduler::ParsePolicy(recovered.policy_yaml, "journal policy", registry, &errors);
  if (p.ok()) return p;
  std::vector<std::string> lines;
  for (const auto& e : errors) lines.push_back(e.ToString());
  return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
}

// The admin API's credentials: TLS with the extender's certificate and key
// (and client CA: mutual TLS) when given, else none.
absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> GrpcServerCredentials(const TlsFiles& tls) {
  if (tls.cert_file.empty()) return grpc::InsecureServerCredentials();
  auto cert = ReadFile(tls.cert_file);
  auto key = ReadFile(tls.key_file);
  if (!cert.ok()) return absl::InvalidArgumentError(absl::StrCat("TLS: ", cert.status().message()));
  if (!key.ok()) return absl::InvalidArgumentError(absl::StrCat("TLS: ", key.status().message()));
  grpc::SslServerCredentialsOptions so(tls.client_ca_file.empty()
                                           ? GRPC_SSL_DONT_REQUEST_CLIENT_CERTIFICATE
                                           : GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY);
  if (!tls.client_ca_file.empty()) {
    auto ca = ReadFile(tls.client_ca_file);
    if (!ca.ok()) return absl::InvalidArgumentError(absl::StrCat("TLS: ", ca.status().message()));
    so.pem_root_certs = *ca;
  }
  so.pem_key_cert_pairs.push_back({*key, *cert});
  return grpc::SslServerCredentials(so);
}

// Where a local process reaches a server listening on `host` (a wildcard
// address is reached on loopback).
std::string DialHost(const std::string& host) {
  if (host == "0.0.0.0" || host.empty()) return "127.0.0.1";
  if (host == "[::]") return "[::1]";
  return host;
}

// The extender's gangs and learned nodes, kept in the journal.
class JournalExtenderStore : public ExtenderStore {
 public:
  explicit JournalExtenderStore(Journal& journal) : journal_(journal) {}
  void Put(const std::string& kind, const std::string& name, std::string value) override {
    journal_.PutExtenderState(kind, name, std::move(value));
  }
  absl::Status Sync() override { return journal_.Flush(); }

 private:
  Journal& journal_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Daemon>> Daemon::Start(DaemonOptions options, const scheduler::PluginRegistry& registry) {
  std::unique_ptr<Daemon> d(new Daemon());
  d->registry_ = &registry;
  d->options_ = std::move(options);
  DaemonOptions& o = d->options_;
  // 1. The journal.
  Recovered recovered;
  if (!o.state_dir.empty()) {
    JournalOpenOptions jo;
    jo.fresh = o.fresh_state;
    jo.other_state = {"executor"};  // the local executor's records (below)
    auto journal = Journal::Open(o.state_dir, jo);
    if (!journal.ok()) return journal.status();
    d->journal_ = *std::move(journal);
    auto loaded = d->journal_->Load();
    if (!loaded.ok()) return loaded.status();
    recovered = *std::move(loaded);
  }
  // 2. The policy; 3. the engine and what runs on it.
  auto policy = StartPolicy(o.policy_file, recovered, registry);
  if (!policy.ok()) return policy.status();
  scheduler::EngineOptions eo;
  eo.auto_confirm_binds = false;
  eo.check_invariants = false;
  eo.restart_grace_ms = o.restart_grace_ms;
  eo.cancel_grace_ms = o.cancel_grace_ms;
  auto engine = scheduler::Engine::Create(std::move(o.cluster), *policy, registry, d->clock_, eo);
  if (!engine.ok()) return engine.status();
  d->engine_ = *std::move(engine);
  d->events_ = std::make_unique<EventLog>();
  AdminOptions admin_options{o.admin_token, {}};
  if (o.local_executor) {
    admin_options.executed = [](const scheduler::Job& job) { return !job.spec().command.empty(); };
  }
  d->admin_ = std::make_unique<AdminService>(*d->engine_, d->engine_mu_, d->clock_, registry, d->journal_.get(),
                                             *d->events_, std::move(admin_options));
  d->coordinator_ = std::make_unique<Coordinator>(o.coordinator);
  d->bridge_ = std::make_unique<MembershipBridge>(*d->coordinator_);
  Daemon* self = d.get();
  o.extender.on_cycle = [self](const scheduler::Decisions& dec) {
    self->engine_mu_.AssertHeld();
    self->OnCycle(dec);
  };
  if (d->journal_) {
    d->extender_store_ = std::make_unique<JournalExtenderStore>(*d->journal_);
    o.extender.store = d->extender_store_.get();
  }
  d->extender_ = std::make_unique<Extender>(*d->engine_, d->clock_, o.extender, o.binder.get(), &d->engine_mu_);
  // A gang of pods joins the coordinator under the names its pods know
  // (membership_bridge.h); the admin API's jobs under the engine's.
  d->bridge_->SetNames([self](scheduler::JobId id) -> std::optional<CoordinatorNames> {
    self->engine_mu_.AssertHeld();
    CoordinatorNames n;
    if (!self->extender_->PodNamesLocked(id, &n.job, &n.workers)) return std::nullopt;
    return n;
  });
  {
    absl::MutexLock lock(&d->engine_mu_);
    if (auto s = d->admin_->Recover(recovered); !s.ok()) return s;
  }
  // The extender's gangs after the admin API's jobs (the extender locks itself).
  std::vector<StoredRecord> stored;
  for (ExtenderRecord& r : recovered.extender) stored.push_back({r.kind, r.name, std::move(r.value)});
  if (auto s = d->extender_->Restore(stored); !s.ok()) return s;
  d->recovered_ = recovered.jobs.size();
  // The servers.
  Extender* ext = d->extender_.get();
  d->metrics_ = std::make_unique<ServeMetrics>(d->metrics_registry_);
  ServeMetrics* metrics = d->metrics_.get();
  if (d->journal_) {
    d->journal_->SetCommitObserver([metrics](double s) { metrics->journal_write_seconds().Observe(s); });
    d->journal_->SetErrorObserver([](const absl::Status& s) {
      common::Log(common::LogLevel::err, "journal write failed", {{"why", s.message()}});
    });
  }
  ext->SetCycleObserver([metrics](double seconds, const scheduler::Decisions& dec, const scheduler::State& st) {
    metrics->ObserveCycle(seconds, dec, st);
  });
  auto http = HttpServer::Start(
      o.http, WithMetricsRoutes(*metrics, [ext](const HttpRequest& r) { return HandleExtenderRequest(*ext, r); }));
  if (!http.ok()) return http.status();
  d->http_ = *std::move(http);
  if (!o.grpc_address.empty()) {
    auto addr = ParseHostPort(o.grpc_address);
    if (!addr.ok()) return absl::InvalidArgumentError(absl::StrCat("--grpc: ", addr.status().message()));
    d->grpc_host_ = addr->first;
    const std::string host = addr->first.find(':') != std::string::npos ? "[" + addr->first + "]" : addr->first;
    auto creds = GrpcServerCredentials(o.http.tls);
    if (!creds.ok()) return creds.status();
    grpc::ServerBuilder b;
    b.AddListeningPort(absl::StrCat(host, ":", addr->second), *creds, &d->grpc_port_);
    b.RegisterService(d->admin_.get());
    if (o.coordinator_address.empty()) {
      d->coordinator_service_ = std::make_unique<CoordinatorService>(*d->coordinator_);
      b.RegisterService(d->coordinator_service_.get());
    }
    b.SetMaxReceiveMessageSize(4 << 20);
    d->grpc_ = b.BuildAndStart();
    if (!d->grpc_ || d->grpc_port_ == 0) {
      return absl::UnavailableError(absl::StrCat("--grpc: cannot listen on ", o.grpc_address));
    }
    if (o.coordinator_address.empty()) d->coordinator_address_ = absl::StrCat(DialHost(host), ":", d->grpc_port_);
  }
  if (!o.coordinator_address.empty()) {
    // Its own plaintext server (the shims' client speaks plaintext gRPC).
    auto addr = ParseHostPort(o.coordinator_address);
    if (!addr.ok()) return absl::InvalidArgumentError(absl::StrCat("--coordinator: ", addr.status().message()));
    const std::string host = addr->first.find(':') != std::string::npos ? "[" + addr->first + "]" : addr->first;
    d->coordinator_service_ = std::make_unique<CoordinatorService>(*d->coordinator_);
    grpc::ServerBuilder b;
    int port = 0;
    b.AddListeningPort(absl::StrCat(host, ":", addr->second), grpc::InsecureServerCredentials(), &port);
    b.RegisterService(d->coordinator_service_.get());
    d->coordinator_grpc_ = b.BuildAndStart();
    if (!d->coordinator_grpc_ || port == 0) {
      return absl::UnavailableError(absl::StrCat("--coordinator: cannot listen on ", o.coordinator_address));
    }
    d->coordinator_address_ = absl::StrCat(DialHost(host), ":", port);
  }
  if (o.local_executor) {
    if (d->coordinator_address_.empty()) {
      return absl::InvalidArgumentError("--local-executor needs the coordinator: give --grpc or --coordinator");
    }
    d->launcher_ = MakeSystemProcessLauncher();
    LocalExecutorOptions eo = o.executor;
    eo.coordinator = d->coordinator_address_;
    if (!o.state_dir.empty() && eo.state_dir.empty()) {
      eo.state_dir = o.state_dir + "/executor";
      if (::mkdir(eo.state_dir.c_str(), 0755) != 0 && errno != EEXIST) {
        return absl::InternalError(absl::StrCat(eo.state_dir, ": cannot create: ", std::strerror(errno)));
      }
    }
    absl::MutexLock lock(&d->engine_mu_);
    d->executor_ = std::make_unique<LocalExecutor>(
        *d->engine_, d->clock_, *d->launcher_, std::move(eo),
        [self](scheduler::JobId id, const std::string& event, const std::string& detail) {
          self->engine_mu_.AssertHeld();
          self->admin_->JobChanged(id, event, detail);
          if (event == "finished" || event == "failed") self->bridge_->JobEnded(self->engine_->state().job(id).name());
        });
    // A restarted daemon re-adopts the processes of the jobs it re-adopted
    // (local_executor.h): those still running are supervised again; tasks
    // whose process is gone failed (an elastic job above its minimum runs
    // on smaller, others restart whole).
    const LocalExecutor::Readopted r = d->executor_->Readopt();
    if (r.adopted + r.ended + r.failed + r.killed > 0) {
      common::Log(common::LogLevel::info, "task processes after restart",
                  {{"adopted", r.adopted}, {"ended", r.ended}, {"failed", r.failed}, {"killed", r.killed}});
    }
  }
  d->background_ = std::thread([self] { self->Background(); });
  return d;
}

void Daemon::OnCycle(const scheduler::Decisions& dec) {
  // The coordinator learns the target membership before any process of it
  // exists: a worker's Join never finds the job unknown (which would create
  // it unmanaged, sized by the Join's desired_workers).
  (void)bridge_->OnCycle(dec);
  if (executor_) executor_->OnCycle(dec);
  admin_->OnCycle(dec);
  for (const scheduler::Eviction& e : dec.evictions) {
    if (e.kind == scheduler::Eviction::Kind::kCancel) bridge_->JobEnded(e.job, engine_->state().job(e.job).name());
  }
}

void Daemon::Background() {
  while (!stop_background_.WaitForNotificationWithTimeout(absl::Milliseconds(100))) {
    coordinator_->Tick();
    absl::MutexLock lock(&engine_mu_);
    if (executor_) executor_->Poll();
  }
}

Daemon::~Daemon() { (void)Shutdown(); }

uint16_t Daemon::http_port() const { return http_ ? http_->port() : 0; }

void Daemon::Tick() { extender_->Tick(); }

absl::Status Daemon::ReloadPolicyFile() {
  if (options_.policy_file.empty()) {
    return absl::FailedPreconditionError("no --policy file to re-read (the policy is the built-in or the journal's)");
  }
  auto text = ReadFile(options_.policy_file);
  if (!text.ok()) return text.status();
  std::vector<std::string> errors;
  return admin_->ApplyPolicy(*text, options_.policy_file, &errors);
}

void Daemon::Run(const sigset_t& signals) {
  const int ms = options_.period_ms;
  const timespec period{ms / 1000, (ms % 1000) * 1'000'000L};
  while (true) {
    const int sig = sigtimedwait(&signals, nullptr, &period);
    if (sig == SIGTERM || sig == SIGINT) return;
    if (sig == SIGHUP) {
      absl::Status s = ReloadPolicyFile();
      std::cerr << (s.ok() ? "policy reloaded from " + options_.policy_file
                    : s.code() == absl::StatusCode::kInvalidArgument
                        ? "policy reload rejected, the old policy stays:\n" + std::string(s.message())
                        : "policy reload: " + std::string(s.message()))
                << std::endl;
      continue;
    }
    Tick();
  }
}

absl::Status Daemon::Shutdown() {
  if (stopped_) return absl::OkStatus();
  stopped_ = true;
  if (background_.joinable()) {
    stop_background_.Notify();
    background_.join();
  }
  {
    absl::MutexLock lock(&engine_mu_);
    if (executor_) {
      executor_->StopAll(options_.shutdown_grace_ms);
      started_processes_ = executor_->started();
    }
  }
  if (coordinator_) coordinator_->Shutdown();  // ends the shims' streams
  if (events_) events_->Close();
  if (grpc_) grpc_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (coordinator_grpc_) coordinator_grpc_->Shutdown(std::chrono::system_clock::now() + std::chrono::seconds(2));
  if (http_) http_->Stop();
  return journal_ ? journal_->Flush() : absl::OkStatus();
}

std::string Daemon::Summary() const {
  return absl::StrCat("serve stopped after ", engine_->cycles(), " cycles, ", extender_->bindings().size(),
                      " bindings, ", admin_->jobs_accepted(), " jobs accepted",
                      launcher_ ? absl::StrCat(", ", started_processes_, " processes started") : "");
}

}  // namespace ringmaster::server
