#include "server/daemon/job_history.h"

#include <algorithm>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "common/logging.h"

namespace ringmaster::server {

using scheduler::JobHistory;
using scheduler::JobId;

JournaledJobHistory ActiveJobHistory::ToJournal(const scheduler::Engine& engine, const scheduler::Job& job,
                                                const JobHistory& h) {
  JournaledJobHistory row{.name = job.name(),
                          .attained_milli_ms = h.attained_milli_ms,
                          .attained_at_ms = h.attained_at,
                          .held_gpu_milli = h.held_gpu_milli,
                          .running = h.running,
                          .started_ms = h.started,
                          .last_stopped_ms = h.last_stopped,
                          .last_resize_ms = h.last_resize,
                          .yielded_to = {}};
  for (JobId y : h.yielded_to) {
    if (engine.state().has_job(y)) row.yielded_to.push_back(engine.state().job(y).name());
  }
  return row;
}

JobHistory ActiveJobHistory::FromJournal(const scheduler::Engine& engine, const JournaledJobHistory& row) {
  JobHistory h{.attained_milli_ms = row.attained_milli_ms,
               .attained_at = row.attained_at_ms,
               .held_gpu_milli = row.held_gpu_milli,
               .running = row.running,
               .started = row.started_ms,
               .last_stopped = row.last_stopped_ms,
               .last_resize = row.last_resize_ms,
               .yielded_to = {}};
  for (const std::string& name : row.yielded_to) {
    if (const JobId y = engine.FindJob(name); y.valid()) h.yielded_to.push_back(y);
  }
  std::sort(h.yielded_to.begin(), h.yielded_to.end());
  h.yielded_to.erase(std::unique(h.yielded_to.begin(), h.yielded_to.end()), h.yielded_to.end());
  return h;
}

size_t ActiveJobHistory::Restore(const Recovered& recovered, scheduler::Engine& engine) {
  constexpr const char* kSkipped = "journal: job history row skipped (that job starts from no history)";
  for (const std::string& why : recovered.history_skipped) {
    common::Log(common::LogLevel::warn, kSkipped, {{"why", why}});
  }
  // The last moment the previous daemon is known to have run.
  int64_t seen = recovered.history_seen_ms;
  for (const JournaledJobHistory& row : recovered.histories) seen = std::max(seen, row.attained_at_ms);
  const scheduler::State& st = engine.state();
  std::vector<std::string> stale;
  size_t given = 0;
  for (const JournaledJobHistory& row : recovered.histories) {
    const JobId id = engine.FindJob(row.name);
    if (!id.valid() || !st.active_jobs().count(id)) {
      stale.push_back(row.name);
      continue;
    }
    if (absl::Status s = engine.RestoreJobHistory(id, FromJournal(engine, row), seen); !s.ok()) {
      common::Log(common::LogLevel::warn, kSkipped,
                  {{"why", absl::StrCat("journal ", journal_ ? journal_->path() : "", ": table job_history, ",
                                        s.message())}});
      continue;
    }
    ++given;
  }
  if (given > 0) {
    common::Log(common::LogLevel::info, "job history restored", {{"jobs", given}, {"dropped", stale.size()}});
  }
  restored_ = true;
  if (journal_ != nullptr && !stale.empty()) {
    journal_->SetJobHistories({}, std::move(stale), std::max<int64_t>(seen, 0));
  }
  return given;
}

size_t ActiveJobHistory::Save(const scheduler::Engine& engine, scheduler::Timestamp now, bool force,
                              const std::function<bool(const scheduler::Job&)>& stopped) {
  // Before Restore the engine's jobs do not hold the journal's records yet:
  // writing would erase them.
  if (journal_ == nullptr || !restored_) return 0;
  const scheduler::State& st = engine.state();
  ++pass_;
  std::vector<JournaledJobHistory> put;
  for (JobId id : st.active_jobs()) {
    const scheduler::Job& job = st.job(id);
    JobHistory h = job.History();
    if (stopped && stopped(job)) {
      h.attained_milli_ms = job.AttainedMilliMs(now);
      h.attained_at = std::max(h.attained_at, now);
      h.held_gpu_milli = 0;
      h.running = false;
      h.last_stopped = std::max(h.last_stopped, now);
    }
    auto [it, added] = written_.try_emplace(id.value());
    it->second.pass = pass_;
    if (!added && it->second.history == h) continue;
    if (added) it->second.name = job.name();
    put.push_back(ToJournal(engine, job, h));
    it->second.history = std::move(h);
  }
  std::vector<std::string> drop;
  for (auto it = written_.begin(); it != written_.end();) {
    if (it->second.pass == pass_) {
      ++it;
      continue;
    }
    drop.push_back(std::move(it->second.name));
    it = written_.erase(it);
  }
  const size_t n = put.size();
  if (force || !put.empty() || !drop.empty()) journal_->SetJobHistories(std::move(put), std::move(drop), now);
  return n;
}

}  // namespace ringmaster::server
