// A gang of pods as the extender knows it (server/extender/extender.h): its
// member pods in arrival order, the engine job they form once submitted,
// each member's reservation and binding, and whether it was cancelled. The
// extender owns every Gang; gang_store.h writes them to its store and reads
// them back.
#ifndef RINGMASTER_SERVER_EXTENDER_GANG_H_
#define RINGMASTER_SERVER_EXTENDER_GANG_H_

#include <cstdint>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "scheduler/clock.h"
#include "scheduler/job.h"
#include "server/extender/kube_objects.h"

namespace ringmaster::server {

// A member's task before its gang is submitted, or when it arrived after.
inline constexpr uint32_t kNoTask = UINT32_MAX;

struct GangMember {
  std::string key;  // namespace/name
  std::string uid;
  PodInfo pod;
  nlohmann::json raw;  // the Pod object read into `pod` (for the store)
  uint32_t task = kNoTask;
  std::string node;  // reserved node (or, when `stopping`, the node it is evicted from); empty when none
  std::vector<int16_t> gpus;  // on `node`
  bool bound = false;
  // Bound, then its gang was cancelled: the pod is being evicted from
  // `node`, whose GPUs the engine holds until the cancel deadline.
  bool stopping = false;
  // The nodes kube-scheduler offered in the last filter of a pod of the
  // gang with this pod's request shape, by NodeId (empty: no filter since
  // a restart, no restriction).
  std::vector<bool> offered;
  // Reserved and not stopping: the node its filter passes and bind takes.
  bool reserved() const { return !node.empty() && !stopping; }
};

struct Gang {
  std::string name;  // "namespace/group", or "namespace/pod" for a gang of one
  int min_member = 0;
  std::string unresolvable;  // why the gang can never be submitted as is
  std::vector<GangMember> members;  // in arrival order
  scheduler::JobId job;  // invalid until submitted
  scheduler::Timestamp deadline = -1;  // its reservations expire then
  bool cancelled = false;  // extender.h, step 8
  scheduler::Timestamp cancel_deadline = -1;  // its stopping pods' GPUs are free then
  // The member holding each engine task (indices into `members`).
  std::vector<uint32_t> member_of_task;
};

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_EXTENDER_GANG_H_
