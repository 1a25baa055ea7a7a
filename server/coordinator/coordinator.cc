// Implementation of the coordinator core; see coordinator.h.
#include "server/coordinator/coordinator.h"

#include <algorithm>
#include <set>
#include <utility>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace ringmaster::server {
namespace {

constexpr size_t kMaxKeyBytes = 512;
constexpr size_t kMaxIdBytes = 256;

bool Contains(const std::vector<std::string>& v, const std::string& s) {
  return std::find(v.begin(), v.end(), s) != v.end();
}

absl::Status UnknownJob(const std::string& job) {
  return absl::NotFoundError(absl::StrCat("unknown job '", job, "'"));
}

}  // namespace

Coordinator::Coordinator(CoordinatorOptions options)
    : options_(std::move(options)) {}

void Coordinator::WakeAll() {
  members_changed_.SignalAll();
  kv_changed_.SignalAll();
}

absl::Time Coordinator::Now() const {
  return options_.now ? options_.now() : absl::Now();
}

absl::StatusOr<Coordinator::Job*> Coordinator::FindJob(
    const std::string& name) {
  auto it = jobs_.find(name);
  if (it == jobs_.end()) return UnknownJob(name);
  return &it->second;
}

absl::Status Coordinator::CheckGeneration(const Job& job,
                                          int64_t generation) const {
  if (generation <= 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("generation must be positive, got ", generation));
  }
  if (generation < job.generation) {
    return absl::FailedPreconditionError(
        absl::StrCat("stale generation ", generation, " for job '", job.name,
                     "' (current ", job.generation, ")"));
  }
  if (generation > job.generation) {
    return absl::InvalidArgumentError(
        absl::StrCat("generation ", generation, " of job '", job.name,
                     "' does not exist yet (current ", job.generation, ")"));
  }
  return absl::OkStatus();
}

bool Coordinator::IsMember(const Job& job, const std::string& worker) const {
  return Contains(job.members, worker);
}

absl::StatusOr<Subscription> Coordinator::Join(
    const api::JoinRequest& request) {
  if (request.job().empty() || request.worker_id().empty()) {
    return absl::InvalidArgumentError("Join needs a job and a worker_id");
  }
  if (request.job().size() > kMaxIdBytes ||
      request.worker_id().size() > kMaxIdBytes) {
    return absl::InvalidArgumentError("job or worker_id longer than 256 bytes");
  }
  if (request.desired_workers() < 0 || request.last_generation() < 0) {
    return absl::InvalidArgumentError(
        "desired_workers and last_generation must not be negative");
  }
  absl::MutexLock lock(&mu_);
  if (shutdown_) return absl::UnavailableError("coordinator shutting down");
  auto [it, created] = jobs_.try_emplace(request.job());
  Job& job = it->second;
  if (created) {
    job.name = request.job();
    job.target = std::max(1, request.desired_workers());
    if (request.last_generation() > 0) {
      // The coordinator restarted under a running job: re-adopt it with the
      // generation numbers continuing where the workers left off.
      job.generation = request.last_generation();
      job.target = std::max(1, request.last_world_size());
      job.adopting = true;
      job.adopt_since = Now();
    }
  }
  if (job.finished) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", job.name, "' has finished"));
  }
  if (request.last_generation() > job.generation) {
    job.generation = request.last_generation();
  }
  Worker& w = job.workers[request.worker_id()];
  w.id = request.worker_id();
  w.host = request.host();
  w.gpus.assign(request.gpus().begin(), request.gpus().end());
  w.last_seen = Now();
  w.subscription = next_subscription_++;
  w.delivered_generation = 0;
  if (w.join_order == 0) w.join_order = next_join_order_++;
  w.last_generation = request.last_generation();
  w.last_rank = request.last_generation() > 0 ? request.last_rank() : -1;
  Subscription sub{job.name, w.id, w.subscription};
  common::Log(common::LogLevel::info, "worker joined",
              {{"job", job.name}, {"worker", w.id}, {"host", w.host}, {"last_generation", w.last_generation}});
  if (!DeferGrow(job, w.id)) {
    Reconcile(job,
              job.generation == 0 ? api::REASON_INITIAL : api::REASON_GROW,
              {}, /*force=*/false);
  }
  WakeAll();
  return sub;
}

