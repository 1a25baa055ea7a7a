#include "scheduler/state.h"

#include <algorithm>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::scheduler {

State::State(topology::Cluster cluster, queue::QueueTree queues, const Clock* clock)
    : cluster_(std::make_unique<topology::Cluster>(std::move(cluster))),
      free_(*cluster_),
      queues_(std::move(queues)),
      queue_usage_(queues_.size()),
      waiting_sums_(queues_.size()),
      clock_(clock) {
  nodes_.resize(cluster_->num_nodes());
  node_tasks_.resize(cluster_->num_nodes());
  for (uint32_t n = 0; n < cluster_->num_nodes(); ++n) {
    NodeId id(n);
    const auto& spec = cluster_->node(id);
    nodes_[n].gpu_used.assign(spec.gpus.size(), 0);
    nodes_[n].gpu_pipelined.assign(spec.gpus.size(), 0);
    nodes_[n].gpu_releasing.assign(spec.gpus.size(), 0);
    nodes_[n].gpu_foreign.assign(spec.gpus.size(), 0);
    nodes_[n].max_gpu_free = spec.gpus.empty() ? 0 : topology::kMilliPerGpu;
    nodes_[n].usage_hash = UsageHash(nodes_[n]);
    nodes_[n].schedulable = cluster_->present(id);
    if (nodes_[n].schedulable) total_ += spec.allocatable;
  }
  for (uint32_t n = 0; n < cluster_->num_nodes(); ++n) TrackState(NodeId(n));
}

void State::TrackState(NodeId n) {
  if (node_state_.size() <= n.value()) node_state_.resize(n.value() + 1);
  StateCount& c = node_state_[n.value()];
  const int64_t free = free_.NodeFree(n);
  const uint64_t hash = NodeStateHash(n);
  if (c.free == free && c.hash == hash) return;
  if (c.free >= 0) {
    auto it = state_count_.find(std::pair{c.free, c.hash});
    if (--it->second == 0) {
      state_count_.erase(it);
      --distinct_by_free_[c.free];
    }
    --nodes_by_free_[c.free];
  }
  c.free = free;
  c.hash = hash;
  if (free < 0) return;
  if (nodes_by_free_.size() <= static_cast<size_t>(free)) nodes_by_free_.resize(free + 1, 0);
  ++nodes_by_free_[free];
  if (++state_count_[std::pair{free, hash}] == 1) {
    if (distinct_by_free_.size() <= static_cast<size_t>(free)) distinct_by_free_.resize(free + 1, 0);
    ++distinct_by_free_[free];
  }
}

JobId State::AddJob(JobSpec spec, QueueId queue, Timestamp now) {
  JobId id(static_cast<uint32_t>(jobs_.size()));
  jobs_.push_back(std::make_unique<Job>(id, std::move(spec), queue, now));
  active_.insert(id);
  if (jobs_.back()->elastic()) elastic_.insert(id);
  flags_.push_back(kActive);
  counted_.emplace_back();
  UpdateWaiting(*jobs_.back());
  return id;
}

absl::Status State::ReplaceQueues(queue::QueueTree queues) {
  Touch();  // even when it fails: harmless
  for (JobId id : active_) {
    const Job& j = job(id);
    auto q = queues.Find(j.spec().queue);
    if (!q) {
      return absl::FailedPreconditionError(
          absl::StrCat("queues: '", j.spec().queue, "' is missing, but job '", j.name(), "' is still in it"));
    }
    if (!queues.is_leaf(*q)) {
      return absl::FailedPreconditionError(absl::StrCat("queues: '", j.spec().queue, "' would have child queues, but job '",
                                                        j.name(), "' is still in it"));
    }
  }
  queues_ = std::move(queues);
  queue_usage_.assign(queues_.size(), QueueUsage());
  for (auto& jp : jobs_) {
    auto q = queues_.Find(jp->spec().queue);
    jp->set_queue(q ? QueueId(*q) : QueueId());
    for (const Task& t : jp->tasks()) {
      if (HoldsNode(t.state)) AddUsage(*jp, t.index, +1);
      const int64_t gpus = jp->request(t.index).gpu_milli();
      if (t.state == TaskState::kReleasing) AddMoving(*jp, &QueueUsage::releasing_gpu_milli, gpus);
      if (t.state == TaskState::kPipelined) AddMoving(*jp, &QueueUsage::pipelined_gpu_milli, gpus);
    }
  }
  RebuildWaitingSums();  // the jobs are in their new queues
  return absl::OkStatus();
}

