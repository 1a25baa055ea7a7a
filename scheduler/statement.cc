#include "scheduler/statement.h"

#include <algorithm>

#include "absl/container/inlined_vector.h"
#include "absl/strings/str_cat.h"

namespace ringmaster::scheduler {

void Statement::Allocate(Job& job, uint32_t task, NodeId node, std::vector<int16_t> gpus) {
  ops_.push_back({.kind = Op::Kind::kAllocate, .job = job.id(), .task = task, .prev = job.task(task).state});
  session_.mutable_state().Place(job, task, node, std::move(gpus), TaskState::kAllocated);
}

void Statement::Pipeline(Job& job, uint32_t task, NodeId node, std::vector<int16_t> gpus) {
  ops_.push_back({.kind = Op::Kind::kPipeline, .job = job.id(), .task = task, .prev = job.task(task).state});
  session_.mutable_state().Place(job, task, node, std::move(gpus), TaskState::kPipelined);
}

void Statement::Evict(Job& job, uint32_t task, std::string reason, Timestamp deadline) {
  ops_.push_back({.kind = Op::Kind::kEvict, .job = job.id(), .task = task, .prev = job.task(task).state,
                  .reason = std::move(reason), .deadline = deadline});
  session_.mutable_state().SetState(job, task, TaskState::kReleasing);
  session_.mutable_state().SetReleaseDeadline(job, task, deadline);
}

void Statement::Vacate(Job& job, uint32_t task, JobId beneficiary, std::string reason,
                       Timestamp deadline) {
  const Task& t = job.task(task);
  ops_.push_back({.kind = Op::Kind::kVacate, .job = job.id(), .task = task, .prev = t.state,
                  .reason = std::move(reason), .node = t.node, .gpus = t.gpus, .deadline = deadline,
                  .beneficiary = beneficiary});
  session_.mutable_state().Release(job, task, TaskState::kPending);
}

void Statement::Promote(Job& job, uint32_t task) {
  const Task& t = job.task(task);
  const NodeId node = t.node;
  const absl::InlinedVector<int16_t, 16> gpus(t.gpus.begin(), t.gpus.end());
  ops_.push_back({.kind = Op::Kind::kPromote, .job = job.id(), .task = task, .prev = t.state});
  State& state = session_.mutable_state();
  state.Unplace(job, task);
  state.Place(job, task, node, std::span<const int16_t>(gpus.data(), gpus.size()), TaskState::kAllocated);
}

void Statement::SetPhase(Job& job, JobPhase phase) {
  ops_.push_back({.kind = Op::Kind::kPhase, .job = job.id(), .prev_phase = job.phase(), .phase = phase,
                  .nominated = job.nominated()});
  session_.mutable_state().SetPhase(job, phase);
}

void Statement::SetNominated(Job& job, bool nominated) {
  ops_.push_back({.kind = Op::Kind::kPhase, .job = job.id(), .prev_phase = job.phase(), .phase = job.phase(),
                  .nominated = job.nominated()});
  job.set_nominated(nominated);
}

void Statement::Unpipeline(Job& job, uint32_t task) {
  const Task& t = job.task(task);
  ops_.push_back({.kind = Op::Kind::kUnpipeline, .job = job.id(), .task = task, .prev = t.state, .node = t.node,
                  .gpus = t.gpus});
  session_.mutable_state().Unplace(job, task);
}

void Statement::AddTask(Job& job, int role) {
  ops_.push_back({.kind = Op::Kind::kAddTask, .job = job.id()});
  ops_.back().task = session_.mutable_state().AddTask(job, role);
}

void Statement::SetReservation(std::optional<Reservation> r) {
  State& state = session_.mutable_state();
  ops_.push_back({.kind = Op::Kind::kReserve, .reservation = state.reservation()});
  state.SetReservation(std::move(r));
}

void Statement::Undo(const Op& op) {
  State& state = session_.mutable_state();
  if (op.kind == Op::Kind::kReserve) {
    state.SetReservation(op.reservation);
    return;
  }
  Job& job = state.job(op.job);
  switch (op.kind) {
    case Op::Kind::kReserve:
      break;
    case Op::Kind::kUnpipeline:
      state.Place(job, op.task, op.node, op.gpus, TaskState::kPipelined);
      break;
    case Op::Kind::kAddTask:
      state.RemoveLastTask(job);
      break;
    case Op::Kind::kAllocate:
    case Op::Kind::kPipeline:
      state.Unplace(job, op.task);
      break;
    case Op::Kind::kEvict:
      state.SetState(job, op.task, op.prev);
      state.SetReleaseDeadline(job, op.task, -1);
      break;
    case Op::Kind::kVacate:
      state.Place(job, op.task, op.node, op.gpus, TaskState::kAllocated);
      state.SetState(job, op.task, op.prev);
      break;
    case Op::Kind::kPromote: {
      const NodeId node = job.task(op.task).node;
      const absl::InlinedVector<int16_t, 16> gpus(job.task(op.task).gpus.begin(), job.task(op.task).gpus.end());
      state.Unplace(job, op.task);
      state.Place(job, op.task, node, std::span<const int16_t>(gpus.data(), gpus.size()), TaskState::kPipelined);
      break;
    }
    case Op::Kind::kPhase:
      state.SetPhase(job, op.prev_phase);
      job.set_nominated(op.nominated);
      break;
  }
}

void Statement::Discard() {
  if (done_) return;
  done_ = true;
  for (auto it = ops_.rbegin(); it != ops_.rend(); ++it) Undo(*it);
  ops_.clear();
  if (session_.commits() == commits_) session_.mutable_state().RestoreEpoch(epoch_);
}

absl::Status Statement::CheckGangs() const {
  const State& state = session_.mutable_state();
  absl::InlinedVector<JobId, 8> touched;
  for (const Op& op : ops_) {
    if (op.kind == Op::Kind::kAllocate || op.kind == Op::Kind::kPromote) touched.push_back(op.job);
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (JobId id : touched) {
    const Job& job = state.job(id);
    if (!job.GangReady()) {
      return absl::FailedPreconditionError(absl::StrCat("gang ", job.name(), " has ", job.ReadyCount(),
                                                        " of its minimum ", job.min_member(),
                                                        " tasks; not committed"));
    }
  }
  return absl::OkStatus();
}

void Statement::HoldForGrace() {
  State& state = session_.mutable_state();
  const Timestamp now = session_.now();
  // 1. What this statement allocated waits, pipelined on the same GPUs.
  for (const Op& op : ops_) {
    if (op.kind != Op::Kind::kAllocate) continue;
    Job& job = state.job(op.job);
    const NodeId node = job.task(op.task).node;
    const absl::InlinedVector<int16_t, 16> gpus(job.task(op.task).gpus.begin(), job.task(op.task).gpus.end());
    state.Unplace(job, op.task);
    state.Place(job, op.task, node, std::span<const int16_t>(gpus.data(), gpus.size()), TaskState::kPipelined);
    job.set_nominated(true);
  }
  // 2. The victims hold their GPUs until they are gone (or the deadline).
  for (const Op& op : ops_) {
    if (op.kind != Op::Kind::kVacate || op.deadline <= now) continue;
    Job& job = state.job(op.job);
    state.Place(job, op.task, op.node, op.gpus, TaskState::kAllocated);
    state.SetState(job, op.task, op.prev);
    state.SetState(job, op.task, TaskState::kReleasing);
    state.SetReleaseDeadline(job, op.task, op.deadline);
  }
}

absl::Status Statement::Commit() {
  if (done_) return absl::FailedPreconditionError("statement already committed or discarded");
  // A gang is committed only when it reaches its minimum.
  if (absl::Status s = CheckGangs(); !s.ok()) {
    Discard();
    return s;
  }
  done_ = true;
  if (parent_) {
    for (Op& op : ops_) parent_->ops_.push_back(std::move(op));
    ops_.clear();
    return absl::OkStatus();
  }
  if (!ops_.empty()) {
    // Admissions alone (Pending -> Inqueue) change no placement.
    const bool admissions_only = std::all_of(ops_.begin(), ops_.end(), [](const Op& op) {
      return op.kind == Op::Kind::kPhase && op.prev_phase == JobPhase::kPending && op.phase == JobPhase::kInqueue;
    });
    session_.NoteCommit(admissions_only);
  }
  State& state = session_.mutable_state();
  const Timestamp now = session_.now();
  const bool grace = std::any_of(ops_.begin(), ops_.end(), [&](const Op& op) {
    return op.kind == Op::Kind::kVacate && op.deadline > now;
  });
  if (grace) HoldForGrace();
  for (const Op& op : ops_) {
    if (op.kind == Op::Kind::kReserve) continue;
    Job& job = state.job(op.job);
    switch (op.kind) {
      case Op::Kind::kAllocate:
        if (!grace) session_.RecordBind(job, op.task);
        break;
      case Op::Kind::kPromote:
        session_.RecordBind(job, op.task);
        break;
      case Op::Kind::kPipeline:
      case Op::Kind::kPhase:
      case Op::Kind::kUnpipeline:
      case Op::Kind::kAddTask:
      case Op::Kind::kReserve:
        break;  // pipelined: released when the session closes; the job waits whole
      case Op::Kind::kEvict:
        session_.RecordEviction(job, op.task, op.reason, op.deadline, {}, op.node);
        break;
      case Op::Kind::kVacate:
        job.AddYieldedTo(op.beneficiary);
        session_.RecordEviction(job, op.task, op.reason, std::max(op.deadline, now),
                                state.job(op.beneficiary).name(), op.node);
        break;
    }
  }
  ops_.clear();
  return absl::OkStatus();
}

}  // namespace ringmaster::scheduler
