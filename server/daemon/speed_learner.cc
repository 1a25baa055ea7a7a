#include "server/daemon/speed_learner.h"

#include "common/logging.h"

namespace ringmaster::server {

namespace {

// The engine's active job of that name; invalid when none (ended, or a
// coordinator job the engine does not run).
scheduler::JobId ActiveJob(const scheduler::Engine& engine, const std::string& name) {
  const scheduler::JobId id = engine.FindJob(name);
  return id.valid() && engine.state().active_jobs().contains(id) ? id : scheduler::JobId();
}

}  // namespace

void SpeedLearner::Restore(const std::vector<std::pair<std::string, std::string>>& rows, scheduler::Engine& engine) {
  for (const auto& [job, text] : rows) {
    const scheduler::JobId id = ActiveJob(engine, job);
    if (!id.valid()) continue;  // ended before the restart: its model is of no use
    absl::StatusOr<std::vector<SpeedObservation>> obs = ParseSpeedObservations(text);
    if (!obs.ok()) {
      common::LogIfError(obs.status(), "journal: speed observations skipped", {{"job", job}});
      continue;
    }
    Learned& l = jobs_[job];
    l.base = *std::move(obs);
    Give(engine, id, job, l.base, l, absl::InfinitePast());
  }
}

bool SpeedLearner::Give(scheduler::Engine& engine, scheduler::JobId id, const std::string& job,
                        const std::vector<SpeedObservation>& obs, Learned& l, absl::Time now) {
  absl::StatusOr<std::shared_ptr<const LearnedSpeedModel>> model = LearnedSpeedModel::Fit(obs);
  if (!model.ok() || !engine.SetJobSpeed(id, *model).ok()) return false;
  l.sizes.clear();
  for (const SpeedObservation& o : obs) l.sizes.insert({o.gpus, o.nodes});
  l.given_at = now;
  common::Log(common::LogLevel::info, "speed model", {{"job", job}, {"model", (*model)->Describe()}});
  return true;
}

int SpeedLearner::Learn(scheduler::Engine& engine, absl::Time now) {
  // What the engine no longer runs is forgotten (its journal row stays).
  std::erase_if(jobs_, [&](const auto& kv) { return !ActiveJob(engine, kv.first).valid(); });
  int given = 0;
  for (const Coordinator::SpeedReports& r : reports_()) {
    const scheduler::JobId id = ActiveJob(engine, r.job);
    if (!id.valid()) continue;
    Learned& l = jobs_[r.job];
    if (r.reports == l.seen_reports) continue;
    l.seen_reports = r.reports;
    std::vector<SpeedObservation> merged = MergeSpeedObservations(l.base, r.sizes);
    std::set<std::pair<int, int>> sizes;
    for (const SpeedObservation& o : merged) sizes.insert({o.gpus, o.nodes});
    if (sizes == l.sizes && now - l.given_at < refit_every_) continue;
    if (!Give(engine, id, r.job, merged, l, now)) continue;
    if (journal_ != nullptr) journal_->SetSpeed(r.job, SpeedObservationsText(merged));
    ++given;
  }
  return given;
}

}  // namespace ringmaster::server
