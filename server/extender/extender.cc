// The extender's handlers on top of the engine (see extender.h).
#include "server/extender/extender.h"

#include <algorithm>
#include <cstdint>
#include <map>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/logging.h"
#include "common/status_macros.h"

namespace ringmaster::server {
namespace {

using scheduler::JobId;
using scheduler::TaskState;

// Pods with the same request run as one role.
using Shape = std::tuple<topology::Quantity, topology::Quantity, int>;
Shape ShapeOf(const PodInfo& p) { return {p.request.cpu_milli(), p.request.memory(), p.gpus}; }

// Every candidate fails with the same reason.
ExtenderFilterResult FailAll(const ExtenderArgs& args, const std::vector<std::string_view>& names,
                             const std::string& reason, bool unresolvable) {
  ExtenderFilterResult r;
  auto& into = unresolvable ? r.failed_and_unresolvable_nodes : r.failed_nodes;
  for (std::string_view n : names) into[std::string(n)] = reason;
  if (args.node_names) r.node_names.emplace();
  else r.nodes.emplace();
  return r;
}

// The candidates' names, in the request's order (views into `args`).
std::vector<std::string_view> CandidateViews(const ExtenderArgs& args) {
  std::vector<std::string_view> out;
  if (args.node_names) {
    out.assign(args.node_names->begin(), args.node_names->end());
  } else if (args.nodes) {
    out.reserve(args.nodes->size());
    for (const NodeObject& n : *args.nodes) out.push_back(n.name());
  }
  return out;
}

// A Node object's id in `cluster` (invalid when the cluster has no node of
// that name). The id is kept with the node's text, tagged with the
// cluster's name epoch: a node read before (the fast parser's memo hands the
// same text to every request that carries the node unchanged) costs no name
// lookup while the cluster's names are unchanged.
constexpr int kHintIdBits = 24;
constexpr uint64_t kHintIdMask = (uint64_t{1} << kHintIdBits) - 1;
topology::NodeId Resolve(const topology::Cluster& cluster, const NodeObject& obj) {
  const uint64_t epoch = cluster.name_epoch();
  const uint64_t hint = obj.hint();
  if (hint != 0 && (hint >> kHintIdBits) == epoch) return topology::NodeId(static_cast<uint32_t>((hint & kHintIdMask) - 1));
  const topology::NodeId id = cluster.FindNode(obj.name());
  if (id.valid() && id.value() + 1 < kHintIdMask && epoch < (uint64_t{1} << (64 - kHintIdBits))) {
    obj.set_hint((epoch << kHintIdBits) | (id.value() + 1));
  }
  return id;
}

// The eviction of `m`'s pod from `node` (the UID a precondition: a pod
// recreated under its name is left alone).
PodEviction EvictionOf(const GangMember& m, std::string node, std::string reason) {
  PodEviction ev;
  const size_t slash = m.key.find('/');
  ev.pod_namespace = m.key.substr(0, slash);
  ev.pod_name = m.key.substr(slash + 1);
  ev.pod_uid = m.uid;
  ev.node = std::move(node);
  ev.reason = std::move(reason);
  return ev;
}

}  // namespace

Extender::Extender(scheduler::Engine& engine, const scheduler::Clock& clock, ExtenderOptions options,
                   Binder* binder, CycleLoop* loop)
    : engine_(engine), clock_(clock), options_(std::move(options)), binder_(binder),
      own_loop_(loop ? nullptr : std::make_unique<CycleLoop>(engine, own_mu_)),
      loop_(loop ? *loop : *own_loop_), mu_(loop_.mutex()), evictions_(binder_, clock_), store_(options_.store),
      lookup_(binder_, clock_, options_.pod_group_retry_ms, mu_,
              [this](const std::string& name, const absl::StatusOr<int>& min_member) {
                mu_.AssertHeld();  // the lookup answers under the engine lock
                PodGroupAnswered(name, min_member);
              }),
      foreign_(engine_, mu_, binder_, options_.foreign_pods_refresh_ms, [this](const BoundPod& p) {
        mu_.AssertHeld();  // ForeignPods asks under the engine lock
        // Ours: admitted through filter (and bound by us, or reserved and
        // bound since); the engine counts it already.
        return p.uid.empty() ? gang_of_pod_.contains(p.key) : pod_of_uid_.contains(p.uid);
      }) {
  loop_.AddSink(this);
  foreign_.Start();
  // The engine runs its cycles under mu_ (RunCycle), so the predicate reads
  // the gangs under it too.
  engine_.SetDriverPredicate([this](const scheduler::TaskRef& task, scheduler::NodeId node)
                                 ABSL_NO_THREAD_SAFETY_ANALYSIS { return Offered(task, node); });
}

Extender::~Extender() {
  foreign_.Stop();
  loop_.RemoveSink(this);
  engine_.SetDriverPredicate(nullptr);
  lookup_.Stop();
}

std::string Extender::MinMemberUnknown(const std::string& gang_name) {
  return absl::StrCat("gang ", gang_name, ": min member unknown: annotate its pods with ",
                      std::string(kVolcanoMinMember), " or give the PodGroup's minMember");
}

void Extender::Refused(std::string_view who, std::string_view what, std::string_view why) {
  common::Log(common::LogLevel::warn, "refused", {{"who", who.empty() ? "-" : who}, {"what", what}, {"why", why}});
}

void Extender::RefreshNodeList(const ExtenderArgs& args) {
  if (!args.nodes || !options_.learn_nodes || binder_ == nullptr) return;
  {
    absl::MutexLock lock(&mu_);
    if (!check_nodes_ || api_nodes_fetching_) return;
    if (api_nodes_at_ >= 0 && clock_.Now() < api_nodes_at_ + options_.node_list_refresh_ms) return;
    const topology::Cluster& cluster = engine_.state().cluster();
    bool unknown = false;
    for (const NodeObject& obj : *args.nodes) {
      const std::string& name = obj.name();
      if (!name.empty() && !Resolve(cluster, obj).valid() && !api_nodes_.contains(name)) {
        unknown = true;
        break;
      }
    }
    if (!unknown) return;
    api_nodes_fetching_ = true;
  }
  absl::StatusOr<std::map<std::string, std::string>> listed = binder_->ListNodes();
  absl::MutexLock lock(&mu_);
  api_nodes_fetching_ = false;
  api_nodes_at_ = clock_.Now();
  if (absl::IsUnimplemented(listed.status())) {
    check_nodes_ = false;  // nothing to check against
  } else if (!listed.ok()) {
    api_nodes_error_ = std::string(listed.status().message());
    common::Log(common::LogLevel::err, "node list not read", {{"error", api_nodes_error_}});
  } else {
    api_nodes_ = *std::move(listed);
    api_nodes_error_.clear();
  }
}

void Extender::LearnNodes(const ExtenderArgs& args, std::string_view who, ExtenderFilterResult& result) {
  if (!args.nodes || !options_.learn_nodes) return;
  const topology::Cluster& cluster = engine_.state().cluster();
  // Checked against the API server's Nodes when the binder can list them.
  const bool check = binder_ != nullptr && check_nodes_;
  int over_limit = 0;
  int unknown_to_api = 0;
  for (const NodeObject& obj : *args.nodes) {
    const std::string& node_name = obj.name();
    const std::string& node_uid = obj.uid();
    if (!node_name.empty() && Resolve(cluster, obj).valid()) continue;
    if (options_.max_learned_nodes > 0 && learned_nodes_ >= options_.max_learned_nodes) {
      ++over_limit;
      if (!node_name.empty()) {
        result.failed_and_unresolvable_nodes[node_name] =
            absl::StrCat("node not learned: ringmaster learns at most ", options_.max_learned_nodes,
                         " nodes from requests (--max-learned-nodes)");
      }
      continue;
    }
    if (check && !node_name.empty()) {
      auto known = api_nodes_.find(node_name);
      if (known == api_nodes_.end() || (!node_uid.empty() && !known->second.empty() && known->second != node_uid)) {
        ++unknown_to_api;
        result.failed_and_unresolvable_nodes[node_name] =
            api_nodes_at_ < 0 || !api_nodes_error_.empty()
                ? absl::StrCat("node not learned yet: the API server's Nodes are being read to check it",
                               api_nodes_error_.empty() ? "" : absl::StrCat(" (the last read failed: ",
                                                                            api_nodes_error_, ")"))
                : absl::StrCat("node not learned: the API server has no Node ", node_name,
                               node_uid.empty() ? "" : absl::StrCat(" with UID ", node_uid));
        continue;
      }
    }
    auto spec = ReadNode(obj.json(), options_.topology);
    absl::Status added = spec.status();
    if (spec.ok()) {
      added = engine_.AddNode(*std::move(spec)).status();
      if (added.ok()) {
        ++learned_nodes_;
        common::Log(common::LogLevel::info, "node learned", {{"node", node_name}});
        store_.PutNode(node_name, obj.text());
      }
      if (!added.ok()) result.failed_and_unresolvable_nodes[node_name] = std::string(added.message());
    } else if (!node_name.empty()) {
      result.failed_and_unresolvable_nodes[node_name] = std::string(added.message());
    }
  }
  if (over_limit > 0) {
    Refused(who, absl::StrCat("learn ", over_limit, " nodes from a filter"),
            absl::StrCat("at most ", options_.max_learned_nodes, " nodes are learned from requests (--max-learned-nodes)"));
  }
  if (unknown_to_api > 0) {
    Refused(who, absl::StrCat("learn ", unknown_to_api, " nodes from a filter"),
            "the API server has no such Nodes (or they could not be read)");
  }
}

scheduler::Verdict Extender::Offered(const scheduler::TaskRef& task, scheduler::NodeId node) const {
  auto g = gang_of_job_.find(task.job->id());
  if (g == gang_of_job_.end()) return scheduler::Verdict::Fit();
  const Gang& gang = gangs_.at(g->second);
  if (task.index >= gang.member_of_task.size()) return scheduler::Verdict::Fit();
  const GangMember& m = gang.members[gang.member_of_task[task.index]];
  if (m.offered.empty()) return scheduler::Verdict::Fit();
  if (node.value() < m.offered.size() && m.offered[node.value()]) return scheduler::Verdict::Fit();
  return scheduler::Verdict::Unschedulable("kube-scheduler did not offer the node for the pod");
}

void Extender::SetOffered(Gang& gang, const GangMember& me, const ExtenderArgs& args) {
  const topology::Cluster& cluster = engine_.state().cluster();
  std::vector<bool> offered(cluster.num_nodes(), false);
  auto offer = [&](topology::NodeId id) {
    if (id.valid() && id.value() < offered.size()) offered[id.value()] = true;
  };
  if (args.node_names) {
    for (const std::string& n : *args.node_names) offer(cluster.FindNode(n));
  } else if (args.nodes) {
    for (const NodeObject& obj : *args.nodes) offer(Resolve(cluster, obj));
  }
  // kube-scheduler's filters judge pods of one request shape alike, and the
  // latest filter knows best what other pods hold now: it speaks for every
  // member of that shape (an earlier member's list may be stale).
  const Shape shape = ShapeOf(me.pod);
  for (GangMember& m : gang.members) {
    if (ShapeOf(m.pod) == shape) m.offered = offered;
  }
}

void Extender::Replan(Gang& gang, const GangMember& me) {
  common::Log(common::LogLevel::info, "re-planned",
              {{"gang", gang.name}, {"pod", me.key}, {"node", me.node},
               {"why", "kube-scheduler no longer offers the reserved node"}});
  const scheduler::Job& job = engine_.state().job(gang.job);
  if (me.task < job.tasks().size() && job.task(me.task).state == TaskState::kBinding) {
    // The engine releases the whole gang (nothing of it has bound), and the
    // cycle below places it again inside the offered nodes.
    common::LogIfError(engine_.ConfirmBind(gang.job, me.task, false), "re-plan: reservation not released", {{"gang", gang.name}});
  }
  for (GangMember& o : gang.members) {
    o.node.clear();
    o.gpus.clear();
  }
  if (gang.deadline >= 0) expiries_.erase({gang.deadline, gang.name});
  gang.deadline = -1;
  store_.Touch(gang.name);
  RunCycle();
}

Gang& Extender::Admit(const PodInfo& pod, const nlohmann::json& raw) {
  const std::string key = pod.Key();
  auto known = gang_of_pod_.find(key);
  if (known != gang_of_pod_.end()) {
    Gang& g = gangs_.at(known->second);
    for (GangMember& m : g.members) {
      if (m.key == key && m.uid != pod.uid) {
        // The same name, a new pod (recreated): it takes the old one's place.
        pod_of_uid_.erase(m.uid);
        if (!pod.uid.empty()) pod_of_uid_[pod.uid] = key;
        m.uid = pod.uid;
        m.pod = pod;
        m.raw = raw;
        store_.PutPod(m);
        store_.Touch(g.name);
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
    } else if (std::optional<int> min = lookup_.MinMember(name)) {
      g.min_member = *min;
    } else if (!lookup_.Looking(name)) {
      g.unresolvable = MinMemberUnknown(name);
    }  // else: min member 0 until the lookup thread reads the PodGroup
  }
  g.members.push_back(GangMember{key, pod.uid, pod, raw});
  store_.PutPod(g.members.back());
  gang_of_pod_[key] = name;
  if (!pod.uid.empty()) pod_of_uid_[pod.uid] = key;
  store_.Touch(name);
  return g;
}

scheduler::JobSpec Extender::GangSpec(Gang& gang, const std::string& job_name,
                                      std::vector<std::pair<int, GangMember*>>* tasks) const {
  scheduler::JobSpec spec;
  spec.name = job_name;
  const PodInfo& first = gang.members.front().pod;
  if (!first.queue.empty()) spec.queue = first.queue;
  spec.priority = first.priority;
  spec.node_selector = first.node_selector;
  spec.tolerations = first.tolerations;
  // The PodGroup's minMember (Submit waits until it is known, > 0): a rigid
  // gang of at least that many of the pods.
  spec.size = scheduler::GangSize{.min = gang.min_member};
  // One role per request shape, in order of first arrival; tasks are numbered
  // role by role (scheduler::Job), members within a role by arrival.
  std::vector<Shape> shapes;
  for (const GangMember& m : gang.members) {
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
  tasks->clear();
  for (GangMember& m : gang.members) {
    const int r = static_cast<int>(std::find(shapes.begin(), shapes.end(), ShapeOf(m.pod)) - shapes.begin());
    ++spec.roles[r].replicas;
    tasks->push_back({r, &m});
  }
  std::stable_sort(tasks->begin(), tasks->end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return spec;
}

absl::Status Extender::Submit(Gang& gang) {
  int& attempt = attempts_[gang.name];
  std::vector<std::pair<int, GangMember*>> tasks;
  scheduler::JobSpec spec = GangSpec(gang, attempt == 0 ? gang.name : absl::StrCat(gang.name, "#", attempt), &tasks);
  RM_ASSIGN_OR_RETURN(auto id, engine_.SubmitJob(std::move(spec)));
  gang.member_of_task.assign(tasks.size(), 0);
  for (uint32_t t = 0; t < tasks.size(); ++t) {
    tasks[t].second->task = t;
    gang.member_of_task[t] = static_cast<uint32_t>(tasks[t].second - gang.members.data());
  }
  gang.job = id;
  ++attempt;
  gang_of_job_[id] = gang.name;
  store_.Touch(gang.name);
  common::Log(common::LogLevel::info, "gang submitted",
              {{"gang", gang.name}, {"job", engine_.state().job(id).name()}, {"pods", gang.members.size()},
               {"min_member", gang.min_member}});
  return absl::OkStatus();
}

void Extender::BeforeCycle() { ExpireReservations(); }

void Extender::RankByIndex(Gang& gang, const scheduler::MembershipChange& start) {
  // The rank of each engine task (its place in the ring order).
  std::vector<int64_t> rank_of_task(gang.member_of_task.size(), INT64_MAX);
  for (const scheduler::Member& m : start.members) {
    if (m.task < rank_of_task.size()) rank_of_task[m.task] = m.rank;
  }
  // Within each request shape (pods of one shape may trade tasks), the pods
  // that carry an index take the tasks they hold, in rank order, by index.
  std::map<Shape, std::vector<GangMember*>> by_shape;
  for (GangMember& m : gang.members) {
    if (m.task != kNoTask && m.pod.rank >= 0) by_shape[ShapeOf(m.pod)].push_back(&m);
  }
  bool changed = false;
  for (auto& [shape, members] : by_shape) {
    std::vector<uint32_t> tasks;
    for (const GangMember* m : members) tasks.push_back(m->task);
    std::sort(tasks.begin(), tasks.end(), [&](uint32_t a, uint32_t b) {
      return std::make_pair(rank_of_task[a], a) < std::make_pair(rank_of_task[b], b);
    });
    std::stable_sort(members.begin(), members.end(), [](const GangMember* a, const GangMember* b) {
      return a->pod.rank < b->pod.rank;
    });
    for (size_t i = 0; i < members.size(); ++i) {
      if (members[i]->task == tasks[i]) continue;
      members[i]->task = tasks[i];
      gang.member_of_task[tasks[i]] = static_cast<uint32_t>(members[i] - gang.members.data());
      changed = true;
    }
  }
  if (changed) {
    common::Log(common::LogLevel::debug, "pods ranked by their index", {{"gang", gang.name}});
    store_.Touch(gang.name);
  }
}

void Extender::OnCycle(const scheduler::Decisions& d) {
  // A gang that starts: its indexed pods take the tasks of their rank before
  // the binds become reservations (issue 27: launchers rank by index).
  for (const scheduler::MembershipChange& mc : d.membership) {
    if (mc.kind != scheduler::MembershipChange::Kind::kStart) continue;
    auto g = gang_of_job_.find(mc.job);
    if (g == gang_of_job_.end()) continue;
    Gang& gang = gangs_.at(g->second);
    if (std::none_of(gang.members.begin(), gang.members.end(), [](const GangMember& m) { return m.bound; })) {
      RankByIndex(gang, mc);
    }
  }
  const scheduler::Timestamp now = clock_.Now();
  for (const scheduler::Bind& b : d.binds) {
    auto g = gang_of_job_.find(b.job);
    if (g == gang_of_job_.end()) continue;
    common::Log(common::LogLevel::debug, "reserved", {{"gang", g->second}, {"task", b.task_name}, {"node", b.node_name}});
    Gang& gang = gangs_.at(g->second);
    for (GangMember& m : gang.members) {
      if (m.task == b.task) {
        m.node = b.node_name;
        m.gpus = b.gpus;
      }
    }
    store_.Touch(gang.name);
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
    store_.Touch(g->second);
    Gang& gang = gangs_.at(g->second);
    for (GangMember& m : gang.members) {
      if (m.task != e.task) continue;
      if (gang.cancelled && e.kind == scheduler::Eviction::Kind::kCancel && (m.bound || m.stopping)) {
        // Cancelled: the pod goes, and its node stays recorded (step 8): a
        // restart before the deadline holds its GPUs again.
        evictions_.Queue(EvictionOf(m, e.node_name, e.reason), e.deadline);
        m.bound = false;
        m.stopping = true;
        gang.cancel_deadline = std::max(gang.cancel_deadline, e.deadline);
        continue;
      }
      if (m.bound) {
        // Its pod runs on the node: it must go. One only reserved has no pod
        // there yet; its bind now fails and kube-scheduler tries again.
        evictions_.Queue(EvictionOf(m, e.node_name, e.reason), e.deadline);
      }
      m.node.clear();
      m.gpus.clear();
      m.bound = false;
    }
  }
  Persist();
}

void Extender::Forget(const std::string& gang_name) {
  auto it = gangs_.find(gang_name);
  if (it == gangs_.end()) return;
  Gang& g = it->second;
  if (g.deadline >= 0) expiries_.erase({g.deadline, g.name});
  for (const GangMember& m : g.members) {
    gang_of_pod_.erase(m.key);
    if (auto u = pod_of_uid_.find(m.uid); u != pod_of_uid_.end() && u->second == m.key) pod_of_uid_.erase(u);
    store_.ErasePod(m.key);
  }
  store_.Touch(gang_name);
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
    if (engine_.CancelJob(g.job).ok()) {
      // Its bound pods run: evict them now, within the engine's cancel
      // grace (their GPUs stay counted until its deadline); the cycle's
      // kCancel evictions will not find the forgotten gang.
      const scheduler::Job& job = engine_.state().job(g.job);
      for (const GangMember& m : g.members) {
        if (!m.bound || m.task >= job.tasks().size()) continue;
        const scheduler::Task& t = job.task(m.task);
        evictions_.Queue(EvictionOf(m, m.node, "reservation expired: job cancelled"),
                         t.state == scheduler::TaskState::kReleasing ? t.release_deadline : -1);
      }
    }
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

ExtenderFilterResult Extender::Filter(const ExtenderArgs& args, std::string_view who) {
  auto pod = ReadPod(args.pod);
  if (!pod.ok()) {
    ExtenderFilterResult r;
    r.error = std::string(pod.status().message());
    return r;
  }
  const std::vector<std::string_view> names = CandidateViews(args);
  if (!options_.scheduler_name.empty() && pod->scheduler_name != options_.scheduler_name) {
    // Not ours to place: nothing is learned from the request, nothing kept.
    const std::string why = absl::StrCat("pod ", pod->Key(), " has spec.schedulerName '", pod->scheduler_name,
                                         "', not '", options_.scheduler_name,
                                         "': this extender places only the pods of its profile");
    Refused(who, absl::StrCat("filter pod ", pod->Key()), why);
    return FailAll(args, names, why, /*unresolvable=*/true);
  }
  RefreshNodeList(args);
  ExtenderFilterResult learned;
  FilterVerdict v;
  {
    absl::MutexLock lock(&mu_);
    LookUpPodGroup(*pod);
    LearnNodes(args, who, learned);
    v = FilterPod(*pod, args.pod, args, who);
    Persist();
  }
  evictions_.Send();  // those the cycle a completed gang ran decided, if any
  // The answer is built outside the lock.
  ExtenderFilterResult r;
  const auto at = v.node.empty() ? names.end() : std::find(names.begin(), names.end(), v.node);
  if (!v.node.empty() && at == names.end()) {
    v.reason = absl::StrCat(v.reason, ", which is not among the candidates (rejected by another filter?)");
    v.node.clear();
  }
  if (v.node.empty()) {
    r = FailAll(args, names, v.reason, v.unresolvable);
  } else if (args.node_names) {
    // Exactly the reserved node passes; the others need no reason (the pod is placed).
    r.node_names = std::vector<std::string>{v.node};
  } else {
    r.nodes = std::vector<nlohmann::json>{(*args.nodes)[at - names.begin()].json()};
  }
  // Node objects that could not be read fail for what they are.
  for (auto& [node, why] : learned.failed_and_unresolvable_nodes) {
    r.failed_nodes.erase(node);
    r.failed_and_unresolvable_nodes[node] = why;
  }
  return r;
}

Extender::FilterVerdict Extender::FilterPod(const PodInfo& pod, const nlohmann::json& raw, const ExtenderArgs& args,
                                            std::string_view who) {
  if (!pod.uid.empty()) {
    if (auto u = pod_of_uid_.find(pod.uid); u != pod_of_uid_.end() && u->second != pod.Key()) {
      // One pod counts once: a second name for the same UID is refused.
      const std::string why = absl::StrCat("pod ", pod.Key(), " has UID ", pod.uid, ", the UID of pod ", u->second,
                                           ", which ringmaster already admitted");
      Refused(who, absl::StrCat("filter pod ", pod.Key()), why);
      return {"", why, true};
    }
  }
  Gang& gang = Admit(pod, raw);
  if (gang.cancelled) {
    return {"", absl::StrCat("gang ", gang.name, " was cancelled (ringmaster cancel): its pods are not placed again"),
            true};
  }
  GangMember* me = FindMember(pod.Key());
  SetOffered(gang, *me, args);
  if (!gang.job.valid() && gang.min_member <= 0 && lookup_.Looking(gang.name)) {
    // Not unresolvable: kube-scheduler tries the pod again, and the answer
    // is in by then.
    return {"", absl::StrCat("gang ", gang.name, ": looking up PodGroup ", gang.name,
                             "'s minMember (its pods carry no ", std::string(kVolcanoMinMember), " annotation)"),
            false};
  }
  if (!gang.unresolvable.empty()) return {"", gang.unresolvable, true};
  if (gang.min_member <= 0) return {"", MinMemberUnknown(gang.name), true};
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
  const topology::NodeId reserved_on =
      me->reserved() ? engine_.state().cluster().FindNode(me->node) : topology::NodeId();
  // A node the engine does not know (or no longer) counts as not offered.
  const bool offered = reserved_on.valid() && reserved_on.value() < me->offered.size() && me->offered[reserved_on.value()];
  if (me->reserved() && !me->bound && !offered &&
      std::none_of(gang.members.begin(), gang.members.end(), [](const GangMember& o) { return o.bound; })) {
    Replan(gang, *me);  // step 4: other pods took the reserved node
  }
  if (!me->reserved()) return {"", WaitReason(gang), false};
  return {me->node, absl::StrCat("gang ", gang.name, ": pod reserved on node ", me->node), false};
}

HostPriorityList Extender::Prioritize(const ExtenderArgs& args) {
  std::string reserved;
  if (auto pod = ReadPod(args.pod); pod.ok()) {
    absl::MutexLock lock(&mu_);
    if (const GangMember* m = FindMember(pod->Key()); m != nullptr && m->reserved()) reserved = m->node;
  }
  // Hosts left out score 0 (kube-scheduler adds only the scores listed).
  HostPriorityList out;
  if (reserved.empty()) return out;
  const std::vector<std::string_view> names = CandidateViews(args);
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
    if (const GangMember* m = FindMember(pod->Key()); m != nullptr && m->reserved()) reserved = m->node;
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

ExtenderBindingResult Extender::Bind(const ExtenderBindingArgs& args, std::string_view who) {
  ExtenderBindingResult r;
  {
    absl::MutexLock lock(&mu_);
    r = BindLocked(args, who);
    Persist();
  }
  // A pod bound in Kubernetes must be known bound after a restart, or its
  // reservation would expire and free GPUs it holds.
  if (r.error.empty() && options_.store) {
    if (absl::Status s = options_.store->Sync(); !s.ok()) {
      common::Log(common::LogLevel::err, "journal", {{"pod", args.pod_name}, {"error", s.message()}});
    }
  }
  return r;
}

ExtenderBindingResult Extender::BindLocked(const ExtenderBindingArgs& args, std::string_view who) {
  const std::string key = absl::StrCat(args.pod_namespace.empty() ? "default" : args.pod_namespace, "/", args.pod_name);
  // Honoured only for a pod admitted through Filter, with its UID, to its
  // reserved node (step 6); a refusal is an audit line.
  auto refuse = [&](std::string why) -> ExtenderBindingResult {
    Refused(who, absl::StrCat("bind pod ", key, " (UID '", args.pod_uid, "') to node ", args.node), why);
    return {std::move(why)};
  };
  GangMember* m = FindMember(key);
  if (m == nullptr) {
    return refuse(absl::StrCat("pod ", key, " was not admitted by ringmaster (did its filter pass through this extender?)"));
  }
  if (args.pod_uid.empty() || args.pod_uid != m->uid) {
    return refuse(absl::StrCat("PodUID '", args.pod_uid, "' is not the UID of the pod ", key, " ringmaster admitted"));
  }
  Gang& gang = gangs_.at(gang_of_pod_.at(key));
  if (gang.cancelled) return refuse(absl::StrCat("gang ", gang.name, " was cancelled"));
  if (!m->reserved()) {
    return refuse(absl::StrCat("pod ", key, " has no node reserved by ringmaster (its gang is not placed yet)"));
  }
  if (m->node != args.node) return refuse(absl::StrCat("pod ", key, " is reserved on node ", m->node, ", not ", args.node));
  if (m->bound) return {};  // a repeated bind: already done
  store_.Touch(gang.name);
  const absl::Status sent = binder_ ? binder_->Bind(args) : absl::OkStatus();
  const TaskState state = engine_.state().job(gang.job).task(m->task).state;
  if (!sent.ok()) {
    common::Log(common::LogLevel::err, "bind failed",
                {{"pod", key}, {"node", args.node}, {"gang", gang.name}, {"error", sent.message()}});
    if (state == TaskState::kBinding) {
      common::LogIfError(engine_.ConfirmBind(gang.job, m->task, false), "failed bind not released", {{"pod", key}});
    }
    for (GangMember& o : gang.members) {  // the engine released the gang; it places it again
      o.node.clear();
      o.gpus.clear();
    }
    if (gang.deadline >= 0) expiries_.erase({gang.deadline, gang.name});
    gang.deadline = -1;
    return {absl::StrCat("binding pod ", key, " to ", args.node, " failed: ", sent.message())};
  }
  if (state == TaskState::kBinding) common::LogIfError(engine_.ConfirmBind(gang.job, m->task, true), "bind not confirmed", {{"pod", key}});
  common::LogIfError(engine_.TaskStarted(gang.job, m->task), "task start", {{"pod", key}});
  m->bound = true;
  bindings_.push_back({key, args.node});
  common::Log(common::LogLevel::info, "pod bound", {{"pod", key}, {"node", args.node}, {"gang", gang.name}});
  if (std::all_of(gang.members.begin(), gang.members.end(),
                  [](const GangMember& o) { return o.bound || o.task == kNoTask; })) {
    if (gang.deadline >= 0) expiries_.erase({gang.deadline, gang.name});
    gang.deadline = -1;
  }
  return {};
}

void Extender::JobCancelledLocked(scheduler::JobId job) {
  auto g = gang_of_job_.find(job);
  if (g == gang_of_job_.end()) return;
  Gang& gang = gangs_.at(g->second);
  if (gang.cancelled) return;
  gang.cancelled = true;
  common::Log(common::LogLevel::info, "gang cancelled", {{"gang", gang.name}, {"job", engine_.state().job(job).name()}});
  // Reservations not bound are gone (the engine released those tasks); the
  // bound pods are evicted with the cycle's kCancel evictions (RunCycle).
  for (GangMember& m : gang.members) {
    if (!m.bound && !m.stopping) {
      m.node.clear();
      m.gpus.clear();
    }
  }
  if (gang.deadline >= 0) expiries_.erase({gang.deadline, gang.name});
  gang.deadline = -1;
  store_.Touch(gang.name);
  Persist();
}


void Extender::SetPodGroupMinMember(const std::string& ns, const std::string& group, int min_member) {
  absl::MutexLock lock(&mu_);
  const std::string name = absl::StrCat(ns, "/", group);
  lookup_.Set(name, min_member);
  MinMemberKnownLocked(name, min_member);
  Persist();
}

void Extender::MinMemberKnownLocked(const std::string& name, int min_member) {
  if (auto it = gangs_.find(name); it != gangs_.end() && !it->second.job.valid()) {
    it->second.min_member = min_member;
    it->second.unresolvable.clear();
    store_.Touch(name);
  }
}

void Extender::LookUpPodGroup(const PodInfo& pod) {
  if (pod.group.empty() || pod.min_member > 0) return;
  const std::string name = absl::StrCat(pod.ns, "/", pod.group);
  if (auto g = gangs_.find(name); g != gangs_.end() && (g->second.job.valid() || g->second.min_member > 0)) return;
  lookup_.LookUp(pod.ns, pod.group);
}

void Extender::PodGroupAnswered(const std::string& name, const absl::StatusOr<int>& min_member) {
  if (min_member.ok()) {
    MinMemberKnownLocked(name, *min_member);
  } else if (auto g = gangs_.find(name); g != gangs_.end() && !g->second.job.valid() && g->second.min_member <= 0) {
    g->second.unresolvable =
        absl::IsUnimplemented(min_member.status())
            ? MinMemberUnknown(name)
            : absl::StrCat(MinMemberUnknown(name), " (reading the PodGroup: ", min_member.status().message(), ")");
    store_.Touch(name);
  }
  Persist();
}

bool Extender::PodNamesLocked(scheduler::JobId job, std::string* gang, std::map<uint32_t, std::string>* pods) const {
  auto g = gang_of_job_.find(job);
  if (g == gang_of_job_.end()) return false;
  const Gang& found = gangs_.at(g->second);
  *gang = found.name;
  pods->clear();
  for (const GangMember& m : found.members) {
    if (m.task != kNoTask) (*pods)[m.task] = m.pod.name;
  }
  return true;
}

absl::Status Extender::Restore(const std::vector<StoredRecord>& records) {
  absl::MutexLock lock(&mu_);
  auto node = [this](const std::string& name, const nlohmann::json& obj) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return RestoreNode(name, obj);
  };
  RM_ASSIGN_OR_RETURN(const StoredRecords stored, ReadRecords(records, node));
  for (const auto& [name, record] : stored.gangs) {
    RM_ASSIGN_OR_RETURN(StoredGang gang, ReadGang(name, record, stored.pods));
    RM_RETURN_IF_ERROR(RestoreGang(std::move(gang)));
  }
  return absl::OkStatus();
}

absl::Status Extender::RestoreNode(const std::string& name, const nlohmann::json& obj) {
  if (!options_.learn_nodes || engine_.state().cluster().FindNode(name).valid()) return absl::OkStatus();
  RM_ASSIGN_OR_RETURN(topology::NodeSpec spec, ReadNode(obj, options_.topology));
  RM_RETURN_IF_ERROR(engine_.AddNode(std::move(spec)).status());
  ++learned_nodes_;
  return absl::OkStatus();
}

absl::Status Extender::RestoreGang(StoredGang stored) {
  Gang& g = stored.gang;
  const std::string name = g.name;
  attempts_[name] = stored.attempt;
  if (stored.job) {
    std::vector<std::pair<int, GangMember*>> tasks;
    scheduler::JobSpec spec = GangSpec(g, stored.job->name, &tasks);
    for (uint32_t t = 0; t < tasks.size(); ++t) {
      if (tasks[t].second->task != t) return BadRecord("gang", name, "its members' task numbers do not match");
    }
    g.member_of_task.assign(tasks.size(), 0);
    for (uint32_t t = 0; t < tasks.size(); ++t) {
      g.member_of_task[t] = static_cast<uint32_t>(tasks[t].second - g.members.data());
    }
    // A cancelled gang holds again only the nodes of its pods still being
    // stopped (bound, or evicted and before the deadline).
    const bool stop_over = g.cancel_deadline >= 0 && clock_.Now() >= g.cancel_deadline;
    std::vector<scheduler::Engine::RestoredTask> placed;
    for (const auto& [role, m] : tasks) {
      if (m->node.empty()) continue;
      if (g.cancelled && (stop_over || !(m->bound || m->stopping))) continue;
      placed.push_back({m->task, role, m->node, m->gpus});
    }
    auto id = engine_.RestoreJob(std::move(spec), stored.job->created, placed, stored.job->generation);
    if (!id.ok()) {
      // E.g. its queue left the policy: its pods form the gang anew (and
      // get the reason) on their next filter.
      common::Log(common::LogLevel::warn, "gang not restored", {{"gang", name}, {"error", id.status().message()}});
      for (const GangMember& m : g.members) store_.ErasePod(m.key);
      store_.EraseGang(name);
      return absl::OkStatus();
    }
    g.job = *id;
    gang_of_job_[*id] = name;
    if (g.cancelled) {
      // Cancelled stays cancelled: its pods still there are stopped again
      // (Cancelling, a new grace period), or it is Aborted at once.
      common::LogIfError(engine_.CancelJob(*id), "restore: cancelled gang not cancelled again", {{"gang", name}});
      for (GangMember& m : g.members) m.bound = false;
    }
    // A placement that no longer holds (a node gone, say) is dropped: the
    // engine places the gang again.
    const scheduler::Job& job = engine_.state().job(*id);
    for (GangMember& m : g.members) {
      if (m.task == kNoTask || !scheduler::HoldsNode(job.task(m.task).state)) {
        m.node.clear();
        m.gpus.clear();
        m.bound = false;
        m.stopping = false;
      } else if (g.cancelled) {
        m.stopping = true;
      }
    }
    g.deadline = stored.job->deadline;
    const bool all_bound = std::all_of(g.members.begin(), g.members.end(),
                                       [](const GangMember& m) { return m.bound || m.task == kNoTask; });
    const bool any_node =
        std::any_of(g.members.begin(), g.members.end(), [](const GangMember& m) { return !m.node.empty(); });
    if (all_bound || !any_node || g.cancelled) g.deadline = -1;
  }
  for (const GangMember& m : g.members) {
    gang_of_pod_[m.key] = name;
    if (!m.uid.empty()) pod_of_uid_[m.uid] = m.key;
    if (m.bound) bindings_.push_back({m.key, m.node});
  }
  if (g.deadline >= 0) expiries_.insert({g.deadline, name});
  common::Log(common::LogLevel::info, "gang restored",
              {{"gang", name},
               {"pods", g.members.size()},
               {"bound", std::count_if(g.members.begin(), g.members.end(), [](const GangMember& m) { return m.bound; })}});
  gangs_[name] = std::move(g);
  store_.Touch(name);
  Persist();
  return absl::OkStatus();
}

GangMember* Extender::FindMember(const std::string& pod_key) {
  auto g = gang_of_pod_.find(pod_key);
  if (g == gang_of_pod_.end()) return nullptr;
  for (GangMember& m : gangs_.at(g->second).members) {
    if (m.key == pod_key) return &m;
  }
  return nullptr;
}

const GangMember* Extender::FindMember(const std::string& pod_key) const {
  return const_cast<Extender*>(this)->FindMember(pod_key);
}

std::optional<std::string> Extender::ReservedNode(const std::string& pod_key) const {
  absl::MutexLock lock(&mu_);
  const GangMember* m = FindMember(pod_key);
  if (m == nullptr || !m->reserved()) return std::nullopt;
  return m->node;
}

std::vector<std::pair<std::string, std::string>> Extender::bindings() const {
  absl::MutexLock lock(&mu_);
  return bindings_;
}

std::vector<PodEviction> Extender::evictions() const { return evictions_.done(); }

size_t Extender::gang_count() const {
  absl::MutexLock lock(&mu_);
  return gangs_.size();
}

}  // namespace ringmaster::server
