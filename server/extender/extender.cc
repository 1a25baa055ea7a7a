// The extender's handlers on top of the engine (see extender.h).
#include "server/extender/extender.h"

#include <algorithm>
#include <chrono>
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

}  // namespace

Extender::Extender(scheduler::Engine& engine, const scheduler::Clock& clock, ExtenderOptions options,
                   Binder* binder, CycleLoop* loop)
    : engine_(engine), clock_(clock), options_(std::move(options)), binder_(binder),
      own_loop_(loop ? nullptr : std::make_unique<CycleLoop>(engine, own_mu_)),
      loop_(loop ? *loop : *own_loop_), mu_(loop_.mutex()) {
  loop_.AddSink(this);
  if (binder_ != nullptr && options_.foreign_pods_refresh_ms > 0) {
    foreign_thread_ = std::thread([this] { ForeignLoop(); });
  }
  // The engine runs its cycles under mu_ (RunCycle), so the predicate reads
  // the gangs under it too.
  engine_.SetDriverPredicate([this](const scheduler::TaskRef& task, scheduler::NodeId node)
                                 ABSL_NO_THREAD_SAFETY_ANALYSIS { return Offered(task, node); });
}

Extender::~Extender() {
  if (foreign_thread_.joinable()) {
    {
      absl::MutexLock lock(&foreign_mu_);
      foreign_stop_ = true;
    }
    foreign_thread_.join();
  }
  loop_.RemoveSink(this);
  engine_.SetDriverPredicate(nullptr);
  std::thread worker;
  {
    absl::MutexLock lock(&lookup_mu_);
    lookup_stop_ = true;
    worker = std::move(lookup_thread_);
  }
  if (worker.joinable()) worker.join();
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
        if (options_.store) {
          options_.store->Put("node", node_name, std::string(obj.text()));
        }
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
  const Member& m = gang.members[gang.member_of_task[task.index]];
  if (m.offered.empty()) return scheduler::Verdict::Fit();
  if (node.value() < m.offered.size() && m.offered[node.value()]) return scheduler::Verdict::Fit();
  return scheduler::Verdict::Unschedulable("kube-scheduler did not offer the node for the pod");
}

void Extender::SetOffered(Gang& gang, const Member& me, const ExtenderArgs& args) {
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
  for (Member& m : gang.members) {
    if (ShapeOf(m.pod) == shape) m.offered = offered;
  }
}

void Extender::Replan(Gang& gang, const Member& me) {
  common::Log(common::LogLevel::info, "re-planned",
              {{"gang", gang.name}, {"pod", me.key}, {"node", me.node},
               {"why", "kube-scheduler no longer offers the reserved node"}});
  const scheduler::Job& job = engine_.state().job(gang.job);
  if (me.task < job.tasks().size() && job.task(me.task).state == TaskState::kBinding) {
    // The engine releases the whole gang (nothing of it has bound), and the
    // cycle below places it again inside the offered nodes.
    common::LogIfError(engine_.ConfirmBind(gang.job, me.task, false), "re-plan: reservation not released", {{"gang", gang.name}});
  }
  for (Member& o : gang.members) {
    o.node.clear();
    o.gpus.clear();
  }
  if (gang.deadline >= 0) expiries_.erase({gang.deadline, gang.name});
  gang.deadline = -1;
  Touch(gang.name);
  RunCycle();
}

