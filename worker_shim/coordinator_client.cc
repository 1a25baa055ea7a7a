// Implementation of the coordinator client; see coordinator_client.h.
#include "worker_shim/coordinator_client.h"

#include <algorithm>
#include <cmath>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace ringmaster::shim {

std::string FormatSeconds(absl::Duration d) {
  if (d < absl::ZeroDuration()) d = absl::ZeroDuration();
  if (d < absl::Seconds(1)) {
    return absl::StrCat(std::llround(absl::ToDoubleMilliseconds(d)), " ms");
  }
  const int64_t tenths = std::llround(absl::ToDoubleSeconds(d) * 10);
  if (tenths % 10 == 0) return absl::StrCat(tenths / 10, " s");
  return absl::StrFormat("%.1f s", static_cast<double>(tenths) / 10);
}

std::string ConnectFailureReason(std::string_view grpc_message) {
  const std::string m = absl::AsciiStrToLower(
      absl::string_view(grpc_message.data(), grpc_message.size()));
  if (absl::StrContains(m, "connection refused")) {
    return "connection refused";
  }
  if (absl::StrContains(m, "no route to host") ||
      absl::StrContains(m, "network is unreachable")) {
    return "no route to host";
  }
  if (absl::StrContains(m, "dns") ||
      absl::StrContains(m, "resolv") ||
      absl::StrContains(m, "name or service not known")) {
    return "name not resolved";
  }
  if (absl::StrContains(m, "timed out") ||
      absl::StrContains(m, "timeout") ||
      absl::StrContains(m, "deadline")) {
    return "no answer";
  }
  return "unreachable";
}

absl::Status FromGrpc(const grpc::Status& status) {
  if (status.ok()) return absl::OkStatus();
  return absl::Status(static_cast<absl::StatusCode>(status.error_code()),
                      status.error_message());
}

absl::StatusOr<std::unique_ptr<CoordinatorClient>> CoordinatorClient::Connect(
    ClientOptions options) {
  if (options.address.empty() || options.job.empty() ||
      options.worker_id.empty()) {
    return absl::InvalidArgumentError(
        "coordinator client needs an address, a job and a worker id");
  }
  std::unique_ptr<CoordinatorClient> c(
      new CoordinatorClient(std::move(options)));
  c->watcher_ = std::thread([p = c.get()] { p->WatchLoop(); });
  c->heartbeat_ = std::thread([p = c.get()] { p->HeartbeatLoop(); });
  return c;
}

CoordinatorClient::CoordinatorClient(ClientOptions options)
    : options_(std::move(options)) {
  Reconnect();
}

std::shared_ptr<api::Coordinator::Stub> CoordinatorClient::Stub() const {
  absl::MutexLock lock(&stub_mu_);
  return stub_;
}

void CoordinatorClient::Reconnect() {
  grpc::ChannelArguments args;
  // A channel of our own: a fresh one must not inherit a shared subchannel
  // that is still backing off from the old coordinator.
  args.SetInt(GRPC_ARG_USE_LOCAL_SUBCHANNEL_POOL, 1);
  // Reconnect quickly after a coordinator restart. (Not
  // GRPC_ARG_MIN_RECONNECT_BACKOFF_MS: that is also the connect timeout, and
  // a small one fails handshakes on a loaded machine.)
  args.SetInt(GRPC_ARG_INITIAL_RECONNECT_BACKOFF_MS, 100);
  args.SetInt(GRPC_ARG_MAX_RECONNECT_BACKOFF_MS, 1000);
  auto channel = grpc::CreateCustomChannel(
      options_.address, grpc::InsecureChannelCredentials(), args);
  absl::MutexLock lock(&stub_mu_);
  stub_ = api::Coordinator::NewStub(channel);
  channel_ = std::move(channel);
}

std::shared_ptr<grpc::Channel> CoordinatorClient::Channel() const {
  absl::MutexLock lock(&stub_mu_);
  return channel_;
}

