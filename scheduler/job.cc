#include "scheduler/job.h"

#include <algorithm>
#include <atomic>
#include <climits>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"

namespace ringmaster::scheduler {

uint64_t Job::NextReasonGen() {
  static std::atomic<uint64_t> last{0};
  return last.fetch_add(1, std::memory_order_relaxed) + 1;
}

std::string_view PhaseName(JobPhase p) {
  switch (p) {
    case JobPhase::kPending: return "Pending";
    case JobPhase::kInqueue: return "Inqueue";
    case JobPhase::kRunning: return "Running";
    case JobPhase::kCompleted: return "Completed";
    case JobPhase::kFailed: return "Failed";
    case JobPhase::kAborted: return "Aborted";
    case JobPhase::kCancelling: return "Cancelling";
  }
  return "?";
}

std::string_view TaskStateName(TaskState s) {
  switch (s) {
    case TaskState::kPending: return "Pending";
    case TaskState::kAllocated: return "Allocated";
    case TaskState::kPipelined: return "Pipelined";
    case TaskState::kBinding: return "Binding";
    case TaskState::kBound: return "Bound";
    case TaskState::kRunning: return "Running";
    case TaskState::kReleasing: return "Releasing";
    case TaskState::kSucceeded: return "Succeeded";
    case TaskState::kFailed: return "Failed";
  }
  return "?";
}

bool HoldsNode(TaskState s) {
  return s == TaskState::kAllocated || s == TaskState::kBinding || s == TaskState::kBound ||
         s == TaskState::kRunning || s == TaskState::kReleasing;
}

bool CountsReady(TaskState s) {
  return s == TaskState::kAllocated || s == TaskState::kBinding || s == TaskState::kBound ||
         s == TaskState::kRunning || s == TaskState::kSucceeded;
}

int JobSpec::total_replicas() const {
  int64_t n = 0;
  for (const auto& r : roles) n += std::max(r.replicas, 0);  // at most 2^31 roles of < 2^31: no overflow
  return static_cast<int>(std::min<int64_t>(n, INT_MAX));
}

absl::Status GangSize::Validate(int desired, const Fields& f) const {
  auto err = [](std::string_view field, std::string_view msg) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(field), ": ", std::string(msg)));
  };
  if (max > kMaxTasksPerJob) {
    return err(f.range_max, absl::StrCat("max ", max, " is more than the ", kMaxTasksPerJob, " tasks a job may have"));
  }
  if (max == 0) {  // rigid
    if (min < 0) return err(f.min, "must be >= 0");
    if (min > desired) return err(f.min, absl::StrCat(min, " is more than the job's ", desired, " tasks"));
    return absl::OkStatus();
  }
  // Elastic (a negative max too: it is an empty range). The bound at fault
  // names the error.
  const std::string range = absl::StrCat("[", min, ", ", max, "]");
  if (min < 1) return err(f.range_min, absl::StrCat("range ", range, " is empty"));
  if (max < min) return err(min > desired ? f.range_min : f.range_max, absl::StrCat("range ", range, " is empty"));
  if (desired < min) return err(f.range_min, absl::StrCat(desired, " tasks is outside the range ", range));
  if (desired > max) return err(f.range_max, absl::StrCat(desired, " tasks is outside the range ", range));
  return absl::OkStatus();
}

absl::StatusOr<GangSize> GangSize::FromMinMember(int min_member, int elastic_min, int elastic_max) {
  if (elastic_min == 0 && elastic_max == 0) return GangSize{min_member, 0};
  if (elastic_max == 0) {  // a range [min, 0] cannot be elastic: say so rather than make it rigid
    return absl::InvalidArgumentError(absl::StrCat("elastic: range [", elastic_min, ", 0] is empty"));
  }
  if (min_member != 0 && min_member != elastic_min && elastic_min >= 1) {  // (an empty range: Validate says so)
    return absl::InvalidArgumentError(absl::StrCat("min_member: ", min_member, " must equal the elastic minimum ",
                                                   elastic_min, " (or be left out)"));
  }
  return GangSize{elastic_min, elastic_max};
}

