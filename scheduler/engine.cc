#include "scheduler/engine.h"

#include <algorithm>
#include <map>

#include "absl/container/flat_hash_set.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "scheduler/session.h"
#include "scheduler/statement.h"
#include "topology/rank_order.h"

namespace ringmaster::scheduler {

absl::StatusOr<Engine::Configured> Engine::Configure(const Policy& policy, const PluginRegistry& registry) {
  Configured c;
  for (const auto& tier : policy.tiers) {
    std::vector<Plugin*> list;
    for (const PluginConfig& pc : tier) {
      const PluginFactory* f = registry.Find(pc.name);
      if (!f) return absl::InvalidArgumentError(absl::StrCat("unknown plugin '", pc.name, "'"));
      RM_ASSIGN_OR_RETURN(auto p, (*f)(pc.args));
      list.push_back(p.get());
      c.plugins.push_back(std::move(p));
    }
    c.tiers.push_back(std::move(list));
  }
  for (const std::string& name : policy.actions) {
    auto it = policy.action_args.find(name);
    RM_ASSIGN_OR_RETURN(auto a, MakeAction(name, it == policy.action_args.end() ? PluginArgs() : it->second));
    c.actions.push_back(std::move(a));
  }
  return c;
}

namespace {

// A grow's reason; for a job with a speed model, what it says the grow
// gained: "grew into idle GPUs: 2 -> 4 GPUs on 1 -> 1 node, x1.9 the rate
// (speed model: ...)". `binds`: the cycle's, the grow's new members among
// them.
std::string GrowReason(const Job& job, const std::vector<Bind>& binds) {
  if (job.spec().speed == nullptr) return "grew into idle GPUs";
  absl::flat_hash_set<uint32_t> added;
  for (const Bind& b : binds) {
    if (b.job == job.id()) added.insert(b.task);
  }
  int gpus_before = 0, gpus_after = 0;
  absl::flat_hash_set<uint32_t> nodes_before, nodes_after;
  for (const Task& t : job.tasks()) {
    const bool ready = t.state == TaskState::kAllocated || t.state == TaskState::kBinding ||
                       t.state == TaskState::kBound || t.state == TaskState::kRunning;
    if (!ready || !t.node.valid()) continue;
    const int g = static_cast<int>(job.gpu(t.index).count);
    gpus_after += g;
    nodes_after.insert(t.node.value());
    if (!added.contains(t.index)) {
      gpus_before += g;
      nodes_before.insert(t.node.value());
    }
  }
  const SpeedModel& m = *job.spec().speed;
  std::string gain;
  if (gpus_before > 0 && gpus_after > 0) {
    const double before = m.Rate(gpus_before, static_cast<int>(nodes_before.size()));
    const double after = m.Rate(gpus_after, static_cast<int>(nodes_after.size()));
    if (before > 0) gain = absl::StrFormat(", x%.2f the rate", after / before);
  }
  return absl::StrCat("grew into idle GPUs: ", gpus_before, " -> ", gpus_after, " GPUs on ", nodes_before.size(), " -> ",
                      nodes_after.size(), nodes_after.size() == 1 ? " node" : " nodes", gain, " (speed model: ",
                      m.Describe(), ")");
}
absl::StatusOr<queue::QueueTree> QueuesOf(const Policy& policy) {
  if (policy.queues.empty()) return queue::QueueTree::Default();
  return queue::QueueTree::Build(policy.queues);
}
}  // namespace

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(topology::Cluster cluster,
                                                       const Policy& policy,
                                                       const PluginRegistry& registry,
                                                       const Clock& clock, EngineOptions options) {
  std::unique_ptr<Engine> e(new Engine(clock, options));
  RM_ASSIGN_OR_RETURN(auto tree, QueuesOf(policy));
  e->state_ = std::make_unique<State>(std::move(cluster), std::move(tree), &e->clock_);
  e->state_->set_ended_kept(options.ended_jobs_kept);
  e->nodes_to_score_ = policy.nodes_to_score;
  RM_ASSIGN_OR_RETURN(auto configured, Configure(policy, registry));
  e->plugins_ = std::move(configured.plugins);
  e->tiers_ = std::move(configured.tiers);
  e->actions_ = std::move(configured.actions);
  return e;
}

absl::Status Engine::SetPolicy(const Policy& policy, const PluginRegistry& registry) {
  touched_ = true;
  RM_ASSIGN_OR_RETURN(auto tree, QueuesOf(policy));
  RM_ASSIGN_OR_RETURN(auto configured, Configure(policy, registry));
  std::vector<DecayedUsage> history = DecayedUsages();  // named by the old queues
  RM_RETURN_IF_ERROR(state_->ReplaceQueues(std::move(tree)));
  for (auto& p : configured.plugins) p->RestoreDecayedUsages(history);
  deserved_.clear();
  // Every remembered verdict was the old policy's.
  ++verdict_context_.id;
  ++verdict_context_.policy;
  verdict_context_.deserved.clear();
  plugins_ = std::move(configured.plugins);
  tiers_ = std::move(configured.tiers);
  actions_ = std::move(configured.actions);
  nodes_to_score_ = policy.nodes_to_score;
  return absl::OkStatus();
}

std::vector<DecayedUsage> Engine::DecayedUsages() const {
  for (const auto& p : plugins_) {
    std::vector<DecayedUsage> u = p->DecayedUsages(*state_, clock_.Now());
    if (!u.empty()) return u;
  }
  return {};
}

std::optional<int> Engine::UsageWeightLevel(QueueId q) const {
  for (const auto& p : plugins_) {
    if (std::optional<int> level = p->UsageWeightLevel(q)) return level;
  }
  return std::nullopt;
}

void Engine::RestoreDecayedUsages(std::span<const DecayedUsage> usages) {
  touched_ = true;
  for (auto& p : plugins_) p->RestoreDecayedUsages(usages);
}

void Engine::RestoreEndedJobs(std::span<const EndedJob> ended) {
  touched_ = true;
  state_->RestoreEndedJobs(ended);
}

absl::StatusOr<JobId> Engine::SubmitJob(JobSpec spec) { return Admit(std::move(spec), clock_.Now()); }

absl::StatusOr<JobId> Engine::Admit(JobSpec spec, Timestamp created) {
  touched_ = true;
  RM_RETURN_IF_ERROR(spec.Validate());
  if (by_name_.count(spec.name)) {
    return absl::AlreadyExistsError(absl::StrCat("job '", spec.name, "': name: already submitted"));
  }
  auto q = state_->queues().Find(spec.queue);
  if (!q) {
    return absl::InvalidArgumentError(
        absl::StrCat("job '", spec.name, "': queue: unknown queue '", spec.queue, "'"));
  }
  if (!state_->queues().is_leaf(*q)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "job '", spec.name, "': queue: '", spec.queue, "' has child queues; submit to a leaf"));
  }
  const std::string name = spec.name;
  JobId id = state_->AddJob(std::move(spec), QueueId(*q), created);
  by_name_[name] = id;
  return id;
}

