#include "server/daemon/daemon.h"

#include <grpcpp/grpcpp.h>
#include <sys/stat.h>
#include <time.h>

#include <cerrno>
#include <cstring>

#include <algorithm>
#include <chrono>
#include <fstream>
#include <iostream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "scheduler/policy.h"
#include "server/extender/volcano_queues.h"
#include "server/admin/admin_service.h"
#include "server/admin/event_log.h"
#include "server/extender/extender_http.h"
#include "server/coordinator/coordinator_service.h"
#include "server/journal/journal.h"
#include "server/coordinator/membership_bridge.h"
#include "server/daemon/fair_share_history.h"

namespace ringmaster::server {

scheduler::Timestamp WallClock::Now() const {
  using namespace std::chrono;
  return duration_cast<milliseconds>(system_clock::now().time_since_epoch()).count();
}

namespace {

// The fewest ended-job records the engine holds in memory whatever
// --ended-jobs-kept says (0 included): more than can end between two cycles,
// so that no learner misses one.
constexpr int64_t kEndedJobsInMemoryAtLeast = 10'000;

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
  Recovered recovered;
  RM_RETURN_IF_ERROR(d->OpenJournal(&recovered));
  RM_RETURN_IF_ERROR(d->MakeEngine(recovered));
  d->MakeSurfaces();
  RM_RETURN_IF_ERROR(d->Readopt(std::move(recovered)));
  RM_RETURN_IF_ERROR(d->StartHttpServers());
  RM_RETURN_IF_ERROR(d->StartGrpcServers());
  RM_RETURN_IF_ERROR(d->StartExecutor());
  Daemon* self = d.get();
  d->background_ = std::thread([self] { self->Background(); });
  if (d->options_.volcano_queues) d->volcano_thread_ = std::thread([self] { self->VolcanoQueuesLoop(); });
  return d;
}

absl::StatusOr<ExternalQueues> Daemon::ReadVolcanoQueues() {
  if (options_.binder == nullptr) return absl::InvalidArgumentError("needs the API server (--api-server URL)");
  RM_ASSIGN_OR_RETURN(const nlohmann::json list, options_.binder->ListVolcanoQueues());
  RM_ASSIGN_OR_RETURN(VolcanoQueues read, ReadVolcanoQueueList(list));
  for (const std::string& note : read.notes) common::Log(common::LogLevel::warn, "volcano queue", {{"note", note}});
  return ExternalQueues{.kind = "Volcano Queue", .specs = std::move(read.specs)};
}

// Re-reads the Queue objects; applies a change, or logs why it was not (once
// per distinct error: the next change, or the jobs leaving a removed queue,
// may make it apply).
void Daemon::VolcanoQueuesLoop() {
  std::string last_error;
  const absl::Duration every = absl::Milliseconds(std::max<int64_t>(options_.volcano_queues_refresh_ms, 100));
  while (!stop_background_.WaitForNotificationWithTimeout(every)) {
    absl::Status s = [&]() -> absl::Status {
      RM_ASSIGN_OR_RETURN(ExternalQueues q, ReadVolcanoQueues());
      return admin_->SetExternalQueues(std::move(q));
    }();
    const std::string error = s.ok() ? "" : std::string(s.message());
    if (error != last_error) {
      if (s.ok()) {
        common::Log(common::LogLevel::info, "volcano queues", {{"state", "in force again"}});
      } else {
        common::Log(common::LogLevel::err, "volcano queues not applied, the queues in force stay", {{"why", error}});
      }
      last_error = error;
    }
  }
}

// 1. The journal in --state DIR, read back.
absl::Status Daemon::OpenJournal(Recovered* recovered) {
  if (options_.state_dir.empty()) return absl::OkStatus();
  JournalOpenOptions jo;
  jo.fresh = options_.fresh_state;
  jo.other_state = {"executor"};  // the local executor's records (StartExecutor)
  RM_ASSIGN_OR_RETURN(journal_, Journal::Open(options_.state_dir, jo));
  RM_ASSIGN_OR_RETURN(*recovered, journal_->Load());
  return absl::OkStatus();
}

// 2. The engine with the policy in force, and the loop that runs its cycles.
absl::Status Daemon::MakeEngine(const Recovered& recovered) {
  RM_ASSIGN_OR_RETURN(scheduler::Policy base, StartPolicy(options_.policy_file, recovered, *registry_));
  if (options_.volcano_queues) {
    auto volcano = ReadVolcanoQueues();
    if (!volcano.ok()) return absl::Status(volcano.status().code(), absl::StrCat("--volcano-queues: ", volcano.status().message()));
    start_queues_ = *std::move(volcano);
  }
  auto composed = ComposeQueues(base, start_queues_);
  if (!composed.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("--volcano-queues: ", composed.status().message()));
  }
  const scheduler::Policy& policy = *composed;
  base_policy_ = std::move(base);
  scheduler::EngineOptions eo;
  eo.auto_confirm_binds = false;
  eo.check_invariants = false;
  eo.restart_grace_ms = options_.restart_grace_ms;
  eo.cancel_grace_ms = options_.cancel_grace_ms;
  // The records the learners and the journal read, bounded in memory: what
  // the journal keeps, and never fewer than a burst of ends between two
  // cycles could hold (a learner reads them every cycle).
  eo.ended_jobs_kept = static_cast<size_t>(std::max<int64_t>(options_.ended_jobs_kept, kEndedJobsInMemoryAtLeast));
  RM_ASSIGN_OR_RETURN(engine_, scheduler::Engine::Create(std::move(options_.cluster), policy, *registry_, clock_, eo));
  loop_ = std::make_unique<CycleLoop>(*engine_, engine_mu_);
  return absl::OkStatus();
}

