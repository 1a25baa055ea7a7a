// Implementation of the in-process shim; see shim.h.
#include "worker_shim/shim.h"

#include <gloo/rendezvous/prefix_store.h>

#include <limits>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"
#include "worker_shim/kv_store.h"

namespace ringmaster::shim {
namespace {

int64_t NowMicros() { return absl::ToUnixMicros(absl::Now()); }

}  // namespace

absl::StatusOr<std::unique_ptr<Shim>> Shim::Create(
    ShimOptions options, std::unique_ptr<CollectiveBackend> backend) {
  if (backend == nullptr) return absl::InvalidArgumentError("no backend");
  RM_ASSIGN_OR_RETURN(auto client, CoordinatorClient::Connect(options.client));
  return std::unique_ptr<Shim>(
      new Shim(std::move(options), std::move(client), std::move(backend)));
}

Shim::Shim(ShimOptions options, std::unique_ptr<CoordinatorClient> client,
           std::unique_ptr<CollectiveBackend> backend)
    : options_(std::move(options)),
      client_(std::move(client)),
      backend_(std::move(backend)),
      state_(options_.commit_file) {
  // A rendezvous that a newer generation made pointless ends now rather than
  // at its timeout (a peer that moved on never connects).
  // A planned one is prepared right away (see shim.h).
  // A failure published since our communicator's generation revokes it: a
  // collective waiting on a dead (or on a live but stuck) peer fails now,
  // not at its timeout.
  client_->SetGenerationListener(
      [this](const api::MembershipUpdate& update) {
        backend_->Interrupt(update.generation());
        if (update.last_failure_generation() > 0) {
          backend_->Revoke(update.last_failure_generation());
        }
        MaybePrepare(update);
      });
  if (backend_->can_prepare()) {
    prep_thread_ = std::thread([this] { PrepareLoop(); });
  }
}

Shim::~Shim() {
  client_->SetGenerationListener(nullptr);
  StopPrepare();
  backend_->Abort();
  client_.reset();
}

void Shim::MaybePrepare(const api::MembershipUpdate& update) {
  absl::MutexLock lock(&prep_mu_);
  // Only while the last re-formation's communicator is held, into a
  // generation this worker is a member of, with no failure since that
  // communicator's (a planned change: no rollback), and each generation
  // once.
  if (!prep_enabled_ || prep_stop_ || update.rank() < 0 ||
      update.generation() <= prep_from_generation_ ||
      update.generation() <= prep_last_queued_ ||
      update.last_failure_generation() > prep_from_generation_) {
    return;
  }
  prep_last_queued_ = update.generation();
  prep_queued_ = update;
}

void Shim::PrepareLoop() {
  while (true) {
    api::MembershipUpdate update;
    std::vector<std::string> from;
    {
      absl::MutexLock lock(&prep_mu_);
      auto ready = [this]() ABSL_SHARED_LOCKS_REQUIRED(prep_mu_) {
        return prep_stop_ || prep_queued_.has_value();
      };
      prep_mu_.Await(absl::Condition(&ready));
      if (prep_stop_) return;
      update = *std::move(prep_queued_);
      prep_queued_.reset();
      from = prep_from_members_;
      prep_running_ = update.generation();
    }
    std::vector<std::string> new_members;
    for (const auto& m : update.members()) new_members.push_back(m.worker_id());
    const ReformPlan plan =
        PlanReform(from, new_members, options_.client.worker_id,
                   update.generation(), /*failure=*/false);
    if (options_.on_reform_start) options_.on_reform_start(update);
    KvStore store(*client_, update.generation(), options_.rendezvous_timeout);
    PrepareResult result;
    result.generation = update.generation();
    result.started_unix_us = NowMicros();
    result.status = backend_->Prepare(plan, store);
    result.done_unix_us = NowMicros();
    result.kv_rpcs = store.rpcs();
    result.kv_rpc_us = absl::ToInt64Microseconds(store.rpc_time());
    absl::MutexLock lock(&prep_mu_);
    prep_running_ = 0;
    prep_result_ = std::move(result);
  }
}

std::optional<Shim::PrepareResult> Shim::PausePrepare() {
  absl::MutexLock lock(&prep_mu_);
  prep_enabled_ = false;
  // One queued but not begun is left to the synchronous rendezvous, which
  // its peers' prepared one matches (same store keys).
  prep_queued_.reset();
  auto idle = [this]() ABSL_SHARED_LOCKS_REQUIRED(prep_mu_) {
    return prep_running_ == 0;
  };
  prep_mu_.Await(absl::Condition(&idle));
  std::optional<PrepareResult> result = std::move(prep_result_);
  prep_result_.reset();
  return result;
}

void Shim::ResumePrepare() {
  if (!backend_->can_prepare()) return;
  {
    absl::MutexLock lock(&prep_mu_);
    prep_from_generation_ = generation_;
    prep_from_members_ = members_;
    prep_result_.reset();
    prep_enabled_ = true;
  }
  // A generation that came during the re-formation was not queued.
  if (client_->LatestGeneration() > generation_) {
    auto update =
        client_->WaitForGeneration(generation_ + 1, absl::ZeroDuration());
    if (update.ok()) MaybePrepare(*update);
  }
}

void Shim::StopPrepare() {
  {
    absl::MutexLock lock(&prep_mu_);
    prep_stop_ = true;
    prep_enabled_ = false;
  }
  // Ends a rendezvous in flight (and any that would begin).
  backend_->Interrupt(std::numeric_limits<int64_t>::max());
  if (prep_thread_.joinable()) prep_thread_.join();
}

absl::Status Shim::Start() {
  RM_ASSIGN_OR_RETURN(auto b, ReformTo(1, /*local_failure=*/false));
  if (b == Boundary::kRemoved) {
    return absl::FailedPreconditionError("removed before starting");
  }
  return absl::OkStatus();
}

absl::StatusOr<Shim::Boundary> Shim::ReformTo(int64_t min_generation,
                                              bool local_failure) {
  const absl::Time began = absl::Now();
  const absl::Time deadline = began + options_.membership_timeout;
  const int64_t boundary = NowMicros();
  // The generation of the communicator this rank holds, or held until a
  // collective failed on it; 0 for a newcomer (Start, or a standby let in),
  // which has no state of its own to roll back: whatever it holds comes
  // from the next sync.
  const int64_t held = rank_ >= 0 ? generation_ : 0;
  // The rollback rule (shim.h): only a failure generation published since
  // `held` rolls back. A collective that failed here (local_failure) or a
  // re-formation that failed below is a failure only if such a generation
  // follows; if a planned one follows instead, a newer generation
  // superseded the one this rank was in or moving to, and nothing happened
  // to the state that the next sync does not put right.
  bool rollback_needed = false;
  while (true) {
    const absl::Time now = absl::Now();
    auto update =
        client_->WaitForGeneration(min_generation, deadline - now, now - began);
    if (!update.ok()) return ExplainWaitFailure(update.status());
    const int64_t received = client_->LatestGeneration() == update->generation()
                                 ? client_->LatestReceivedUnixMicros()
                                 : 0;
    if (held > 0 && update->last_failure_generation() > held) {
      rollback_needed = true;
    }
    // No preparation while re-forming; the one in flight ends first (a newer
    // generation interrupted it, or it is the one to adopt).
    const std::optional<PrepareResult> prepared = PausePrepare();
    if (update->rank() < 0) {
      if (rank_ >= 0) {
        // Shrunk away (or declared failed): this worker is done here.
        common::Log(common::LogLevel::info, "removed from the job",
                    {{"job", options_.client.job}, {"worker", options_.client.worker_id},
                     {"generation", update->generation()}});
        backend_->Abort();
        rank_ = -1;
        return Boundary::kRemoved;
      }
      min_generation = update->generation() + 1;  // standby: keep waiting
      continue;
    }
    std::vector<std::string> new_members;
    int root = -1;
    for (const auto& m : update->members()) {
      new_members.push_back(m.worker_id());
      if (root < 0 && m.has_state()) root = m.rank();
    }
    // The communicator this rank holds (if any) is the previous members';
    // the backend decides whether it can be reused (NCCL shrink) or not,
    // and must not reuse one a collective failed on.
    ReformPlan plan = PlanReform(
        rank_ >= 0 ? members_ : std::vector<std::string>(), new_members,
        options_.client.worker_id, update->generation(),
        rollback_needed || local_failure);
    KvStore store(*client_, update->generation(), options_.rendezvous_timeout);
    const bool tried =
        prepared.has_value() && prepared->generation == update->generation();
    // A prepared communicator serves a planned change, whatever broke the
    // old one: its peers, who prepared it too, adopt theirs.
    const bool adopted = tried && prepared->status.ok() && !rollback_needed &&
                         backend_->AdoptPrepared(update->generation());
    int64_t rendezvous = 0;
    absl::Status s;
    if (adopted) {
      rendezvous = prepared->started_unix_us;
    } else {
      backend_->DropPrepared();
      if (options_.on_reform_start) options_.on_reform_start(*update);
      // After a prepared attempt at this generation its store keys are
      // taken (and may be stale): the peers that also fell back meet under
      // a prefix of their own.
      gloo::rendezvous::PrefixStore retry("retry", store);
      rendezvous = NowMicros();
      gloo::rendezvous::Store& where =
          tried ? static_cast<gloo::rendezvous::Store&>(retry) : store;
      s = backend_->Reform(plan, where);
    }
    const int64_t formed = NowMicros();
    if (s.ok()) {
      if (rollback_needed && state_.has_commit()) {
        RM_RETURN_IF_ERROR(state_.Restore());
      }
      if (root >= 0) s = state_.Sync(*backend_, root);
    }
    if (!s.ok()) {
      // Superseded while re-forming (the rendezvous interrupted, the store
      // stale, or peers that formed it moved on in the middle of the sync),
      // or a peer died: move on to a newer generation, asking for one if
      // none is known. Which of the two it was, the next generation says
      // (checked at the top). This rank may not have heard yet of a newer
      // generation that its peers already moved to; the coordinator then
      // ignores the report (it names an older generation), and a report
      // that reaches it first is dropped when the newer one is published
      // (a failure generation follows only if none is within
      // failure_report_grace).
      common::Log(common::LogLevel::warn, "re-formation failed",
                  {{"job", options_.client.job}, {"worker", options_.client.worker_id},
                   {"generation", update->generation()}, {"error", s.message()}});
      backend_->Abort();
      if (client_->LatestGeneration() <= update->generation()) {
        (void)client_->ReportFailure(update->generation(), "",
                                     std::string(s.message()));
      }
      generation_ = update->generation();
      members_ = new_members;
      rank_ = update->rank();
      min_generation = update->generation() + 1;
      continue;
    }
    generation_ = update->generation();
    members_ = std::move(new_members);
    rank_ = update->rank();
    client_->SetCurrent(generation_, rank_, world_size());
    ReformRecord record;
    record.generation = generation_;
    record.reason = update->reason();
    record.rank = rank_;
    record.world_size = world_size();
    record.rolled_back = rollback_needed;
    record.sync_root = root;
    record.published_unix_us = update->published_unix_us();
    record.received_unix_us = received;
    record.boundary_unix_us = boundary;
    record.rendezvous_unix_us = rendezvous;
    record.formed_unix_us = formed;
    record.synced_unix_us = NowMicros();
    record.prepared = adopted;
    record.prepared_unix_us = adopted ? prepared->done_unix_us : 0;
    record.kv_rpcs = adopted ? prepared->kv_rpcs : store.rpcs();
    record.kv_rpc_us = adopted ? prepared->kv_rpc_us
                               : absl::ToInt64Microseconds(store.rpc_time());
    reforms_.push_back(record);
    common::Log(common::LogLevel::info, "communicator re-formed",
                {{"job", options_.client.job}, {"worker", options_.client.worker_id}, {"generation", generation_},
                 {"rank", rank_}, {"world_size", world_size()}, {"rolled_back", rollback_needed ? "true" : "false"},
                 {"prepared", adopted ? "true" : "false"}, {"took_us", record.synced_unix_us - boundary}});
    ResumePrepare();
    return Boundary::kReformed;
  }
}

absl::Status Shim::AllReduce(void* data, size_t count, DataType type,
                             ReduceOp op) {
  return backend_->AllReduce(data, count, type, op);
}

absl::Status Shim::Broadcast(void* data, size_t bytes, int root) {
  return backend_->Broadcast(data, bytes, root);
}

absl::Status Shim::Barrier() { return backend_->Barrier(); }

absl::Status Shim::Commit(int64_t step, int64_t position) {
  RM_RETURN_IF_ERROR(state_.Commit());
  const bool measured = step_generation_ == generation_;
  if (rank_ == 0) {
    // Progress reports are advisory; a restarting coordinator must not stop
    // training.
    (void)client_->CommitProgress(generation_, step, position, measured ? step_seconds_ : 0,
                                  measured ? step_samples_ : 0);
  }
  step_generation_ = -1;
  return absl::OkStatus();
}

absl::Status Shim::ReportStep(double seconds, double samples) {
  if (!(seconds >= 0) || !(samples >= 0) || seconds > 1e6 || samples > 1e12) {
    return absl::InvalidArgumentError(absl::StrCat("report_step: seconds (", seconds, ") must be in [0, 1e6] and samples (",
                                                   samples, ") in [0, 1e12]"));
  }
  step_seconds_ = seconds;
  step_samples_ = samples;
  step_generation_ = generation_;
  return absl::OkStatus();
}

absl::StatusOr<Shim::Boundary> Shim::StepBoundary() {
  int64_t newest = client_->LatestGeneration();
  if (auto s = backend_->AllReduce(&newest, 1, DataType::kInt64,
                                   ReduceOp::kMax);
      !s.ok()) {
    return Recover(std::string(s.message()));
  }
  if (newest <= generation_) return Boundary::kContinue;
  return ReformTo(newest, /*local_failure=*/false);
}

absl::StatusOr<Shim::Boundary> Shim::Recover(const std::string& detail) {
  // The backend keeps its broken communicator: NCCL revokes and shrinks it.
  auto reported = client_->ReportFailure(generation_, "", detail);
  if (!reported.ok() && !client_->reachability().connected) {
    // Nobody can publish the generation that goes on without the lost peer
    // until the coordinator is back: say so now, not at the timeout.
    common::Log(common::LogLevel::warn,
                "collective failed while the coordinator is unreachable",
                {{"address", options_.client.address},
                 {"job", options_.client.job},
                 {"worker", options_.client.worker_id},
                 {"generation", generation_},
                 {"error", detail},
                 {"waiting", FormatSeconds(options_.membership_timeout)}});
  }
  return ReformTo(generation_ + 1, /*local_failure=*/true);
}

absl::Status Shim::ExplainWaitFailure(const absl::Status& status) const {
  if (status.code() != absl::StatusCode::kDeadlineExceeded) return status;
  // The coordinator is there; what it has of the job says why this worker
  // is not in (a gang still forming, a standby, ...).
  const std::string job = client_->DescribeJob();
  return absl::DeadlineExceededError(absl::StrCat(
      "worker '", options_.client.worker_id, "': ", status.message(),
      job.empty() ? "" : absl::StrCat("; ", job)));
}

absl::Status Shim::Leave(bool finished) {
  StopPrepare();
  backend_->Abort();
  return client_->Leave(finished);
}

}  // namespace ringmaster::shim