absl::StatusOr<JobId> Engine::RestoreJob(JobSpec spec, Timestamp created, std::span<const RestoredTask> placed,
                                         int64_t generation) {
  auto admitted = Admit(std::move(spec), created);
  if (!admitted.ok() || placed.empty()) return admitted;
  Job& job = state_->job(*admitted);
  const topology::Cluster& c = state_->cluster();
  // 1. Check every placement before changing anything: the node exists and
  //    is schedulable, the GPU indices are its own and free, the task fits.
  std::map<std::pair<uint32_t, int16_t>, int64_t> gpu_taken;
  std::set<uint32_t> seen;
  for (const RestoredTask& r : placed) {
    const NodeId n = c.FindNode(r.node);
    const bool role_ok = r.role >= 0 && static_cast<size_t>(r.role) < job.spec().roles.size();
    const bool index_ok = r.index < job.tasks().size() ||
                          (job.elastic() && r.index < static_cast<uint32_t>(job.max_member()));
    if (!n.valid() || !state_->node(n).schedulable || !role_ok || !index_ok || !seen.insert(r.index).second) {
      return *admitted;
    }
    const GpuRequest& g = job.spec().roles[r.role].gpu;
    if (static_cast<int>(r.gpus.size()) != g.count) return *admitted;
    for (int16_t d : r.gpus) {
      if (d < 0 || static_cast<size_t>(d) >= c.node(n).gpus.size()) return *admitted;
      int64_t& taken = gpu_taken[{n.value(), d}];
      taken += g.milli;
      if (state_->GpuFree(n, d, /*future=*/false) < taken) return *admitted;
    }
  }
  if (static_cast<int>(placed.size()) < job.min_member()) return *admitted;
  // 2. Grow an elastic job to its recorded size, then place and start.
  uint32_t top = 0;
  for (const RestoredTask& r : placed) top = std::max(top, r.index + 1);
  std::vector<int> roles(top, -1);
  for (const RestoredTask& r : placed) roles[r.index] = r.role;
  while (job.tasks().size() < top) state_->AddTask(job, roles[job.tasks().size()] < 0 ? 0 : roles[job.tasks().size()]);
  std::vector<uint32_t> done;
  for (const RestoredTask& r : placed) {
    const NodeId n = c.FindNode(r.node);
    if (!state_->FitsIdle(n, job.request(r.index))) break;
    state_->Place(job, r.index, n, r.gpus, TaskState::kAllocated);
    state_->SetState(job, r.index, TaskState::kRunning);
    done.push_back(r.index);
  }
  if (done.size() < placed.size()) {
    // cpu or memory no longer fit: undo; the job waits again.
    for (uint32_t i : done) state_->Release(job, i, TaskState::kPending);
    return *admitted;
  }
  state_->SetPhase(job, JobPhase::kRunning);
  job.set_started(clock_.Now());
  job.set_last_resize(clock_.Now());
  job.set_generation(generation);
  return *admitted;
}