// 3. The surfaces on the engine, and the loop's sinks: the extender (it
// adds itself), then the daemon's.
void Daemon::MakeSurfaces() {
  events_ = std::make_unique<EventLog>();
  metrics_ = std::make_unique<ServeMetrics>(metrics_registry_);
  ServeMetrics* metrics = metrics_.get();
  loop_->SetObserver([metrics](double seconds, const scheduler::Decisions& dec, const scheduler::State& st) {
    metrics->ObserveCycle(seconds, dec, st);
  });
  if (journal_) {
    journal_->SetCommitObserver([metrics](double s) { metrics->journal_write_seconds().Observe(s); });
    journal_->SetErrorObserver([](const absl::Status& s) {
      common::Log(common::LogLevel::err, "journal write failed", {{"why", s.message()}});
    });
  }
  AdminOptions admin_options{options_.admin_token, {}, {}};
  // A cancelled pod gang keeps its GPUs until its pods are gone (the
  // extender evicts them), like a job the local executor runs.
  const bool executor = options_.local_executor;
  admin_options.executed = [this, executor](const scheduler::Job& job) {
    engine_mu_.AssertHeld();
    return (executor && !job.spec().command.empty()) || extender_->OwnsJobLocked(job.id());
  };
  admin_options.on_cancel = [this](scheduler::JobId id) {
    engine_mu_.AssertHeld();
    extender_->JobCancelledLocked(id);
  };
  admin_ = std::make_unique<AdminService>(*engine_, engine_mu_, clock_, *registry_, journal_.get(), *events_,
                                          std::move(admin_options));
  {
    absl::MutexLock lock(&engine_mu_);
    admin_->SetPolicySourcesLocked(*std::move(base_policy_), std::move(start_queues_));
  }
  coordinator_ = std::make_unique<Coordinator>(options_.coordinator);
  bridge_ = std::make_unique<MembershipBridge>(*coordinator_);
  if (journal_) {
    extender_store_ = std::make_unique<JournalExtenderStore>(*journal_);
    options_.extender.store = extender_store_.get();
  }
  extender_ = std::make_unique<Extender>(*engine_, clock_, options_.extender, options_.binder.get(), loop_.get());
  loop_->AddSink(this);
  // A gang of pods joins the coordinator under the names its pods know
  // (membership_bridge.h); the admin API's jobs under the engine's.
  bridge_->SetNames([this](scheduler::JobId id) -> std::optional<CoordinatorNames> {
    engine_mu_.AssertHeld();
    CoordinatorNames n;
    if (!extender_->PodNamesLocked(id, &n.job, &n.workers)) return std::nullopt;
    return n;
  });
}

// 4. The journal's jobs, then the extender's gangs (the extender locks
// itself).
absl::Status Daemon::Readopt(Recovered recovered) {
  {
    absl::MutexLock lock(&engine_mu_);
    // First: the journal's terminal jobs that Recover ends again (and that
    // teach nothing: they did not run here) come after them.
    ended_ = std::make_unique<EndedJobHistory>(journal_.get(), options_.ended_jobs_kept);
    ended_->Restore(recovered, *engine_);
    RM_RETURN_IF_ERROR(admin_->Recover(recovered));
  }
  std::vector<StoredRecord> stored;
  for (ExtenderRecord& r : recovered.extender) stored.push_back({r.kind, r.name, std::move(r.value)});
  RM_RETURN_IF_ERROR(extender_->Restore(stored));
  {
    absl::MutexLock lock(&engine_mu_);
    // Every job is back (the API's and the extender's): what each
    // accumulated, before the first cycle reads it.
    history_ = std::make_unique<ActiveJobHistory>(journal_.get());
    history_->Restore(recovered, *engine_);
    speeds_ = std::make_unique<SpeedLearner>([c = coordinator_.get()] { return c->AllSpeedReports(); }, journal_.get());
    speeds_->Restore(recovered.speeds, *engine_);
    RestoreQueueUsage(recovered, *engine_);
    queue_usage_restored_ = true;
  }
  recovered_ = recovered.jobs.size();
  return absl::OkStatus();
}

