// The extender's handlers on top of the engine (see extender.h).
#include "server/extender.h"

#include <algorithm>
#include <chrono>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace ringmaster::server {
namespace {

using scheduler::JobId;
using scheduler::TaskState;

// Pods with the same request run as one role.
using Shape = std::tuple<topology::Quantity, topology::Quantity, int>;
Shape ShapeOf(const PodInfo& p) { return {p.request.cpu_milli(), p.request.memory(), p.gpus}; }

// Every candidate fails with the same reason.
ExtenderFilterResult FailAll(const ExtenderArgs& args, const std::string& reason, bool unresolvable) {
  ExtenderFilterResult r;
  auto& into = unresolvable ? r.failed_and_unresolvable_nodes : r.failed_nodes;
  for (const std::string& n : args.CandidateNames()) into[n] = reason;
  if (args.node_names) r.node_names.emplace();
  else r.nodes.emplace();
  return r;
}

}  // namespace

Extender::Extender(scheduler::Engine& engine, const scheduler::Clock& clock, ExtenderOptions options,
                   Binder* binder, absl::Mutex* engine_mu)
    : engine_(engine), clock_(clock), options_(std::move(options)), binder_(binder),
      mu_(engine_mu ? *engine_mu : own_mu_) {}

void Extender::LearnNodes(const ExtenderArgs& args, ExtenderFilterResult& result) {
  if (!args.nodes || !options_.learn_nodes) return;
  const topology::Cluster& cluster = engine_.state().cluster();
  for (const nlohmann::json& obj : *args.nodes) {
    const nlohmann::json* meta = FindKey(obj, "metadata");
    const nlohmann::json* name = meta ? FindKey(*meta, "name") : nullptr;
    if (name && name->is_string() && cluster.FindNode(name->get<std::string>()).valid()) continue;
    auto spec = ReadNode(obj, options_.topology);
    absl::Status added = spec.status();
    if (spec.ok()) {
      const std::string node_name = spec->name;
      added = engine_.AddNode(*std::move(spec)).status();
      if (added.ok()) common::Log(common::LogLevel::info, "node learned", {{"node", node_name}});
      if (!added.ok()) result.failed_and_unresolvable_nodes[node_name] = std::string(added.message());
    } else if (name && name->is_string()) {
      result.failed_and_unresolvable_nodes[name->get<std::string>()] = std::string(added.message());
    }
  }
}

Extender::Gang& Extender::Admit(const PodInfo& pod) {
  const std::string key = pod.Key();
  auto known = gang_of_pod_.find(key);
  if (known != gang_of_pod_.end()) {
    Gang& g = gangs_.at(known->second);
    for (Member& m : g.members) {
      if (m.key == key && m.uid != pod.uid) {
        // The same name, a new pod (recreated): it takes the old one's place.
        m.uid = pod.uid;
        m.pod = pod;
      }
    }
    return g;
  }
  const std::string name = pod.group.empty() ? key : absl::StrCat(pod.ns, "/", pod.group);
  auto [it, created] = gangs_.try_emplace(name);
  Gang& g = it->second;
  if (created) {
    g.name = name;
    if (pod.group.empty()) {
      g.min_member = 1;
    } else if (pod.min_member > 0) {
      g.min_member = pod.min_member;
    } else if (auto m = pod_group_min_.find(name); m != pod_group_min_.end()) {
      g.min_member = m->second;
    } else {
      g.unresolvable = absl::StrCat("gang ", name, ": min member unknown: annotate its pods with ",
                                    std::string(kVolcanoMinMember), " or give the PodGroup's minMember");
    }
  }
  g.members.push_back(Member{key, pod.uid, pod});
  gang_of_pod_[key] = name;
  return g;
}

