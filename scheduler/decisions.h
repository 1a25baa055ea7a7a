// What one scheduling cycle decided, for the driver to carry out: binds,
// evictions, pending reasons and membership generations.
#ifndef RINGMASTER_SCHEDULER_DECISIONS_H_
#define RINGMASTER_SCHEDULER_DECISIONS_H_

#include <string>
#include <vector>

#include "scheduler/job.h"

namespace ringmaster::scheduler {

struct Bind {
  JobId job;
  uint32_t task = 0;
  std::string task_name;
  NodeId node;
  std::string node_name;
  std::vector<int16_t> gpus;
};

// A task to stop: which, why, by when, and for whom.
struct Eviction {
  enum class Kind {
    kEvict,   // the whole job stops and waits again (preempt, reclaim, gang broken)
    kShrink,  // an elastic job gives up this member and runs on smaller
    kCancel,  // the job was cancelled
  };
  JobId job;
  uint32_t task = 0;
  std::string task_name;
  NodeId node;
  std::string node_name;
  std::string reason;
  Kind kind = Kind::kEvict;
  // The task must be gone by then (the grace period's end); its GPUs count
  // as free only once it is released (Engine::TaskReleased) or the deadline
  // passes.
  Timestamp deadline = -1;
  std::string preemptor;  // the job it makes room for; empty if none
};
std::string_view EvictionKindName(Eviction::Kind k);

// A waiting job's pending reason that this cycle changed (a job whose
// reason stays the same is not listed again: Job::pending_reason holds it).
struct PendingReason {
  JobId job;
  std::string job_name;
  std::string reason;
};

// One generation of a running job's membership, for the coordinator.
struct Member {
  uint32_t task = 0;
  std::string task_name;
  std::string node_name;
  std::vector<int16_t> gpus;
  int rank = 0;
};

// A new generation of a running job's membership. Generations of one job
// strictly increase.
struct MembershipChange {
  enum class Kind { kStart, kShrink, kGrow, kFailure };
  JobId job;
  std::string job_name;
  int64_t generation = 0;
  Kind kind = Kind::kStart;
  std::vector<Member> members;  // ordered by rank (the topology ring order)
  std::string reason;           // why: "shrunk for llm-pretrain (preempt)", ...
  // Shrink: the leavers must be gone by then. -1: no deadline.
  Timestamp deadline = -1;
};
std::string_view MembershipKindName(MembershipChange::Kind k);

struct Decisions {
  int64_t cycle = 0;
  std::vector<Bind> binds;
  std::vector<Eviction> evictions;
  std::vector<PendingReason> pending;
  std::vector<MembershipChange> membership;
  bool empty() const { return binds.empty() && evictions.empty() && membership.empty(); }
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_DECISIONS_H_