CoordinatorClient::ConnectResult CoordinatorClient::AwaitConnected(
    grpc::Channel& channel) {
  const absl::Time give_up = absl::Now() + options_.unreachable_after;
  grpc_connectivity_state state = channel.GetState(/*try_to_connect=*/true);
  while (state != GRPC_CHANNEL_READY) {
    if (state == GRPC_CHANNEL_TRANSIENT_FAILURE ||
        state == GRPC_CHANNEL_SHUTDOWN) {
      return ConnectResult::kFailed;
    }
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return ConnectResult::kStopping;
    }
    const absl::Time now = absl::Now();
    if (now >= give_up) return ConnectResult::kNoAnswer;
    channel.WaitForStateChange(
        state, absl::ToChronoTime(std::min(give_up, now + absl::Milliseconds(20))));
    state = channel.GetState(/*try_to_connect=*/true);
  }
  return ConnectResult::kReady;
}

void CoordinatorClient::NoteConnected() {
  absl::MutexLock lock(&mu_);
  if (reach_.connected) return;
  const absl::Time now = absl::Now();
  if (reach_reported_) {
    common::Log(common::LogLevel::info,
                reach_.ever_connected ? "coordinator back" : "coordinator reached",
                {{"address", options_.address},
                 {"job", options_.job},
                 {"worker", options_.worker_id},
                 {"unreachable_for", FormatSeconds(now - reach_.since)}});
  }
  reach_.connected = true;
  reach_.ever_connected = true;
  reach_.since = now;
  reach_.reason.clear();
  reach_.error.clear();
  reach_reported_ = false;
}

void CoordinatorClient::NoteUnreachable(const std::string& reason,
                                        const std::string& error) {
  absl::MutexLock lock(&mu_);
  if (stopping_) return;
  const absl::Time now = absl::Now();
  const bool was_connected = reach_.connected;
  // Since when: the loss, or the first failed attempt.
  if (was_connected || reach_.since == absl::Time()) reach_.since = now;
  reach_.connected = false;
  reach_.reason = reason;
  reach_.error = error;
  if (reach_reported_ && now - reach_logged_ < options_.unreachable_log_interval) {
    return;
  }
  const std::string retry =
      absl::StrCat("every ", FormatSeconds(options_.reconnect_backoff));
  if (was_connected) {
    // A coordinator this worker was connected to went away: training goes
    // on with the communicator it has; a membership change waits for it.
    common::Log(common::LogLevel::warn, "coordinator lost",
                {{"address", options_.address},
                 {"job", options_.job},
                 {"worker", options_.worker_id},
                 {"generation", current_generation_},
                 {"reason", reason},
                 {"error", error},
                 {"retrying", retry},
                 {"note", "training goes on; membership changes wait for it"}});
  } else if (!reach_reported_) {
    common::Log(reach_.ever_connected ? common::LogLevel::warn
                                      : common::LogLevel::err,
                reach_.ever_connected ? "coordinator lost"
                                      : "coordinator unreachable",
                {{"address", options_.address},
                 {"job", options_.job},
                 {"worker", options_.worker_id},
                 {"reason", reason},
                 {"error", error},
                 {"retrying", retry}});
  } else {
    common::Log(common::LogLevel::warn, "coordinator still unreachable",
                {{"address", options_.address},
                 {"job", options_.job},
                 {"worker", options_.worker_id},
                 {"for", FormatSeconds(now - reach_.since)},
                 {"reason", reason},
                 {"error", error}});
  }
  reach_reported_ = true;
  reach_logged_ = now;
}

Reachability CoordinatorClient::reachability() const {
  absl::MutexLock lock(&mu_);
  return reach_;
}

