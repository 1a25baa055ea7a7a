#include "server/admin/admin_service.h"

#include <algorithm>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "scheduler/policy.h"
#include "server/admin/admin_convert.h"
#include "server/coordinator/coordinator_service.h"  // ToGrpc
#include "common/status_macros.h"

namespace ringmaster::server {

using scheduler::JobId;
using scheduler::JobPhase;
using scheduler::TaskState;

namespace {

bool Terminal(JobPhase p) { return p == JobPhase::kCompleted || p == JobPhase::kFailed || p == JobPhase::kAborted; }

// A write the journal refused (no space, read-only, I/O error): logged in
// serve's log, and answered INTERNAL (the daemon answered; nothing was
// promised) rather than UNAVAILABLE, which the CLI reads as "no daemon".
grpc::Status NotJournaled(std::string_view rpc, const std::string& name, const std::string& what,
                          const absl::Status& s) {
  common::Log(common::LogLevel::err, "refused: not journaled",
              {{"rpc", rpc}, {"name", name}, {"why", s.message()}});
  return grpc::Status(grpc::StatusCode::INTERNAL, absl::StrCat(what, ": ", s.message()));
}

std::vector<JournaledTask> HeldTasks(const scheduler::Engine& e, const scheduler::Job& job) {
  std::vector<JournaledTask> out;
  for (const scheduler::Task& t : job.tasks()) {
    // A Cancelling job's stopping tasks still hold their GPUs: a restart
    // re-adopts them and stops them again (AdminService::Recover).
    const bool stopping = t.state == TaskState::kReleasing && job.phase() == JobPhase::kCancelling;
    if (!scheduler::HoldsNode(t.state) || (t.state == TaskState::kReleasing && !stopping)) continue;
    out.push_back({t.index, t.role, e.state().cluster().node(t.node).name, t.gpus});
  }
  return out;
}

grpc::Status NoJob(const std::string& name) {
  if (name.empty()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "name: must not be empty");
  return grpc::Status(grpc::StatusCode::NOT_FOUND, absl::StrCat("job '", name, "': no such job"));
}

}  // namespace

AdminService::AdminService(scheduler::Engine& engine, absl::Mutex& engine_mu, const scheduler::Clock& clock,
                           const scheduler::PluginRegistry& registry, Journal* journal, EventLog& events,
                           AdminOptions options)
    : engine_(engine), engine_mu_(engine_mu), clock_(clock), registry_(registry), journal_(journal),
      events_(events), options_(std::move(options)) {}

grpc::Status AdminService::Authorize(const grpc::ServerContext& ctx, std::string_view what) const {
  if (options_.token.empty()) return grpc::Status::OK;
  const auto& md = ctx.client_metadata();
  auto it = md.find("authorization");
  const std::string want = "Bearer " + options_.token;
  auto refuse = [&](const char* why) {
    common::Log(common::LogLevel::warn, "refused", {{"who", ctx.peer()}, {"what", what}, {"why", why}});
    return grpc::Status(grpc::StatusCode::UNAUTHENTICATED, why);
  };
  if (it == md.end()) return refuse("this daemon needs a token: authorization: Bearer TOKEN");
  const std::string_view got(it->second.data(), it->second.size());
  // Compare without an early exit so timing does not reveal the prefix.
  unsigned diff = got.size() != want.size();
  for (size_t i = 0; i < want.size(); ++i) diff |= static_cast<unsigned>(want[i] ^ (i < got.size() ? got[i] : 0));
  if (diff != 0) return refuse("wrong token");
  return grpc::Status::OK;
}

absl::Status AdminService::Recover(const Recovered& r) {
  for (const JournaledJob& row : r.jobs) {
    next_seq_ = std::max(next_seq_, row.seq + 1);
    admin::JobSpec proto;
    if (!proto.ParseFromString(row.spec)) {
      return absl::DataLossError(absl::StrCat("journal: job '", row.name, "': its spec does not parse"));
    }
    auto spec = JobSpecFromProto(proto);
    if (!spec.ok()) return absl::DataLossError(absl::StrCat("journal: ", spec.status().message()));
    const bool is_phase = std::any_of(std::begin(scheduler::kAllPhases), std::end(scheduler::kAllPhases),
                                      [&](JobPhase k) { return static_cast<int>(k) == row.phase; });
    if (!is_phase) {
      return absl::DataLossError(absl::StrCat("journal: job '", row.name, "': phase ", row.phase, " is no phase"));
    }
    const JobPhase phase = static_cast<JobPhase>(row.phase);
    std::vector<scheduler::Engine::RestoredTask> placed;
    if (!Terminal(phase)) {
      for (const JournaledTask& t : row.tasks) placed.push_back({t.index, t.role, t.node, t.gpus});
    }
    auto id = engine_.RestoreJob(*std::move(spec), row.created_ms, placed, row.generation);
    if (!id.ok()) {
      if (Terminal(phase)) continue;  // an ended job of a queue the policy no longer has
      return absl::FailedPreconditionError(absl::StrCat("journal: job '", row.name, "' cannot be restored: ",
                                                        id.status().message()));
    }
    accepted_[*id] = row.seq;
    if (phase == JobPhase::kAborted || phase == JobPhase::kCancelling) {
      common::LogIfError(CancelInEngine(*id), "journal: cancelled job not cancelled again", {{"job", row.name}});
    }
    if (phase == JobPhase::kCompleted || phase == JobPhase::kFailed) {
      common::LogIfError(engine_.FinishJob(*id, phase == JobPhase::kCompleted), "journal: ended job not ended again", {{"job", row.name}});
    }
    const scheduler::Job& job = engine_.state().job(*id);
    if (!Terminal(phase) && static_cast<int>(row.tasks.size()) != job.ReadyCount()) {
      JournalPlacement(*id);  // its old placement no longer fits: it waits again
    }
  }
  return absl::OkStatus();
}

void AdminService::JournalPlacement(JobId id) {
  if (!journal_) return;
  const scheduler::Job& job = engine_.state().job(id);
  journal_->SetPlacement(job.name(), static_cast<int>(job.phase()), job.generation(), HeldTasks(engine_, job));
}

absl::Status AdminService::CancelInEngine(JobId id) {
  RM_RETURN_IF_ERROR(engine_.CancelJob(id));
  const scheduler::Job& job = engine_.state().job(id);
  if (job.phase() != JobPhase::kCancelling) return absl::OkStatus();
  if (!Executed(id)) {
    // No process to wait for: its tasks are gone at once.
    for (uint32_t i = 0; i < job.tasks().size(); ++i) {
      if (job.task(i).state == TaskState::kReleasing) common::LogIfError(engine_.TaskReleased(id, i), "task release", {{"job", job.name()}});
    }
  }
  if (engine_.state().job(id).phase() == JobPhase::kCancelling) cancelling_.insert(id);
  return absl::OkStatus();
}

void AdminService::SettleCancels() {
  for (auto it = cancelling_.begin(); it != cancelling_.end();) {
    const scheduler::Job& job = engine_.state().job(*it);
    if (job.phase() == JobPhase::kCancelling) {
      ++it;
      continue;
    }
    // Its last task is gone (or the deadline passed): it ended.
    // Not waited for (the cycle does not wait for fsyncs): a failed write is
    // logged by the journal's error observer, and the next restart finds the
    // job Cancelling and settles it again.
    if (journal_) (void)journal_->SetPhase(job.name(), static_cast<int>(job.phase()), /*terminal=*/true);
    events_.Publish(clock_.Now(), "cancelled", job.name(), std::string(scheduler::PhaseName(job.phase())));
    it = cancelling_.erase(it);
  }
}

bool AdminService::Executed(JobId id) const {
  return options_.executed && options_.executed(engine_.state().job(id));
}

void AdminService::JobChanged(JobId id, const std::string& event, const std::string& detail) {
  if (!accepted_.count(id)) return;
  const scheduler::Job& job = engine_.state().job(id);
  events_.Publish(clock_.Now(), event, job.name(), detail);
  JournalPlacement(id);
  SettleCancels();
}

void AdminService::OnCycle(const scheduler::Decisions& d) {
  const scheduler::Timestamp now = clock_.Now();
  std::set<JobId> touched;
  auto ours = [&](JobId id) { return accepted_.count(id) > 0; };
  for (const scheduler::Bind& b : d.binds) {
    if (!ours(b.job)) continue;
    touched.insert(b.job);
    if (Executed(b.job)) continue;  // its executor binds and starts it
    // No executor: the bind is done and the task started at once.
    if (engine_.ConfirmBind(b.job, b.task, true).ok()) common::LogIfError(engine_.TaskStarted(b.job, b.task), "task start", {{"task", b.task_name}});
  }
  for (const scheduler::Eviction& e : d.evictions) {
    if (!ours(e.job)) continue;
    const scheduler::Job& job = engine_.state().job(e.job);
    if (!Executed(e.job) && e.task < job.tasks().size() && job.task(e.task).state == TaskState::kReleasing) {
      common::LogIfError(engine_.TaskReleased(e.job, e.task), "task release", {{"task", e.task_name}});
    }
    touched.insert(e.job);
  }
  std::map<std::string, std::vector<const scheduler::Eviction*>> stops;
  for (const scheduler::Eviction& e : d.evictions) {
    stops[absl::StrCat(e.job.value(), "/", std::string(scheduler::EvictionKindName(e.kind)))].push_back(&e);
  }
  for (const auto& [key, list] : stops) {
    const scheduler::Eviction& e = *list.front();
    if (e.kind == scheduler::Eviction::Kind::kCancel) continue;  // published by CancelJob
    events_.Publish(now, std::string(scheduler::EvictionKindName(e.kind)), engine_.state().job(e.job).name(),
                    absl::StrCat(list.size(), " task(s): ", e.reason));
  }
  for (const scheduler::MembershipChange& m : d.membership) {
    touched.insert(m.job);
    std::vector<std::string> where;
    for (const scheduler::Member& mem : m.members) where.push_back(mem.node_name);
    events_.Publish(now, std::string(scheduler::MembershipKindName(m.kind)), m.job_name,
                    absl::StrCat("generation ", m.generation, ", ", m.members.size(), " member(s) on ",
                                 absl::StrJoin(where, ","), m.reason.empty() ? "" : ": ", m.reason));
  }
  for (JobId id : touched) {
    if (ours(id)) JournalPlacement(id);
  }
  SettleCancels();  // a deadline this cycle passed ends a Cancelling job
}

absl::Status AdminService::ApplyPolicy(const std::string& yaml, const std::string& file,
                                       std::vector<std::string>* errors) {
  std::vector<queue::ConfigError> found;
  auto policy = scheduler::ParsePolicy(yaml, file, registry_, &found);
  if (!policy.ok()) {
    for (const auto& e : found) errors->push_back(e.ToString());
    if (errors->empty()) errors->push_back(std::string(policy.status().message()));
    return absl::InvalidArgumentError(absl::StrJoin(*errors, "\n"));
  }
  std::future<absl::Status> durable;
  {
    absl::MutexLock lock(&engine_mu_);
    auto composed = ComposeQueues(*policy, external_);
    if (!composed.ok()) {
      errors->push_back(std::string(composed.status().message()));
      return absl::InvalidArgumentError(errors->back());
    }
    if (absl::Status s = engine_.SetPolicy(*composed, registry_); !s.ok()) {
      errors->push_back(absl::StrCat(file, ": ", s.message()));
      return absl::InvalidArgumentError(errors->back());
    }
    base_policy_ = *std::move(policy);
    if (journal_) durable = journal_->SetPolicy(yaml);
  }
  events_.Publish(clock_.Now(), "policy", "", absl::StrCat("policy from ", file, " in force"));
  if (!durable.valid()) return absl::OkStatus();
  if (absl::Status s = durable.get(); !s.ok()) {
    common::Log(common::LogLevel::err, "policy not journaled", {{"from", file}, {"why", s.message()}});
    return absl::InternalError(
        absl::StrCat("policy from ", file, " in force but not journaled (a restart brings back the previous one): ",
                     s.message()));
  }
  return absl::OkStatus();
}

void AdminService::SetPolicySourcesLocked(scheduler::Policy base, ExternalQueues external) {
  base_policy_ = std::move(base);
  external_ = std::move(external);
}

absl::Status AdminService::SetExternalQueues(ExternalQueues external) {
  std::string detail;
  {
    absl::MutexLock lock(&engine_mu_);
    if (external == external_) return absl::OkStatus();
    if (!base_policy_) return absl::FailedPreconditionError("external queues before the policy (SetPolicySourcesLocked)");
    RM_ASSIGN_OR_RETURN(scheduler::Policy composed, ComposeQueues(*base_policy_, external));
    if (absl::Status s = engine_.SetPolicy(composed, registry_); !s.ok()) {
      return absl::FailedPreconditionError(
          absl::StrCat(external.kind, " objects not applied, the queues in force stay: ", s.message()));
    }
    detail = absl::StrCat(external.specs.size(), " queues from ", external.kind, " objects in force");
    external_ = std::move(external);
  }
  events_.Publish(clock_.Now(), "queues", "", detail);
  return absl::OkStatus();
}

size_t AdminService::jobs_accepted() const {
  absl::MutexLock lock(&engine_mu_);
  return accepted_.size();
}

grpc::Status AdminService::SubmitJob(grpc::ServerContext* ctx, const admin::SubmitJobRequest* req,
                                     admin::SubmitJobResponse* resp) {
  if (grpc::Status a = Authorize(*ctx, absl::StrCat("submit job '", req->job().name(), "'")); !a.ok()) return a;
  if (!req->has_job()) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, "job: missing");
  auto spec = JobSpecFromProto(req->job());
  if (!spec.ok()) return ToGrpc(spec.status());
  const std::string name = spec->name;
  std::future<absl::Status> durable;
  JobId id;
  {
    absl::MutexLock lock(&engine_mu_);
    auto submitted = engine_.SubmitJob(*std::move(spec));
    if (!submitted.ok()) return ToGrpc(submitted.status());
    id = *submitted;
    const int64_t seq = next_seq_++;
    accepted_[id] = seq;
    if (journal_) {
      const scheduler::Job& job = engine_.state().job(id);
      JournaledJob row;
      row.name = name;
      row.seq = seq;
      row.spec = JobSpecToProto(job.spec()).SerializeAsString();
      row.created_ms = job.created();
      row.phase = static_cast<int>(job.phase());
      durable = journal_->AddJob(std::move(row));
    }
  }
  if (durable.valid()) {
    if (absl::Status s = durable.get(); !s.ok()) {
      // Not durable: take it back so what runs matches what was promised.
      absl::MutexLock lock(&engine_mu_);
      common::LogIfError(engine_.CancelJob(id), "unjournaled job not taken back", {{"job", name}});
      return NotJournaled("SubmitJob", name, absl::StrCat("job '", name, "' not accepted (not journaled; it shows as Aborted)"), s);
    }
  }
  events_.Publish(clock_.Now(), "submit", name, "");
  absl::MutexLock lock(&engine_mu_);
  *resp->mutable_job() = JobToProto(engine_, id, JobView::kBrief);
  return grpc::Status::OK;
}

