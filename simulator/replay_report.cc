// summary.json, jobs.csv, timeline.csv and stops.csv of a replay.
#include "simulator/replay_report.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <map>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringmaster::simulator {
namespace {

double Seconds(int64_t ms) { return static_cast<double>(ms) / 1000; }

// printf's "%.<precision>f" (std::to_chars is specified to match it), for
// the CSVs' many numbers.
void AppendFixed(std::string* out, double v, int precision) {
  char buf[64];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, v, std::chars_format::fixed, precision);
  if (ec != std::errc()) {
    absl::StrAppend(out, absl::StrFormat("%.*f", precision, v));
    return;
  }
  out->append(buf, end);
}

// Milliseconds as seconds with three decimals: what "%.3f" prints for
// ms / 1000.0 (exact below 2^53 / 1000 ms), without the floating point.
void AppendMs(std::string* out, int64_t ms) {
  if (ms < 0) out->push_back('-');
  const uint64_t a = ms < 0 ? uint64_t{0} - static_cast<uint64_t>(ms) : static_cast<uint64_t>(ms);
  absl::StrAppend(out, a / 1000);
  const unsigned frac = static_cast<unsigned>(a % 1000);
  const char digits[4] = {'.', static_cast<char>('0' + frac / 100), static_cast<char>('0' + frac / 10 % 10),
                          static_cast<char>('0' + frac % 10)};
  out->append(digits, 4);
}

// Nearest-rank percentile of sorted values (0 when empty).
double Percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0;
  size_t rank = static_cast<size_t>(std::ceil(p / 100 * sorted.size()));
  return sorted[std::clamp<size_t>(rank, 1, sorted.size()) - 1];
}

double Mean(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return v.empty() ? 0 : s / v.size();
}

std::string Quote(std::string_view s) {
  std::string o = "\"";
  for (char c : s) {
    if (c == '"' || c == '\\') o.push_back('\\');
    if (static_cast<unsigned char>(c) < 0x20) {
      absl::StrAppend(&o, absl::StrFormat("\\u%04x", c));
      continue;
    }
    o.push_back(c);
  }
  return o + "\"";
}

struct QueueStats {
  int64_t jobs = 0;
  std::vector<double> jcts;
  double gpu_seconds = 0;
};

std::string QueuesJson(const ReplayResult& r) {
  std::map<std::string, QueueStats> q;
  double total = 0;
  for (const JobOutcome& j : r.jobs) {
    QueueStats& s = q[j.queue];
    ++s.jobs;
    if (j.completed) s.jcts.push_back(Seconds(j.end_ms - j.submit_ms));
    s.gpu_seconds += j.gpu_seconds;
    total += j.gpu_seconds;
  }
  std::string out = "  \"queues\": {";
  double sum = 0, sum_sq = 0;
  bool first = true;
  for (const auto& [name, s] : q) {
    const double share = total > 0 ? s.gpu_seconds / total : 0;
    sum += share;
    sum_sq += share * share;
    absl::StrAppend(&out, first ? "\n" : ",\n", "    ", Quote(name),
                    absl::StrFormat(": {\"jobs\": %d, \"avg_jct_s\": %.3f, \"gpu_share\": %.6f}", s.jobs,
                                    Mean(s.jcts), share));
    first = false;
  }
  const double jain = sum_sq > 0 ? sum * sum / (q.size() * sum_sq) : 1;
  absl::StrAppend(&out, q.empty() ? "},\n" : "\n  },\n", absl::StrFormat("  \"jain_fairness\": %.6f,\n", jain));
  return out;
}

}  // namespace