absl::Status Engine::RestoreJobHistory(JobId id, const JobHistory& h, Timestamp seen) {
  RM_ASSIGN_OR_RETURN(auto found, ActiveJob(id));
  Job& job = *found;
  auto bad = [&](const char* field, int64_t value, const char* why) {
    return absl::InvalidArgumentError(absl::StrCat("job '", job.name(), "': ", field, ": ", value, " ", why));
  };
  if (h.attained_milli_ms < 0) return bad("attained_milli_ms", h.attained_milli_ms, "is below 0");
  if (h.attained_at < 0) return bad("attained_at", h.attained_at, "is below 0");
  if (h.held_gpu_milli < 0) return bad("held_gpu_milli", h.held_gpu_milli, "is below 0");
  for (const auto& [field, t] : {std::pair<const char*, Timestamp>{"started", h.started},
                                 {"last_stopped", h.last_stopped},
                                 {"last_resize", h.last_resize}}) {
    if (t < -1) return bad(field, t, "is below -1");
  }
  if (h.running && h.started < 0) return bad("started", h.started, "for a job recorded running");
  JobHistory now = h;
  const bool runs = job.phase() == JobPhase::kRunning;
  if (runs && !h.running) {  // 2.
    now.started = job.started();
    now.last_resize = job.last_resize();
    now.attained_at = std::max(h.attained_at, clock_.Now());
  } else if (!runs && h.running) {  // 3.
    const Timestamp until = std::max(seen, h.attained_at);
    int64_t more = 0;
    if (__builtin_mul_overflow(h.held_gpu_milli, until - h.attained_at, &more) ||
        __builtin_add_overflow(h.attained_milli_ms, more, &now.attained_milli_ms)) {
      return bad("attained_milli_ms", h.attained_milli_ms, "overflows with the time run since the record");
    }
    now.attained_at = until;
    now.last_stopped = std::max(h.last_stopped, until);
  }
  // 1. (and 4.): as recorded; a Running job's service grows from
  // attained_at on what it holds now.
  int64_t grown = 0;
  if (__builtin_mul_overflow(job.allocated().gpu_milli(), std::max<Timestamp>(0, clock_.Now() - now.attained_at),
                             &grown) ||
      __builtin_add_overflow(now.attained_milli_ms, grown, &grown)) {
    return bad("attained_milli_ms", h.attained_milli_ms, "overflows with the time run since the record");
  }
  job.RestoreHistory(now);
  touched_ = true;
  return absl::OkStatus();
}

JobId Engine::FindJob(std::string_view name) const {
  auto it = by_name_.find(name);
  return it == by_name_.end() ? JobId() : it->second;
}

absl::StatusOr<Job*> Engine::ActiveJob(JobId id) {
  if (!state_->has_job(id)) return absl::NotFoundError("no such job");
  Job& job = state_->job(id);
  if (!state_->active_jobs().count(id)) {
    return absl::FailedPreconditionError(absl::StrCat("job '", job.name(), "' already ended"));
  }
  return &job;
}

absl::Status Engine::CancelJob(JobId id) {
  touched_ = true;
  RM_ASSIGN_OR_RETURN(auto found, ActiveJob(id));
  Job& job = *found;
  if (job.phase() == JobPhase::kCancelling) return absl::OkStatus();  // already stopping
  const int64_t grace = options_.cancel_grace_ms;
  const Timestamp deadline = clock_.Now() + grace;
  int stopping = 0;
  Timestamp by = -1;
  for (uint32_t i = 0; i < job.tasks().size(); ++i) {
    const TaskState s = job.task(i).state;
    if (grace > 0 && (s == TaskState::kBound || s == TaskState::kRunning)) {
      // Its process runs: its GPUs are not free until it is gone.
      RecordEvictionOf(job, i, "job cancelled");
      carry_.evictions.back().kind = Eviction::Kind::kCancel;
      carry_.evictions.back().deadline = deadline;
      state_->SetState(job, i, TaskState::kReleasing);
      state_->SetReleaseDeadline(job, i, deadline);
      releasing_.insert({deadline, job.id(), i});
      ++stopping;
      by = std::max(by, deadline);
    } else if (grace > 0 && s == TaskState::kReleasing) {
      // Already leaving (a shrunk member, a broken gang's survivor) by its
      // own deadline: it was told to stop.
      ++stopping;
      by = std::max(by, job.task(i).release_deadline);
    } else if (HoldsNode(s)) {
      RecordEvictionOf(job, i, "job cancelled");
      carry_.evictions.back().kind = Eviction::Kind::kCancel;
      state_->Release(job, i, TaskState::kFailed);
    } else if (s == TaskState::kPipelined || s == TaskState::kPending) {
      state_->Release(job, i, TaskState::kFailed);
    }
  }
  job.set_nominated(false);
  if (stopping == 0) {
    state_->FinishJob(id, JobPhase::kAborted);
    return absl::OkStatus();
  }
  state_->SetPhase(job, JobPhase::kCancelling);
  job.set_pending_reason(absl::StrCat("cancelling: ", stopping, " task(s) stopping; their GPUs are free once they are gone (",
                                      (std::max<Timestamp>(by - clock_.Now(), 0) + 999) / 1000, " s at the latest)"));
  return absl::OkStatus();
}

void Engine::ReleaseStopped(Job& job, uint32_t task) {
  if (job.phase() != JobPhase::kCancelling) {
    state_->Release(job, task, TaskState::kPending);
    return;
  }
  state_->Release(job, task, TaskState::kFailed);
  if (job.Count(TaskState::kReleasing) == 0) state_->FinishJob(job.id(), JobPhase::kAborted);
}