std::string CoordinatorClient::DescribeJob() const {
  api::GetJobRequest req;
  req.set_job(options_.job);
  api::JobStatus job;
  auto ctx = MakeContext(absl::Seconds(1));
  grpc::Status s = Stub()->GetJob(ctx.get(), req, &job);
  if (!s.ok()) {
    if (s.error_code() == grpc::StatusCode::NOT_FOUND) {
      return absl::StrCat("the coordinator does not know job '", options_.job,
                          "'");
    }
    return "";
  }
  std::vector<std::string> members;
  for (const auto& m : job.members()) members.push_back(m.worker_id());
  if (job.generation() == 0) {
    return absl::StrCat(
        "job '", job.job(), "' has ", job.standby_size(), " of ",
        job.target_workers(), " workers (", absl::StrJoin(job.standby(), ", "),
        "): its first generation waits for the whole gang to join");
  }
  return absl::StrCat(
      "job '", job.job(), "' is at generation ", job.generation(), " with ",
      members.size(), " of ", job.target_workers(), " workers (",
      absl::StrJoin(members, ", "), ")",
      job.standby_size() > 0
          ? absl::StrCat("; standby: ", absl::StrJoin(job.standby(), ", "),
                         " (they enter when the job grows)")
          : std::string());
}

CoordinatorClient::~CoordinatorClient() {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
    if (stream_ctx_ != nullptr) stream_ctx_->TryCancel();
  }
  if (watcher_.joinable()) watcher_.join();
  if (heartbeat_.joinable()) heartbeat_.join();
}

std::unique_ptr<grpc::ClientContext> CoordinatorClient::MakeContext(
    absl::Duration timeout) const {
  auto ctx = std::make_unique<grpc::ClientContext>();
  ctx->set_deadline(absl::ToChronoTime(absl::Now() + timeout));
  return ctx;
}

void CoordinatorClient::WatchLoop() {
  while (true) {
    api::JoinRequest req;
    grpc::ClientContext ctx;
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      req.set_job(options_.job);
      req.set_worker_id(options_.worker_id);
      req.set_host(options_.host);
      for (int32_t g : options_.gpus) req.add_gpus(g);
      req.set_desired_workers(options_.desired_workers);
      req.set_last_generation(current_generation_);
      req.set_last_rank(current_rank_);
      req.set_last_world_size(current_world_);
    }
    // Connect first, so that a coordinator that refuses or does not answer
    // is reported within seconds (the Join would wait out gRPC's connect
    // timeout, 20 s, in silence). A failed channel is joined anyway: the
    // Join then fails at once with gRPC's reason.
    std::shared_ptr<grpc::Channel> channel = Channel();
    std::shared_ptr<api::Coordinator::Stub> stub = Stub();
    switch (AwaitConnected(*channel)) {
      case ConnectResult::kStopping:
        return;
      case ConnectResult::kNoAnswer:
        NoteUnreachable("no answer",
                        absl::StrCat("not connected after ",
                                     FormatSeconds(options_.unreachable_after),
                                     " (still trying)"));
        continue;  // the same channel goes on trying
      case ConnectResult::kReady:
        NoteConnected();
        break;
      case ConnectResult::kFailed:
        break;
    }
    {
      absl::MutexLock lock(&mu_);
      if (stopping_) return;
      stream_ctx_ = &ctx;
    }
    auto reader = stub->Join(&ctx, req);
    api::MembershipUpdate update;
    bool got_any = false;
    while (reader->Read(&update)) {
      if (!got_any) {
        got_any = true;
        connects_.fetch_add(1);
        NoteConnected();
      }
      bool newer = false;
      {
        absl::MutexLock lock(&mu_);
        if (!latest_.has_value() ||
            update.generation() > latest_->generation()) {
          latest_ = update;
          latest_received_us_ = absl::ToUnixMicros(absl::Now());
          newer = true;
        }
      }
      if (newer) {
        absl::MutexLock lock(&listener_mu_);
        if (listener_) listener_(update);
      }
    }
    grpc::Status status = reader->Finish();
    if (status.error_code() == grpc::StatusCode::UNAVAILABLE) {
      // The coordinator is down or restarting (or never was there): say so,
      // and a fresh channel connects as soon as it is back instead of
      // waiting out the old one's backoff.
      NoteUnreachable(ConnectFailureReason(status.error_message()),
                      status.error_message());
      Reconnect();
    }
    absl::MutexLock lock(&mu_);
    stream_ctx_ = nullptr;
    if (stopping_) return;
    if (status.error_code() == grpc::StatusCode::FAILED_PRECONDITION ||
        status.error_code() == grpc::StatusCode::INVALID_ARGUMENT) {
      terminal_ = FromGrpc(status);
      return;
    }
    // Back off, but wake at once when stopping.
    mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                         options_.reconnect_backoff);
  }
}