ReplayStats StatsOf(const ReplayResult& r) {
  ReplayStats s;
  std::vector<double> jct, delay;
  for (const JobOutcome& j : r.jobs) {
    ++s.jobs_total;
    if (j.completed) {
      ++s.jobs_completed;
      jct.push_back(Seconds(j.end_ms - j.submit_ms));
      delay.push_back(Seconds(j.start_ms - j.submit_ms));
    } else if (j.end_ms >= 0) {
      ++s.jobs_failed;
    }
    s.preemptions += j.preemptions;
    s.evictions += j.evictions;
    s.shrinks += j.shrinks;
    s.grows += j.grows;
    if (j.tier_spanned > 1) ++s.cross_tier_jobs;
  }
  std::sort(jct.begin(), jct.end());
  std::sort(delay.begin(), delay.end());
  s.avg_jct_s = Mean(jct);
  s.p50_jct_s = Percentile(jct, 50);
  s.p95_jct_s = Percentile(jct, 95);
  s.p99_jct_s = Percentile(jct, 99);
  s.avg_queue_delay_s = Mean(delay);
  s.p99_queue_delay_s = Percentile(delay, 99);
  s.makespan_s = Seconds(r.makespan_ms);
  const double capacity = static_cast<double>(r.total_gpus) * s.makespan_s;
  s.gpu_alloc_ratio = capacity > 0 ? r.allocated_gpu_seconds / capacity : 0;
  return s;
}

std::string SummaryJson(const ReplayResult& r, const RunInfo& info) {
  const ReplayStats s = StatsOf(r);
  std::string out = "{\n";
  absl::StrAppend(&out, "  \"trace\": ", Quote(info.trace), ",\n  \"format\": ", Quote(info.format),
                  ",\n  \"policy\": ", Quote(info.policy), ",\n");
  absl::StrAppend(&out, absl::StrFormat("  \"gpus\": %d,\n  \"jobs_total\": %d,\n  \"jobs_completed\": %d,\n"
                                        "  \"jobs_failed\": %d,\n",
                                        r.total_gpus, s.jobs_total, s.jobs_completed, s.jobs_failed));
  absl::StrAppend(&out, absl::StrFormat("  \"avg_jct_s\": %.3f,\n  \"p50_jct_s\": %.3f,\n  \"p95_jct_s\": %.3f,\n"
                                        "  \"p99_jct_s\": %.3f,\n  \"avg_queue_delay_s\": %.3f,\n"
                                        "  \"p99_queue_delay_s\": %.3f,\n  \"makespan_s\": %.3f,\n"
                                        "  \"gpu_alloc_ratio\": %.6f,\n",
                                        s.avg_jct_s, s.p50_jct_s, s.p95_jct_s, s.p99_jct_s, s.avg_queue_delay_s,
                                        s.p99_queue_delay_s, s.makespan_s, s.gpu_alloc_ratio));
  absl::StrAppend(&out, absl::StrFormat("  \"preemptions\": %d,\n  \"evictions\": %d,\n  \"shrinks\": %d,\n"
                                        "  \"grows\": %d,\n  \"cross_tier_jobs\": %d,\n",
                                        s.preemptions, s.evictions, s.shrinks, s.grows, s.cross_tier_jobs));
  absl::StrAppend(&out, QueuesJson(r));
  absl::StrAppend(&out, absl::StrFormat("  \"node_failures\": %d,\n  \"cycles\": %d,\n  \"events\": %d,\n"
                                        "  \"seed\": %d,\n",
                                        r.node_failures, r.cycles, r.events, info.seed));
  if (r.violation) {
    absl::StrAppend(&out, absl::StrFormat("  \"invariant_violation\": {\"cycle\": %d, \"time_s\": %.3f, ",
                                          r.violation->cycle, Seconds(r.violation->time_ms)),
                    "\"message\": ", Quote(r.violation->message), "},\n");
  }
  absl::StrAppend(&out, absl::StrFormat("  \"sim_wall_s\": %.3f\n}\n", info.sim_wall_s));
  return out;
}