bool Coordinator::DeferGrow(Job& job, const std::string& worker) {
  if (options_.grow_settle <= absl::ZeroDuration() || job.generation == 0 ||
      job.adopting || job.finished || IsMember(job, worker)) {
    return false;
  }
  int connected_members = 0;
  for (const auto& m : job.members) {
    if (job.workers.contains(m)) ++connected_members;
  }
  const int free_slots = job.target - connected_members;
  const int standby =
      static_cast<int>(job.workers.size()) - connected_members;
  if (free_slots <= 0 || standby >= free_slots) {
    return false;  // no slot for it, or every slot filled now
  }
  if (!job.grow_pending) {
    job.grow_pending = true;
    job.grow_pending_since = Now();
  }
  return true;
}

absl::StatusOr<std::optional<api::MembershipUpdate>> Coordinator::NextUpdate(
    const Subscription& sub, absl::Duration wait) {
  absl::MutexLock lock(&mu_);
  const absl::Time deadline = absl::Now() + wait;
  while (true) {
    if (shutdown_) return absl::CancelledError("coordinator shutting down");
    auto job_it = jobs_.find(sub.job);
    if (job_it == jobs_.end()) return UnknownJob(sub.job);
    Job& job = job_it->second;
    auto w_it = job.workers.find(sub.worker_id);
    if (w_it == job.workers.end() || w_it->second.subscription != sub.id) {
      return absl::CancelledError("subscription replaced or worker gone");
    }
    if (!job.adopting && job.generation > 0 &&
        job.generation > w_it->second.delivered_generation) {
      w_it->second.delivered_generation = job.generation;
      return std::optional<api::MembershipUpdate>(UpdateFor(job, sub.worker_id));
    }
    if (members_changed_.WaitWithDeadline(&mu_, deadline)) {
      return std::optional<api::MembershipUpdate>();
    }
  }
}

void Coordinator::Disconnect(const Subscription& sub) {
  absl::MutexLock lock(&mu_);
  auto job_it = jobs_.find(sub.job);
  if (job_it == jobs_.end()) return;
  Job& job = job_it->second;
  auto w_it = job.workers.find(sub.worker_id);
  if (w_it == job.workers.end() || w_it->second.subscription != sub.id) return;
  job.workers.erase(w_it);
  if (IsMember(job, sub.worker_id)) {
    Reconcile(job, api::REASON_FAILURE, {sub.worker_id}, /*force=*/false);
  }
  WakeAll();
}

absl::StatusOr<int64_t> Coordinator::Heartbeat(
    const api::HeartbeatRequest& request) {
  absl::MutexLock lock(&mu_);
  RM_ASSIGN_OR_RETURN(auto job, FindJob(request.job()));
  auto it = job->workers.find(request.worker_id());
  if (it == job->workers.end()) {
    return absl::NotFoundError(absl::StrCat("unknown worker '",
                                            request.worker_id(), "' in job '",
                                            request.job(), "'"));
  }
  it->second.last_seen = Now();
  return job->generation;
}

absl::Status Coordinator::KvSet(const api::KvSetRequest& request) {
  if (request.key().empty() || request.key().size() > kMaxKeyBytes) {
    return absl::InvalidArgumentError("key must be 1..512 bytes");
  }
  if (request.value().size() > options_.max_value_bytes) {
    return absl::InvalidArgumentError(
        absl::StrCat("value of ", request.value().size(),
                     " bytes exceeds the limit of ", options_.max_value_bytes));
  }
  absl::MutexLock lock(&mu_);
  RM_ASSIGN_OR_RETURN(auto job, FindJob(request.job()));
  RM_RETURN_IF_ERROR(CheckGeneration(*job, request.generation()));
  auto& kv = job->kv;
  if (!kv.contains(request.key()) &&
      kv.size() >= options_.max_keys_per_generation) {
    return absl::ResourceExhaustedError(
        absl::StrCat("more than ", options_.max_keys_per_generation,
                     " keys in one generation"));
  }
  kv[request.key()] = request.value();
  kv_changed_.SignalAll();  // membership waiters need not wake
  return absl::OkStatus();
}