GangSize GangSize::FromBounds(int min, int max, int desired) {
  if (min == desired && max == desired) return GangSize{};
  return GangSize{min, max};
}

absl::StatusOr<GangSize> GangSize::ParseRange(std::string_view text) {
  const size_t colon = text.find(':');
  int bounds[2] = {0, 0};
  bool ok = colon != std::string_view::npos;
  for (int i = 0; ok && i < 2; ++i) {
    const std::string_view part = i == 0 ? text.substr(0, colon) : text.substr(colon + 1);
    ok = !part.empty() && absl::SimpleAtoi(absl::string_view(part.data(), part.size()), &bounds[i]) && part.find_first_of(" \t+") == std::string_view::npos;
  }
  if (!ok) return absl::InvalidArgumentError(absl::StrCat("'", std::string(text), "' is not MIN:MAX (two whole numbers, e.g. 2:8)"));
  return GangSize{bounds[0], bounds[1]};
}

absl::Status JobSpec::Validate() const {
  auto err = [&](std::string_view field, std::string_view msg) {
    return absl::InvalidArgumentError(absl::StrCat("job '", name, "': ", std::string(field), ": ", std::string(msg)));
  };
  if (name.empty()) return absl::InvalidArgumentError("job: name: must not be empty");
  if (roles.empty()) return err("roles", "a job needs at least one role");
  for (size_t i = 0; i < roles.size(); ++i) {
    const RoleSpec& r = roles[i];
    const std::string field = absl::StrCat("roles[", i, "] (", r.name, ")");
    if (r.replicas < 0) return err(field, "replicas must be >= 0");
    if (r.request.AnyNegative()) return err(field, "negative resource request");
    if (r.gpu.count < 0) return err(field, "gpu count must be >= 0");
    if (r.gpu.milli <= 0 || r.gpu.milli > topology::kMilliPerGpu) {
      return err(field, "gpu share must be in (0, 1000] milli");
    }
    if (r.gpu.count > 1 && !r.gpu.whole()) {
      return err(field, "a task that shares a GPU may use only one GPU");
    }
  }
  const int total = total_replicas();
  if (total == 0) return err("roles", "a job needs at least one task");
  if (total > kMaxTasksPerJob) {
    return err("roles", absl::StrCat(total, " tasks is more than the ", kMaxTasksPerJob, " a job may have"));
  }
  if (absl::Status s = size.Validate(total); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("job '", name, "': ", s.message()));
  }
  if (topology_mode != TopologyMode::kNone && highest_tier < 0) {
    return err("topology.highest_tier", "must be >= 0");
  }
  if (walltime_ms < 0) return err("walltime", "must be >= 0");
  if (checkpoint_interval_ms < 0) return err("checkpoint_interval", "must be >= 0");
  return absl::OkStatus();
}

Job::Job(JobId id, JobSpec spec, QueueId queue, Timestamp created)
    : id_(id),
      queue_(queue),
      priority_(spec.priority),
      created_(created),
      checkpoint_interval_ms_(spec.checkpoint_interval_ms),
      spec_(std::move(spec)) {
  const int total = spec_.total_replicas();
  min_member_ = spec_.size.Min(total);
  for (const RoleSpec& r : spec_.roles) {
    Resources req = r.request;
    req.set_gpu_milli(r.gpu.total_milli());
    role_requests_.push_back(std::move(req));
  }
  for (int role = 0; role < static_cast<int>(spec_.roles.size()); ++role) {
    for (int i = 0; i < spec_.roles[role].replicas; ++i) AddTask(role);
  }
  for (int i = 0; i < min_member_ && i < static_cast<int>(tasks_.size()); ++i) {
    min_request_ += role_requests_[tasks_[i].role];
  }
}