absl::Status Engine::FinishJob(JobId id, bool succeeded) {
  touched_ = true;
  RM_ASSIGN_OR_RETURN(auto found, ActiveJob(id));
  Job& job = *found;
  for (uint32_t i = 0; i < job.tasks().size(); ++i) {
    const Task& t = job.task(i);
    if (t.state == TaskState::kReleasing) {
      state_->Release(job, i, TaskState::kFailed);  // a shrunk member that had not left yet
    } else if (HoldsNode(t.state)) {
      state_->Release(job, i, succeeded ? TaskState::kSucceeded : TaskState::kFailed);
    } else if (t.state == TaskState::kPending || t.state == TaskState::kPipelined) {
      state_->Release(job, i, TaskState::kFailed);
    }
  }
  job.set_nominated(false);
  const bool cancelled = job.phase() == JobPhase::kCancelling;
  state_->FinishJob(id, cancelled ? JobPhase::kAborted : succeeded ? JobPhase::kCompleted : JobPhase::kFailed);
  return absl::OkStatus();
}

absl::Status Engine::ConfirmBind(JobId id, uint32_t task, bool ok) {
  touched_ = true;
  if (!state_->has_job(id)) return absl::NotFoundError("no such job");
  Job& job = state_->job(id);
  if (task >= job.tasks().size()) return absl::NotFoundError("no such task");
  if (job.task(task).state != TaskState::kBinding) {
    return absl::FailedPreconditionError(
        absl::StrCat("task ", job.task(task).name, " is ", std::string(TaskStateName(job.task(task).state)),
                     ", not Binding"));
  }
  if (ok) {
    state_->SetState(job, task, TaskState::kBound);
    return absl::OkStatus();
  }
  // A failed bind breaks the gang: it stops whole and waits again.
  state_->Release(job, task, TaskState::kPending);
  StopBrokenGang(job, absl::StrCat("bind of ", job.task(task).name, " failed"));
  state_->SetPhase(job, JobPhase::kInqueue);
  return absl::OkStatus();
}

absl::Status Engine::TaskStarted(JobId id, uint32_t task) {
  touched_ = true;
  if (!state_->has_job(id)) return absl::NotFoundError("no such job");
  Job& job = state_->job(id);
  if (task >= job.tasks().size()) return absl::NotFoundError("no such task");
  if (job.task(task).state != TaskState::kBound) {
    return absl::FailedPreconditionError(absl::StrCat(
        "task ", job.task(task).name, " is ", std::string(TaskStateName(job.task(task).state)), ", not Bound"));
  }
  state_->SetState(job, task, TaskState::kRunning);
  return absl::OkStatus();
}

absl::Status Engine::TaskReleased(JobId id, uint32_t task) {
  touched_ = true;
  if (!state_->has_job(id)) return absl::NotFoundError("no such job");
  Job& job = state_->job(id);
  if (task >= job.tasks().size()) return absl::NotFoundError("no such task");
  if (job.task(task).state != TaskState::kReleasing) {
    return absl::FailedPreconditionError(absl::StrCat(
        "task ", job.task(task).name, " is ", std::string(TaskStateName(job.task(task).state)), ", not Releasing"));
  }
  releasing_.erase({job.task(task).release_deadline, id, task});
  ReleaseStopped(job, task);
  return absl::OkStatus();
}

Timestamp Engine::NextDeadline() const {
  for (const auto& [deadline, id, task] : releasing_) {
    const Job& job = state_->job(id);
    if (job.task(task).state == TaskState::kReleasing && job.task(task).release_deadline == deadline) {
      return deadline;
    }
  }
  return -1;
}

bool Engine::ReadsClock() const {
  for (const auto& a : actions_) {
    if (a->UsesTime()) return true;
  }
  for (const auto& p : plugins_) {
    if (p->UsesTime()) return true;
  }
  return false;
}

Timestamp Engine::NextWakeup() const {
  const Timestamp now = clock_.Now();
  // Something new since the last cycle, or the last cycle changed the state
  // (a decision, an admission, a reservation, a release at its deadline):
  // the next cycle starts from another state, and may decide anything.
  if (cycle_ == 0 || touched_ || last_cycle_changed_) return now;
  const Timestamp deadline = NextDeadline();
  Timestamp at = deadline >= 0 ? std::max(deadline, now) : kNever;
  // The last cycle changed nothing: the next one starts from the same
  // state. A policy that reads no clock decides the same until an event or
  // a release deadline; one that does, until one of its time-based
  // conditions turns (each says when: Action / Plugin::NextChange).
  if (!ReadsClock()) return at;
  if (!options_.fast_paths) return now;
  for (const auto& a : actions_) {
    if (a->UsesTime()) at = std::min(at, a->NextChange(*state_, now));
  }
  for (const auto& p : plugins_) {
    if (p->UsesTime()) at = std::min(at, p->NextChange(*state_, now));
  }
  return std::max(at, now);
}

bool Engine::ExpireReleases() {
  const Timestamp now = clock_.Now();
  bool released = false;
  while (!releasing_.empty() && std::get<0>(*releasing_.begin()) <= now) {
    const auto [deadline, id, task] = *releasing_.begin();
    releasing_.erase(releasing_.begin());
    Job& job = state_->job(id);
    if (job.task(task).state == TaskState::kReleasing && job.task(task).release_deadline == deadline) {
      ReleaseStopped(job, task);
      released = true;
    }
  }
  return released;
}

