// A Statement is a transaction over the session: every operation changes the
// live state as it is recorded, so later placements in the same cycle see it;
// Discard undoes them in reverse order; Commit makes them decisions. This is
// how a gang is placed all-or-nothing, and how preemption tries a victim set
// before it evicts anything.
//
// Contract:
//   - Discard is idempotent and safe after Commit (then it does nothing).
//   - Commit fails, and discards, when a job it allocated for is below its gang
//     minimum. Pipelined tasks never count: they are promises, released when
//     the session closes (unless held for a preemptor, see Vacate).
//   - A Statement destroyed while open discards.
//   - A child statement (constructed with a parent) commits into its parent:
//     its operations become the parent's, and only the parent's Commit makes
//     decisions. Discarding the parent undoes the child's committed work too.
#ifndef RINGMASTER_SCHEDULER_STATEMENT_H_
#define RINGMASTER_SCHEDULER_STATEMENT_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/container/inlined_vector.h"
#include "absl/status/status.h"
#include "scheduler/session.h"

namespace ringmaster::scheduler {

class Statement {
 public:
  explicit Statement(Session& session, Statement* parent = nullptr)
      : session_(session),
        parent_(parent),
        epoch_(session.state().epoch()),
        commits_(session.commits()) {}
  ~Statement() { Discard(); }
  Statement(const Statement&) = delete;
  Statement& operator=(const Statement&) = delete;

  // Pending -> Allocated on `node` with `gpus`.
  void Allocate(Job& job, uint32_t task, NodeId node, std::vector<int16_t> gpus);
  // Pending -> Pipelined: promised the node's future idle.
  void Pipeline(Job& job, uint32_t task, NodeId node, std::vector<int16_t> gpus);
  // Running/Bound -> Releasing (the caller's grace period ends at `deadline`).
  void Evict(Job& job, uint32_t task, std::string reason, Timestamp deadline = -1);
  // Takes a running task off its node for `beneficiary` (a preemptor): its
  // resources are free at once for the rest of the statement, so the
  // preemptor's placement is tried on the state without it. On Commit the
  // task becomes an eviction with `deadline`: when the deadline is in the
  // future the task goes back on its node as Releasing, and every task this
  // statement allocated becomes Pipelined on the same GPUs, held for its job
  // (Job::nominated) until the victims are gone. Otherwise it is released now.
  void Vacate(Job& job, uint32_t task, JobId beneficiary, std::string reason, Timestamp deadline);
  // A held Pipelined task whose GPUs are free now -> Allocated (a bind).
  void Promote(Job& job, uint32_t task);
  // The job's phase (Pending -> Inqueue on admission; Running -> Inqueue for
  // a gang that lost its minimum).
  void SetPhase(Job& job, JobPhase phase);
  // Whether the job's pipelined tasks are held across cycles.
  void SetNominated(Job& job, bool nominated);
  // Pipelined -> Pending (a held promise given up).
  void Unpipeline(Job& job, uint32_t task);
  // Appends a Pending task of `role` (elastic growth past the submitted size).
  void AddTask(Job& job, int role);
  // Replaces the head-of-line reservation (nullopt: none).
  void SetReservation(std::optional<Reservation> r);

  void Discard();
  absl::Status Commit();

  size_t size() const { return ops_.size(); }
  bool open() const { return !done_; }

 private:
  struct Op {
    enum class Kind { kAllocate, kPipeline, kEvict, kVacate, kPromote, kPhase, kUnpipeline, kAddTask, kReserve };
    Kind kind;
    JobId job;
    uint32_t task = 0;
    TaskState prev = TaskState::kPending;
    std::string reason;
    NodeId node;                 // kVacate: where the task was
    std::vector<int16_t> gpus;   // kVacate: what it held
    Timestamp deadline = -1;     // kEvict, kVacate
    JobId beneficiary;           // kVacate
    JobPhase prev_phase = JobPhase::kPending;  // kPhase
    JobPhase phase = JobPhase::kPending;       // kPhase
    bool nominated = false;                    // kPhase: the job's flag before
    std::optional<Reservation> reservation;    // kReserve: the one before
  };
  // Turns a vacated victim back into a Releasing task and the allocations
  // into held pipelined tasks (a Vacate with a deadline in the future).
  void HoldForGrace();
  absl::Status CheckGangs() const;
  void Undo(const Op& op);

  Session& session_;
  Statement* parent_;
  // The state's epoch and the session's commits when the statement opened:
  // a Discard with no commit since leaves the state as it found it, and
  // gives it its epoch back (State::epoch).
  uint64_t epoch_;
  int commits_;
  // A statement holds a few operations (a gang's tasks, a victim's): inline
  // room for them spares a heap allocation per statement opened.
  absl::InlinedVector<Op, 4> ops_;
  bool done_ = false;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_STATEMENT_H_