void State::FinishJob(JobId id, JobPhase terminal) {
  Job& j = job(id);
  j.set_phase(terminal);
  if (active_.erase(id) > 0) {
    AddEnded({.id = id,
                      .name = j.name(),
                      .queue = j.spec().queue,
                      .min_gpu_milli = j.min_request().gpu_milli(),
                      .phase = terminal,
                      .attained_milli_ms = j.AttainedMilliMs(Now()),
                      .started = j.started(),
                      .last_stopped = j.last_stopped(),
                      .ended_at = Now()});
  }
  waiting_.erase(id);
  running_.erase(id);
  elastic_room_.erase(id);
  elastic_.erase(id);
  flags_[id.value()] = 0;
  RecountWaiting(j);
  if (reservation_ && reservation_->job == id) SetReservation(std::nullopt);
}

void State::RestoreEndedJobs(std::span<const EndedJob> ended) {
  for (EndedJob e : ended) {
    e.id = JobId();
    AddEnded(std::move(e));
  }
}

void State::AddEnded(EndedJob e) {
  ended_.push_back(std::move(e));
  if (ended_kept_ > 0 && ended_.size() >= 2 * ended_kept_) {
    const size_t drop = ended_.size() - ended_kept_;
    ended_.erase(ended_.begin(), ended_.begin() + static_cast<std::ptrdiff_t>(drop));
    ended_base_ += drop;
  }
}

void State::set_ended_kept(size_t n) { ended_kept_ = n; }  // the next record trims

Resources State::Idle(NodeId n) const {
  return cluster_->node(n).allocatable - nodes_[n.value()].used;
}

bool State::FitsIdle(NodeId n, const Resources& req) const {
  const Resources& a = cluster_->node(n).allocatable;
  const Resources& u = nodes_[n.value()].used;
  if (req.cpu_milli() > a.cpu_milli() - u.cpu_milli()) return false;
  if (req.memory() > a.memory() - u.memory()) return false;
  for (const auto& [name, v] : req.scalars()) {
    if (v > a.scalar(name) - u.scalar(name)) return false;
  }
  return true;
}

Resources State::FutureIdle(NodeId n) const {
  const NodeState& s = nodes_[n.value()];
  return cluster_->node(n).allocatable - s.used + s.releasing - s.pipelined;
}

namespace {
// What State::admitted_waiting_scoped counts.
bool IsScoped(const JobSpec& spec) { return spec.topology_mode == TopologyMode::kHard || spec.speed != nullptr; }
}  // namespace

void State::UpdateWaiting(const Job& job) {
  // The flag spares the set a lookup on every task move (most do not
  // change whether the job waits).
  const uint32_t id = job.id().value();
  const bool wait = (flags_[id] & kActive) && job.Count(TaskState::kPending) > 0;
  if (wait != ((flags_[id] & kWaiting) != 0)) {
    if (wait) {
      waiting_.insert(job.id());
      flags_[id] |= kWaiting;
    } else {
      waiting_.erase(job.id());
      flags_[id] &= static_cast<uint8_t>(~kWaiting);
    }
  }
  RecountWaiting(job);
  if (!job.elastic()) return;
  const bool room = (flags_[id] & kActive) && job.ReadyCount() < job.max_member();
  if (room != ((flags_[id] & kRoom) != 0)) {
    if (room) {
      elastic_room_.insert(job.id());
      flags_[id] |= kRoom;
    } else {
      elastic_room_.erase(job.id());
      flags_[id] &= static_cast<uint8_t>(~kRoom);
    }
  }
}