grpc::Status AdminService::CancelJob(grpc::ServerContext* ctx, const admin::CancelJobRequest* req,
                                     admin::CancelJobResponse* resp) {
  if (grpc::Status a = Authorize(*ctx, absl::StrCat("cancel job '", req->name(), "'")); !a.ok()) return a;
  std::future<absl::Status> durable;
  bool sync = false;  // a job not of the admin API (a pod gang): its record is the extender's
  {
    absl::MutexLock lock(&engine_mu_);
    const JobId id = engine_.FindJob(req->name());
    if (!id.valid()) return NoJob(req->name());
    const bool was_cancelling = engine_.state().job(id).phase() == JobPhase::kCancelling;
    if (absl::Status s = CancelInEngine(id); !s.ok()) return ToGrpc(s);
    const JobPhase now_phase = engine_.state().job(id).phase();
    if (options_.on_cancel) options_.on_cancel(id);
    sync = !accepted_.count(id) && !was_cancelling;
    if (journal_ && accepted_.count(id) && !was_cancelling) {
      // Durable before the answer: Cancelling keeps the tasks' rows (a
      // restart stops them again), Aborted drops them.
      durable = journal_->SetPhase(req->name(), static_cast<int>(now_phase), /*terminal=*/Terminal(now_phase));
    }
    *resp->mutable_job() = JobToProto(engine_, id, JobView::kBrief);
  }
  if (durable.valid()) {
    if (absl::Status s = durable.get(); !s.ok()) {
      return NotJournaled("CancelJob", req->name(),
                          absl::StrCat("job '", req->name(), "' cancelled but not journaled (a restart brings it back)"), s);
    }
  }
  if (sync && journal_) {
    if (absl::Status s = journal_->Flush(); !s.ok()) return ToGrpc(s);
  }
  events_.Publish(clock_.Now(), "cancel", req->name(), "");
  return grpc::Status::OK;
}

