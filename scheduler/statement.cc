#include "scheduler/statement.h"

#include <algorithm>

#include "absl/strings/str_cat.h"

namespace ringmaster::scheduler {

void Statement::Allocate(Job& job, uint32_t task, NodeId node, std::vector<int16_t> gpus) {
  ops_.push_back({Op::Kind::kAllocate, job.id(), task, job.task(task).state, {}});
  session_.state().Place(job, task, node, gpus, TaskState::kAllocated);
}

void Statement::Pipeline(Job& job, uint32_t task, NodeId node, std::vector<int16_t> gpus) {
  ops_.push_back({Op::Kind::kPipeline, job.id(), task, job.task(task).state, {}});
  session_.state().Place(job, task, node, gpus, TaskState::kPipelined);
}

void Statement::Evict(Job& job, uint32_t task, std::string reason) {
  ops_.push_back({Op::Kind::kEvict, job.id(), task, job.task(task).state, std::move(reason)});
  session_.state().SetState(job, task, TaskState::kReleasing);
}

void Statement::Discard() {
  if (done_) return;
  done_ = true;
  State& state = session_.state();
  for (auto it = ops_.rbegin(); it != ops_.rend(); ++it) {
    Job& job = state.job(it->job);
    switch (it->kind) {
      case Op::Kind::kAllocate:
      case Op::Kind::kPipeline:
        state.Unplace(job, it->task);
        break;
      case Op::Kind::kEvict:
        state.SetState(job, it->task, it->prev);
        break;
    }
  }
  ops_.clear();
}

absl::Status Statement::Commit() {
  if (done_) return absl::FailedPreconditionError("statement already committed or discarded");
  State& state = session_.state();
  // A gang is committed only when it reaches its minimum.
  std::vector<JobId> touched;
  for (const Op& op : ops_) {
    if (op.kind == Op::Kind::kAllocate) touched.push_back(op.job);
  }
  std::sort(touched.begin(), touched.end());
  touched.erase(std::unique(touched.begin(), touched.end()), touched.end());
  for (JobId id : touched) {
    const Job& job = state.job(id);
    if (job.ReadyCount() < job.min_member()) {
      const std::string msg = absl::StrCat("gang ", job.name(), " has ", job.ReadyCount(),
                                           " of its minimum ", job.min_member(),
                                           " tasks; not committed");
      Discard();
      return absl::FailedPreconditionError(msg);
    }
  }
  done_ = true;
  for (const Op& op : ops_) {
    const Job& job = state.job(op.job);
    switch (op.kind) {
      case Op::Kind::kAllocate:
        session_.RecordBind(job, op.task);
        break;
      case Op::Kind::kPipeline:
        break;  // released when the session closes; the job waits whole
      case Op::Kind::kEvict:
        session_.RecordEviction(job, op.task, op.reason);
        break;
    }
  }
  ops_.clear();
  return absl::OkStatus();
}

}  // namespace ringmaster::scheduler