void State::RecountWaiting(const Job& job) {
  const uint32_t id = job.id().value();
  Counted& c = counted_[id];
  const bool wait = (flags_[id] & kWaiting) != 0;
  if (!wait && !c.in && !c.scoped) return;  // most task moves: a running job's
  if (c.in) {
    WaitingSums& old = waiting_sums_[c.queue];
    old.pending -= c.pending;
    if (c.inqueue) old.inqueue -= job.min_request();
  }
  const bool admitted = wait && job.phase() != JobPhase::kPending;
  const bool unadmitted = wait && job.phase() == JobPhase::kPending;
  if ((unadmitted || c.unadmitted) && !admission_overflow_) {
    if (admission_changes_.size() >= kMaxAdmissionChanges) {
      admission_overflow_ = true;
      admission_changes_.clear();
    } else {
      admission_changes_.push_back(job.id());
    }
  }
  c.unadmitted = unadmitted;
  if (admitted) {
    admitted_waiting_.insert(job.id());
  } else {
    admitted_waiting_.erase(job.id());
  }
  const bool scoped = admitted && IsScoped(job.spec());
  if (scoped != c.scoped) {
    c.scoped = scoped;
    scoped ? ++admitted_waiting_scoped_ : --admitted_waiting_scoped_;
  }
  c.in = wait && job.queue().valid() && job.queue().value() < waiting_sums_.size();
  if (!c.in) {
    c.pending = Resources();
    c.inqueue = false;
    return;
  }
  c.queue = job.queue().value();
  c.pending = job.PendingRequest();
  c.inqueue = job.phase() == JobPhase::kInqueue;
  WaitingSums& now = waiting_sums_[c.queue];
  now.pending += c.pending;
  if (c.inqueue) now.inqueue += job.min_request();
}

bool State::TakeAdmissionChanges(std::vector<JobId>& out) {
  out.clear();
  out.swap(admission_changes_);
  const bool whole = !admission_overflow_;
  admission_overflow_ = false;
  return whole;
}

void State::RebuildWaitingSums() {
  admission_overflow_ = true;  // jobs moved queues
  waiting_sums_.assign(queues_.size(), WaitingSums{});
  admitted_waiting_.clear();
  admitted_waiting_scoped_ = 0;
  for (Counted& c : counted_) c = Counted{};
  for (JobId id : waiting_) RecountWaiting(job(id));
}

void State::SetPhase(Job& job, JobPhase phase) {
  if (job.phase() == phase) return;
  job.set_phase(phase);
  if (phase == JobPhase::kRunning) {
    running_.insert(job.id());
  } else {
    running_.erase(job.id());
  }
  RecountWaiting(job);
}

uint64_t UsageHash(const NodeState& ns) {
  uint64_t h = 0xcbf29ce484222325ULL;
  auto mix = [&h](uint64_t v) { h = (h ^ v) * 0x100000001b3ULL + (h >> 29); };
  mix(static_cast<uint64_t>(ns.used.cpu_milli()));
  mix(static_cast<uint64_t>(ns.used.memory()));
  for (int16_t u : ns.gpu_used) mix(static_cast<uint64_t>(u));
  return h;
}

void State::Refresh(NodeId n) {
  NodeState& s = nodes_[n.value()];
  s.usage_hash = UsageHash(s);
  int64_t free = 0;
  int64_t milli = 0;
  int16_t least = topology::kMilliPerGpu;
  for (int16_t u : s.gpu_used) {
    free += (u == 0);
    milli += topology::kMilliPerGpu - u;
    least = std::min(least, u);
  }
  s.max_gpu_free = s.gpu_used.empty() ? 0 : static_cast<int16_t>(topology::kMilliPerGpu - least);
  free_.SetNodeFree(n, free);
  free_.SetNodeFreeMilli(n, milli);
  TrackState(n);
}

void State::AddUsage(Job& job, uint32_t i, int sign) {
  const Resources& req = job.request(i);
  int q = static_cast<int>(job.queue().value());
  while (q >= 0) {
    if (sign > 0) {
      queue_usage_[q].allocated += req;
    } else {
      queue_usage_[q].allocated -= req;
    }
    q = queues_.parent(static_cast<uint32_t>(q));
  }
}

void State::AddMoving(const Job& job, int64_t QueueUsage::*count, int64_t delta) {
  for (int q = static_cast<int>(job.queue().value()); q >= 0; q = queues_.parent(static_cast<uint32_t>(q))) {
    queue_usage_[q].*count += delta;
  }
}