absl::StatusOr<std::optional<std::string>> Coordinator::KvGet(
    const api::KvGetRequest& request) {
  absl::MutexLock lock(&mu_);
  RM_ASSIGN_OR_RETURN(auto job, FindJob(request.job()));
  RM_RETURN_IF_ERROR(CheckGeneration(*job, request.generation()));
  auto it = job->kv.find(request.key());
  if (it == job->kv.end()) return std::optional<std::string>();
  return std::optional<std::string>(it->second);
}

absl::StatusOr<std::vector<std::string>> Coordinator::KvWait(
    const api::KvWaitRequest& request) {
  if (request.timeout_ms() < 0) {
    return absl::InvalidArgumentError("timeout_ms must not be negative");
  }
  const absl::Duration wait =
      std::min(absl::Milliseconds(request.timeout_ms()), options_.max_wait);
  const absl::Time deadline = absl::Now() + wait;
  absl::MutexLock lock(&mu_);
  {
    RM_ASSIGN_OR_RETURN(auto job, FindJob(request.job()));
    RM_RETURN_IF_ERROR(CheckGeneration(*job, request.generation()));
  }
  while (true) {
    if (shutdown_) return absl::CancelledError("coordinator shutting down");
    RM_ASSIGN_OR_RETURN(auto job, FindJob(request.job()));
    if (job->generation != request.generation()) {
      return absl::AbortedError(
          absl::StrCat("generation ", request.generation(),
                       " superseded by ", job->generation));
    }
    std::vector<std::string> missing;
    for (const auto& key : request.keys()) {
      if (!job->kv.contains(key)) missing.push_back(key);
    }
    if (missing.empty()) {
      std::vector<std::string> values;
      if (request.return_values()) {
        for (const auto& key : request.keys()) values.push_back(job->kv[key]);
      }
      return values;
    }
    if (kv_changed_.WaitWithDeadline(&mu_, deadline)) {
      return absl::DeadlineExceededError(absl::StrCat(
          "timed out waiting for keys: ", absl::StrJoin(missing, ", ")));
    }
  }
}

