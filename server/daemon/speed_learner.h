// The daemon's learned speed models (issue 24 §4, docs/SHIM.md "Speed
// reports"): what each job's workers measured of its step time reaches the
// coordinator (rank 0's CommitProgress); the learner reads it from there,
// fits it (server/coordinator/learned_speed.h), gives the model to the
// engine's job (Engine::SetJobSpeed, read by the speedup plugin as a
// measured table is in replays) and journals the observations, so that a
// restarted daemon starts from what was learned.
//
// A job's model is replaced when its workers were measured at a size not
// seen before, and otherwise at most every `refit_every` (each replacement
// is an event for the engine: it re-judges the job's size). A job is found
// by its coordinator name: the engine's job name (admin jobs; a pod gang's
// first attempt). Not thread-safe: call under the engine's lock.
#ifndef RINGMASTER_SERVER_DAEMON_SPEED_LEARNER_H_
#define RINGMASTER_SERVER_DAEMON_SPEED_LEARNER_H_

#include <functional>
#include <map>
#include <set>
#include <string>
#include <utility>
#include <vector>

#include "absl/time/time.h"
#include "scheduler/engine.h"
#include "server/coordinator/coordinator.h"
#include "server/coordinator/learned_speed.h"
#include "server/journal/journal.h"

namespace ringmaster::server {

class SpeedLearner {
 public:
  // Where the reports come from: Coordinator::AllSpeedReports in serve.
  using ReportSource = std::function<std::vector<Coordinator::SpeedReports>()>;
  // `journal` may be null (serve without --state).
  SpeedLearner(ReportSource reports, Journal* journal, absl::Duration refit_every = absl::Seconds(30))
      : reports_(std::move(reports)), journal_(journal), refit_every_(refit_every) {}

  // The journal's observations (Recovered::speeds): the starting point of
  // each active job's model, given at once to the engine's job of that name
  // (rows of jobs that ended are left out). A row that does not parse is
  // logged and skipped (the model is learned again).
  void Restore(const std::vector<std::pair<std::string, std::string>>& rows, scheduler::Engine& engine);

  // Reads the coordinator's reports; fits and hands on each active job's
  // model that is due (see the file comment); forgets jobs the engine no
  // longer runs. Returns the number of models given.
  int Learn(scheduler::Engine& engine, absl::Time now);

 private:
  struct Learned {
    std::vector<SpeedObservation> base;  // from the journal (a previous run)
    int64_t seen_reports = -1;           // the coordinator's count last read
    std::set<std::pair<int, int>> sizes;  // sizes of the model given last
    absl::Time given_at = absl::InfinitePast();
  };
  // Fits `obs` and gives the model to job `id`; false when nothing fits.
  bool Give(scheduler::Engine& engine, scheduler::JobId id, const std::string& job,
            const std::vector<SpeedObservation>& obs, Learned& l, absl::Time now);

  ReportSource reports_;
  Journal* journal_;
  const absl::Duration refit_every_;
  std::map<std::string, Learned> jobs_;
};

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_DAEMON_SPEED_LEARNER_H_
