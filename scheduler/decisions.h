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

struct Eviction {
  JobId job;
  uint32_t task = 0;
  std::string task_name;
  NodeId node;
  std::string node_name;
  std::string reason;
};

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

struct MembershipChange {
  enum class Kind { kStart, kShrink, kGrow, kFailure };
  JobId job;
  std::string job_name;
  int64_t generation = 0;
  Kind kind = Kind::kStart;
  std::vector<Member> members;  // ordered by rank
};

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