absl::Status Extender::Submit(Gang& gang) {
  scheduler::JobSpec spec;
  int& attempt = attempts_[gang.name];
  spec.name = attempt == 0 ? gang.name : absl::StrCat(gang.name, "#", attempt);
  const PodInfo& first = gang.members.front().pod;
  if (!first.queue.empty()) spec.queue = first.queue;
  spec.priority = first.priority;
  spec.node_selector = first.node_selector;
  spec.tolerations = first.tolerations;
  spec.min_member = gang.min_member;
  // One role per request shape, in order of first arrival; tasks are numbered
  // role by role (scheduler::Job), members within a role by arrival.
  std::vector<Shape> shapes;
  for (const Member& m : gang.members) {
    if (std::find(shapes.begin(), shapes.end(), ShapeOf(m.pod)) == shapes.end()) shapes.push_back(ShapeOf(m.pod));
  }
  for (size_t r = 0; r < shapes.size(); ++r) {
    scheduler::RoleSpec role;
    role.name = shapes.size() == 1 ? "worker" : absl::StrCat("role", r);
    role.replicas = 0;
    role.request.set_cpu_milli(std::get<0>(shapes[r]));
    role.request.set_memory(std::get<1>(shapes[r]));
    role.gpu = {std::get<2>(shapes[r]), topology::kMilliPerGpu};
    spec.roles.push_back(std::move(role));
  }
  std::vector<std::pair<size_t, Member*>> by_role;
  for (Member& m : gang.members) {
    const size_t r = std::find(shapes.begin(), shapes.end(), ShapeOf(m.pod)) - shapes.begin();
    ++spec.roles[r].replicas;
    by_role.push_back({r, &m});
  }
  std::stable_sort(by_role.begin(), by_role.end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  auto id = engine_.SubmitJob(std::move(spec));
  if (!id.ok()) return id.status();
  for (uint32_t t = 0; t < by_role.size(); ++t) by_role[t].second->task = t;
  gang.job = *id;
  ++attempt;
  gang_of_job_[*id] = gang.name;
  common::Log(common::LogLevel::info, "gang submitted",
              {{"gang", gang.name}, {"job", engine_.state().job(*id).name()}, {"pods", gang.members.size()},
               {"min_member", gang.min_member}});
  return absl::OkStatus();
}

void Extender::RunCycle() {
  const auto start = std::chrono::steady_clock::now();
  const scheduler::Decisions d = engine_.RunCycle();
  const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
  if (observe_) observe_(took.count(), d, engine_.state());
  const scheduler::Timestamp now = clock_.Now();
  for (const scheduler::Bind& b : d.binds) {
    auto g = gang_of_job_.find(b.job);
    if (g == gang_of_job_.end()) continue;
    common::Log(common::LogLevel::debug, "reserved", {{"gang", g->second}, {"task", b.task_name}, {"node", b.node_name}});
    Gang& gang = gangs_.at(g->second);
    for (Member& m : gang.members) {
      if (m.task == b.task) m.node = b.node_name;
    }
    if (gang.deadline < 0) {
      gang.deadline = now + options_.reservation_timeout_ms;
      expiries_.insert({gang.deadline, gang.name});
    }
  }
  for (const scheduler::Eviction& e : d.evictions) {
    auto g = gang_of_job_.find(e.job);
    if (g == gang_of_job_.end()) continue;
    common::Log(common::LogLevel::info, "evicted",
                {{"gang", g->second}, {"task", e.task_name}, {"node", e.node_name},
                 {"kind", scheduler::EvictionKindName(e.kind)}, {"reason", e.reason}, {"preemptor", e.preemptor}});
    for (Member& m : gangs_.at(g->second).members) {
      if (m.task == e.task) {
        m.node.clear();
        m.bound = false;
      }
    }
  }
  if (options_.on_cycle) options_.on_cycle(d);
}

void Extender::Forget(const std::string& gang_name) {
  auto it = gangs_.find(gang_name);
  if (it == gangs_.end()) return;
  Gang& g = it->second;
  if (g.deadline >= 0) expiries_.erase({g.deadline, g.name});
  for (const Member& m : g.members) gang_of_pod_.erase(m.key);
  if (g.job.valid()) gang_of_job_.erase(g.job);
  gangs_.erase(it);
}

void Extender::ExpireReservations() {
  const scheduler::Timestamp now = clock_.Now();
  while (!expiries_.empty() && expiries_.begin()->first <= now) {
    const std::string name = expiries_.begin()->second;
    expiries_.erase(expiries_.begin());
    Gang& g = gangs_.at(name);
    g.deadline = -1;
    common::Log(common::LogLevel::warn, "reservation expired", {{"gang", name}, {"job", g.job.value()}});
    (void)engine_.CancelJob(g.job);  // fails only if the job already ended
    Forget(name);
  }
}

std::string Extender::WaitReason(const Gang& g) const {
  if (!g.job.valid()) {
    return absl::StrCat("gang ", g.name, ": ", g.members.size(), " of ", g.min_member,
                        " member pods seen; waiting for the rest to reach the scheduler");
  }
  const scheduler::Job& job = engine_.state().job(g.job);
  const std::string why = job.pending_reason().empty() ? "waiting for the next scheduling cycle" : job.pending_reason();
  return absl::StrCat("gang ", g.name, " (", job.tasks().size(), " pods, min ", job.min_member(),
                      ") is not placed: ", why);
}

ExtenderFilterResult Extender::Filter(const ExtenderArgs& args) {
  auto pod = ReadPod(args.pod);
  if (!pod.ok()) {
    ExtenderFilterResult r;
    r.error = std::string(pod.status().message());
    return r;
  }
  ExtenderFilterResult learned;
  FilterVerdict v;
  {
    absl::MutexLock lock(&mu_);
    LearnNodes(args, learned);
    v = FilterPod(*pod);
  }
  // The answer is built outside the lock.
  ExtenderFilterResult r;
  const std::vector<std::string> names = args.CandidateNames();
  const auto at = v.node.empty() ? names.end() : std::find(names.begin(), names.end(), v.node);
  if (!v.node.empty() && at == names.end()) {
    v.reason = absl::StrCat(v.reason, ", which is not among the candidates (rejected by another filter?)");
    v.node.clear();
  }
  if (v.node.empty()) {
    r = FailAll(args, v.reason, v.unresolvable);
  } else if (args.node_names) {
    // Exactly the reserved node passes; the others need no reason (the pod is placed).
    r.node_names = std::vector<std::string>{v.node};
  } else {
    r.nodes = std::vector<nlohmann::json>{(*args.nodes)[at - names.begin()]};
  }
  // Node objects that could not be read fail for what they are.
  for (auto& [node, why] : learned.failed_and_unresolvable_nodes) {
    r.failed_nodes.erase(node);
    r.failed_and_unresolvable_nodes[node] = why;
  }
  return r;
}

Extender::FilterVerdict Extender::FilterPod(const PodInfo& pod) {
  Gang& gang = Admit(pod);
  if (!gang.unresolvable.empty()) return {"", gang.unresolvable, true};
  Member* me = FindMember(pod.Key());
  if (!gang.job.valid() && static_cast<int>(gang.members.size()) >= gang.min_member) {
    if (absl::Status s = Submit(gang); !s.ok()) return {"", absl::StrCat("gang ", gang.name, ": ", s.message()), true};
    RunCycle();
  }
  if (gang.job.valid() && me->task == kNoTask) {
    return {"",
            absl::StrCat("gang ", gang.name, " was submitted with ", gang.members.size() - 1,
                         " pods before this one arrived; it is not part of the gang"),
            true};
  }
  if (me->node.empty()) return {"", WaitReason(gang), false};
  return {me->node, absl::StrCat("gang ", gang.name, ": pod reserved on node ", me->node), false};
}

HostPriorityList Extender::Prioritize(const ExtenderArgs& args) {
  std::string reserved;
  if (auto pod = ReadPod(args.pod); pod.ok()) {
    absl::MutexLock lock(&mu_);
    if (const Member* m = FindMember(pod->Key())) reserved = m->node;
  }
  // Hosts left out score 0 (kube-scheduler adds only the scores listed).
  HostPriorityList out;
  if (reserved.empty()) return out;
  const std::vector<std::string> names = args.CandidateNames();
  if (std::find(names.begin(), names.end(), reserved) != names.end()) out.push_back({reserved, kMaxExtenderPriority});
  return out;
}

ExtenderPreemptionResult Extender::Preempt(const ExtenderPreemptionArgs& args) {
  ExtenderPreemptionResult out;
  auto pod = ReadPod(args.pod);
  if (!pod.ok()) return out;
  std::string reserved;
  {
    absl::MutexLock lock(&mu_);
    if (const Member* m = FindMember(pod->Key())) reserved = m->node;
  }
  if (reserved.empty()) return out;
  if (args.node_name_to_meta_victims) {
    if (auto it = args.node_name_to_meta_victims->find(reserved); it != args.node_name_to_meta_victims->end()) {
      out.node_name_to_meta_victims[reserved] = it->second;
    }
  } else if (args.node_name_to_victims) {
    if (auto it = args.node_name_to_victims->find(reserved); it != args.node_name_to_victims->end()) {
      MetaVictims meta{{}, it->second.num_pdb_violations};
      for (const nlohmann::json& p : it->second.pods) {
        const nlohmann::json* md = FindKey(p, "metadata");
        auto uid = md ? StringAt(*md, "uid", "uid") : absl::StatusOr<std::string>(std::string());
        if (uid.ok()) meta.pod_uids.push_back(*uid);
      }
      out.node_name_to_meta_victims[reserved] = std::move(meta);
    }
  }
  return out;
}

ExtenderBindingResult Extender::Bind(const ExtenderBindingArgs& args) {
  const std::string key = absl::StrCat(args.pod_namespace.empty() ? "default" : args.pod_namespace, "/", args.pod_name);
  absl::MutexLock lock(&mu_);
  Member* m = FindMember(key);
  if (m == nullptr || m->node.empty()) {
    return {absl::StrCat("pod ", key, " has no node reserved by ringmaster (did its filter pass through this extender?)")};
  }
  if (m->node != args.node) return {absl::StrCat("pod ", key, " is reserved on node ", m->node, ", not ", args.node)};
  if (m->bound) return {};  // a repeated bind: already done
  Gang& gang = gangs_.at(gang_of_pod_.at(key));
  const absl::Status sent = binder_ ? binder_->Bind(args) : absl::OkStatus();
  const TaskState state = engine_.state().job(gang.job).task(m->task).state;
  if (!sent.ok()) {
    common::Log(common::LogLevel::err, "bind failed",
                {{"pod", key}, {"node", args.node}, {"gang", gang.name}, {"error", sent.message()}});
    if (state == TaskState::kBinding) (void)engine_.ConfirmBind(gang.job, m->task, false);
    for (Member& o : gang.members) o.node.clear();  // the engine released the gang; it places it again
    if (gang.deadline >= 0) expiries_.erase({gang.deadline, gang.name});
    gang.deadline = -1;
    return {absl::StrCat("binding pod ", key, " to ", args.node, " failed: ", sent.message())};
  }
  if (state == TaskState::kBinding) (void)engine_.ConfirmBind(gang.job, m->task, true);
  (void)engine_.TaskStarted(gang.job, m->task);
  m->bound = true;
  bindings_.push_back({key, args.node});
  common::Log(common::LogLevel::info, "pod bound", {{"pod", key}, {"node", args.node}, {"gang", gang.name}});
  if (std::all_of(gang.members.begin(), gang.members.end(), [](const Member& o) { return o.bound || o.task == kNoTask; })) {
    if (gang.deadline >= 0) expiries_.erase({gang.deadline, gang.name});
    gang.deadline = -1;
  }
  return {};
}

void Extender::Tick() {
  absl::MutexLock lock(&mu_);
  ExpireReservations();
  RunCycle();
}

void Extender::SetCycleObserver(CycleObserver observe) {
  absl::MutexLock lock(&mu_);
  observe_ = std::move(observe);
}

void Extender::SetPodGroupMinMember(const std::string& ns, const std::string& group, int min_member) {
  absl::MutexLock lock(&mu_);
  const std::string name = absl::StrCat(ns, "/", group);
  pod_group_min_[name] = min_member;
  if (auto it = gangs_.find(name); it != gangs_.end() && !it->second.job.valid()) {
    it->second.min_member = min_member;
    it->second.unresolvable.clear();
  }
}

Extender::Member* Extender::FindMember(const std::string& pod_key) {
  auto g = gang_of_pod_.find(pod_key);
  if (g == gang_of_pod_.end()) return nullptr;
  for (Member& m : gangs_.at(g->second).members) {
    if (m.key == pod_key) return &m;
  }
  return nullptr;
}

const Extender::Member* Extender::FindMember(const std::string& pod_key) const {
  return const_cast<Extender*>(this)->FindMember(pod_key);
}

std::optional<std::string> Extender::ReservedNode(const std::string& pod_key) const {
  absl::MutexLock lock(&mu_);
  const Member* m = FindMember(pod_key);
  if (m == nullptr || m->node.empty()) return std::nullopt;
  return m->node;
}

std::vector<std::pair<std::string, std::string>> Extender::bindings() const {
  absl::MutexLock lock(&mu_);
  return bindings_;
}

size_t Extender::gang_count() const {
  absl::MutexLock lock(&mu_);
  return gangs_.size();
}

}  // namespace ringmaster::server