void Engine::Unhold(Job& job) {
  for (uint32_t i = 0; i < job.tasks().size(); ++i) {
    if (job.task(i).state == TaskState::kPipelined) state_->Unplace(job, i);
  }
  job.set_nominated(false);
}

void Engine::PromoteHeld(Session& session) {
  std::erase_if(held_, [&](JobId id) { return !state_->job(id).nominated(); });
  const std::vector<JobId> held(held_.begin(), held_.end());
  for (JobId id : held) {
    Job& job = state_->job(id);
    bool fits = true;
    bool waits_on_someone = false;
    // What its promises take of each node and GPU, summed: members that each
    // fit the idle room alone may not fit it together while victims still
    // hold part of it.
    std::map<uint32_t, Resources> node_taken;
    std::map<std::pair<uint32_t, int16_t>, int64_t> gpu_taken;
    for (const Task& t : job.tasks()) {
      if (t.state != TaskState::kPipelined) continue;
      const NodeState& ns = state_->node(t.node);
      if (!ns.schedulable) fits = false;
      if (!ns.releasing.IsZero()) waits_on_someone = true;
      for (int16_t d : t.gpus) {
        int64_t& taken = gpu_taken[{t.node.value(), d}];
        taken += job.gpu(t.index).milli;
        if (state_->GpuFree(t.node, d, /*future=*/false) < taken) fits = false;
      }
      Resources& taken = node_taken[t.node.value()];
      taken += job.request(t.index);
      if (!state_->FitsIdle(t.node, taken)) fits = false;
    }
    if (fits) {
      // A promise is not queue usage: while the victims left, another job
      // of the queue may have taken what its capability allows. Each task
      // is promoted only within it (Session::Allocatable, as allocate asks).
      Statement stmt(session);
      bool within = true;
      for (uint32_t i = 0; i < job.tasks().size() && within; ++i) {
        if (job.task(i).state != TaskState::kPipelined) continue;
        within = session.Allocatable(session.queue(job.queue()), TaskRef{&job, i});
        if (within) stmt.Promote(job, i);
      }
      if (within) {
        stmt.SetNominated(job, false);
        if (stmt.Commit().ok()) continue;
      } else {
        stmt.Discard();
      }
    } else if (waits_on_someone) {
      continue;  // victims still leaving: keep waiting
    }
    // It does not fit and nobody is leaving (a node was lost), or its queue
    // has no room left for it: give the promise up; it waits again.
    Statement drop(session);
    for (uint32_t i = 0; i < job.tasks().size(); ++i) {
      if (job.task(i).state == TaskState::kPipelined) drop.Unpipeline(job, i);
    }
    drop.SetNominated(job, false);
    RM_CHECK_OK(drop.Commit());  // dropping promises cannot fail: a bug
  }
}

Timestamp Engine::ExpectedStart(JobId id) const {
  if (!state_->has_job(id)) return -1;
  const Job& job = state_->job(id);
  const Timestamp now = clock_.Now();
  if (job.phase() == JobPhase::kRunning) return job.started();
  if (!state_->active_jobs().count(id) || job.phase() == JobPhase::kCancelling) return -1;
  if (job.nominated()) {
    // Held for its victims: they are gone by their deadline.
    Timestamp by = now;
    for (const Task& t : job.tasks()) {
      if (t.state != TaskState::kPipelined) continue;
      for (const auto& [jid, i] : state_->TasksOn(t.node)) {
        const Task& v = state_->job(jid).task(i);
        if (v.state == TaskState::kReleasing) by = std::max(by, v.release_deadline);
      }
    }
    return by;
  }
  // Whole GPUs per task and how many tasks the minimum still needs.
  int64_t per_task = 0;
  int need = job.GangShortfall();
  for (const Task& t : job.tasks()) {
    if (t.state == TaskState::kPending && job.gpu(t.index).whole()) {
      per_task = std::max<int64_t>(per_task, job.gpu(t.index).count);
    }
  }
  if (need <= 0 || per_task == 0) return now;
  // Free GPUs per node the job may use (GPU model, node selector), then
  // running tasks end in walltime order.
  const topology::Cluster& c = state_->cluster();
  auto usable = [&](uint32_t n) {
    if (!state_->node(NodeId(n)).schedulable) return false;
    const topology::NodeSpec& spec = c.node(NodeId(n));
    for (const auto& g : spec.gpus) {
      if (!job.spec().AllowsModel(g.model)) return false;
    }
    for (const auto& [k, v] : job.spec().node_selector) {
      auto it = spec.labels.find(k);
      if (it == spec.labels.end() || it->second != v) return false;
    }
    return true;
  };
  std::vector<int64_t> free(state_->num_nodes(), -1);  // -1: not usable
  int64_t fit = 0;
  for (uint32_t n = 0; n < state_->num_nodes(); ++n) {
    if (!usable(n)) continue;
    free[n] = state_->FreeWholeGpus(NodeId(n));
    fit += free[n] / per_task;
  }
  // Enough GPUs free now and still waiting: something other than GPUs
  // (topology, cpu, a queue limit) holds it; no time can be promised.
  if (fit >= need) return -1;
  std::vector<std::tuple<Timestamp, uint32_t, int64_t>> ends;  // (end, node, gpus)
  for (JobId jid : state_->active_jobs()) {
    const Job& r = state_->job(jid);
    for (const Task& t : r.tasks()) {
      if (!HoldsNode(t.state) || free[t.node.value()] < 0) continue;
      const int64_t g = r.gpu(t.index).whole() ? r.gpu(t.index).count : 0;
      if (g == 0) continue;
      Timestamp end = -1;
      if (t.state == TaskState::kReleasing) {
        end = t.release_deadline >= 0 ? t.release_deadline : now;
      } else if (r.spec().walltime_ms > 0) {
        end = std::max(now, (r.started() < 0 ? now : r.started()) + r.spec().walltime_ms);
      }
      if (end >= 0) ends.emplace_back(end, t.node.value(), g);
    }
  }
  std::sort(ends.begin(), ends.end());
  for (const auto& [end, n, g] : ends) {
    fit -= free[n] / per_task;
    free[n] += g;
    fit += free[n] / per_task;
    if (fit >= need) return end;
  }
  return -1;
}

