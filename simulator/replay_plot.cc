// The gnuplot script and the per-size queue delays behind a replay's charts.
#include "simulator/replay_plot.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringmaster::simulator {
namespace {

// gnuplot string literal in single quotes (a quote is doubled).
std::string GpQuote(std::string_view s) {
  std::string o = "'";
  for (char c : s) {
    if (c == '\'') o.push_back('\'');
    if (c != '\n') o.push_back(c);
  }
  return o + "'";
}

}  // namespace

namespace {

struct SizeDelays {
  int gpus = 0;
  size_t jobs = 0;
  double avg_s = 0;
  double p99_s = 0;
};

// Queue delay to first start per traced job size, over the jobs that started.
std::vector<SizeDelays> DelaysBySize(const ReplayResult& r) {
  std::map<int, std::vector<double>> by_size;
  for (const JobOutcome& j : r.jobs) {
    if (j.start_ms >= 0) by_size[j.gpus].push_back(static_cast<double>(j.start_ms - j.submit_ms) / 1000);
  }
  std::vector<SizeDelays> out;
  for (auto& [gpus, delays] : by_size) {
    std::sort(delays.begin(), delays.end());
    double sum = 0;
    for (double d : delays) sum += d;
    const size_t rank = std::clamp<size_t>(static_cast<size_t>(std::ceil(0.99 * delays.size())), 1, delays.size());
    out.push_back({gpus, delays.size(), sum / delays.size(), delays[rank - 1]});
  }
  return out;
}

}  // namespace

std::string QueueDelayBySizeCsv(const ReplayResult& r) {
  std::string out = "gpus,jobs,avg_queue_delay_s,p99_queue_delay_s\n";
  for (const SizeDelays& d : DelaysBySize(r)) {
    absl::StrAppend(&out, absl::StrFormat("%d,%d,%.3f,%.3f\n", d.gpus, d.jobs, d.avg_s, d.p99_s));
  }
  return out;
}

std::string GnuplotScript(const ReplayResult& r, const std::string& title) {
  int64_t completed = 0;
  for (const JobOutcome& j : r.jobs) completed += j.completed ? 1 : 0;
  double max_delay = 0;  // the tallest bar
  for (const SizeDelays& d : DelaysBySize(r)) max_delay = std::max({max_delay, d.avg_s, d.p99_s});
  // Long waits in hours (seconds would print as 1.8e+06).
  const bool hours = max_delay > 4 * 3600;
  const double unit = hours ? 3600 : 1;
  int64_t max_pending = 0;
  for (const TimelinePoint& p : r.timeline) max_pending = std::max(max_pending, p.pending);
  // Ranges are set from the data (gnuplot widens an all-zero range to
  // [-1:1], which draws negative GPUs, jobs and delays).
  std::string s = "# Drawn by `ringmaster simulate --plot`; run in this folder: gnuplot plots.gp\n";
  absl::StrAppend(&s, "set datafile separator ','\nset terminal pngcairo size 1000,600 noenhanced\n", "set grid\n");
  // 1. Allocation over time, pending jobs on the right axis.
  absl::StrAppend(&s, "set output 'alloc.png'\nset key outside below\nset title ",
                  GpQuote(title + ": GPU allocation and pending jobs"), "\n",
                  "set xlabel 'time (hours)'\nset ylabel 'allocated GPUs'\nset y2label 'pending jobs'\n",
                  "set xrange [0:*]\nset ytics nomirror\nset y2tics\n",
                  absl::StrFormat("set yrange [0:%d]\nset y2range [0:%d]\n", std::max<int64_t>(1, r.total_gpus),
                                  std::max<int64_t>(1, max_pending + max_pending / 10)),
                  "plot 'timeline.csv' every ::1 using ($1/3600):2 with steps lw 1.5 title 'allocated GPUs (left)', \\\n",
                  "     '' every ::1 using ($1/3600):4 axes x1y2 with steps lw 1 title 'pending jobs (right)'\n",
                  "unset y2label\nunset y2tics\nset ytics mirror\nset autoscale x\n");
  // 2. JCT CDF.
  absl::StrAppend(&s, "set output 'jct_cdf.png'\nset key inside bottom right\nset title ",
                  GpQuote(title + ": job completion time CDF"), "\n",
                  "set xlabel 'JCT (s, log scale)'\nset ylabel 'fraction of completed jobs'\nset logscale x\n",
                  "set yrange [0:1]\n");
  if (completed > 0) {
    absl::StrAppend(&s, absl::StrFormat("plot 'jobs.csv' every ::1 using ($6 > 0 ? $6 : 0.001):(1.0) "
                                        "smooth cnormal lw 2 title 'JCT (%d completed jobs)'\n",
                                        completed));
  } else {
    absl::StrAppend(&s, "set xrange [1:10]\nset label 'no job completed' at graph 0.4, 0.5\nplot NaN notitle\n",
                    "unset label\nset autoscale x\n");
  }
  // 3. Queue delay by size.
  absl::StrAppend(&s, "unset logscale x\nset output 'queue_delay.png'\nset title ",
                  GpQuote(title + ": queue delay by job size"), "\n",
                  "set xlabel 'job size (GPUs)'\n",
                  hours ? "set ylabel 'queue delay to first start (hours)'\n"
                        : "set ylabel 'queue delay to first start (s)'\n",
                  "set key inside top left\n",
                  absl::StrFormat("set yrange [0:%.3f]\n", max_delay > 0 ? max_delay / unit * 1.1 : 1.0),
                  max_delay > 0 ? "" : "set label 'no job waited' at graph 0.42, 0.5\n",
                  "set style data histograms\nset style histogram clustered gap 1\nset style fill solid 0.8 border -1\n",
                  "set xtics rotate by 0\n",
                  absl::StrFormat("plot 'queue_delay_by_size.csv' every ::1 using ($3/%.0f):xtic(1) title 'average', "
                                  "'' every ::1 using ($4/%.0f) title 'p99'\n",
                                  unit, unit));
  return s;
}

absl::Status WritePlotInputs(const std::string& dir, const ReplayResult& r, const std::string& title) {
  for (const auto& [name, text] : {std::pair{"queue_delay_by_size.csv", QueueDelayBySizeCsv(r)},
                                   {"plots.gp", GnuplotScript(r, title)}}) {
    const std::string path = absl::StrCat(dir, "/", name);
    std::ofstream f(path, std::ios::binary);
    f << text;
    if (!f) return absl::InternalError(absl::StrCat(path, ": write failed"));
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::simulator
