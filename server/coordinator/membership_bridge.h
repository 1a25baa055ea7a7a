// The engine -> coordinator half of the loop in `ringmaster serve`: each
// MembershipChange the engine decides (scheduler/decisions.h) becomes the
// coordinator's target membership for that job (Coordinator::SetMembers).
//
// Mapping:
//   engine job name      = coordinator job (the shim's --job)
//   engine task name     = coordinator worker id (the shim's --worker),
//                          "<job>-<role>-<i>" as `ringmaster job NAME` shows
//   member order (ranks) = the engine's ring order (Member::rank)
//   kStart               -> INITIAL: published once every member has joined
//   kShrink              -> PLANNED_SHRINK at once; the leavers get the
//                           generation with rank -1, leave at their step
//                           boundary, and must be gone by the engine's
//                           deadline (the update's deadline)
//   kGrow                -> GROW once every newcomer has joined
//   kFailure             -> FAILURE (usually already published by the
//                           coordinator itself when the worker's stream
//                           dropped; then nothing changes)
// A gang of pods from the extender is named as its pods know themselves
// (the names a shim in the pod gets from the downward API): coordinator job
// = the gang ("NAMESPACE/GROUP"), worker id = the pod's name, through the
// NameSource the daemon sets (Extender::PodNamesLocked); the engine's task
// names stay the engine's.
// The coordinator numbers its own generations (it also publishes the
// failures it detects); the engine's generation is journaled with the
// job's placement (server/journal/journal.h).
#ifndef RINGMASTER_SERVER_COORDINATOR_MEMBERSHIP_BRIDGE_H_
#define RINGMASTER_SERVER_COORDINATOR_MEMBERSHIP_BRIDGE_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "api/coordinator.pb.h"
#include "scheduler/decisions.h"
#include "server/coordinator/coordinator.h"

namespace ringmaster::server {

// What the coordinator is told for one MembershipChange.
struct MembershipTarget {
  std::string job;
  std::vector<std::string> workers;  // rank order
  api::Reason reason = api::REASON_UNSPECIFIED;
  absl::Time deadline = absl::InfiniteFuture();
};

// The coordinator's names for a job whose workers are not named after the
// engine's tasks.
struct CoordinatorNames {
  std::string job;
  std::map<uint32_t, std::string> workers;  // engine task index -> worker id
};
// Names for the job, or nullopt: the engine's (job name, task names).
using NameSource = std::function<std::optional<CoordinatorNames>(scheduler::JobId)>;

api::Reason ReasonOf(scheduler::MembershipChange::Kind kind);
// The worker id of an engine task (its name, or names->workers' entry).
std::string WorkerIdOf(const scheduler::Member& m, const CoordinatorNames* names = nullptr);
// Members ordered by rank; the engine's deadline (Unix ms, -1: none) as a
// time; the job and workers named by `names` when given.
MembershipTarget TargetOf(const scheduler::MembershipChange& m, const CoordinatorNames* names = nullptr);

class MembershipBridge {
 public:
  explicit MembershipBridge(Coordinator& coordinator) : coordinator_(coordinator) {}
  // Set before the first cycle; called under the engine lock.
  void SetNames(NameSource names) { names_ = std::move(names); }

  // Hands every membership change of a cycle to the coordinator, in order;
  // a change the coordinator refuses (e.g. the job already finished) is
  // logged and skipped. Returns the first refusal, OK if none.
  absl::Status OnCycle(const scheduler::Decisions& d);
  absl::Status Apply(const scheduler::MembershipChange& m);
  // The engine no longer runs the job (finished, cancelled).
  void JobEnded(const std::string& job) { coordinator_.DropJob(job); }
  // The same, for engine job `id` named `engine_name`, under its
  // coordinator name.
  void JobEnded(scheduler::JobId id, const std::string& engine_name);

 private:
  Coordinator& coordinator_;
  NameSource names_;
};

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_COORDINATOR_MEMBERSHIP_BRIDGE_H_