absl::StatusOr<NodeId> Engine::AddNode(topology::NodeSpec spec) {
  touched_ = true;
  return state_->AddNode(std::move(spec));
}

absl::StatusOr<int64_t> Engine::SetForeignUsage(std::string_view node, const Resources& req, int64_t gpus) {
  const NodeId n = state_->cluster().FindNode(node);
  if (!n.valid() || !state_->node(n).schedulable) {
    return absl::NotFoundError(absl::StrCat("node '", std::string(node), "' is not in the cluster"));
  }
  const NodeState& ns = state_->node(n);
  const Resources before = ns.foreign;
  const std::vector<int16_t> gpus_before = ns.gpu_foreign;
  const int64_t short_by = state_->SetForeignUsage(n, req, gpus);
  // A change of what is free is an event: the next cycle may decide anew.
  if (!(ns.foreign == before) || ns.gpu_foreign != gpus_before) touched_ = true;
  return short_by;
}

absl::Status Engine::SetJobSpeed(JobId id, std::shared_ptr<const SpeedModel> model) {
  if (!id.valid() || !state_->active_jobs().contains(id)) return absl::NotFoundError("no such active job");
  state_->SetJobSpeed(id, std::move(model));
  touched_ = true;  // an event: the next cycle may size the job anew
  return absl::OkStatus();
}

absl::Status Engine::RemoveNode(std::string_view name) { return LoseNode(name, "node removed"); }
absl::Status Engine::FailNode(std::string_view name) { return LoseNode(name, "node failed"); }

void Engine::RecordEvictionOf(const Job& job, uint32_t task, std::string reason) {
  carry_.evictions.push_back(MakeEviction(*state_, job, task, std::move(reason)));
}

absl::Status Engine::LoseNode(std::string_view name, std::string_view why) {
  touched_ = true;
  const NodeId n = state_->cluster().FindNode(name);
  if (!n.valid()) return absl::NotFoundError(absl::StrCat("node '", std::string(name), "' is not in the cluster"));
  std::vector<JobId> hit;
  std::vector<JobId> held;
  for (const auto& [jid, i] : state_->TasksOn(n)) {
    Job& job = state_->job(jid);
    if (job.task(i).state == TaskState::kPipelined) {
      held.push_back(jid);
      continue;
    }
    const bool leaving = job.task(i).state == TaskState::kReleasing;
    if (leaving) {
      ReleaseStopped(job, i);  // gone with its node
      continue;
    }
    state_->Release(job, i, TaskState::kPending);  // the task's work is lost; it waits again
    hit.push_back(jid);
  }
  for (JobId jid : held) {
    if (state_->job(jid).nominated()) Unhold(state_->job(jid));
  }
  state_->DisableNode(n);
  AfterTasksLost(std::move(hit), absl::StrCat(std::string(why), " ", std::string(name)));
  return absl::OkStatus();
}

void Engine::AfterTasksLost(std::vector<JobId> hit, const std::string& what) {
  std::sort(hit.begin(), hit.end());
  hit.erase(std::unique(hit.begin(), hit.end()), hit.end());
  for (JobId jid : hit) {
    Job& job = state_->job(jid);
    if (job.GangReady()) {
      // Still a whole gang (elastic slack): it runs on, smaller.
      if (job.phase() == JobPhase::kRunning) {
        job.set_generation(job.generation() + 1);
        job.set_last_resize(clock_.Now());
        carry_.membership.push_back(Membership(job, MembershipChange::Kind::kFailure, what));
      }
      continue;
    }
    // Below its minimum: a gang never runs partly. Stop the rest; it
    // waits whole again.
    StopBrokenGang(job, absl::StrCat("gang below its minimum after ", what));
    state_->SetPhase(job, JobPhase::kInqueue);
    job.set_pending_reason(absl::StrCat("restarting: ", what, " took the gang below its minimum"));
  }
}