absl::Status Coordinator::CommitProgress(
    const api::CommitProgressRequest& request) {
  if (request.step() < 0 || request.position() < 0) {
    return absl::InvalidArgumentError("step and position must not be negative");
  }
  if (!(request.step_seconds() >= 0) || request.step_seconds() > 1e6) {
    return absl::InvalidArgumentError(
        absl::StrCat("step_seconds must be a number of seconds in [0, 1e6], not ", request.step_seconds()));
  }
  if (!(request.step_samples() >= 0) || request.step_samples() > 1e12) {
    return absl::InvalidArgumentError(
        absl::StrCat("step_samples must be a number in [0, 1e12], not ", request.step_samples()));
  }
  absl::MutexLock lock(&mu_);
  RM_ASSIGN_OR_RETURN(auto job, FindJob(request.job()));
  if (request.generation() > job->generation) {
    return absl::InvalidArgumentError(
        absl::StrCat("generation ", request.generation(), " does not exist"));
  }
  if (request.position() >= job->committed_position) {
    job->committed_step = request.step();
    job->committed_position = request.position();
  }
  // A speed measured in the current generation by its rank 0 (the shim
  // reports there) counts for its size; one of an older generation (its
  // members are gone) or from another worker is dropped.
  if (request.step_seconds() > 0 && request.generation() == job->generation && !job->members.empty() &&
      job->members.front() == request.worker_id()) {
    int32_t gpus = 0;
    std::set<std::string> hosts;
    for (const std::string& id : job->members) {
      auto w = job->workers.find(id);
      if (w == job->workers.end()) continue;
      gpus += w->second.gpus.empty() ? 1 : static_cast<int32_t>(w->second.gpus.size());
      hosts.insert(w->second.host);
    }
    if (gpus > 0) {
      Job::Speed& sp = job->speed[{gpus, static_cast<int32_t>(hosts.size())}];
      sp.seconds += request.step_seconds();
      ++sp.reports;
      if (request.step_samples() > 0) {
        sp.samples += request.step_samples();
        ++sp.samples_reports;
      }
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Coordinator::ReportFailure(
    const api::ReportFailureRequest& request) {
  absl::MutexLock lock(&mu_);
  RM_ASSIGN_OR_RETURN(auto job_or, FindJob(request.job()));
  Job& job = *job_or;
  if (request.generation() < job.generation || job.finished) {
    return job.generation;  // Already handled by a newer generation.
  }
  if (request.generation() > job.generation) {
    return absl::InvalidArgumentError(
        absl::StrCat("generation ", request.generation(), " does not exist"));
  }
  std::vector<std::string> dropped;
  if (!request.suspect().empty() && IsMember(job, request.suspect())) {
    dropped.push_back(request.suspect());
  }
  const absl::Time now = Now();
  for (const auto& m : job.members) {
    auto it = job.workers.find(m);
    if (it == job.workers.end() ||
        now - it->second.last_seen > options_.heartbeat_timeout / 2) {
      if (!Contains(dropped, m)) dropped.push_back(m);
    }
  }
  for (const auto& d : dropped) job.workers.erase(d);
  common::Log(common::LogLevel::warn, "failure reported",
              {{"job", job.name}, {"generation", job.generation}, {"suspect", request.suspect()},
               {"detail", request.detail()}, {"dropped", absl::StrJoin(dropped, ",")}});
  if (dropped.empty() && options_.failure_report_grace > absl::ZeroDuration()) {
    if (job.pending_failure_generation != job.generation) {
      job.pending_failure_generation = job.generation;
      job.pending_failure_since = now;
    }
    return job.generation;  // Tick() forces the re-formation if need be.
  }
  Reconcile(job, api::REASON_FAILURE, dropped, /*force=*/true);
  WakeAll();
  return job.generation;
}

absl::Status Coordinator::Leave(const api::LeaveRequest& request) {
  absl::MutexLock lock(&mu_);
  RM_ASSIGN_OR_RETURN(auto job_or, FindJob(request.job()));
  Job& job = *job_or;
  if (!job.workers.contains(request.worker_id())) {
    return absl::NotFoundError(absl::StrCat("unknown worker '",
                                            request.worker_id(), "'"));
  }
  job.workers.erase(request.worker_id());
  if (request.finished()) job.finished = true;
  common::Log(common::LogLevel::info, "worker left",
              {{"job", job.name}, {"worker", request.worker_id()}, {"finished", request.finished() ? "true" : "false"}});
  if (IsMember(job, request.worker_id()) && !job.finished) {
    Reconcile(job, api::REASON_PLANNED_SHRINK, {request.worker_id()},
              /*force=*/false);
  }
  WakeAll();
  return absl::OkStatus();
}

absl::StatusOr<int64_t> Coordinator::Resize(const api::ResizeRequest& request) {
  if (request.workers() < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("workers must be at least 1, got ", request.workers()));
  }
  std::vector<std::string> order(request.ring_order().begin(),
                                 request.ring_order().end());
  {
    std::vector<std::string> sorted = order;
    std::sort(sorted.begin(), sorted.end());
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      return absl::InvalidArgumentError("ring_order names a worker twice");
    }
  }
  absl::MutexLock lock(&mu_);
  RM_ASSIGN_OR_RETURN(auto job_or, FindJob(request.job()));
  Job& job = *job_or;
  if (job.finished) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", job.name, "' has finished"));
  }
  if (job.managed) {
    return absl::FailedPreconditionError(absl::StrCat(
        "job '", job.name, "' is managed by the scheduler: resize it there"));
  }
  const bool shrink = request.workers() < static_cast<int>(job.members.size());
  job.target = request.workers();
  job.ring_order = std::move(order);
  Reconcile(job, shrink ? api::REASON_PLANNED_SHRINK : api::REASON_GROW, {},
            /*force=*/false);
  WakeAll();
  return job.generation;
}

