// What each active job accumulated that the policy reads (scheduler::JobHistory:
// attained service, last start, stop and resize, the jobs it yielded to)
// across daemon restarts, so that a restart changes none of the default
// policy's decisions: las' levels and levelCooldown, the preemption and
// elastic cooldowns, gittins, victims' work at risk and rule 4 read the same
// values after it. `serve --state` keeps one row per active job (the API's
// and the extender's pod gangs) in the journal's job_history table: the
// daemon's background tick writes, every 0.1 s, the jobs whose record
// changed (a record changes only when the GPUs a job holds or one of its
// stamps change, not with the clock: the service in between is the recorded
// one plus the held GPU milli times the time since), drops the rows of jobs
// that ended, and with every write and at least every
// DaemonOptions::queue_usage_every_ms notes when it last wrote
// ('history_seen'). At start, after the jobs are re-adopted and before the
// first cycle, each job of the journal gets its record back
// (Engine::RestoreJobHistory says what becomes of the time the daemon was
// down: a job re-adopted where it ran counts it as run). A kill -9 loses
// the changes of the last 0.1 s (and those not yet committed).
// Not thread-safe: call under the engine's lock.
#ifndef RINGMASTER_SERVER_DAEMON_JOB_HISTORY_H_
#define RINGMASTER_SERVER_DAEMON_JOB_HISTORY_H_

#include <cstdint>
#include <functional>
#include <string>
#include <unordered_map>

#include "scheduler/engine.h"
#include "server/journal/journal.h"

namespace ringmaster::server {

class ActiveJobHistory {
 public:
  // `journal` may be null (serve without --state: nothing is kept).
  explicit ActiveJobHistory(Journal* journal) : journal_(journal) {}

  // The journal's records (Recovered::histories) to the engine's active
  // jobs of those names (Engine::RestoreJobHistory, the jobs they yielded
  // to by name; a name the engine does not have is left out). Call once,
  // after the jobs are re-adopted and before the engine's first cycle. Each
  // row the journal skipped (Recovered::history_skipped), and each record
  // the engine refuses (a value out of range), is logged naming the job and
  // the field, and that job starts from nothing, as a new one; a record of
  // a job not active any more is dropped from the journal. Returns the jobs
  // given their record.
  size_t Restore(const Recovered& recovered, scheduler::Engine& engine);

  // The records of the active jobs that changed since they were last
  // written to the journal, and the drop of those of jobs no longer active
  // (queued, not waited for), with 'history_seen' = `now` (the engine's
  // clock); with `force`, that write happens even when nothing changed. A
  // job for which `stopped` answers true is recorded as stopped now,
  // holding nothing (the daemon stopped its processes at shutdown: the time
  // down is not time run). O(active jobs). Returns the records written.
  size_t Save(const scheduler::Engine& engine, scheduler::Timestamp now, bool force,
              const std::function<bool(const scheduler::Job&)>& stopped = nullptr);

  // The record as the journal keeps it (yielded_to by name), and back
  // (names the engine does not have left out).
  static JournaledJobHistory ToJournal(const scheduler::Engine& engine, const scheduler::Job& job,
                                       const scheduler::JobHistory& h);
  static scheduler::JobHistory FromJournal(const scheduler::Engine& engine, const JournaledJobHistory& row);

 private:
  struct Written {
    std::string name;
    scheduler::JobHistory history;
    uint64_t pass = 0;  // the Save that last saw the job active
  };
  Journal* journal_;
  bool restored_ = false;
  uint64_t pass_ = 0;
  std::unordered_map<uint32_t, Written> written_;  // by JobId value
};

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_DAEMON_JOB_HISTORY_H_
