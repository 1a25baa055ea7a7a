#include "server/admin/admin_convert.h"

#include <algorithm>
#include <map>
#include <numbers>
#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::server {

using scheduler::JobSpec;
using topology::Resources;

namespace {

absl::Status Bad(const std::string& job, const std::string& field, const std::string& why) {
  return absl::InvalidArgumentError(absl::StrCat("job '", job, "': ", field, ": ", why));
}

}  // namespace

absl::StatusOr<JobSpec> JobSpecFromProto(const admin::JobSpec& p) {
  JobSpec s;
  s.name = p.name();
  if (s.name.empty()) return absl::InvalidArgumentError("job: name: must not be empty");
  if (s.name.size() > 253) return Bad(s.name.substr(0, 32) + "...", "name", "longer than 253 characters");
  if (!p.queue().empty()) s.queue = p.queue();
  s.priority = p.priority();
  for (int i = 0; i < p.roles_size(); ++i) {
    const admin::Role& r = p.roles(i);
    const std::string field = absl::StrCat("roles[", i, "]");
    scheduler::RoleSpec role;
    if (!r.name().empty()) role.name = r.name();
    role.replicas = r.replicas();
    if (r.replicas() > 100'000) return Bad(s.name, field + ".replicas", "more than 100000");
    role.request.set_cpu_milli(r.cpu_milli()).set_memory(r.memory_bytes());
    for (const auto& [k, v] : r.scalars()) {
      if (k.empty()) return Bad(s.name, field + ".scalars", "empty resource name");
      role.request.set_scalar(k, v);
    }
    if (r.gpu_count() > 64) return Bad(s.name, field + ".gpu_count", "more than 64 GPUs per task");
    role.gpu.count = r.gpu_count();
    role.gpu.milli = r.gpu_milli() == 0 ? topology::kMilliPerGpu : r.gpu_milli();
    s.roles.push_back(std::move(role));
  }
  auto size = scheduler::GangSize::FromMinMember(p.min_member(), p.elastic_min(), p.elastic_max());
  if (!size.ok()) return absl::InvalidArgumentError(absl::StrCat("job '", s.name, "': ", size.status().message()));
  s.size = *size;
  switch (p.topology_mode()) {
    case admin::JobSpec::TOPOLOGY_NONE: s.topology_mode = scheduler::TopologyMode::kNone; break;
    case admin::JobSpec::TOPOLOGY_HARD: s.topology_mode = scheduler::TopologyMode::kHard; break;
    case admin::JobSpec::TOPOLOGY_SOFT: s.topology_mode = scheduler::TopologyMode::kSoft; break;
    default: return Bad(s.name, "topology_mode", absl::StrCat("unknown value ", static_cast<int>(p.topology_mode())));
  }
  s.highest_tier = p.highest_tier();
  s.gpu_models.assign(p.gpu_models().begin(), p.gpu_models().end());
  for (const auto& [k, v] : p.node_selector()) s.node_selector[k] = v;
  for (const admin::Toleration& t : p.tolerations()) {
    s.tolerations.push_back({t.key(), t.exists() ? scheduler::TolerationOp::kExists : scheduler::TolerationOp::kEqual,
                             t.value(), t.effect()});
  }
  s.walltime_ms = p.walltime_ms();
  s.checkpoint_interval_ms = p.checkpoint_interval_ms();
  s.command.assign(p.command().begin(), p.command().end());
  if (!s.command.empty() && s.command.front().empty()) {
    return absl::InvalidArgumentError(absl::StrCat("job '", s.name, "': command[0]: an empty program name"));
  }
  RM_RETURN_IF_ERROR(s.Validate());
  return s;
}

admin::JobSpec JobSpecToProto(const JobSpec& s) {
  admin::JobSpec p;
  p.set_name(s.name);
  p.set_queue(s.queue);
  p.set_priority(s.priority);
  for (const scheduler::RoleSpec& r : s.roles) {
    admin::Role* role = p.add_roles();
    role->set_name(r.name);
    role->set_replicas(r.replicas);
    role->set_cpu_milli(r.request.cpu_milli());
    role->set_memory_bytes(r.request.memory());
    for (const auto& [k, v] : r.request.scalars()) (*role->mutable_scalars())[k] = v;
    role->set_gpu_count(r.gpu.count);
    role->set_gpu_milli(r.gpu.milli);
  }
  // min_member is the gang minimum either way (0: every replica), so a
  // reader that knows no elastic range still reads it right; the range, when
  // there is one, repeats it (GangSize::FromMinMember takes both).
  p.set_min_member(s.size.min);
  if (s.size.max != 0) {  // elastic (or, unvalidated, an empty range that must stay one)
    p.set_elastic_min(s.size.min);
    p.set_elastic_max(s.size.max);
  }
  p.set_topology_mode(s.topology_mode == scheduler::TopologyMode::kHard   ? admin::JobSpec::TOPOLOGY_HARD
                      : s.topology_mode == scheduler::TopologyMode::kSoft ? admin::JobSpec::TOPOLOGY_SOFT
                                                                          : admin::JobSpec::TOPOLOGY_NONE);
  p.set_highest_tier(s.highest_tier);
  for (const std::string& m : s.gpu_models) p.add_gpu_models(m);
  for (const auto& [k, v] : s.node_selector) (*p.mutable_node_selector())[k] = v;
  for (const scheduler::Toleration& t : s.tolerations) {
    admin::Toleration* o = p.add_tolerations();
    o->set_key(t.key);
    o->set_exists(t.op == scheduler::TolerationOp::kExists);
    o->set_value(t.value);
    o->set_effect(t.effect);
  }
  p.set_walltime_ms(s.walltime_ms);
  p.set_checkpoint_interval_ms(s.checkpoint_interval_ms);
  for (const std::string& a : s.command) p.add_command(a);
  return p;
}

admin::Resources ResourcesToProto(const Resources& r) {
  admin::Resources p;
  p.set_cpu_milli(r.cpu_milli());
  p.set_memory_bytes(r.memory());
  p.set_gpu_milli(r.gpu_milli());
  for (const auto& [k, v] : r.scalars()) (*p.mutable_scalars())[k] = v;
  return p;
}

admin::Job JobToProto(const scheduler::Engine& engine, scheduler::JobId id, JobView view) {
  const scheduler::State& st = engine.state();
  const scheduler::Job& job = st.job(id);
  admin::Job p;
  p.set_name(job.name());
  p.set_queue(job.spec().queue);
  p.set_priority(job.priority());
  p.set_phase(std::string(scheduler::PhaseName(job.phase())));
  p.set_min_member(job.min_member());
  p.set_tasks_total(static_cast<int32_t>(job.tasks().size()));
  p.set_tasks_ready(job.ReadyCount());
  p.set_tasks_binding(job.Count(scheduler::TaskState::kBinding));
  p.set_gpu_milli(job.allocated().gpu_milli());
  p.set_created_ms(job.created());
  p.set_started_ms(job.started());
  p.set_pending_reason(job.phase() == scheduler::JobPhase::kRunning ? "" : job.pending_reason());
  p.set_expected_start_ms(view == JobView::kBrief ? -1 : engine.ExpectedStart(id));
  p.set_generation(job.generation());
  if (view != JobView::kFull) return p;
  *p.mutable_spec() = JobSpecToProto(job.spec());
  if (job.spec().speed != nullptr) p.set_speed_model(job.spec().speed->Describe());
  std::vector<int32_t> rank_of(job.tasks().size(), -1);
  for (const scheduler::Member& m : engine.RingOrder(id)) {
    if (m.task < rank_of.size()) rank_of[m.task] = m.rank;
  }
  for (const scheduler::Task& t : job.tasks()) {
    admin::Task* o = p.add_tasks();
    o->set_index(t.index);
    o->set_name(t.name);
    o->set_state(std::string(scheduler::TaskStateName(t.state)));
    o->set_rank(rank_of[t.index]);
    if (scheduler::HoldsNode(t.state)) {
      o->set_node(st.cluster().node(t.node).name);
      for (int16_t g : t.gpus) o->add_gpus(g);
    }
  }
  return p;
}

admin::ListQueuesResponse QueuesToProto(const scheduler::Engine& engine) {
  const scheduler::State& st = engine.state();
  const queue::QueueTree& tree = st.queues();
  std::vector<int32_t> pending(tree.size(), 0), running(tree.size(), 0);
  for (scheduler::JobId id : st.active_jobs()) {
    const scheduler::Job& job = st.job(id);
    if (!job.queue().valid()) continue;
    if (job.phase() == scheduler::JobPhase::kRunning) ++running[job.queue().value()];
    else ++pending[job.queue().value()];
  }
  // A walk of the records the state holds (restored ones too; at most
  // twice serve's --ended-jobs-kept): ListQueues is an admin's call, not a
  // cycle's.
  std::map<std::string, int64_t, std::less<>> ended_runs;
  for (uint64_t i = st.ended_begin(); i < st.ended_end(); ++i) {
    const scheduler::EndedJob& e = st.ended_job(i);
    if (e.Teaches()) ++ended_runs[e.queue];
  }
  std::map<std::string, const scheduler::DecayedUsage*, std::less<>> usage;
  const std::vector<scheduler::DecayedUsage> usages = engine.DecayedUsages();
  for (const scheduler::DecayedUsage& u : usages) usage[u.queue] = &u;
  admin::ListQueuesResponse out;
  for (uint32_t q = 0; q < tree.size(); ++q) {
    const queue::QueueSpec& spec = tree.spec(q);
    admin::Queue* o = out.add_queues();
    o->set_name(spec.name);
    o->set_parent(spec.parent);
    o->set_weight(static_cast<int32_t>(spec.weight));
    *o->mutable_deserved() = ResourcesToProto(q < engine.deserved().size() ? engine.deserved()[q] : st.total());
    *o->mutable_allocated() = ResourcesToProto(st.queue_usage(scheduler::QueueId(q)).allocated);
    if (spec.capability) {
      *o->mutable_capability() = ResourcesToProto(*spec.capability);
    } else {
      o->mutable_capability()->set_cpu_milli(-1);
      o->mutable_capability()->set_memory_bytes(-1);
      o->mutable_capability()->set_gpu_milli(-1);
    }
    o->set_pending_jobs(pending[q]);
    o->set_running_jobs(running[q]);
    if (auto it = ended_runs.find(spec.name); it != ended_runs.end()) o->set_ended_runs(it->second);
    if (const std::optional<int> level = engine.UsageWeightLevel(scheduler::QueueId(q))) {
      o->set_usage_weighted(true);
      o->set_usage_weight_level(*level);
    }
    if (auto it = usage.find(spec.name); it != usage.end() && it->second->half_life_ms > 0) {
      const scheduler::DecayedUsage& u = *it->second;
      o->set_usage_half_life_ms(u.half_life_ms);
      o->set_usage_gpu_seconds(u.gpu_seconds);
      o->set_usage_gpus(u.gpu_seconds * std::numbers::ln2 / (static_cast<double>(u.half_life_ms) / 1e3));
    }
  }
  return out;
}

admin::ListNodesResponse NodesToProto(const scheduler::Engine& engine) {
  const scheduler::State& st = engine.state();
  admin::ListNodesResponse out;
  for (uint32_t n = 0; n < st.num_nodes(); ++n) {
    const topology::NodeId id(n);
    const topology::NodeSpec& spec = st.cluster().node(id);
    const scheduler::NodeState& ns = st.node(id);
    admin::Node* o = out.add_nodes();
    o->set_name(spec.name);
    o->set_schedulable(ns.schedulable);
    Resources alloc = spec.allocatable;
    alloc.set_gpu_milli(static_cast<topology::Quantity>(spec.gpus.size()) * topology::kMilliPerGpu);
    *o->mutable_allocatable() = ResourcesToProto(alloc);
    *o->mutable_used() = ResourcesToProto(ns.used);
    o->set_gpus(static_cast<int32_t>(spec.gpus.size()));
    o->set_gpus_free(static_cast<int32_t>(
        std::count(ns.gpu_used.begin(), ns.gpu_used.end(), int16_t{0})));
    if (!spec.gpus.empty()) o->set_gpu_model(spec.gpus.front().model);
    o->set_tasks(ns.tasks);
  }
  return out;
}

}  // namespace ringmaster::server