grpc::Status AdminService::GetJob(grpc::ServerContext*, const admin::GetJobRequest* req, admin::Job* resp) {
  absl::MutexLock lock(&engine_mu_);
  const JobId id = engine_.FindJob(req->name());
  if (!id.valid()) return NoJob(req->name());
  *resp = JobToProto(engine_, id, JobView::kFull);
  return grpc::Status::OK;
}

grpc::Status AdminService::ListJobs(grpc::ServerContext*, const admin::ListJobsRequest* req,
                                    admin::ListJobsResponse* resp) {
  std::set<std::string> phases(req->phases().begin(), req->phases().end());
  for (const std::string& p : phases) {
    bool known = false;
    for (JobPhase k : scheduler::kAllPhases) {
      known |= scheduler::PhaseName(k) == p;
    }
    if (!known) return grpc::Status(grpc::StatusCode::INVALID_ARGUMENT, absl::StrCat("phases: unknown phase '", p, "'"));
  }
  absl::MutexLock lock(&engine_mu_);
  const scheduler::State& st = engine_.state();
  for (uint32_t i = 0; i < st.num_jobs(); ++i) {
    const scheduler::Job& job = st.job(JobId(i));
    if (!req->queue().empty() && job.spec().queue != req->queue()) continue;
    if (!phases.empty() && !phases.count(std::string(scheduler::PhaseName(job.phase())))) continue;
    *resp->add_jobs() = JobToProto(engine_, job.id(), JobView::kList);
  }
  return grpc::Status::OK;
}