void CoordinatorClient::HeartbeatLoop() {
  while (true) {
    api::HeartbeatRequest req;
    {
      absl::MutexLock lock(&mu_);
      if (mu_.AwaitWithTimeout(absl::Condition(&stopping_),
                               options_.heartbeat_interval)) {
        return;
      }
      req.set_generation(current_generation_);
    }
    req.set_job(options_.job);
    req.set_worker_id(options_.worker_id);
    api::HeartbeatReply reply;
    auto ctx = MakeContext(options_.rpc_timeout);
    (void)Stub()->Heartbeat(ctx.get(), req, &reply);  // Best effort.
  }
}

int64_t CoordinatorClient::LatestGeneration() const {
  absl::MutexLock lock(&mu_);
  return latest_.has_value() ? latest_->generation() : 0;
}

int64_t CoordinatorClient::LatestFailureGeneration() const {
  absl::MutexLock lock(&mu_);
  return latest_.has_value() ? latest_->last_failure_generation() : 0;
}

void CoordinatorClient::SetGenerationListener(GenerationListener listener) {
  absl::MutexLock lock(&listener_mu_);
  listener_ = std::move(listener);
}

int64_t CoordinatorClient::LatestReceivedUnixMicros() const {
  absl::MutexLock lock(&mu_);
  return latest_received_us_;
}

absl::StatusOr<api::MembershipUpdate> CoordinatorClient::WaitForGeneration(
    int64_t min_generation, absl::Duration timeout,
    absl::Duration waited_before) {
  absl::MutexLock lock(&mu_);
  auto ready = [&]() ABSL_SHARED_LOCKS_REQUIRED(mu_) {
    return (latest_.has_value() && latest_->generation() >= min_generation) ||
           !terminal_.ok() || stopping_;
  };
  mu_.AwaitWithTimeout(absl::Condition(&ready), timeout);
  if (latest_.has_value() && latest_->generation() >= min_generation) {
    return *latest_;
  }
  RM_RETURN_IF_ERROR(terminal_);
  if (stopping_) return absl::CancelledError("client stopping");
  const std::string waited = FormatSeconds(waited_before + timeout);
  if (!reach_.connected) {
    if (!reach_.ever_connected) {
      return absl::UnavailableError(absl::StrCat(
          "never reached the coordinator at ", options_.address, " within ",
          waited, ": ", reach_.reason.empty() ? "not connected" : reach_.reason,
          reach_.error.empty() ? "" : absl::StrCat(" (", reach_.error, ")")));
    }
    return absl::UnavailableError(absl::StrCat(
        "no generation >= ", min_generation, " within ", waited,
        ": the coordinator at ", options_.address, " was lost ",
        FormatSeconds(absl::Now() - reach_.since), " ago (", reach_.reason,
        reach_.error.empty() ? "" : absl::StrCat(": ", reach_.error),
        "), and a membership change cannot be agreed without it"));
  }
  return absl::DeadlineExceededError(absl::StrCat(
      "no generation >= ", min_generation, " within ", waited,
      " (the coordinator at ", options_.address, " is reachable)"));
}

void CoordinatorClient::SetCurrent(int64_t generation, int32_t rank,
                                   int32_t world_size) {
  absl::MutexLock lock(&mu_);
  current_generation_ = generation;
  current_rank_ = rank;
  current_world_ = world_size;
}

absl::Status CoordinatorClient::KvSet(int64_t generation,
                                      const std::string& key,
                                      const std::string& value) {
  api::KvSetRequest req;
  req.set_job(options_.job);
  req.set_generation(generation);
  req.set_key(key);
  req.set_value(value);
  api::KvSetReply reply;
  auto ctx = MakeContext(options_.rpc_timeout);
  return FromGrpc(Stub()->KvSet(ctx.get(), req, &reply));
}