uint32_t Job::AddTask(int role) {
  Task t;
  t.index = static_cast<uint32_t>(tasks_.size());
  t.role = role;
  // The role's n-th task (a count kept per role: a scan of the tasks made
  // creating a gang quadratic in its size).
  if (role_tasks_.size() <= static_cast<size_t>(role)) role_tasks_.resize(role + 1, 0);
  const int n = role_tasks_[role]++;
  t.name = absl::StrCat(spec_.name, "-", spec_.roles[role].name, "-", n);
  tasks_.push_back(std::move(t));
  counts_[static_cast<int>(TaskState::kPending)]++;
  ++task_changes_;
  return tasks_.back().index;
}

const Resources& Job::PendingRequest() const {
  if (pending_stamp_ != task_changes_) {
    Resources sum;
    for (const Task& t : tasks_) {
      if (t.state == TaskState::kPending) sum += request(t.index);
    }
    pending_request_ = std::move(sum);
    pending_stamp_ = task_changes_;
  }
  return pending_request_;
}

void Job::PopPendingTask() {
  if (tasks_.empty() || tasks_.back().state != TaskState::kPending) {  // a bug in the caller
    std::fprintf(stderr, "Job::PopPendingTask: job %s has %s\n", spec_.name.c_str(),
                 tasks_.empty() ? "no tasks" : "a last task that is not pending");
    std::abort();
  }
  counts_[static_cast<int>(TaskState::kPending)]--;
  role_tasks_[tasks_.back().role]--;
  tasks_.pop_back();
  ++task_changes_;
}

void Job::NoteState(TaskState from, TaskState to, uint32_t i, Timestamp now) {
  ++task_changes_;
  counts_[static_cast<int>(from)]--;
  counts_[static_cast<int>(to)]++;
  const bool held = HoldsNode(from), holds = HoldsNode(to);
  if (held != holds) {
    attained_milli_ms_ = AttainedMilliMs(now);
    attained_at_ = std::max(attained_at_, now);
  }
  if (held && !holds) allocated_ -= request(i);
  if (held && !holds && from != TaskState::kAllocated) last_stopped_ = std::max(last_stopped_, now);
  if (!held && holds) allocated_ += request(i);
}

Timestamp Job::WorkAtRisk(Timestamp now) const {
  if (started_ < 0) return 0;
  const Timestamp ran = std::max<Timestamp>(0, now - started_);
  const int64_t every = checkpoint_interval_ms_;
  return every > 0 ? ran % every : ran;
}

int64_t Job::AttainedMilliMs(Timestamp now) const {
  return attained_milli_ms_ + allocated_.gpu_milli() * std::max<Timestamp>(0, now - attained_at_);
}

JobHistory Job::History() const {
  return {.attained_milli_ms = attained_milli_ms_,
          .attained_at = attained_at_,
          .held_gpu_milli = allocated_.gpu_milli(),
          .running = phase_ == JobPhase::kRunning,
          .started = started_,
          .last_stopped = last_stopped_,
          .last_resize = last_resize_,
          .yielded_to = std::vector<JobId>(yielded_to_.begin(), yielded_to_.end())};
}

void Job::RestoreHistory(const JobHistory& h) {
  attained_milli_ms_ = h.attained_milli_ms;
  attained_at_ = h.attained_at;
  started_ = h.started;
  last_stopped_ = h.last_stopped;
  last_resize_ = h.last_resize;
  yielded_to_ = std::set<JobId>(h.yielded_to.begin(), h.yielded_to.end());
}

int Job::max_member() const {
  return elastic() ? spec_.size.max : static_cast<int>(tasks_.size());
}

int Job::ReadyCount() const {
  return Count(TaskState::kAllocated) + Count(TaskState::kBinding) + Count(TaskState::kBound) +
         Count(TaskState::kRunning) + Count(TaskState::kSucceeded);
}

}  // namespace ringmaster::scheduler