// 5a. The extender's HTTP server, and the health port's.
absl::Status Daemon::StartHttpServers() {
  Extender* ext = extender_.get();
  RM_ASSIGN_OR_RETURN(http_, HttpServer::Start(options_.http, WithMetricsRoutes(*metrics_, [ext](HttpRequest& r) {
                                                 return HandleExtenderRequest(*ext, r);
                                               })));
  if (options_.health_http.address.empty()) return absl::OkStatus();
  HttpServerOptions ho = options_.health_http;
  ho.tls = {};
  auto health = HttpServer::Start(ho, WithMetricsRoutes(*metrics_, HandleHealthRequest));
  if (!health.ok()) return absl::UnavailableError(absl::StrCat("--metrics: ", health.status().message()));
  health_http_ = *std::move(health);
  return absl::OkStatus();
}

// 5b. The admin API's gRPC server (with the coordinator on its port unless
// it has its own address), and the coordinator's own.
absl::Status Daemon::StartGrpcServers() {
  const DaemonOptions& o = options_;
  if (!o.grpc_address.empty()) {
    auto addr = ParseHostPort(o.grpc_address);
    if (!addr.ok()) return absl::InvalidArgumentError(absl::StrCat("--grpc: ", addr.status().message()));
    grpc_host_ = addr->first;
    const std::string host = addr->first.find(':') != std::string::npos ? "[" + addr->first + "]" : addr->first;
    RM_ASSIGN_OR_RETURN(std::shared_ptr<grpc::ServerCredentials> creds, GrpcServerCredentials(o.http.tls));
    grpc::ServerBuilder b;
    b.AddListeningPort(absl::StrCat(host, ":", addr->second), creds, &grpc_port_);
    b.RegisterService(admin_.get());
    if (o.coordinator_address.empty()) {
      coordinator_service_ = std::make_unique<CoordinatorService>(*coordinator_);
      b.RegisterService(coordinator_service_.get());
    }
    b.SetMaxReceiveMessageSize(4 << 20);
    grpc_ = b.BuildAndStart();
    if (!grpc_ || grpc_port_ == 0) {
      return absl::UnavailableError(absl::StrCat("--grpc: cannot listen on ", o.grpc_address));
    }
    if (o.coordinator_address.empty()) coordinator_address_ = absl::StrCat(DialHost(host), ":", grpc_port_);
  }
  if (o.coordinator_address.empty()) return absl::OkStatus();
  // Its own plaintext server (the shims' client speaks plaintext gRPC).
  auto addr = ParseHostPort(o.coordinator_address);
  if (!addr.ok()) return absl::InvalidArgumentError(absl::StrCat("--coordinator: ", addr.status().message()));
  const std::string host = addr->first.find(':') != std::string::npos ? "[" + addr->first + "]" : addr->first;
  coordinator_service_ = std::make_unique<CoordinatorService>(*coordinator_);
  grpc::ServerBuilder b;
  int port = 0;
  b.AddListeningPort(absl::StrCat(host, ":", addr->second), grpc::InsecureServerCredentials(), &port);
  b.RegisterService(coordinator_service_.get());
  coordinator_grpc_ = b.BuildAndStart();
  if (!coordinator_grpc_ || port == 0) {
    return absl::UnavailableError(absl::StrCat("--coordinator: cannot listen on ", o.coordinator_address));
  }
  coordinator_address_ = absl::StrCat(DialHost(host), ":", port);
  return absl::OkStatus();
}

