// What a replay writes (docs/TRACE_FORMAT.md, "Outputs"): summary.json with
// the run's metrics, jobs.csv with one row per trace job, timeline.csv with
// the cluster after each change, stops.csv with one row per whole-job stop
// (who was stopped, after how much service, for whom, who had waited how
// long). Rendered as strings so tests can compare two runs byte for byte;
// WriteReplayOutputs puts them in a folder.
//
// Definitions: JCT = end - submit and queue delay = first start - submit, over
// completed jobs; percentiles are nearest-rank. gpu_alloc_ratio = allocated
// GPU-seconds / (GPUs x makespan). A queue's gpu_share is its jobs'
// GPU-seconds over all jobs'; jain_fairness is Jain's index of the queues'
// gpu_share (1 = equal). cross_tier_jobs counts jobs whose gang left one
// first-tier domain (a rack) at some point.
#ifndef RINGMASTER_SIMULATOR_REPLAY_REPORT_H_
#define RINGMASTER_SIMULATOR_REPLAY_REPORT_H_

#include <cstdint>
#include <string>

#include "absl/status/status.h"
#include "simulator/replay.h"

namespace ringmaster::simulator {

// Run facts that are not in the result.
struct RunInfo {
  std::string trace;
  std::string format;
  std::string policy;
  uint64_t seed = 0;
  double sim_wall_s = 0;  // the only field that differs between identical runs
};

std::string SummaryJson(const ReplayResult& r, const RunInfo& info);
std::string JobsCsv(const ReplayResult& r);
std::string TimelineCsv(const ReplayResult& r);
std::string StopsCsv(const ReplayResult& r);

// Creates `dir` and writes summary.json, jobs.csv, timeline.csv and
// stops.csv there.
absl::Status WriteReplayOutputs(const std::string& dir, const ReplayResult& r, const RunInfo& info);

// The headline numbers of SummaryJson, for the CLI's table and for tests.
struct ReplayStats {
  int64_t jobs_total = 0, jobs_completed = 0, jobs_failed = 0;
  double avg_jct_s = 0, p50_jct_s = 0, p95_jct_s = 0, p99_jct_s = 0;
  double avg_queue_delay_s = 0, p99_queue_delay_s = 0;
  double makespan_s = 0, gpu_alloc_ratio = 0;
  int64_t preemptions = 0, evictions = 0, shrinks = 0, grows = 0, cross_tier_jobs = 0;
};
ReplayStats StatsOf(const ReplayResult& r);

}  // namespace ringmaster::simulator

#endif  // RINGMASTER_SIMULATOR_REPLAY_REPORT_H_