grpc::Status AdminService::ListQueues(grpc::ServerContext*, const admin::ListQueuesRequest*,
                                      admin::ListQueuesResponse* resp) {
  absl::MutexLock lock(&engine_mu_);
  *resp = QueuesToProto(engine_);
  return grpc::Status::OK;
}

grpc::Status AdminService::ListNodes(grpc::ServerContext*, const admin::ListNodesRequest*,
                                     admin::ListNodesResponse* resp) {
  absl::MutexLock lock(&engine_mu_);
  *resp = NodesToProto(engine_);
  return grpc::Status::OK;
}

grpc::Status AdminService::UpdatePolicy(grpc::ServerContext* ctx, const admin::UpdatePolicyRequest* req,
                                        admin::UpdatePolicyResponse*) {
  if (grpc::Status a = Authorize(*ctx, "update the policy"); !a.ok()) return a;
  std::vector<std::string> errors;
  return ToGrpc(ApplyPolicy(req->yaml(), "UpdatePolicy", &errors));
}

grpc::Status AdminService::WatchEvents(grpc::ServerContext* ctx, const admin::WatchEventsRequest* req,
                                       grpc::ServerWriter<admin::Event>* writer) {
  int64_t seen = events_.last();
  while (!ctx->IsCancelled() && !events_.closed()) {
    const std::vector<LoggedEvent> batch = events_.After(seen, absl::Milliseconds(200));
    for (const LoggedEvent& e : batch) {
      seen = e.sequence;
      if (!req->job().empty() && e.job != req->job()) continue;
      admin::Event out;
      out.set_sequence(e.sequence);
      out.set_time_ms(e.time_ms);
      out.set_kind(e.kind);
      out.set_job(e.job);
      out.set_detail(e.detail);
      if (!writer->Write(out)) return grpc::Status::OK;  // the client went away
    }
  }
  return grpc::Status::OK;
}

}  // namespace ringmaster::server