absl::StatusOr<api::JobStatus> Coordinator::GetJob(
    const std::string& name) const {
  absl::MutexLock lock(&mu_);
  auto it = jobs_.find(name);
  if (it == jobs_.end()) return UnknownJob(name);
  const Job& job = it->second;
  api::JobStatus out;
  out.set_job(job.name);
  out.set_generation(job.generation);
  out.set_target_workers(job.target);
  for (size_t i = 0; i < job.members.size(); ++i) {
    auto* m = out.add_members();
    m->set_worker_id(job.members[i]);
    m->set_rank(static_cast<int32_t>(i));
    m->set_has_state(job.members_have_state[i]);
  }
  for (const auto& [id, w] : job.workers) {
    if (!IsMember(job, id)) out.add_standby(id);
  }
  out.set_committed_step(job.committed_step);
  out.set_committed_position(job.committed_position);
  out.set_finished(job.finished);
  for (const auto& [size, sp] : job.speed) {
    auto* m = out.add_speed();
    m->set_gpus(size.first);
    m->set_nodes(size.second);
    m->set_step_seconds(sp.seconds / static_cast<double>(sp.reports));
    m->set_step_samples(sp.samples_reports > 0 ? sp.samples / static_cast<double>(sp.samples_reports) : 0);
    m->set_reports(sp.reports);
  }
  return out;
}

std::vector<Coordinator::SpeedReports> Coordinator::AllSpeedReports() const {
  absl::MutexLock lock(&mu_);
  std::vector<SpeedReports> out;
  for (const auto& [name, job] : jobs_) {
    if (job.speed.empty()) continue;
    SpeedReports& r = out.emplace_back();
    r.job = name;
    for (const auto& [size, sp] : job.speed) {
      r.sizes.push_back({.gpus = size.first,
                         .nodes = size.second,
                         .step_seconds = sp.seconds / static_cast<double>(sp.reports),
                         .step_samples = sp.samples_reports > 0 ? sp.samples / static_cast<double>(sp.samples_reports) : 0,
                         .reports = sp.reports});
      r.reports += sp.reports;
    }
  }
  return out;
}

void Coordinator::Tick() {
  absl::MutexLock lock(&mu_);
  const absl::Time now = Now();
  for (auto& [name, job] : jobs_) {
    if (job.finished) continue;
    if (job.adopting && now - job.adopt_since >= options_.adoption_grace) {
      // Not every previous member came back: re-form with those that did.
      job.adopting = false;
      Reconcile(job, api::REASON_FAILURE, {}, /*force=*/true);
      WakeAll();
      continue;
    }
    if (job.pending_failure_generation > 0 &&
        job.pending_failure_generation == job.generation &&
        now - job.pending_failure_since >= options_.failure_report_grace) {
      // Reported, but nobody was found dead: everybody re-forms.
      job.pending_failure_generation = 0;
      Reconcile(job, api::REASON_FAILURE, {}, /*force=*/true);
      WakeAll();
      continue;
    }
    if (job.grow_pending &&
        now - job.grow_pending_since >= options_.grow_settle) {
      // The settle window of standby newcomers is over: let them in.
      job.grow_pending = false;
      Reconcile(job, api::REASON_GROW, {}, /*force=*/false);
      WakeAll();
    }
    std::vector<std::string> late;
    for (const auto& m : job.members) {
      auto it = job.workers.find(m);
      if (it != job.workers.end() &&
          now - it->second.last_seen > options_.heartbeat_timeout) {
        late.push_back(m);
      }
    }
    if (late.empty()) continue;
    common::Log(common::LogLevel::warn, "heartbeats missed",
                {{"job", job.name}, {"generation", job.generation}, {"workers", absl::StrJoin(late, ",")}});
    for (const auto& l : late) job.workers.erase(l);
    Reconcile(job, api::REASON_FAILURE, late, /*force=*/false);
    WakeAll();
  }
}

void Coordinator::Shutdown() {
  absl::MutexLock lock(&mu_);
  shutdown_ = true;
  WakeAll();
}