// 6. The local executor (--local-executor), which re-adopts the processes
// of the jobs re-adopted in step 4.
absl::Status Daemon::StartExecutor() {
  if (!options_.local_executor) return absl::OkStatus();
  if (coordinator_address_.empty()) {
    return absl::InvalidArgumentError("--local-executor needs the coordinator: give --grpc or --coordinator");
  }
  launcher_ = MakeSystemProcessLauncher();
  LocalExecutorOptions eo = options_.executor;
  eo.coordinator = coordinator_address_;
  // The executor's shims join under the engine's job name.
  eo.job_finished = [c = coordinator_.get()](const std::string& job) {
    const absl::StatusOr<api::JobStatus> status = c->GetJob(job);
    return status.ok() && status->finished();
  };
  if (!options_.state_dir.empty() && eo.state_dir.empty()) {
    eo.state_dir = options_.state_dir + "/executor";
    if (::mkdir(eo.state_dir.c_str(), 0755) != 0 && errno != EEXIST) {
      return absl::InternalError(absl::StrCat(eo.state_dir, ": cannot create: ", std::strerror(errno)));
    }
  }
  absl::MutexLock lock(&engine_mu_);
  executor_ = std::make_unique<LocalExecutor>(
      *engine_, clock_, *launcher_, std::move(eo),
      [this](scheduler::JobId id, const std::string& event, const std::string& detail) {
        engine_mu_.AssertHeld();
        admin_->JobChanged(id, event, detail);
        if (event == "finished" || event == "failed") bridge_->JobEnded(engine_->state().job(id).name());
      });
  // Those still running are supervised again; tasks whose process is gone
  // failed (an elastic job above its minimum runs on smaller, others
  // restart whole).
  const LocalExecutor::Readopted r = executor_->Readopt();
  if (r.adopted + r.ended + r.failed + r.killed > 0) {
    common::Log(common::LogLevel::info, "task processes after restart",
                {{"adopted", r.adopted}, {"ended", r.ended}, {"failed", r.failed}, {"killed", r.killed}});
  }
  return absl::OkStatus();
}

void Daemon::OnCycle(const scheduler::Decisions& dec) {
  // The coordinator learns the target membership before any process of it
  // exists: a worker's Join never finds the job unknown (which would create
  // it unmanaged, sized by the Join's desired_workers).
  common::LogIfError(bridge_->OnCycle(dec), "coordinator membership not set");
  if (executor_) executor_->OnCycle(dec);
  admin_->OnCycle(dec);
  for (const scheduler::Eviction& e : dec.evictions) {
    if (e.kind == scheduler::Eviction::Kind::kCancel) bridge_->JobEnded(e.job, engine_->state().job(e.job).name());
  }
}

void Daemon::Background() {
  const int64_t usage_ticks = std::max<int64_t>(options_.queue_usage_every_ms / 100, 1);
  for (int64_t tick = 1; !stop_background_.WaitForNotificationWithTimeout(absl::Milliseconds(100)); ++tick) {
    coordinator_->Tick();
    absl::MutexLock lock(&engine_mu_);
    if (executor_) executor_->Poll();
    // Once a second: the workers' speed reports into the jobs' models.
    if (tick % 10 == 0 && speeds_) speeds_->Learn(*engine_, absl::Now());
    if (tick % usage_ticks == 0) SaveQueueUsageLocked();
    if (ended_) ended_->Save(*engine_);
    if (history_) history_->Save(*engine_, clock_.Now(), /*force=*/tick % usage_ticks == 0);
  }
}

void Daemon::SaveQueueUsageLocked() {
  if (journal_ && queue_usage_restored_) SaveQueueUsage(*engine_, *journal_);
}

Daemon::~Daemon() { common::LogIfError(Shutdown(), "shutdown"); }

uint16_t Daemon::http_port() const { return http_ ? http_->port() : 0; }
uint16_t Daemon::health_port() const { return health_http_ ? health_http_->port() : 0; }

absl::Status Daemon::ReloadPolicyFile() {
  if (options_.policy_file.empty()) {
    return absl::FailedPreconditionError("no --policy file to re-read (the policy is the built-in or the journal's)");
  }
  RM_ASSIGN_OR_RETURN(auto text, ReadFile(options_.policy_file));
  std::vector<std::string> errors;
  return admin_->ApplyPolicy(text, options_.policy_file, &errors);
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
  if (volcano_thread_.joinable()) volcano_thread_.join();
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
  if (health_http_) health_http_->Stop();
  {
    absl::MutexLock lock(&engine_mu_);
    SaveQueueUsageLocked();
    if (ended_) ended_->Save(*engine_);
    // The executor stopped its jobs' processes above: they do not run
    // while no daemon does. A pod gang's pods go on.
    const bool executed = executor_ != nullptr;
    if (history_) {
      history_->Save(*engine_, clock_.Now(), /*force=*/true, [executed](const scheduler::Job& job) {
        return executed && !job.spec().command.empty();
      });
    }
  }
  return journal_ ? journal_->Flush() : absl::OkStatus();
}

std::string Daemon::Summary() const {
  return absl::StrCat("serve stopped after ", engine_->cycles(), " cycles, ", extender_->bindings().size(),
                      " bindings, ", admin_->jobs_accepted(), " jobs accepted",
                      launcher_ ? absl::StrCat(", ", started_processes_, " processes started") : "");
}

}  // namespace ringmaster::server
