// Charts of a replay, drawn by gnuplot (a Debian package; scripts/setup.sh
// installs gnuplot-nox) from the CSV files the replay wrote:
//   alloc.png        allocated GPUs and pending jobs over time (timeline.csv)
//   jct_cdf.png      the CDF of job completion times, log scale (jobs.csv)
//   queue_delay.png  average and p99 queue delay by job size
//                    (queue_delay_by_size.csv, written here)
// This file only writes the gnuplot script and its data; the CLI runs
// gnuplot in the output folder.
#ifndef RINGMASTER_SIMULATOR_REPLAY_PLOT_H_
#define RINGMASTER_SIMULATOR_REPLAY_PLOT_H_

#include <string>

#include "absl/status/status.h"
#include "simulator/replay.h"

namespace ringmaster::simulator {

// gpus,jobs,avg_queue_delay_s,p99_queue_delay_s per distinct job size
// (traced GPUs) over the jobs that started, smallest size first.
std::string QueueDelayBySizeCsv(const ReplayResult& r);

// The gnuplot script that draws the three charts from the files in its own
// folder (relative paths: run it there). `title` heads every chart.
std::string GnuplotScript(const ReplayResult& r, const std::string& title);

// Writes queue_delay_by_size.csv and plots.gp into `dir` (next to the
// outputs of WriteReplayOutputs).
absl::Status WritePlotInputs(const std::string& dir, const ReplayResult& r, const std::string& title);

}  // namespace ringmaster::simulator

#endif  // RINGMASTER_SIMULATOR_REPLAY_PLOT_H_
