// The jobs seen to end, as the learners read them (scheduler/ended_job.h:
// gittins' histogram of service, backfill's learned walltimes; docs/POLICY.md),
// across daemon restarts. The engine keeps them (State::ended_jobs);
// `serve --state` appends each one that teaches a learner to the journal's
// ended_jobs table within 0.1 s of its end (the daemon's background tick)
// and at shutdown, keeping the last `keep`; at start the engine gets
// them back, in the order they ended, before any job of this process ends,
// and the learners read them as if those jobs had ended here (the same
// histogram, the same estimates). A kill -9 loses the jobs that ended in the
// last 0.1 s and those whose write was not yet committed (one transaction).
// Not thread-safe: call under the engine's lock.
#ifndef RINGMASTER_SERVER_DAEMON_ENDED_JOB_HISTORY_H_
#define RINGMASTER_SERVER_DAEMON_ENDED_JOB_HISTORY_H_

#include <cstdint>

#include "scheduler/engine.h"
#include "server/journal/journal.h"

namespace ringmaster::server {

class EndedJobHistory {
 public:
  // The jobs the journal keeps by default (serve --ended-jobs-kept): at a
  // few hundred bytes a row, tens of MB at most, and enough for every
  // learner's percentile or histogram to settle.
  static constexpr int64_t kDefaultKeep = 100'000;

  // `journal` may be null (serve without --state: nothing is kept). `keep`
  // >= 0: the journal keeps the last `keep` records (0: none).
  EndedJobHistory(Journal* journal, int64_t keep) : journal_(journal), keep_(keep) {}

  // The journal's records (Recovered::ended_jobs), the last `keep` of them,
  // to the engine in their end order (Engine::RestoreEndedJobs). Call once,
  // before the engine's first cycle and before any job ends. Each row the
  // journal skipped (Recovered::ended_skipped) is logged with its table, row
  // and column, and so is a row whose phase is not an ended one (skipped).
  // Returns the records given.
  size_t Restore(const Recovered& recovered, scheduler::Engine& engine);

  // The jobs that ended since Restore or the last Save and teach a learner
  // (EndedJob::Teaches) to the journal (queued, not waited for). Returns the
  // records written.
  size_t Save(const scheduler::Engine& engine);

 private:
  Journal* journal_;
  int64_t keep_;
  uint64_t saved_ = 0;  // State::ended_job records handled so far (an index from the first ever)
  bool restored_ = false;
};

// The journal's row as the engine's record (id invalid), and back (seq 0:
// the journal gives it).
scheduler::EndedJob FromJournal(const JournaledEndedJob& row);
JournaledEndedJob ToJournal(const scheduler::EndedJob& ended);

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_DAEMON_ENDED_JOB_HISTORY_H_