Extender::Gang& Extender::Admit(const PodInfo& pod, const nlohmann::json& raw) {
  const std::string key = pod.Key();
  auto known = gang_of_pod_.find(key);
  if (known != gang_of_pod_.end()) {
    Gang& g = gangs_.at(known->second);
    for (Member& m : g.members) {
      if (m.key == key && m.uid != pod.uid) {
        // The same name, a new pod (recreated): it takes the old one's place.
        pod_of_uid_.erase(m.uid);
        if (!pod.uid.empty()) pod_of_uid_[pod.uid] = key;
        m.uid = pod.uid;
        m.pod = pod;
        m.raw = raw;
        PutPod(m);
        Touch(g.name);
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
    } else if (!pod_group_looking_.contains(name)) {
      g.unresolvable = MinMemberUnknown(name);
    }  // else: min member 0 until the lookup thread reads the PodGroup
  }
  g.members.push_back(Member{key, pod.uid, pod, raw});
  PutPod(g.members.back());
  gang_of_pod_[key] = name;
  if (!pod.uid.empty()) pod_of_uid_[pod.uid] = key;
  Touch(name);
  return g;
}

scheduler::JobSpec Extender::GangSpec(Gang& gang, const std::string& job_name,
                                      std::vector<std::pair<int, Member*>>* tasks) const {
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
  tasks->clear();
  for (Member& m : gang.members) {
    const int r = static_cast<int>(std::find(shapes.begin(), shapes.end(), ShapeOf(m.pod)) - shapes.begin());
    ++spec.roles[r].replicas;
    tasks->push_back({r, &m});
  }
  std::stable_sort(tasks->begin(), tasks->end(), [](const auto& a, const auto& b) { return a.first < b.first; });
  return spec;
}

absl::Status Extender::Submit(Gang& gang) {
  int& attempt = attempts_[gang.name];
  std::vector<std::pair<int, Member*>> tasks;
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
  Touch(gang.name);
  common::Log(common::LogLevel::info, "gang submitted",
              {{"gang", gang.name}, {"job", engine_.state().job(id).name()}, {"pods", gang.members.size()},
               {"min_member", gang.min_member}});
  return absl::OkStatus();
}

void Extender::BeforeCycle() { ExpireReservations(); }

absl::Status Extender::RefreshForeignPods() {
  if (binder_ == nullptr) return absl::UnimplementedError("no binder to list pods with");
  RM_ASSIGN_OR_RETURN(const std::vector<BoundPod> pods, binder_->ListBoundPods());
  absl::MutexLock lock(&mu_);
  std::map<std::string, Foreign> now;
  for (const BoundPod& p : pods) {
    // Ours: admitted through filter (and bound by us, or reserved and bound
    // since); the engine counts it already.
    if (!p.uid.empty() && pod_of_uid_.contains(p.uid)) continue;
    if (p.uid.empty() && gang_of_pod_.contains(p.key)) continue;
    Foreign& f = now[p.node];
    f.request += p.request;
    f.gpus += std::max(p.gpus, 0);
    ++f.pods;
  }
  const topology::Cluster& cluster = engine_.state().cluster();
  // Nodes whose count changed, and those no longer holding anything of others'.
  std::vector<std::string> changed;
  for (const auto& [node, f] : now) {
    auto old = foreign_.find(node);
    if (old == foreign_.end() || !(old->second.request == f.request) || old->second.gpus != f.gpus) {
      changed.push_back(node);
    }
  }
  for (const auto& [node, f] : foreign_) {
    if (!now.contains(node)) changed.push_back(node);
  }
  for (const std::string& node : changed) {
    if (!cluster.FindNode(node).valid()) continue;  // not (yet) learned: counted once it is
    const Foreign f = now.contains(node) ? now.at(node) : Foreign{};
    auto short_by = engine_.SetForeignUsage(node, f.request, f.gpus);
    if (!short_by.ok()) continue;
    if (*short_by > 0) {
      common::Log(common::LogLevel::warn, "GPUs held twice",
                  {{"node", node}, {"gpus", *short_by}, {"foreign_pods", f.pods},
                   {"why", "pods ringmaster did not admit hold GPUs that ringmaster gave to its own tasks"}});
    }
  }
  // Nodes not learned yet keep their count for when they are (the next
  // refresh applies it: they are "changed" until then).
  for (auto it = now.begin(); it != now.end();) {
    if (!cluster.FindNode(it->first).valid()) {
      it = now.erase(it);
    } else {
      ++it;
    }
  }
  foreign_ = std::move(now);
  return absl::OkStatus();
}

std::pair<int64_t, int> Extender::ForeignOn(const std::string& node) const {
  absl::MutexLock lock(&mu_);
  auto it = foreign_.find(node);
  return it == foreign_.end() ? std::pair<int64_t, int>{0, 0} : std::pair<int64_t, int>{it->second.gpus, it->second.pods};
}

void Extender::ForeignLoop() {
  std::string last_error;
  while (true) {
    const absl::Status s = RefreshForeignPods();
    if (s.code() == absl::StatusCode::kUnimplemented) return;
    if (!s.ok() && std::string(s.message()) != last_error) {
      common::Log(common::LogLevel::warn, "pods not listed", {{"error", s.message()},
                  {"effect", "the GPUs of pods ringmaster did not place are counted as last read"}});
    }
    last_error = s.ok() ? "" : std::string(s.message());
    absl::MutexLock lock(&foreign_mu_);
    if (foreign_mu_.AwaitWithTimeout(absl::Condition(&foreign_stop_),
                                     absl::Milliseconds(options_.foreign_pods_refresh_ms))) {
      return;
    }
  }
}

void Extender::RankByIndex(Gang& gang, const scheduler::MembershipChange& start) {
  // The rank of each engine task (its place in the ring order).
  std::vector<int64_t> rank_of_task(gang.member_of_task.size(), INT64_MAX);
  for (const scheduler::Member& m : start.members) {
    if (m.task < rank_of_task.size()) rank_of_task[m.task] = m.rank;
  }
  // Within each request shape (pods of one shape may trade tasks), the pods
  // that carry an index take the tasks they hold, in rank order, by index.
  std::map<Shape, std::vector<Member*>> by_shape;
  for (Member& m : gang.members) {
    if (m.task != kNoTask && m.pod.rank >= 0) by_shape[ShapeOf(m.pod)].push_back(&m);
  }
  bool changed = false;
  for (auto& [shape, members] : by_shape) {
    std::vector<uint32_t> tasks;
    for (const Member* m : members) tasks.push_back(m->task);
    std::sort(tasks.begin(), tasks.end(), [&](uint32_t a, uint32_t b) {
      return std::make_pair(rank_of_task[a], a) < std::make_pair(rank_of_task[b], b);
    });
    std::stable_sort(members.begin(), members.end(), [](const Member* a, const Member* b) {
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
    Touch(gang.name);
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
    if (std::none_of(gang.members.begin(), gang.members.end(), [](const Member& m) { return m.bound; })) {
      RankByIndex(gang, mc);
    }
  }
  const scheduler::Timestamp now = clock_.Now();
  for (const scheduler::Bind& b : d.binds) {
    auto g = gang_of_job_.find(b.job);
    if (g == gang_of_job_.end()) continue;
    common::Log(common::LogLevel::debug, "reserved", {{"gang", g->second}, {"task", b.task_name}, {"node", b.node_name}});
    Gang& gang = gangs_.at(g->second);
    for (Member& m : gang.members) {
      if (m.task == b.task) {
        m.node = b.node_name;
        m.gpus = b.gpus;
      }
    }
    Touch(gang.name);
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
    Touch(g->second);
    Gang& gang = gangs_.at(g->second);
    for (Member& m : gang.members) {
      if (m.task != e.task) continue;
      if (gang.cancelled && e.kind == scheduler::Eviction::Kind::kCancel && (m.bound || m.stopping)) {
        // Cancelled: the pod goes, and its node stays recorded (step 8): a
        // restart before the deadline holds its GPUs again.
        PodEviction ev;
        const size_t slash = m.key.find('/');
        ev.pod_namespace = m.key.substr(0, slash);
        ev.pod_name = m.key.substr(slash + 1);
        ev.pod_uid = m.uid;
        ev.node = e.node_name;
        ev.reason = e.reason;
        to_evict_.push_back({std::move(ev), e.deadline});
        m.bound = false;
        m.stopping = true;
        gang.cancel_deadline = std::max(gang.cancel_deadline, e.deadline);
        continue;
      }
      if (m.bound) {
        // Its pod runs on the node: it must go. One only reserved has no pod
        // there yet; its bind now fails and kube-scheduler tries again.
        PodEviction ev;
        const size_t slash = m.key.find('/');
        ev.pod_namespace = m.key.substr(0, slash);
        ev.pod_name = m.key.substr(slash + 1);
        ev.pod_uid = m.uid;
        ev.node = e.node_name;
        ev.reason = e.reason;
        to_evict_.push_back({std::move(ev), e.deadline});
      }
      m.node.clear();
      m.gpus.clear();
      m.bound = false;
    }
  }
  Persist();
}

void Extender::CarryOutEvictions() {
  std::vector<std::pair<PodEviction, scheduler::Timestamp>> batch;
  {
    absl::MutexLock lock(&mu_);
    batch.swap(to_evict_);
  }
  if (batch.empty()) return;
  std::vector<std::pair<PodEviction, scheduler::Timestamp>> retry;
  std::vector<PodEviction> done;
  for (auto& [ev, deadline] : batch) {
    const std::string pod = absl::StrCat(ev.pod_namespace, "/", ev.pod_name);
    // The grace period left until the deadline, rounded up (a retry asks
    // for less than the first try).
    if (deadline >= 0) ev.grace_period_seconds = std::max<int64_t>(0, (deadline - clock_.Now() + 999) / 1000);
    const absl::Status s = binder_ ? binder_->Evict(ev) : absl::OkStatus();
    if (s.ok()) {
      common::Log(common::LogLevel::info, binder_ ? "pod evicted" : "pod eviction recorded",
                  {{"pod", pod}, {"node", ev.node}, {"grace_s", ev.grace_period_seconds}, {"reason", ev.reason}});
      done.push_back(std::move(ev));
      continue;
    }
    // Past its deadline the engine counts the GPUs free anyway: retrying
    // longer would only stop a pod that may have been placed again.
    const bool again = s.code() == absl::StatusCode::kUnavailable && deadline >= 0 && clock_.Now() < deadline;
    common::Log(common::LogLevel::err, again ? "eviction refused, trying again" : "eviction failed",
                {{"pod", pod}, {"node", ev.node}, {"error", s.message()}});
    if (again) retry.push_back({std::move(ev), deadline});
  }
  absl::MutexLock lock(&mu_);
  for (PodEviction& ev : done) evicted_.push_back(std::move(ev));
  for (auto& r : retry) to_evict_.push_back(std::move(r));
}

void Extender::Forget(const std::string& gang_name) {
  auto it = gangs_.find(gang_name);
  if (it == gangs_.end()) return;
  Gang& g = it->second;
  if (g.deadline >= 0) expiries_.erase({g.deadline, g.name});
  for (const Member& m : g.members) {
    gang_of_pod_.erase(m.key);
    if (auto u = pod_of_uid_.find(m.uid); u != pod_of_uid_.end() && u->second == m.key) pod_of_uid_.erase(u);
    if (options_.store) options_.store->Put("pod", m.key, "");
  }
  Touch(gang_name);
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
      for (const Member& m : g.members) {
        if (!m.bound || m.task >= job.tasks().size()) continue;
        const scheduler::Task& t = job.task(m.task);
        PodEviction ev;
        const size_t slash = m.key.find('/');
        ev.pod_namespace = m.key.substr(0, slash);
        ev.pod_name = m.key.substr(slash + 1);
        ev.pod_uid = m.uid;
        ev.node = m.node;
        ev.reason = "reservation expired: job cancelled";
        to_evict_.push_back({std::move(ev), t.state == scheduler::TaskState::kReleasing ? t.release_deadline : -1});
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
  bool evict = false;
  {
    absl::MutexLock lock(&mu_);
    LookUpPodGroup(*pod);
    LearnNodes(args, who, learned);
    v = FilterPod(*pod, args.pod, args, who);
    Persist();
    evict = !to_evict_.empty();
  }
  if (evict) CarryOutEvictions();  // the cycle a completed gang ran decided some
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
  Member* me = FindMember(pod.Key());
  SetOffered(gang, *me, args);
  if (!gang.job.valid() && gang.min_member <= 0 && pod_group_looking_.contains(gang.name)) {
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
      std::none_of(gang.members.begin(), gang.members.end(), [](const Member& o) { return o.bound; })) {
    Replan(gang, *me);  // step 4: other pods took the reserved node
  }
  if (!me->reserved()) return {"", WaitReason(gang), false};
  return {me->node, absl::StrCat("gang ", gang.name, ": pod reserved on node ", me->node), false};
}

HostPriorityList Extender::Prioritize(const ExtenderArgs& args) {
  std::string reserved;
  if (auto pod = ReadPod(args.pod); pod.ok()) {
    absl::MutexLock lock(&mu_);
    if (const Member* m = FindMember(pod->Key()); m != nullptr && m->reserved()) reserved = m->node;
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
    if (const Member* m = FindMember(pod->Key()); m != nullptr && m->reserved()) reserved = m->node;
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
  Member* m = FindMember(key);
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
  Touch(gang.name);
  const absl::Status sent = binder_ ? binder_->Bind(args) : absl::OkStatus();
  const TaskState state = engine_.state().job(gang.job).task(m->task).state;
  if (!sent.ok()) {
    common::Log(common::LogLevel::err, "bind failed",
                {{"pod", key}, {"node", args.node}, {"gang", gang.name}, {"error", sent.message()}});
    if (state == TaskState::kBinding) {
      common::LogIfError(engine_.ConfirmBind(gang.job, m->task, false), "failed bind not released", {{"pod", key}});
    }
    for (Member& o : gang.members) {  // the engine released the gang; it places it again
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
  if (std::all_of(gang.members.begin(), gang.members.end(), [](const Member& o) { return o.bound || o.task == kNoTask; })) {
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
  for (Member& m : gang.members) {
    if (!m.bound && !m.stopping) {
      m.node.clear();
      m.gpus.clear();
    }
  }
  if (gang.deadline >= 0) expiries_.erase({gang.deadline, gang.name});
  gang.deadline = -1;
  Touch(gang.name);
  Persist();
}


void Extender::SetPodGroupMinMember(const std::string& ns, const std::string& group, int min_member) {
  absl::MutexLock lock(&mu_);
  SetPodGroupMinMemberLocked(absl::StrCat(ns, "/", group), min_member);
  Persist();
}

void Extender::SetPodGroupMinMemberLocked(const std::string& name, int min_member) {
  pod_group_min_[name] = min_member;
  pod_group_miss_.erase(name);
  if (auto it = gangs_.find(name); it != gangs_.end() && !it->second.job.valid()) {
    it->second.min_member = min_member;
    it->second.unresolvable.clear();
    Touch(name);
  }
}

void Extender::LookUpPodGroup(const PodInfo& pod) {
  if (binder_ == nullptr || pod.group.empty() || pod.min_member > 0) return;
  const std::string name = absl::StrCat(pod.ns, "/", pod.group);
  if (pod_group_min_.contains(name) || pod_group_looking_.contains(name)) return;
  if (auto g = gangs_.find(name); g != gangs_.end() && (g->second.job.valid() || g->second.min_member > 0)) return;
  if (auto miss = pod_group_miss_.find(name);
      miss != pod_group_miss_.end() && clock_.Now() < miss->second + options_.pod_group_retry_ms) {
    return;
  }
  pod_group_looking_.insert(name);
  absl::MutexLock lock(&lookup_mu_);
  lookup_queue_.emplace_back(pod.ns, pod.group);
  if (!lookup_thread_.joinable()) lookup_thread_ = std::thread([this] { LookupLoop(); });
}

void Extender::LookupLoop() {
  while (true) {
    std::pair<std::string, std::string> next;
    {
      absl::MutexLock lock(&lookup_mu_);
      lookup_mu_.Await(absl::Condition(
          +[](Extender* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->lookup_mu_) {
            return e->lookup_stop_ || !e->lookup_queue_.empty();
          },
          this));
      if (lookup_stop_) return;
      next = std::move(lookup_queue_.front());
      lookup_queue_.pop_front();
      ++lookups_in_flight_;
    }
    const auto& [ns, group] = next;
    const std::string name = absl::StrCat(ns, "/", group);
    const absl::StatusOr<int> min = binder_->PodGroupMinMember(ns, group);
    {
      absl::MutexLock lock(&mu_);
      pod_group_looking_.erase(name);
      if (min.ok()) {
        common::Log(common::LogLevel::info, "pod group read", {{"gang", name}, {"min_member", std::to_string(*min)}});
        SetPodGroupMinMemberLocked(name, *min);
      } else {
        pod_group_miss_[name] = clock_.Now();
        if (!absl::IsUnimplemented(min.status())) {
          common::Log(common::LogLevel::warn, "pod group not read", {{"gang", name}, {"error", min.status().message()}});
        }
        if (auto g = gangs_.find(name); g != gangs_.end() && !g->second.job.valid() && g->second.min_member <= 0) {
          g->second.unresolvable =
              absl::IsUnimplemented(min.status())
                  ? MinMemberUnknown(name)
                  : absl::StrCat(MinMemberUnknown(name), " (reading the PodGroup: ", min.status().message(), ")");
          Touch(name);
        }
      }
      Persist();
    }
    absl::MutexLock lock(&lookup_mu_);
    --lookups_in_flight_;
  }
}

void Extender::WaitForPodGroupLookups() {
  absl::MutexLock lock(&lookup_mu_);
  lookup_mu_.Await(absl::Condition(
      +[](Extender* e) ABSL_EXCLUSIVE_LOCKS_REQUIRED(e->lookup_mu_) {
        return e->lookup_queue_.empty() && e->lookups_in_flight_ == 0;
      },
      this));
}

bool Extender::PodNamesLocked(scheduler::JobId job, std::string* gang, std::map<uint32_t, std::string>* pods) const {
  auto g = gang_of_job_.find(job);
  if (g == gang_of_job_.end()) return false;
  const Gang& found = gangs_.at(g->second);
  *gang = found.name;
  pods->clear();
  for (const Member& m : found.members) {
    if (m.task != kNoTask) (*pods)[m.task] = m.pod.name;
  }
  return true;
}

void Extender::PutPod(const Member& m) {
  if (options_.store) {
    options_.store->Put("pod", m.key, m.raw.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
}

void Extender::Touch(const std::string& gang_name) {
  if (options_.store) dirty_.insert(gang_name);
}

// A gang's record: its own fields and its members' places (the Pod objects
// are records of their own, written once).
void Extender::Persist() {
  if (!options_.store) return;
  for (const std::string& name : dirty_) {
    auto it = gangs_.find(name);
    if (it == gangs_.end()) {
      options_.store->Put("gang", name, "");
      continue;
    }
    const Gang& g = it->second;
    nlohmann::json members = nlohmann::json::array();
    for (const Member& m : g.members) {
      members.push_back({{"pod", m.key},
                         {"task", m.task == kNoTask ? -1 : static_cast<int64_t>(m.task)},
                         {"node", m.node},
                         {"gpus", m.gpus},
                         {"bound", m.bound},
                         {"stopping", m.stopping}});
    }
    nlohmann::json state{{"min_member", g.min_member}, {"unresolvable", g.unresolvable},
                         {"attempt", attempts_.count(name) ? attempts_.at(name) : 0},
                         {"deadline", g.deadline}, {"members", std::move(members)}};
    if (g.cancelled) {
      state["cancelled"] = true;
      state["cancel_deadline"] = g.cancel_deadline;
    }
    if (g.job.valid()) {
      const scheduler::Job& job = engine_.state().job(g.job);
      state["job"] = job.name();
      state["created"] = job.created();
      state["generation"] = job.generation();
    }
    options_.store->Put("gang", name, state.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  }
  dirty_.clear();
}

absl::Status Extender::Restore(const std::vector<StoredRecord>& records) {
  absl::MutexLock lock(&mu_);
  auto bad = [](const StoredRecord& r, absl::string_view why) {
    return absl::DataLossError(absl::StrCat("journal: extender ", r.kind, " '", r.name, "': ", why));
  };
  std::map<std::string, nlohmann::json> pods;
  std::vector<std::pair<std::string, nlohmann::json>> gangs;
  for (const StoredRecord& r : records) {
    nlohmann::json j = nlohmann::json::parse(r.value, nullptr, /*allow_exceptions=*/false);
    if (j.is_discarded()) return bad(r, "not JSON");
    if (r.kind == "node") {
      if (!options_.learn_nodes || engine_.state().cluster().FindNode(r.name).valid()) continue;
      auto spec = ReadNode(j, options_.topology);
      if (!spec.ok()) return bad(r, spec.status().message());
      if (auto added = engine_.AddNode(*std::move(spec)); !added.ok()) return bad(r, added.status().message());
      ++learned_nodes_;
    } else if (r.kind == "pod") {
      pods[r.name] = std::move(j);
    } else if (r.kind == "gang") {
      gangs.push_back({r.name, std::move(j)});
    } else {
      return bad(r, "unknown kind");
    }
  }
  for (const auto& [name, state] : gangs) {
    try {
      if (absl::Status s = RestoreGang(name, state, pods); !s.ok()) {
        return absl::DataLossError(absl::StrCat("journal: extender gang '", name, "': ", s.message()));
      }
    } catch (const nlohmann::json::exception& e) {  // a field of the wrong type
      return absl::DataLossError(absl::StrCat("journal: extender gang '", name, "': ", e.what()));
    }
  }
  return absl::OkStatus();
}

absl::Status Extender::RestoreGang(const std::string& name, const nlohmann::json& state,
                                   const std::map<std::string, nlohmann::json>& pods) {
  Gang g;
  g.name = name;
  g.min_member = state.at("min_member").get<int>();
  g.unresolvable = state.at("unresolvable").get<std::string>();
  for (const nlohmann::json& mj : state.at("members")) {
    const std::string key = mj.at("pod").get<std::string>();
    auto raw = pods.find(key);
    if (raw == pods.end()) return absl::DataLossError(absl::StrCat("pod ", key, " is missing"));
    auto pod = ReadPod(raw->second);
    if (!pod.ok()) return absl::DataLossError(absl::StrCat("pod ", key, ": ", pod.status().message()));
    Member m{key, pod->uid, *pod, raw->second};
    const int64_t task = mj.at("task").get<int64_t>();
    m.task = task < 0 ? kNoTask : static_cast<uint32_t>(task);
    m.node = mj.at("node").get<std::string>();
    m.gpus = mj.at("gpus").get<std::vector<int16_t>>();
    m.bound = mj.at("bound").get<bool>();
    m.stopping = mj.value("stopping", false);
    g.members.push_back(std::move(m));
  }
  if (g.members.empty()) return absl::DataLossError("no members");
  g.cancelled = state.value("cancelled", false);
  g.cancel_deadline = state.value("cancel_deadline", scheduler::Timestamp{-1});
  attempts_[name] = state.at("attempt").get<int>();
  if (state.contains("job")) {
    std::vector<std::pair<int, Member*>> tasks;
    scheduler::JobSpec spec = GangSpec(g, state.at("job").get<std::string>(), &tasks);
    for (uint32_t t = 0; t < tasks.size(); ++t) {
      if (tasks[t].second->task != t) return absl::DataLossError("its members' task numbers do not match");
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
    auto id = engine_.RestoreJob(std::move(spec), state.at("created").get<int64_t>(), placed,
                                 state.at("generation").get<int64_t>());
    if (!id.ok()) {
      // E.g. its queue left the policy: its pods form the gang anew (and
      // get the reason) on their next filter.
      common::Log(common::LogLevel::warn, "gang not restored", {{"gang", name}, {"error", id.status().message()}});
      if (options_.store) {
        for (const Member& m : g.members) options_.store->Put("pod", m.key, "");
        options_.store->Put("gang", name, "");
      }
      return absl::OkStatus();
    }
    g.job = *id;
    gang_of_job_[*id] = name;
    if (g.cancelled) {
      // Cancelled stays cancelled: its pods still there are stopped again
      // (Cancelling, a new grace period), or it is Aborted at once.
      common::LogIfError(engine_.CancelJob(*id), "restore: cancelled gang not cancelled again", {{"gang", name}});
      for (Member& m : g.members) m.bound = false;
    }
    // A placement that no longer holds (a node gone, say) is dropped: the
    // engine places the gang again.
    const scheduler::Job& job = engine_.state().job(*id);
    for (Member& m : g.members) {
      if (m.task == kNoTask || !scheduler::HoldsNode(job.task(m.task).state)) {
        m.node.clear();
        m.gpus.clear();
        m.bound = false;
        m.stopping = false;
      } else if (g.cancelled) {
        m.stopping = true;
      }
    }
    g.deadline = state.at("deadline").get<int64_t>();
    const bool all_bound =
        std::all_of(g.members.begin(), g.members.end(), [](const Member& m) { return m.bound || m.task == kNoTask; });
    const bool any_node = std::any_of(g.members.begin(), g.members.end(), [](const Member& m) { return !m.node.empty(); });
    if (all_bound || !any_node || g.cancelled) g.deadline = -1;
  }
  for (const Member& m : g.members) {
    gang_of_pod_[m.key] = name;
    if (!m.uid.empty()) pod_of_uid_[m.uid] = m.key;
    if (m.bound) bindings_.push_back({m.key, m.node});
  }
  if (g.deadline >= 0) expiries_.insert({g.deadline, name});
  common::Log(common::LogLevel::info, "gang restored",
              {{"gang", name}, {"pods", g.members.size()}, {"bound", std::count_if(g.members.begin(), g.members.end(),
                                                                                 [](const Member& m) { return m.bound; })}});
  gangs_[name] = std::move(g);
  Touch(name);
  Persist();
  return absl::OkStatus();
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
  if (m == nullptr || !m->reserved()) return std::nullopt;
  return m->node;
}

std::vector<std::pair<std::string, std::string>> Extender::bindings() const {
  absl::MutexLock lock(&mu_);
  return bindings_;
}

std::vector<PodEviction> Extender::evictions() const {
  absl::MutexLock lock(&mu_);
  return evicted_;
}

size_t Extender::gang_count() const {
  absl::MutexLock lock(&mu_);
  return gangs_.size();
}

}  // namespace ringmaster::server
