#include "server/daemon/ended_job_history.h"

#include <algorithm>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace ringmaster::server {

using scheduler::EndedJob;
using scheduler::JobPhase;

namespace {

bool EndedPhase(int phase) {
  return phase == static_cast<int>(JobPhase::kCompleted) || phase == static_cast<int>(JobPhase::kFailed) ||
         phase == static_cast<int>(JobPhase::kAborted);
}

}  // namespace

EndedJob FromJournal(const JournaledEndedJob& row) {
  return {.id = scheduler::JobId(),
          .name = row.name,
          .queue = row.queue,
          .min_gpu_milli = row.min_gpu_milli,
          .phase = static_cast<JobPhase>(row.phase),
          .attained_milli_ms = row.attained_milli_ms,
          .started = row.started_ms,
          .last_stopped = row.last_stopped_ms,
          .ended_at = row.ended_at_ms};
}

JournaledEndedJob ToJournal(const EndedJob& e) {
  return {.seq = 0,
          .name = e.name,
          .queue = e.queue,
          .min_gpu_milli = e.min_gpu_milli,
          .phase = static_cast<int>(e.phase),
          .attained_milli_ms = e.attained_milli_ms,
          .started_ms = e.started,
          .last_stopped_ms = e.last_stopped,
          .ended_at_ms = e.ended_at};
}

size_t EndedJobHistory::Restore(const Recovered& recovered, scheduler::Engine& engine) {
  for (const std::string& why : recovered.ended_skipped) {
    common::Log(common::LogLevel::warn, "journal: ended job row skipped (the learners do not read that job)",
                {{"why", why}});
  }
  // A row of a table written by hand (or by a later version) whose phase is
  // not an ended one would teach what no job did.
  std::vector<EndedJob> ended;
  const size_t n = recovered.ended_jobs.size();
  const size_t first = n - std::min<size_t>(n, static_cast<size_t>(std::max<int64_t>(keep_, 0)));
  for (size_t i = first; i < n; ++i) {
    const JournaledEndedJob& row = recovered.ended_jobs[i];
    if (!EndedPhase(row.phase)) {
      common::Log(common::LogLevel::warn, "journal: ended job row skipped (the learners do not read that job)",
                  {{"why", absl::StrCat("journal ", journal_ ? journal_->path() : "", ": table ended_jobs, seq ",
                                        row.seq, " (job '", row.name, "'), column phase: ", row.phase,
                                        " is not an ended phase (Completed, Failed or Aborted)")}});
      continue;
    }
    ended.push_back(FromJournal(row));
  }
  if (!ended.empty()) {
    engine.RestoreEndedJobs(ended);
    common::Log(common::LogLevel::info, "ended jobs restored",
                {{"jobs", ended.size()}, {"left_out_over_keep", first}});
  }
  saved_ = engine.state().ended_end();
  restored_ = true;
  // keep 0 (none kept): what an earlier run kept goes now, not at the next
  // write (Save writes none).
  if (journal_ != nullptr && keep_ <= 0 && n > 0) journal_->AddEndedJobs({}, 0);
  return ended.size();
}

size_t EndedJobHistory::Save(const scheduler::Engine& engine) {
  // Before Restore, the engine's list does not hold the journal's yet:
  // writing would put new jobs before them.
  if (journal_ == nullptr || !restored_) return 0;
  const scheduler::State& st = engine.state();
  if (saved_ >= st.ended_end()) return 0;
  if (keep_ <= 0) {
    saved_ = st.ended_end();
    return 0;
  }
  std::vector<JournaledEndedJob> rows;
  for (saved_ = std::max<uint64_t>(saved_, st.ended_begin()); saved_ < st.ended_end(); ++saved_) {
    if (st.ended_job(saved_).Teaches()) rows.push_back(ToJournal(st.ended_job(saved_)));
  }
  const size_t written = rows.size();
  if (!rows.empty()) journal_->AddEndedJobs(std::move(rows), keep_);
  return written;
}

}  // namespace ringmaster::server