void State::Place(Job& job, uint32_t i, NodeId node, std::span<const int16_t> gpus, TaskState to) {
  job.mutable_task(i).gpus.assign(gpus.begin(), gpus.end());
  PlaceOnGpusSet(job, i, node, to);
}

void State::Place(Job& job, uint32_t i, NodeId node, std::vector<int16_t>&& gpus, TaskState to) {
  // The task keeps its own vector where it has the room (a task placed
  // before), else takes the caller's: no copy either way.
  std::vector<int16_t>& held = job.mutable_task(i).gpus;
  if (held.capacity() >= gpus.size()) {
    held.assign(gpus.begin(), gpus.end());
  } else {
    held = std::move(gpus);
  }
  PlaceOnGpusSet(job, i, node, to);
}

void State::PlaceOnGpusSet(Job& job, uint32_t i, NodeId node, TaskState to) {
  Touch();
  Task& t = job.mutable_task(i);
  NodeState& s = nodes_[node.value()];
  const GpuRequest& g = job.gpu(i);
  const std::vector<int16_t>& gpus = t.gpus;
  t.node = node;
  node_tasks_[node.value()].emplace_back(job.id(), i);
  if (to == TaskState::kPipelined) {
    s.pipelined += job.request(i);
    for (int16_t d : gpus) s.gpu_pipelined[d] += static_cast<int16_t>(g.milli);
    AddMoving(job, &QueueUsage::pipelined_gpu_milli, job.request(i).gpu_milli());
  } else {
    s.used += job.request(i);
    for (int16_t d : gpus) s.gpu_used[d] += static_cast<int16_t>(g.milli);
    s.tasks++;
    AddUsage(job, i, +1);
    Refresh(node);
  }
  job.NoteState(t.state, to, i, Now());
  t.state = to;
  UpdateWaiting(job);
}

uint32_t State::AddTask(Job& job, int role) {
  Touch();
  const uint32_t i = job.AddTask(role);
  UpdateWaiting(job);
  return i;
}

void State::RemoveLastTask(Job& job) {
  Touch();
  job.PopPendingTask();
  UpdateWaiting(job);
}

void State::Unplace(Job& job, uint32_t i) { Release(job, i, TaskState::kPending); }

void State::SetState(Job& job, uint32_t i, TaskState to) {
  Task& t = job.mutable_task(i);
  if (t.state == to) return;
  Touch();
  NodeState& s = nodes_[t.node.value()];
  const auto milli = static_cast<int16_t>(job.gpu(i).milli);
  if (t.state == TaskState::kReleasing) {
    s.releasing -= job.request(i);
    for (int16_t d : t.gpus) s.gpu_releasing[d] -= milli;
    --releasing_tasks_;
    AddMoving(job, &QueueUsage::releasing_gpu_milli, -job.request(i).gpu_milli());
  }
  if (to == TaskState::kReleasing) {
    ++releasing_tasks_;
    s.releasing += job.request(i);
    for (int16_t d : t.gpus) s.gpu_releasing[d] += milli;
    AddMoving(job, &QueueUsage::releasing_gpu_milli, job.request(i).gpu_milli());
  }
  job.NoteState(t.state, to, i, Now());
  t.state = to;
  UpdateWaiting(job);
}

void State::Release(Job& job, uint32_t i, TaskState to) {
  Touch();
  Task& t = job.mutable_task(i);
  if (t.node.valid()) {
    NodeState& s = nodes_[t.node.value()];
    const GpuRequest& g = job.gpu(i);
    if (t.state == TaskState::kPipelined) {
      s.pipelined -= job.request(i);
      for (int16_t d : t.gpus) s.gpu_pipelined[d] -= static_cast<int16_t>(g.milli);
      AddMoving(job, &QueueUsage::pipelined_gpu_milli, -job.request(i).gpu_milli());
    } else if (HoldsNode(t.state)) {
      if (t.state == TaskState::kReleasing) {
        --releasing_tasks_;
        s.releasing -= job.request(i);
        for (int16_t d : t.gpus) s.gpu_releasing[d] -= static_cast<int16_t>(g.milli);
        AddMoving(job, &QueueUsage::releasing_gpu_milli, -job.request(i).gpu_milli());
      }
      s.used -= job.request(i);
      for (int16_t d : t.gpus) s.gpu_used[d] -= static_cast<int16_t>(g.milli);
      s.tasks--;
      AddUsage(job, i, -1);
      Refresh(t.node);
    }
    auto& list = node_tasks_[t.node.value()];
    auto it = std::find(list.begin(), list.end(), std::make_pair(job.id(), i));
    if (it != list.end()) list.erase(it);
  }
  t.node = NodeId();
  t.gpus.clear();
  t.release_deadline = -1;
  job.NoteState(t.state, to, i, Now());
  t.state = to;
  UpdateWaiting(job);
}