void Engine::StopBrokenGang(Job& job, const std::string& reason) {
  const Timestamp deadline = clock_.Now() + options_.restart_grace_ms;
  for (uint32_t i = 0; i < job.tasks().size(); ++i) {
    const TaskState s = job.task(i).state;
    if (s == TaskState::kBound || s == TaskState::kRunning) {
      // Its process still runs: its GPUs are not free until it is gone.
      RecordEvictionOf(job, i, reason);
      if (options_.restart_grace_ms > 0) {
        carry_.evictions.back().deadline = deadline;
        state_->SetState(job, i, TaskState::kReleasing);
        state_->SetReleaseDeadline(job, i, deadline);
        releasing_.insert({deadline, job.id(), i});
        continue;
      }
      state_->Release(job, i, TaskState::kPending);
    } else if (s == TaskState::kReleasing) {
      if (options_.restart_grace_ms <= 0) state_->Release(job, i, TaskState::kPending);
      // else: already leaving (a shrunk member) by its own deadline
    } else if (HoldsNode(s)) {
      state_->Release(job, i, TaskState::kPending);  // placed, never started
    }
  }
}

absl::Status Engine::TaskFailed(JobId id, uint32_t task, std::string_view why) {
  touched_ = true;
  RM_ASSIGN_OR_RETURN(auto found, ActiveJob(id));
  Job& job = *found;
  if (task >= job.tasks().size()) return absl::NotFoundError("no such task");
  const TaskState s = job.task(task).state;
  if (s != TaskState::kBound && s != TaskState::kRunning) {
    return absl::FailedPreconditionError(absl::StrCat("task ", job.task(task).name, " is ",
                                                      std::string(TaskStateName(s)), ", not Bound or Running"));
  }
  const std::string what = absl::StrCat("task ", job.task(task).name, " ", std::string(why));
  state_->Release(job, task, TaskState::kPending);  // its work is lost; it waits again
  AfterTasksLost({id}, what);
  return absl::OkStatus();
}

std::vector<Member> Engine::RingOrder(JobId id) const {
  if (!state_->has_job(id)) return {};
  return Membership(state_->job(id), MembershipChange::Kind::kStart, "").members;
}

MembershipChange Engine::Membership(const Job& job, MembershipChange::Kind kind, std::string reason,
                                    Timestamp deadline) const {
  MembershipChange m;
  m.job = job.id();
  m.job_name = job.name();
  m.generation = job.generation();
  m.kind = kind;
  m.reason = std::move(reason);
  m.deadline = deadline;
  const topology::Cluster& c = state_->cluster();
  // Scratch kept by the thread (a preempting cycle emits a change per job it
  // shrinks or starts): the members in task index order, their slots, and
  // the ring order over them.
  thread_local std::vector<const Task*> members;
  thread_local std::vector<topology::RankSlot> slots;
  thread_local std::vector<uint32_t> order;
  thread_local std::vector<int64_t> keys;
  members.clear();
  slots.clear();
  for (const Task& t : job.tasks()) {
    if (CountsReady(t.state) && t.state != TaskState::kSucceeded) {
      members.push_back(&t);
      slots.push_back({t.node, t.gpus.empty() ? -1 : t.gpus.front()});
    }
  }
  // Ring order from the topology: members of a domain together at every tier,
  // then socket, PCIe switch, NVLink island (topology/rank_order.h); members
  // of one slot in task index order.
  topology::OrderRankIndices(c, slots, &order, &keys);
  m.members.reserve(order.size());
  for (size_t r = 0; r < order.size(); ++r) {
    const Task& t = *members[order[r]];
    Member mem;
    mem.task = t.index;
    mem.task_name = t.name;
    mem.node_name = c.node(t.node).name;
    mem.gpus = t.gpus;
    mem.rank = static_cast<int>(r);
    m.members.push_back(std::move(mem));
  }
  return m;
}

void Engine::AfterClose(Decisions& d) {
  const Timestamp now = clock_.Now();
  // Shrinks and evictions with a grace period: remember their deadlines; a
  // shrunk job gets its next generation (the leavers are out of it).
  // The shrunk jobs, each with its first shrink record (thread scratch).
  thread_local std::vector<std::pair<JobId, const Eviction*>> shrunk;
  shrunk.clear();
  // A preemptor's victims come one after another: look its name up once.
  const std::string* last_preemptor = nullptr;
  for (const Eviction& e : d.evictions) {
    const Job& job = state_->job(e.job);
    if (job.task(e.task).state == TaskState::kReleasing) {
      // A cycle's deadlines are the latest so far: the end is the usual
      // place (a wrong hint costs a normal insert).
      releasing_.insert(releasing_.end(), {job.task(e.task).release_deadline, e.job, e.task});
    }
    if (e.kind == Eviction::Kind::kShrink) shrunk.emplace_back(e.job, &e);
    if (!e.preemptor.empty() && !(last_preemptor && *last_preemptor == e.preemptor)) {
      last_preemptor = &e.preemptor;
      const JobId p = FindJob(e.preemptor);
      if (p.valid() && state_->job(p).nominated()) held_.insert(p);
    }
  }
  // By job, the first record of each (records are in `d.evictions`, so
  // their addresses give their order).
  std::sort(shrunk.begin(), shrunk.end());
  for (size_t k = 0; k < shrunk.size(); ++k) {
    const auto [id, e] = shrunk[k];
    if (k > 0 && shrunk[k - 1].first == id) continue;
    Job& job = state_->job(id);
    job.set_generation(job.generation() + 1);
    job.set_last_resize(now);
    d.membership.push_back(Membership(job, MembershipChange::Kind::kShrink, e->reason, e->deadline));
  }
  thread_local std::vector<JobId> touched;
  touched.clear();
  for (const Bind& b : d.binds) touched.push_back(b.job);
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  if (options_.auto_confirm_binds) {
    for (const Bind& b : d.binds) state_->SetState(state_->job(b.job), b.task, TaskState::kRunning);
  }
  for (JobId id : touched) {
    Job& job = state_->job(id);
    if (!job.GangReady()) continue;
    const bool starting = job.phase() != JobPhase::kRunning;
    if (starting) {
      state_->SetPhase(job, JobPhase::kRunning);
      job.set_started(now);
    }
    job.set_last_resize(now);
    job.set_pending_reason("");
    job.set_generation(job.generation() + 1);
    d.membership.push_back(Membership(job, starting ? MembershipChange::Kind::kStart : MembershipChange::Kind::kGrow,
                                      starting ? "started" : GrowReason(job, d.binds)));
  }
}