absl::StatusOr<std::optional<std::string>> CoordinatorClient::KvGet(
    int64_t generation, const std::string& key) {
  api::KvGetRequest req;
  req.set_job(options_.job);
  req.set_generation(generation);
  req.set_key(key);
  api::KvGetReply reply;
  auto ctx = MakeContext(options_.rpc_timeout);
  RM_RETURN_IF_ERROR(FromGrpc(Stub()->KvGet(ctx.get(), req, &reply)));
  if (!reply.found()) return std::optional<std::string>();
  return std::optional<std::string>(reply.value());
}

absl::Status CoordinatorClient::KvWait(int64_t generation,
                                       const std::vector<std::string>& keys,
                                       absl::Duration timeout) {
  return KvWaitGet(generation, keys, timeout).status();
}

absl::StatusOr<std::string> CoordinatorClient::KvWaitGet(
    int64_t generation, const std::string& key, absl::Duration timeout) {
  RM_ASSIGN_OR_RETURN(auto values, KvWaitGet(generation, std::vector<std::string>{key}, timeout));
  return std::move(values.front());
}

absl::StatusOr<std::vector<std::string>> CoordinatorClient::KvWaitGet(
    int64_t generation, const std::vector<std::string>& keys,
    absl::Duration timeout) {
  api::KvWaitRequest req;
  req.set_job(options_.job);
  req.set_generation(generation);
  for (const auto& k : keys) req.add_keys(k);
  req.set_timeout_ms(absl::ToInt64Milliseconds(timeout));
  req.set_return_values(true);
  api::KvWaitReply reply;
  auto ctx = MakeContext(timeout + options_.rpc_timeout);
  RM_RETURN_IF_ERROR(FromGrpc(Stub()->KvWait(ctx.get(), req, &reply)));
  if (reply.values_size() != static_cast<int>(keys.size())) {
    return absl::InternalError(absl::StrCat("KvWait returned ",
                                            reply.values_size(), " values for ",
                                            keys.size(), " keys"));
  }
  return std::vector<std::string>(reply.values().begin(),
                                  reply.values().end());
}

absl::Status CoordinatorClient::CommitProgress(int64_t generation,
                                               int64_t step,
                                               int64_t position,
                                               double step_seconds,
                                               double step_samples) {
  api::CommitProgressRequest req;
  req.set_job(options_.job);
  req.set_worker_id(options_.worker_id);
  req.set_generation(generation);
  req.set_step(step);
  req.set_position(position);
  req.set_step_seconds(step_seconds);
  req.set_step_samples(step_samples);
  api::CommitProgressReply reply;
  auto ctx = MakeContext(options_.rpc_timeout);
  return FromGrpc(Stub()->CommitProgress(ctx.get(), req, &reply));
}

absl::StatusOr<int64_t> CoordinatorClient::ReportFailure(
    int64_t generation, const std::string& suspect,
    const std::string& detail) {
  api::ReportFailureRequest req;
  req.set_job(options_.job);
  req.set_reporter(options_.worker_id);
  req.set_generation(generation);
  req.set_suspect(suspect);
  req.set_detail(detail);
  api::ReportFailureReply reply;
  auto ctx = MakeContext(options_.rpc_timeout);
  RM_RETURN_IF_ERROR(FromGrpc(Stub()->ReportFailure(ctx.get(), req, &reply)));
  return reply.current_generation();
}

absl::Status CoordinatorClient::Leave(bool finished) {
  {
    absl::MutexLock lock(&mu_);
    stopping_ = true;
  }
  api::LeaveRequest req;
  req.set_job(options_.job);
  req.set_worker_id(options_.worker_id);
  req.set_finished(finished);
  api::LeaveReply reply;
  auto ctx = MakeContext(options_.rpc_timeout);
  absl::Status s = FromGrpc(Stub()->Leave(ctx.get(), req, &reply));
  absl::MutexLock lock(&mu_);
  if (stream_ctx_ != nullptr) stream_ctx_->TryCancel();
  return s;
}

}  // namespace ringmaster::shim
