// What a job that ended leaves for the policies that learn from the jobs seen
// to end (gittins' histogram of service, backfill's learned walltimes): its
// run as the engine saw it, taken when the job ends (State::FinishJob), or
// given back from the daemon's journal after a restart
// (State::RestoreEndedJobs; server/daemon/ended_job_history.h). A learner
// reads only this record, never the Job, so that a restored record teaches
// it exactly what the job taught the process it ended in.
#ifndef RINGMASTER_SCHEDULER_ENDED_JOB_H_
#define RINGMASTER_SCHEDULER_ENDED_JOB_H_

#include <cstdint>
#include <string>

#include "scheduler/job.h"

namespace ringmaster::scheduler {

struct EndedJob {
  JobId id;                   // invalid: restored (it ended before this process started)
  std::string name;
  std::string queue;          // JobSpec::queue
  int64_t min_gpu_milli = 0;  // GPU milli of its gang minimum (Job::min_request)
  JobPhase phase = JobPhase::kCompleted;  // Completed, Failed or Aborted
  // Job::AttainedMilliMs when it ended: it holds nothing then, so the value
  // is final.
  int64_t attained_milli_ms = 0;
  Timestamp started = -1;       // Job::started: its last start; -1: it never ran
  Timestamp last_stopped = -1;  // Job::last_stopped: when it let go of its nodes
  Timestamp ended_at = 0;       // on the state's clock

  // A job cancelled, or one that never ran, teaches no learner: the one
  // test both learners (and the journal, which keeps only these) apply.
  bool Teaches() const { return phase != JobPhase::kAborted && started >= 0; }
  bool operator==(const EndedJob&) const = default;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_ENDED_JOB_H_