void Coordinator::Reconcile(Job& job, api::Reason reason,
                            const std::vector<std::string>& dropped,
                            bool force) {
  if (job.finished) return;
  std::vector<std::string> members;
  if (job.adopting) {
    // Wait for every previous member, then re-form in their old rank order.
    std::vector<const Worker*> previous;
    for (const auto& [id, w] : job.workers) {
      if (w.last_generation > 0) previous.push_back(&w);
    }
    if (static_cast<int>(previous.size()) < job.target) return;
    std::stable_sort(previous.begin(), previous.end(),
                     [](const Worker* a, const Worker* b) {
                       return a->last_rank < b->last_rank;
                     });
    for (const Worker* w : previous) members.push_back(w->id);
    members.resize(job.target);
    job.adopting = false;
    Publish(job, std::move(members), api::REASON_RECOVERY);
    return;
  }
  if (job.managed) {
    ReconcileManaged(job, reason, dropped, force);
    return;
  }
  if (job.generation == 0 && static_cast<int>(job.workers.size()) < job.target) {
    return;  // The initial gang is not complete yet.
  }
  std::vector<std::string> survivors;
  for (const auto& m : job.members) {
    if (job.workers.contains(m) && !Contains(dropped, m)) survivors.push_back(m);
  }
  members = survivors;
  if (static_cast<int>(members.size()) > job.target) members.resize(job.target);
  // Fill free slots from standby workers, first come first served; members
  // just shrunk away are not standby.
  std::vector<const Worker*> standby;
  for (const auto& [id, w] : job.workers) {
    if (!Contains(survivors, id)) standby.push_back(&w);
  }
  std::sort(standby.begin(), standby.end(),
            [](const Worker* a, const Worker* b) {
              return a->join_order < b->join_order;
            });
  for (const Worker* w : standby) {
    if (static_cast<int>(members.size()) >= job.target) break;
    members.push_back(w->id);
  }
  if (job.generation == 0) {
    // The first gang: ranks by worker id, so that one input gives one order.
    std::sort(members.begin(), members.end());
  }
  if (!job.ring_order.empty()) {
    auto pos = [&](const std::string& id) {
      auto it = std::find(job.ring_order.begin(), job.ring_order.end(), id);
      return it - job.ring_order.begin();
    };
    std::stable_sort(members.begin(), members.end(),
                     [&](const std::string& a, const std::string& b) {
                       return pos(a) < pos(b);
                     });
  }
  if (members.empty()) {
    job.members.clear();
    job.members_have_state.clear();
    return;
  }
  if (members == job.members && !force) return;
  Publish(job, std::move(members), reason);
}

void Coordinator::ReconcileManaged(Job& job, api::Reason reason,
                                   const std::vector<std::string>& dropped,
                                   bool force) {
  std::vector<std::string> members;
  for (const auto& w : job.ring_order) {
    if (job.workers.contains(w) && !Contains(dropped, w)) members.push_back(w);
  }
  bool member_lost = false;  // shrunk away, left or failed
  for (const auto& m : job.members) {
    if (!Contains(members, m)) member_lost = true;
  }
  const bool complete = members.size() == job.ring_order.size();
  if (!complete && job.generation == 0) return;  // the first gang is whole or nothing
  if (!complete && !member_lost && !force) return;  // newcomers still to join
  if (members.empty()) {
    job.members.clear();
    job.members_have_state.clear();
    return;
  }
  if (members == job.members && !force) return;
  if (member_lost &&
      (reason == api::REASON_GROW || reason == api::REASON_INITIAL)) {
    reason = api::REASON_PLANNED_SHRINK;  // someone was told to leave
  }
  Publish(job, std::move(members), reason);
}