std::string JobsCsv(const ReplayResult& r) {
  std::string out =
      "job_id,queue,submit_s,start_s,end_s,jct_s,queue_delay_s,gpus,tier_spanned,preemptions,evictions,"
      "shrinks,grows,gpu_seconds\n";
  out.reserve(out.size() + r.jobs.size() * 96);
  for (const JobOutcome& j : r.jobs) {
    const bool started = j.start_ms >= 0;
    const bool ended = j.end_ms >= 0;
    absl::StrAppend(&out, j.id, ",", j.queue, ",");
    AppendMs(&out, j.submit_ms);
    out.push_back(',');
    if (started) AppendMs(&out, j.start_ms);
    out.push_back(',');
    if (ended) AppendMs(&out, j.end_ms);
    out.push_back(',');
    if (ended) AppendMs(&out, j.end_ms - j.submit_ms);
    out.push_back(',');
    if (started) AppendMs(&out, j.start_ms - j.submit_ms);
    absl::StrAppend(&out, ",", j.gpus, ",", j.tier_spanned, ",", j.preemptions, ",", j.evictions, ",", j.shrinks,
                    ",", j.grows, ",");
    AppendFixed(&out, j.gpu_seconds, 3);
    out.push_back('\n');
  }
  return out;
}

std::string TimelineCsv(const ReplayResult& r) {
  std::string out = "time_s,allocated_gpus,running_jobs,pending_jobs,fragmentation\n";
  out.reserve(out.size() + r.timeline.size() * 40);
  for (const TimelinePoint& p : r.timeline) {
    AppendMs(&out, p.time_ms);
    out.push_back(',');
    AppendFixed(&out, p.allocated_gpus, 3);
    absl::StrAppend(&out, ",", p.running, ",", p.pending, ",");
    AppendFixed(&out, p.fragmentation, 4);
    out.push_back('\n');
  }
  return out;
}

std::string StopsCsv(const ReplayResult& r) {
  std::string out =
      "time_s,job_id,gpus,gpu_seconds,since_start_s,preemptor,preemptor_gpus,preemptor_gpu_seconds,"
      "preemptor_waited_s,reason\n";
  for (const StopRecord& s : r.stops) {
    const JobOutcome& j = r.jobs[s.job];
    AppendMs(&out, s.time_ms);
    absl::StrAppend(&out, ",", j.id, ",", j.gpus, ",");
    AppendFixed(&out, s.gpu_seconds, 3);
    out.push_back(',');
    AppendMs(&out, s.since_start_ms);
    out.push_back(',');
    if (s.preemptor) {
      const JobOutcome& p = r.jobs[*s.preemptor];
      absl::StrAppend(&out, p.id, ",", p.gpus, ",");
      AppendFixed(&out, s.preemptor_gpu_seconds, 3);
      out.push_back(',');
      if (s.preemptor_waited_ms >= 0) AppendMs(&out, s.preemptor_waited_ms);
    } else {
      out.append(",,,");
    }
    // The reason is free text: quoted, a quote doubled (RFC 4180).
    out.append(",\"");
    for (char c : s.reason) {
      if (c == '"') out.push_back('"');
      out.push_back(c);
    }
    out.append("\"\n");
  }
  return out;
}

absl::Status WriteReplayOutputs(const std::string& dir, const ReplayResult& r, const RunInfo& info) {
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return absl::InternalError(absl::StrCat(dir, ": cannot create: ", ec.message()));
  for (const auto& [name, text] : {std::pair{"summary.json", SummaryJson(r, info)},
                                   {"jobs.csv", JobsCsv(r)}, {"timeline.csv", TimelineCsv(r)},
                                   {"stops.csv", StopsCsv(r)}}) {
    const std::string path = absl::StrCat(dir, "/", name);
    std::ofstream f(path, std::ios::binary);
    f << text;
    if (!f) return absl::InternalError(absl::StrCat(path, ": write failed"));
  }
  return absl::OkStatus();
}

}  // namespace ringmaster::simulator
