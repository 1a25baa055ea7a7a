// A Statement is a transaction over the session: Allocate, Pipeline and Evict
// change the live state as they are recorded, so later placements in the same
// cycle see them; Discard undoes them in reverse order; Commit makes them
// decisions. This is how a gang is placed all-or-nothing.
//
// Contract:
//   - Discard is idempotent and safe after Commit (then it does nothing).
//   - Commit fails, and discards, when a job it allocated for is below its gang
//     minimum. Pipelined tasks never count: they are promises, released when
//     the session closes.
//   - A Statement destroyed while open discards.
#ifndef RINGMASTER_SCHEDULER_STATEMENT_H_
#define RINGMASTER_SCHEDULER_STATEMENT_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "scheduler/session.h"

namespace ringmaster::scheduler {

class Statement {
 public:
  explicit Statement(Session& session) : session_(session) {}
  ~Statement() { Discard(); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Pending -> Allocated on `node` with `gpus`.
  void Allocate(Job& job, uint32_t task, NodeId node, std::vector<int16_t> gpus);
  // Pending -> Pipelined: promised the node's future idle.
  void Pipeline(Job& job, uint32_t task, NodeId node, std::vector<int16_t> gpus);
  // Running/Bound -> Releasing.
  void Evict(Job& job, uint32_t task, std::string reason);

  void Discard();
  absl::Status Commit();

  size_t size() const { return ops_.size(); }
  bool open() const { return !done_; }

 private:
  struct Op {
    enum class Kind { kAllocate, kPipeline, kEvict };
    Kind kind;
    JobId job;
    uint32_t task;
    TaskState prev;
    std::string reason;
  };
  Session& session_;
  std::vector<Op> ops_;
  bool done_ = false;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_STATEMENT_H_