absl::StatusOr<int64_t> Coordinator::SetMembers(const std::string& name,
                                                std::vector<std::string> workers,
                                                api::Reason reason,
                                                absl::Time deadline) {
  if (name.empty() || name.size() > kMaxIdBytes) {
    return absl::InvalidArgumentError("SetMembers needs a job name of 1..256 bytes");
  }
  if (workers.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat("SetMembers of job '", name, "' names no worker"));
  }
  {
    std::vector<std::string> sorted = workers;
    std::sort(sorted.begin(), sorted.end());
    if (sorted.front().empty()) {
      return absl::InvalidArgumentError("SetMembers: an empty worker id");
    }
    if (std::adjacent_find(sorted.begin(), sorted.end()) != sorted.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("SetMembers of job '", name, "' names a worker twice"));
    }
  }
  absl::MutexLock lock(&mu_);
  if (shutdown_) return absl::UnavailableError("coordinator shutting down");
  auto [it, created] = jobs_.try_emplace(name);
  Job& job = it->second;
  if (created) job.name = name;
  if (job.finished) {
    return absl::FailedPreconditionError(
        absl::StrCat("job '", job.name, "' has finished"));
  }
  job.managed = true;
  job.adopting = false;
  job.target = static_cast<int32_t>(workers.size());
  job.ring_order = std::move(workers);
  job.next_deadline = deadline;
  common::Log(common::LogLevel::info, "membership target",
              {{"job", job.name}, {"reason", api::Reason_Name(reason)},
               {"workers", absl::StrJoin(job.ring_order, ",")}});
  Reconcile(job, job.generation == 0 ? api::REASON_INITIAL : reason, {},
            /*force=*/false);
  WakeAll();
  return job.generation;
}

void Coordinator::DropJob(const std::string& name) {
  absl::MutexLock lock(&mu_);
  if (jobs_.erase(name) > 0) WakeAll();
}

void Coordinator::Publish(Job& job, std::vector<std::string> members,
                          api::Reason reason) {
  const bool initial = job.generation == 0;
  std::vector<bool> has_state;
  for (const auto& m : members) {
    auto it = job.workers.find(m);
    const bool adopted = it != job.workers.end() &&
                         it->second.last_generation > 0 &&
                         reason == api::REASON_RECOVERY;
    has_state.push_back(!initial && (IsMember(job, m) || adopted));
  }
  if (reason == api::REASON_RECOVERY && job.members.empty()) {
    // Re-adopted: every member that reported a generation holds state.
    for (size_t i = 0; i < members.size(); ++i) {
      has_state[i] = job.workers.at(members[i]).last_generation > 0;
    }
  }
  ++job.generation;
  job.reason = initial ? api::REASON_INITIAL : reason;
  if (job.reason == api::REASON_FAILURE) {
    job.last_failure_generation = job.generation;
  }
  job.members = std::move(members);
  job.members_have_state = std::move(has_state);
  job.kv.clear();
  job.published_at = Now();
  job.grow_pending = false;  // whoever was waiting is in (or still standby)
  job.deadline = job.next_deadline;
  job.next_deadline = absl::InfiniteFuture();
  common::Log(common::LogLevel::info, "membership published",
              {{"job", job.name}, {"generation", job.generation}, {"reason", api::Reason_Name(job.reason)},
               {"members", absl::StrJoin(job.members, ",")}});
}

api::MembershipUpdate Coordinator::UpdateFor(const Job& job,
                                             const std::string& worker) const {
  api::MembershipUpdate u;
  u.set_job(job.name);
  u.set_generation(job.generation);
  u.set_rank(-1);
  for (size_t i = 0; i < job.members.size(); ++i) {
    auto* m = u.add_members();
    m->set_worker_id(job.members[i]);
    m->set_rank(static_cast<int32_t>(i));
    m->set_has_state(job.members_have_state[i]);
    if (auto it = job.workers.find(job.members[i]); it != job.workers.end()) {
      m->set_host(it->second.host);
      for (int g : it->second.gpus) m->add_gpus(g);
    }
    if (job.members[i] == worker) u.set_rank(static_cast<int32_t>(i));
  }
  u.set_world_size(static_cast<int32_t>(job.members.size()));
  u.set_reason(job.reason);
  u.set_deadline_unix_ms(absl::ToUnixMillis(
      job.deadline != absl::InfiniteFuture()
          ? job.deadline
          : job.published_at + options_.reform_deadline));
  u.set_committed_step(job.committed_step);
  u.set_committed_position(job.committed_position);
  u.set_last_failure_generation(job.last_failure_generation);
  u.set_published_unix_us(absl::ToUnixMicros(job.published_at));
  return u;
}

}  // namespace ringmaster::server