absl::StatusOr<NodeId> State::AddNode(topology::NodeSpec spec) {
  RM_ASSIGN_OR_RETURN(auto id, cluster_->AddNode(std::move(spec)));
  Touch();
  ++node_changes_;
  const auto& s = cluster_->node(id);
  NodeState ns;
  ns.gpu_used.assign(s.gpus.size(), 0);
  ns.gpu_pipelined.assign(s.gpus.size(), 0);
  ns.gpu_releasing.assign(s.gpus.size(), 0);
  ns.gpu_foreign.assign(s.gpus.size(), 0);
  ns.max_gpu_free = s.gpus.empty() ? 0 : topology::kMilliPerGpu;
  ns.usage_hash = UsageHash(ns);
  nodes_.push_back(std::move(ns));
  node_tasks_.emplace_back();
  free_.AddNode(id, static_cast<int64_t>(s.gpus.size()));
  total_ += s.allocatable;
  TrackState(id);
  return id;
}

int64_t State::SetForeignUsage(NodeId n, const Resources& req, int64_t gpus) {
  Touch();
  NodeState& s = nodes_[n.value()];
  // Drop the old foreign usage.
  s.used -= s.foreign;
  for (size_t d = 0; d < s.gpu_foreign.size(); ++d) {
    s.gpu_used[d] -= s.gpu_foreign[d];
    s.gpu_foreign[d] = 0;
  }
  // Whole GPUs no task holds: the unpromised ones first, highest index first.
  int64_t marked = 0;
  for (int pass = 0; pass < 2 && marked < gpus; ++pass) {
    for (size_t d = s.gpu_used.size(); d-- > 0 && marked < gpus;) {
      if (s.gpu_used[d] != 0 || s.gpu_foreign[d] != 0) continue;
      if (pass == 0 && s.gpu_pipelined[d] != 0) continue;
      s.gpu_foreign[d] = static_cast<int16_t>(topology::kMilliPerGpu);
      s.gpu_used[d] += s.gpu_foreign[d];
      ++marked;
    }
  }
  // cpu and memory up to what is idle (the node's other resources stay
  // ringmaster's: foreign pods' scalars are not counted).
  const Resources idle = cluster_->node(n).allocatable - s.used;
  Resources f;
  f.set_cpu_milli(std::clamp<topology::Quantity>(req.cpu_milli(), 0, std::max<topology::Quantity>(idle.cpu_milli(), 0)));
  f.set_memory(std::clamp<topology::Quantity>(req.memory(), 0, std::max<topology::Quantity>(idle.memory(), 0)));
  f.set_gpu_milli(marked * topology::kMilliPerGpu);
  s.foreign = f;
  s.used += f;
  Refresh(n);
  return std::max<int64_t>(gpus, 0) - marked;
}

void State::DisableNode(NodeId n) {
  NodeState& s = nodes_[n.value()];
  if (!s.schedulable) return;
  s.schedulable = false;
  Touch();
  ++node_changes_;
  total_ -= cluster_->node(n).allocatable;
  free_.RemoveNode(n);
  // A schedulable node is in the cluster (the constructor and AddNode set
  // the flag from presence, and only here clears both), so removing it
  // cannot fail: a failure is a bug.
  RM_CHECK_OK(cluster_->RemoveNode(n));
  if (IsReserved(n)) SetReservation(std::nullopt);
}

std::vector<std::pair<JobId, uint32_t>> State::TasksOn(NodeId n) const {
  return node_tasks_[n.value()];
}

void State::SetJobSpeed(JobId id, std::shared_ptr<const SpeedModel> model) {
  job(id).set_speed(std::move(model));
  ++speed_changes_;
  Touch();
}