bool Engine::Quiet() const {
  // With the fast paths and no driver predicate (whose answers may change
  // without an event), no event since a quiet cycle and no release due:
  // this cycle would start from the state the last one ended in and decide,
  // and explain, the same: for a policy that reads no clock, always; for
  // one that does, until one of its time-based conditions turns (the last
  // quiet cycle's NextWakeup, by which a simulator skips its wake-ups).
  if (!options_.fast_paths || cycle_ == 0 || touched_ || !last_cycle_quiet_ || driver_predicate_) return false;
  if (!carry_.evictions.empty() || !carry_.membership.empty()) return false;
  const Timestamp now = clock_.Now();
  const Timestamp deadline = NextDeadline();
  if (deadline >= 0 && deadline <= now) return false;
  return !ReadsClock() || now < quiet_until_;
}

Decisions Engine::RunCycle() {
  ++cycle_;
  if (Quiet()) {
    // Nothing to run (docs/ARCHITECTURE.md §7): no decision, no reason
    // changes; every waiting job keeps its pending reason.
    Decisions d;
    d.cycle = cycle_;
    last_cycle_changed_ = false;
    work_ = CycleWork();
    CheckAfterCycle();
    return d;
  }
  touched_ = false;
  Decisions d;
  bool changed = false;
  bool quiet = false;
  {
    changed = ExpireReleases();
    Session session(*state_, clock_, cycle_, tiers_, &session_buffers_);
    session.set_nodes_to_score(nodes_to_score_);
    if (driver_predicate_) session.AddPredicateFn("driver", driver_predicate_);
    session.set_fast_paths(options_.fast_paths);
    session.set_admission_groups(options_.admission_groups);
    const bool memo = options_.fast_paths && !driver_predicate_ && !session.verdict_reads_clock();
    session.set_verdict_context(memo ? &verdict_context_ : nullptr);
    session.set_job_order_cache(&job_order_cache_);
    PromoteHeld(session);
    for (auto& a : actions_) a->Execute(session);
    deserved_.resize(session.queues().size());
    for (size_t q = 0; q < deserved_.size(); ++q) deserved_[q] = session.queues()[q].deserved;
    // Quiet: it changed nothing but admissions, and, if it admitted any,
    // no job is left to admit (one refused after them could be refused
    // for another reason next time: the admitted count against its queue).
    quiet = !changed && session.placement_commits() == 0;
    if (quiet && session.commits() > 0) {
      for (JobId id : session.jobs()) {
        if (state_->job(id).phase() == JobPhase::kPending) {
          quiet = false;
          break;
        }
      }
    }
    work_ = {.ran = true, .tried = session.tried(), .recalled = session.recalled()};
    d = session.Close();
    changed |= session.commits() > 0;
  }
  AfterClose(d);
  // Hand out what happened between cycles first.
  d.evictions.insert(d.evictions.begin(), std::make_move_iterator(carry_.evictions.begin()),
                     std::make_move_iterator(carry_.evictions.end()));
  d.membership.insert(d.membership.begin(), std::make_move_iterator(carry_.membership.begin()),
                      std::make_move_iterator(carry_.membership.end()));
  carry_ = Decisions();
  last_cycle_changed_ = changed || !d.empty();
  last_cycle_quiet_ = quiet && d.empty();
  // Asked after the cycle, as a simulator asks: a condition that turns at
  // this very time was seen by the cycle; the next one turns later.
  quiet_until_ = last_cycle_quiet_ && !last_cycle_changed_ && options_.fast_paths && ReadsClock() ? NextWakeup() : 0;
  CheckAfterCycle();
  return d;
}

void Engine::CheckAfterCycle() const {
  if (options_.check_invariants) {
    absl::Status s = state_->CheckInvariants();
    if (!s.ok()) {
      // A broken invariant is a bug, never a log line and carry on.
      fprintf(stderr, "ringmaster: invariant broken after cycle %lld: %s\n",
              static_cast<long long>(cycle_), std::string(s.message()).c_str());
      std::abort();
    }
  }
}

}  // namespace ringmaster::scheduler
