#include "server/daemon/speed_learner.h"

#include "common/logging.h"

namespace ringmaster::server {

void SpeedLearner::Restore(const std::vector<std::pair<std::string, std::string>>& rows, scheduler::Engine& engine) {
  for (const auto& [job, text] : rows) {
    absl::StatusOr<std::vector<SpeedObservation>> obs = ParseSpeedObservations(text);
    if (!obs.ok()) {
      common::LogIfError(obs.status(), "journal: speed observations skipped", {{"job", job}});
      continue;
    }
    Learned& l = jobs_[job];
    l.base = *std::move(obs);
    l.pending_base = !Give(engine, job, l.base, l, absl::InfinitePast());
  }
}

bool SpeedLearner::Give(scheduler::Engine& engine, const std::string& job, const std::vector<SpeedObservation>& obs,
                        Learned& l, absl::Time now) {
  const scheduler::JobId id = engine.FindJob(job);
  if (!id.valid() || !engine.state().active_jobs().contains(id)) return false;
  absl::StatusOr<std::shared_ptr<const LearnedSpeedModel>> model = LearnedSpeedModel::Fit(obs);
  if (!model.ok()) return false;
  if (!engine.SetJobSpeed(id, *model).ok()) return false;
  l.sizes.clear();
  for (const SpeedObservation& o : obs) l.sizes.insert({o.gpus, o.nodes});
  l.given_at = now;
  common::Log(common::LogLevel::info, "speed model", {{"job", job}, {"model", (*model)->Describe()}});
  return true;
}

int SpeedLearner::Learn(scheduler::Engine& engine, absl::Time now) {
  int given = 0;
  for (const Coordinator::SpeedReports& r : reports_()) {
    Learned& l = jobs_[r.job];
    if (r.reports == l.seen_reports && !l.pending_base) continue;
    l.seen_reports = r.reports;
    std::vector<SpeedObservation> merged = MergeSpeedObservations(l.base, r.sizes);
    std::set<std::pair<int, int>> sizes;
    for (const SpeedObservation& o : merged) sizes.insert({o.gpus, o.nodes});
    const bool new_size = sizes != l.sizes;
    if (!new_size && !l.pending_base && now - l.given_at < refit_every_) continue;
    if (!Give(engine, r.job, merged, l, now)) continue;
    l.pending_base = false;
    if (journal_ != nullptr) journal_->SetSpeed(r.job, SpeedObservationsText(merged));
    ++given;
  }
  return given;
}

}  // namespace ringmaster::server