void State::SetReservation(std::optional<Reservation> r) {
  Touch();
  std::fill(reserved_.begin(), reserved_.end(), false);
  reservation_ = std::move(r);
  if (!reservation_) return;
  reserved_.resize(nodes_.size(), false);
  for (NodeId n : reservation_->nodes) reserved_[n.value()] = true;
}

absl::Status State::CheckInvariants() const {
  // Recounted from the tasks, starting from what others hold (foreign).
  std::vector<Resources> used(nodes_.size());
  std::vector<std::vector<int>> gpu(nodes_.size());
  for (size_t n = 0; n < nodes_.size(); ++n) {
    used[n] = nodes_[n].foreign;
    gpu[n].assign(nodes_[n].gpu_foreign.begin(), nodes_[n].gpu_foreign.end());
    int64_t foreign_gpus = 0;
    for (int16_t g : nodes_[n].gpu_foreign) {
      if (g != 0 && g != topology::kMilliPerGpu) {
        return absl::InternalError(absl::StrCat("1: node ", cluster_->node(NodeId(static_cast<uint32_t>(n))).name,
                                                " holds a foreign GPU share of ", g, " milli (whole GPUs only)"));
      }
      foreign_gpus += g / topology::kMilliPerGpu;
    }
    if (nodes_[n].foreign.gpu_milli() != foreign_gpus * topology::kMilliPerGpu) {
      return absl::InternalError(absl::StrCat("1: node ", cluster_->node(NodeId(static_cast<uint32_t>(n))).name,
                                              " foreign GPU counter is off"));
    }
  }
  std::vector<Resources> qalloc(queues_.size());
  std::vector<std::pair<int64_t, int64_t>> qmoving(queues_.size());  // releasing, pipelined GPU milli
  // Finished jobs (not active) are checked through counts: no flag of theirs
  // is set (the flag counts equal the sets' sizes, and every active job's
  // flags are checked below), and one still holding a node or counted in a
  // queue would break the node and queue recounts, which add up active jobs
  // only. So the check costs O(active jobs + nodes), not O(every job ever
  // submitted).
  size_t active_flags = 0, waiting_flags = 0, room_flags = 0;
  for (uint8_t f : flags_) {
    active_flags += (f & kActive) != 0;
    waiting_flags += (f & kWaiting) != 0;
    room_flags += (f & kRoom) != 0;
  }
  if (room_flags != elastic_room_.size()) {
    return absl::InternalError(absl::StrCat("8: ", room_flags, " jobs flagged elastic below their maximum, but the ",
                                            "set holds ", elastic_room_.size()));
  }
  if (active_flags != active_.size() || waiting_flags != waiting_.size()) {
    return absl::InternalError(absl::StrCat("7: ", active_flags, " jobs flagged active and ", waiting_flags,
                                            " waiting, but the sets hold ", active_.size(), " and ",
                                            waiting_.size()));
  }
  for (JobId id : waiting_) {
    if (!active_.count(id)) return absl::InternalError(absl::StrCat("7: job ", job(id).name(), " waits, not active"));
  }
  {
    // 7 (cont.): the admitted waiting jobs and the per-queue sums are what
    // the waiting jobs add up to now.
    std::vector<WaitingSums> sums(queues_.size());
    size_t admitted = 0, scoped = 0;
    for (JobId id : waiting_) {
      const Job& j = job(id);
      const bool in = j.phase() != JobPhase::kPending;
      admitted += in;
      scoped += in && IsScoped(j.spec());
      if (in != (admitted_waiting_.count(id) > 0)) {
        return absl::InternalError(absl::StrCat("7: job ", j.name(), " admitted-waiting set is off"));
      }
      if (!j.queue().valid() || j.queue().value() >= sums.size()) continue;
      sums[j.queue().value()].pending += j.PendingRequest();
      if (j.phase() == JobPhase::kInqueue) sums[j.queue().value()].inqueue += j.min_request();
    }
    if (admitted != admitted_waiting_.size()) {
      return absl::InternalError(absl::StrCat("7: ", admitted, " waiting jobs admitted, but the set holds ",
                                              admitted_waiting_.size()));
    }
    if (scoped != admitted_waiting_scoped_) {
      return absl::InternalError(absl::StrCat("7: ", scoped, " admitted waiting jobs with a hard topology or a ",
                                              "speed model, but the count is ", admitted_waiting_scoped_));
    }
    for (size_t q = 0; q < sums.size(); ++q) {
      if (!(sums[q].pending - waiting_sums_[q].pending).IsZero() ||
          !(sums[q].inqueue - waiting_sums_[q].inqueue).IsZero()) {
        return absl::InternalError(absl::StrCat("7: queue ", queues_.spec(static_cast<uint32_t>(q)).name,
                                                " waiting sums are pending ", waiting_sums_[q].pending.ToString(),
                                                ", inqueue ", waiting_sums_[q].inqueue.ToString(), "; recounted ",
                                                sums[q].pending.ToString(), ", ", sums[q].inqueue.ToString()));
      }
    }
  }
  for (JobId id : elastic_) {
    if (!active_.count(id)) {
      return absl::InternalError(absl::StrCat("8: job ", job(id).name(), " is in the elastic set, not active"));
    }
  }
  for (JobId id : running_) {
    if (!active_.count(id)) {
      return absl::InternalError(absl::StrCat("8: job ", job(id).name(), " is in the running set, not active"));
    }
  }
  for (JobId id : active_) {
    const Job& j = job(id);
    const bool should_wait = j.Count(TaskState::kPending) > 0;
    if (should_wait != (waiting_.count(j.id()) > 0) ||
        should_wait != ((flags_[j.id().value()] & kWaiting) != 0) ||
        (flags_[j.id().value()] & kActive) == 0) {
      return absl::InternalError(absl::StrCat("7: job ", j.name(), " waiting set is off"));
    }
    if (j.elastic() != (elastic_.count(j.id()) > 0)) {
      return absl::InternalError(absl::StrCat("8: job ", j.name(), " elastic set is off"));
    }
    if ((j.phase() == JobPhase::kRunning) != (running_.count(j.id()) > 0)) {
      return absl::InternalError(absl::StrCat("8: job ", j.name(), " running set is off"));
    }
    const bool room = j.elastic() && j.ReadyCount() < j.max_member();
    if (room != (elastic_room_.count(j.id()) > 0) || room != ((flags_[j.id().value()] & kRoom) != 0)) {
      return absl::InternalError(absl::StrCat("8: job ", j.name(), " elastic-below-maximum set is off"));
    }
    Resources jalloc;
    for (const Task& t : j.tasks()) {
      if (!HoldsNode(t.state)) continue;
      if (!t.node.valid()) {
        return absl::InternalError(absl::StrCat("1: task ", t.name, " holds no node"));
      }
      used[t.node.value()] += j.request(t.index);
      jalloc += j.request(t.index);
      for (int16_t d : t.gpus) gpu[t.node.value()][d] += static_cast<int>(j.gpu(t.index).milli);
    }
    if (!(jalloc == j.allocated())) {
      return absl::InternalError(absl::StrCat("5: job ", j.name(), " allocated counter is off"));
    }
    int64_t releasing = 0, pipelined = 0;
    for (const Task& t : j.tasks()) {
      if (t.state == TaskState::kReleasing) releasing += j.request(t.index).gpu_milli();
      if (t.state == TaskState::kPipelined) pipelined += j.request(t.index).gpu_milli();
    }
    int q = static_cast<int>(j.queue().value());
    while (q >= 0) {
      qalloc[q] += jalloc;
      qmoving[q].first += releasing;
      qmoving[q].second += pipelined;
      q = queues_.parent(static_cast<uint32_t>(q));
    }
    if (j.phase() == JobPhase::kRunning && !j.GangReady()) {
      return absl::InternalError(absl::StrCat("6: running job ", j.name(), " has ", j.ReadyCount(),
                                              " ready tasks, below its minimum ", j.min_member()));
    }
  }
  for (size_t n = 0; n < nodes_.size(); ++n) {
    NodeId id(static_cast<uint32_t>(n));
    const std::string& name = cluster_->node(id).name;
    if (!(used[n] == nodes_[n].used)) {
      return absl::InternalError(absl::StrCat("1: node ", name, " used counter ",
                                              nodes_[n].used.ToString(), " != recount ",
                                              used[n].ToString()));
    }
    int64_t free = 0;
    int64_t milli = 0;
    int max_free = 0;
    for (size_t d = 0; d < gpu[n].size(); ++d) {
      max_free = std::max(max_free, static_cast<int>(topology::kMilliPerGpu) - gpu[n][d]);
      milli += topology::kMilliPerGpu - gpu[n][d];
      if (gpu[n][d] != nodes_[n].gpu_used[d]) {
        return absl::InternalError(absl::StrCat("1: node ", name, " gpu ", d, " counter is off"));
      }
      if (gpu[n][d] < 0 || gpu[n][d] > topology::kMilliPerGpu) {
        return absl::InternalError(absl::StrCat("2: node ", name, " gpu ", d, " given ", gpu[n][d],
                                                " milli (more than one GPU)"));
      }
      free += (gpu[n][d] == 0);
    }
    if (!used[n].LessEqual(cluster_->node(id).allocatable)) {
      return absl::InternalError(absl::StrCat("3: node ", name, " is over-committed: ",
                                              used[n].ToString()));
    }
    if (nodes_[n].schedulable && free_.NodeFree(id) != free) {
      return absl::InternalError(absl::StrCat("4: node ", name, " free index says ",
                                              free_.NodeFree(id), " free GPUs, recount ", free));
    }
    if (nodes_[n].schedulable && free_.NodeFreeMilli(id) != milli) {
      return absl::InternalError(absl::StrCat("4: node ", name, " free index says ", free_.NodeFreeMilli(id),
                                              " free GPU milli, recount ", milli));
    }
    if (nodes_[n].max_gpu_free != max_free) {
      return absl::InternalError(absl::StrCat("4: node ", name, " max_gpu_free ", nodes_[n].max_gpu_free,
                                              " != recount ", max_free));
    }
    if (nodes_[n].usage_hash != UsageHash(nodes_[n])) {
      return absl::InternalError(absl::StrCat("4: node ", name, " usage_hash is stale"));
    }
    if (nodes_[n].schedulable && (n >= node_state_.size() || node_state_[n].free != free_.NodeFree(NodeId(n)) ||
                                  node_state_[n].hash != NodeStateHash(NodeId(n)))) {
      return absl::InternalError(absl::StrCat("4: node ", name, " distinct-state count is stale"));
    }
  }
  {
    // (Part of invariant 4.) The distinct-state counts add up the nodes as
    // counted, and every schedulable node is counted in its current state.
    absl::flat_hash_map<std::pair<int64_t, uint64_t>, int32_t> count;
    for (const StateCount& c : node_state_) {
      if (c.free >= 0) ++count[std::pair{c.free, c.hash}];
    }
    std::vector<int64_t> distinct(distinct_by_free_.size(), 0);
    for (const auto& [key, k] : count) {
      if (static_cast<size_t>(key.first) >= distinct.size()) distinct.resize(key.first + 1, 0);
      ++distinct[key.first];
    }
    distinct.resize(std::max(distinct.size(), distinct_by_free_.size()), 0);
    if (count != state_count_ || distinct != distinct_by_free_) {
      return absl::InternalError("4: distinct node states per free-GPU count are off");
    }
  }
  for (size_t q = 0; q < queues_.size(); ++q) {
    if (!(qalloc[q] == queue_usage_[q].allocated)) {
      return absl::InternalError(absl::StrCat("5: queue ", queues_.spec(q).name,
                                              " allocated counter is off"));
    }
    if (qmoving[q] != std::pair{queue_usage_[q].releasing_gpu_milli, queue_usage_[q].pipelined_gpu_milli}) {
      return absl::InternalError(absl::StrCat("5: queue ", queues_.spec(q).name, " releasing (", qmoving[q].first,
                                              " counted, ", queue_usage_[q].releasing_gpu_milli,
                                              " kept) or pipelined (", qmoving[q].second, " counted, ",
                                              queue_usage_[q].pipelined_gpu_milli, " kept) GPU milli are off"));
    }
  }
  return free_.CheckConsistent(*cluster_);
}

}  // namespace ringmaster::scheduler
