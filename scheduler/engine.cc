#include "scheduler/engine.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "scheduler/session.h"
#include "topology/rank_order.h"

namespace ringmaster::scheduler {

absl::StatusOr<std::unique_ptr<Engine>> Engine::Create(topology::Cluster cluster,
                                                       const Policy& policy,
                                                       const PluginRegistry& registry,
                                                       const Clock& clock, EngineOptions options) {
  std::unique_ptr<Engine> e(new Engine(clock, options));
  queue::QueueTree tree = queue::QueueTree::Default();
  if (!policy.queues.empty()) {
    auto built = queue::QueueTree::Build(policy.queues);
    if (!built.ok()) return built.status();
    tree = *std::move(built);
  }
  e->state_ = std::make_unique<State>(std::move(cluster), std::move(tree));
  e->nodes_to_score_ = policy.nodes_to_score;
  for (const auto& tier : policy.tiers) {
    std::vector<Plugin*> list;
    for (const PluginConfig& pc : tier) {
      const PluginFactory* f = registry.Find(pc.name);
      if (!f) return absl::InvalidArgumentError(absl::StrCat("unknown plugin '", pc.name, "'"));
      auto p = (*f)(pc.args);
      if (!p.ok()) return p.status();
      list.push_back(p->get());
      e->plugins_.push_back(*std::move(p));
    }
    e->tiers_.push_back(std::move(list));
  }
  for (const std::string& name : policy.actions) {
    auto a = MakeAction(name);
    if (!a.ok()) return a.status();
    e->actions_.push_back(*std::move(a));
  }
  return e;
}

absl::StatusOr<JobId> Engine::SubmitJob(JobSpec spec) {
  if (auto s = spec.Validate(); !s.ok()) return s;
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
  JobId id = state_->AddJob(std::move(spec), QueueId(*q), clock_.Now());
  by_name_[name] = id;
  return id;
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
  auto found = ActiveJob(id);
  if (!found.ok()) return found.status();
  Job& job = **found;
  for (uint32_t i = 0; i < job.tasks().size(); ++i) {
    const Task& t = job.task(i);
    if (HoldsNode(t.state)) {
      RecordEvictionOf(job, i, "job cancelled");
      state_->Release(job, i, TaskState::kFailed);
    }
  }
  state_->FinishJob(id, JobPhase::kAborted);
  return absl::OkStatus();
}

absl::Status Engine::FinishJob(JobId id, bool succeeded) {
  auto found = ActiveJob(id);
  if (!found.ok()) return found.status();
  Job& job = **found;
  for (uint32_t i = 0; i < job.tasks().size(); ++i) {
    const Task& t = job.task(i);
    if (HoldsNode(t.state)) {
      state_->Release(job, i, succeeded ? TaskState::kSucceeded : TaskState::kFailed);
    } else if (t.state == TaskState::kPending) {
      state_->Release(job, i, TaskState::kFailed);
    }
  }
  state_->FinishJob(id, succeeded ? JobPhase::kCompleted : JobPhase::kFailed);
  return absl::OkStatus();
}

absl::Status Engine::ConfirmBind(JobId id, uint32_t task, bool ok) {
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
  // A failed bind breaks the gang: release it whole; it waits again.
  for (uint32_t i = 0; i < job.tasks().size(); ++i) {
    const TaskState s = job.task(i).state;
    if (s == TaskState::kBound || s == TaskState::kRunning) {
      RecordEvictionOf(job, i, absl::StrCat("bind of ", job.task(task).name, " failed"));
    }
    if (HoldsNode(s)) state_->Release(job, i, TaskState::kPending);
  }
  job.set_phase(JobPhase::kInqueue);
  return absl::OkStatus();
}

absl::Status Engine::TaskStarted(JobId id, uint32_t task) {
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

absl::StatusOr<NodeId> Engine::AddNode(topology::NodeSpec spec) {
  return state_->AddNode(std::move(spec));
}

absl::Status Engine::RemoveNode(std::string_view name) { return LoseNode(name, "node removed"); }
absl::Status Engine::FailNode(std::string_view name) { return LoseNode(name, "node failed"); }

void Engine::RecordEvictionOf(const Job& job, uint32_t task, std::string reason) {
  carry_.evictions.push_back(MakeEviction(*state_, job, task, std::move(reason)));
}

absl::Status Engine::LoseNode(std::string_view name, std::string_view why) {
  const NodeId n = state_->cluster().FindNode(name);
  if (!n.valid()) return absl::NotFoundError(absl::StrCat("node '", std::string(name), "' is not in the cluster"));
  std::vector<JobId> hit;
  for (const auto& [jid, i] : state_->TasksOn(n)) {
    Job& job = state_->job(jid);
    if (job.task(i).state == TaskState::kPipelined) continue;
    state_->Release(job, i, TaskState::kPending);  // the task's work is lost; it waits again
    hit.push_back(jid);
  }
  state_->DisableNode(n);
  std::sort(hit.begin(), hit.end());
  hit.erase(std::unique(hit.begin(), hit.end()), hit.end());
  for (JobId jid : hit) {
    Job& job = state_->job(jid);
    if (job.ReadyCount() >= job.min_member()) {
      // Still a whole gang (elastic slack): it runs on, smaller.
      if (job.phase() == JobPhase::kRunning) {
        job.set_generation(job.generation() + 1);
        carry_.membership.push_back(Membership(job, MembershipChange::Kind::kFailure));
      }
      continue;
    }
    // Below its minimum: a gang never runs partly. Release the rest; it
    // waits whole again.
    for (uint32_t i = 0; i < job.tasks().size(); ++i) {
      if (HoldsNode(job.task(i).state)) {
        RecordEvictionOf(job, i, absl::StrCat("gang below its minimum after ", std::string(why), " ", std::string(name)));
        state_->Release(job, i, TaskState::kPending);
      }
    }
    job.set_phase(JobPhase::kInqueue);
    job.set_pending_reason(absl::StrCat("restarting: ", std::string(why), " ", std::string(name), " took the gang below its minimum"));
  }
  return absl::OkStatus();
}

MembershipChange Engine::Membership(const Job& job, MembershipChange::Kind kind) const {
  MembershipChange m;
  m.job = job.id();
  m.job_name = job.name();
  m.generation = job.generation();
  m.kind = kind;
  const topology::Cluster& c = state_->cluster();
  std::vector<const Task*> members;
  for (const Task& t : job.tasks()) {
    if (CountsReady(t.state) && t.state != TaskState::kSucceeded) members.push_back(&t);
  }
  // Ring order from the topology: members of a domain together at every tier,
  // then socket, PCIe switch, NVLink island (topology/rank_order.h).
  std::stable_sort(members.begin(), members.end(),
                   [](const Task* a, const Task* b) { return a->index < b->index; });
  std::vector<topology::RankSlot> slots;
  for (const Task* t : members) slots.push_back({t->node, t->gpus.empty() ? -1 : t->gpus.front()});
  const std::vector<topology::RankSlot> ring = topology::OrderRanks(c, slots);
  std::vector<const Task*> ordered;
  std::vector<bool> used(members.size(), false);
  for (const topology::RankSlot& slot : ring) {
    for (size_t k = 0; k < members.size(); ++k) {
      if (!used[k] && slots[k] == slot) {
        used[k] = true;
        ordered.push_back(members[k]);
        break;
      }
    }
  }
  if (ordered.size() == members.size()) members = std::move(ordered);
  for (size_t r = 0; r < members.size(); ++r) {
    Member mem;
    mem.task = members[r]->index;
    mem.task_name = members[r]->name;
    mem.node_name = c.node(members[r]->node).name;
    mem.gpus = members[r]->gpus;
    mem.rank = static_cast<int>(r);
    m.members.push_back(std::move(mem));
  }
  return m;
}

void Engine::AfterClose(Decisions& d) {
  std::vector<JobId> touched;
  for (const Bind& b : d.binds) touched.push_back(b.job);
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  if (options_.auto_confirm_binds) {
    for (const Bind& b : d.binds) state_->SetState(state_->job(b.job), b.task, TaskState::kRunning);
  }
  for (JobId id : touched) {
    Job& job = state_->job(id);
    if (job.ReadyCount() < job.min_member()) continue;
    const bool starting = job.phase() != JobPhase::kRunning;
    if (starting) {
      job.set_phase(JobPhase::kRunning);
      job.set_started(clock_.Now());
    }
    job.set_pending_reason("");
    job.set_generation(job.generation() + 1);
    d.membership.push_back(
        Membership(job, starting ? MembershipChange::Kind::kStart : MembershipChange::Kind::kGrow));
  }
}

Decisions Engine::RunCycle() {
  ++cycle_;
  Decisions d;
  {
    Session session(*state_, clock_, cycle_, tiers_);
    session.set_nodes_to_score(nodes_to_score_);
    for (auto& a : actions_) a->Execute(session);
    d = session.Close();
  }
  AfterClose(d);
  // Hand out what happened between cycles first.
  d.evictions.insert(d.evictions.begin(), std::make_move_iterator(carry_.evictions.begin()),
                     std::make_move_iterator(carry_.evictions.end()));
  d.membership.insert(d.membership.begin(), std::make_move_iterator(carry_.membership.begin()),
                      std::make_move_iterator(carry_.membership.end()));
  carry_ = Decisions();
  if (options_.check_invariants) {
    absl::Status s = state_->CheckInvariants();
    if (!s.ok()) {
      // A broken invariant is a bug, never a log line and carry on.
      fprintf(stderr, "ringmaster: invariant broken after cycle %lld: %s\n",
              static_cast<long long>(cycle_), std::string(s.message()).c_str());
      std::abort();
    }
  }
  return d;
}

}  // namespace ringmaster::scheduler
