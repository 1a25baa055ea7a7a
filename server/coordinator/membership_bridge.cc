#include "server/coordinator/membership_bridge.h"

#include <algorithm>

#include "common/logging.h"

namespace ringmaster::server {

api::Reason ReasonOf(scheduler::MembershipChange::Kind kind) {
  using Kind = scheduler::MembershipChange::Kind;
  switch (kind) {
    case Kind::kStart: return api::REASON_INITIAL;
    case Kind::kShrink: return api::REASON_PLANNED_SHRINK;
    case Kind::kGrow: return api::REASON_GROW;
    case Kind::kFailure: return api::REASON_FAILURE;
  }
  return api::REASON_UNSPECIFIED;
}

std::string WorkerIdOf(const scheduler::Member& m, const CoordinatorNames* names) {
  if (names) {
    if (auto it = names->workers.find(m.task); it != names->workers.end() && !it->second.empty()) return it->second;
  }
  return m.task_name;
}

MembershipTarget TargetOf(const scheduler::MembershipChange& m, const CoordinatorNames* names) {
  MembershipTarget t;
  t.job = names && !names->job.empty() ? names->job : m.job_name;
  t.reason = ReasonOf(m.kind);
  std::vector<const scheduler::Member*> by_rank;
  for (const scheduler::Member& mem : m.members) by_rank.push_back(&mem);
  std::stable_sort(by_rank.begin(), by_rank.end(),
                   [](const scheduler::Member* a, const scheduler::Member* b) { return a->rank < b->rank; });
  for (const scheduler::Member* mem : by_rank) t.workers.push_back(WorkerIdOf(*mem, names));
  if (m.deadline >= 0) t.deadline = absl::FromUnixMillis(m.deadline);
  return t;
}

void MembershipBridge::JobEnded(scheduler::JobId id, const std::string& engine_name) {
  const std::optional<CoordinatorNames> names = names_ ? names_(id) : std::nullopt;
  coordinator_.DropJob(names && !names->job.empty() ? names->job : engine_name);
}

absl::Status MembershipBridge::Apply(const scheduler::MembershipChange& m) {
  const std::optional<CoordinatorNames> names = names_ ? names_(m.job) : std::nullopt;
  MembershipTarget t = TargetOf(m, names ? &*names : nullptr);
  if (t.workers.empty()) return absl::OkStatus();  // nobody left to tell
  auto g = coordinator_.SetMembers(t.job, std::move(t.workers), t.reason, t.deadline);
  if (!g.ok()) {
    common::Log(common::LogLevel::warn, "membership not applied",
                {{"job", t.job}, {"engine_job", m.job_name}, {"engine_generation", m.generation}, {"error", std::string(g.status().message())}});
    return g.status();
  }
  if (m.kind != scheduler::MembershipChange::Kind::kStart) {
    // A resize in serve's log with the engine's reason (the grow's gain by
    // the job's speed model, the shrink's preemptor).
    common::Log(common::LogLevel::info, "membership changed",
                {{"job", m.job_name}, {"kind", std::string(scheduler::MembershipKindName(m.kind))},
                 {"members", m.members.size()}, {"generation", m.generation}, {"why", m.reason}});
  }
  return absl::OkStatus();
}

absl::Status MembershipBridge::OnCycle(const scheduler::Decisions& d) {
  absl::Status first;
  for (const scheduler::MembershipChange& m : d.membership) {
    if (absl::Status s = Apply(m); !s.ok() && first.ok()) first = s;
  }
  return first;
}

}  // namespace ringmaster::server
