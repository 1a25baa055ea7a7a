// Formats, auto detection, and the checks every trace reader ends with.
#include "simulator/trace.h"

#include <algorithm>

#include "absl/container/flat_hash_map.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "simulator/alibaba2023_trace.h"
#include "simulator/dlrm2025_trace.h"
#include "simulator/gavel_trace.h"
#include "simulator/native_trace.h"
#include "simulator/philly_trace.h"
#include "simulator/pollux_trace.h"
#include "simulator/tiresias_trace.h"
#include "topology/node_lists.h"

namespace ringmaster::simulator {
namespace {

constexpr TraceFormat kConcreteFormats[] = {TraceFormat::kNative,   TraceFormat::kPhilly,
                                            TraceFormat::kGavel,    TraceFormat::kTiresias,
                                            TraceFormat::kAlibaba2023, TraceFormat::kDlrm2025,
                                            TraceFormat::kPollux};

// The formats a trace can be in, with "auto" first unless `concrete_only`.
std::string FormatList(bool concrete_only = false) {
  std::string s = concrete_only ? "" : "auto";
  for (TraceFormat f : kConcreteFormats) {
    absl::StrAppend(&s, s.empty() ? "" : ", ", std::string(TraceFormatName(f)));
  }
  return s;
}


bool Recognizes(TraceFormat f, std::string_view first) {
  switch (f) {
    case TraceFormat::kNative: return NativeTraceReader::Recognizes(first);
    case TraceFormat::kPhilly: return PhillyTraceReader::Recognizes(first);
    case TraceFormat::kGavel: return GavelTraceReader::Recognizes(first);
    case TraceFormat::kTiresias: return TiresiasTraceReader::Recognizes(first);
    case TraceFormat::kAlibaba2023: return Alibaba2023TraceReader::Recognizes(first);
    case TraceFormat::kDlrm2025: return Dlrm2025TraceReader::Recognizes(first);
    case TraceFormat::kPollux: return PolluxTraceReader::Recognizes(first);
    case TraceFormat::kAuto: return false;
  }
  return false;
}

absl::Status CheckJob(const TraceJob& j, std::string_view filename) {
  // "file:line: " (composed only for an error: most jobs pass).
  auto where = [&] { return absl::StrCat(std::string(filename), ":", j.line, ": "); };
  auto bad = [&](std::string_view field, std::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(where(), std::string(field), ": ", std::string(what)));
  };
  if (j.id().empty()) return bad("job_id", "empty");
  if (j.submit_s < 0) return bad("submit_time_s", "must be >= 0");
  if (j.duration_s < 0) return bad("duration_s", "must be >= 0");
  if (j.checkpoint_interval_s < 0) return bad("checkpoint_interval_s", "must be >= 0");
  if (j.comm_fraction > 1) return bad("comm_fraction", "must be in [0, 1]");
  if (j.reform_pause_s > 1e9) return bad("reform_pause_s", "must be in [0, 1e9]");
  // The size first in the trace's words (its columns are min_tasks and
  // max_tasks), then the whole spec, as the engine will check it.
  const scheduler::GangSize::Fields columns{.min = "min_tasks", .range_min = "min_tasks", .range_max = "max_tasks"};
  if (absl::Status s = j.spec.size.Validate(j.tasks(), columns); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(where(), s.message()));
  }
  if (absl::Status s = j.spec.Validate(); !s.ok()) return absl::InvalidArgumentError(absl::StrCat(where(), s.message()));
  return absl::OkStatus();
}

}  // namespace

int TraceJob::gpus() const {
  int n = 0;
  for (const scheduler::RoleSpec& r : spec.roles) n += r.replicas * r.gpu.count;
  return n;
}

std::string_view TraceFormatName(TraceFormat f) {
  switch (f) {
    case TraceFormat::kAuto: return "auto";
    case TraceFormat::kNative: return "native";
    case TraceFormat::kPhilly: return "philly";
    case TraceFormat::kGavel: return "gavel";
    case TraceFormat::kTiresias: return "tiresias";
    case TraceFormat::kAlibaba2023: return "alibaba2023";
    case TraceFormat::kDlrm2025: return "dlrm2025";
    case TraceFormat::kPollux: return "pollux";
  }
  return "?";
}

absl::StatusOr<TraceFormat> ParseTraceFormat(std::string_view name) {
  if (name == "auto") return TraceFormat::kAuto;
  for (TraceFormat f : kConcreteFormats) {
    if (TraceFormatName(f) == name) return f;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown trace format '", std::string(name), "' (formats: ", FormatList(), ")"));
}

std::string_view FirstLine(std::string_view text) {
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t") != std::string_view::npos) return line;
    pos = end + 1;
  }
  return {};
}

absl::StatusOr<TraceFormat> DetectTraceFormat(std::string_view text, std::string_view filename) {
  const std::string_view first = FirstLine(text);
  for (TraceFormat f : kConcreteFormats) {
    if (Recognizes(f, first)) return f;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      std::string(filename), ":1: header: no trace format recognizes it; give --format (one of ",
      FormatList(/*concrete_only=*/true), "; docs/TRACE_FORMAT.md)"));
}

absl::StatusOr<std::vector<TraceJob>> ParseTrace(std::string_view text, std::string_view filename,
                                                 TraceFormat format) {
  if (format == TraceFormat::kAuto) {
    RM_ASSIGN_OR_RETURN(format, DetectTraceFormat(text, filename));
  }
  switch (format) {
    case TraceFormat::kNative: return NativeTraceReader::Parse(text, filename);
    case TraceFormat::kPhilly: return PhillyTraceReader::Parse(text, filename);
    case TraceFormat::kGavel: return GavelTraceReader::Parse(text, filename);
    case TraceFormat::kTiresias: return TiresiasTraceReader::Parse(text, filename);
    case TraceFormat::kAlibaba2023: return Alibaba2023TraceReader::Parse(text, filename);
    case TraceFormat::kDlrm2025: return Dlrm2025TraceReader::Parse(text, filename);
    case TraceFormat::kPollux: return PolluxTraceReader::Parse(text, filename);
    case TraceFormat::kAuto: break;
  }
  return absl::InternalError("unreachable trace format");
}

absl::StatusOr<std::vector<TraceJob>> ParseTraceSlice(std::string_view text, std::string_view filename,
                                                      TraceFormat format, const TraceSlice& slice) {
  if (format == TraceFormat::kAuto) {
    RM_ASSIGN_OR_RETURN(format, DetectTraceFormat(text, filename));
  }
  if (format == TraceFormat::kPhilly) {
    RM_ASSIGN_OR_RETURN(auto jobs, PhillyTraceReader::ParseSlice(text, filename, slice));
    return SliceTrace(std::move(jobs), slice);
  }
  RM_ASSIGN_OR_RETURN(auto jobs, ParseTrace(text, filename, format));
  return SliceTrace(std::move(jobs), slice);
}

absl::StatusOr<std::vector<TraceJob>> ReadTrace(const std::string& path, TraceFormat format) {
  RM_ASSIGN_OR_RETURN(auto text, topology::ReadTextFile(path));
  return ParseTrace(text, path, format);
}

absl::StatusOr<std::vector<TraceJob>> FinishTrace(std::vector<TraceJob> jobs,
                                                  std::string_view filename) {
  absl::flat_hash_map<std::string_view, int> first_line;
  first_line.reserve(jobs.size());
  for (const TraceJob& j : jobs) {
    RM_RETURN_IF_ERROR(CheckJob(j, filename));
    auto [it, fresh] = first_line.emplace(j.id(), j.line);
    if (!fresh) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(filename), ":", j.line,
                                                     ": job_id: '", j.id(), "' already on line ",
                                                     it->second));
    }
  }
  // By submit time, then line: the order of a stable sort of the jobs.
  // Sorted through an index (a TraceJob is large to move), then permuted in
  // place (each job moved once or twice, no second vector); a trace in order
  // already is left as it is.
  auto before = [&jobs](uint32_t a, uint32_t b) {
    const TraceJob& x = jobs[a];
    const TraceJob& y = jobs[b];
    return x.submit_s != y.submit_s ? x.submit_s < y.submit_s : x.line < y.line;
  };
  bool sorted = true;
  for (uint32_t i = 1; i < jobs.size() && sorted; ++i) sorted = !before(i, i - 1);
  if (sorted) return jobs;
  std::vector<uint32_t> order(jobs.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), before);
  // Position i takes the job at order[i]: follow each cycle of the
  // permutation once, marking placed positions with kDone.
  constexpr uint32_t kDone = UINT32_MAX;
  for (uint32_t start = 0; start < order.size(); ++start) {
    if (order[start] == kDone || order[start] == start) continue;
    TraceJob held = std::move(jobs[start]);
    uint32_t at = start;
    while (order[at] != start) {
      const uint32_t from = order[at];
      jobs[at] = std::move(jobs[from]);
      order[at] = kDone;
      at = from;
    }
    jobs[at] = std::move(held);
    order[at] = kDone;
  }
  return jobs;
}

SliceStep SliceChoice(const TraceSlice& slice, double submit_s, size_t kept) {
  if (submit_s < slice.from_s) return SliceStep::kSkip;
  if (slice.until_s >= 0 && submit_s >= slice.until_s) return SliceStep::kEnd;
  if (slice.max_jobs > 0 && static_cast<int64_t>(kept) >= slice.max_jobs) return SliceStep::kEnd;
  return SliceStep::kKeep;
}

std::vector<TraceJob> SliceTrace(std::vector<TraceJob> jobs, const TraceSlice& slice) {
  // In place: the kept jobs move to the front, the rest are dropped.
  size_t kept = 0;
  for (TraceJob& j : jobs) {
    const SliceStep step = SliceChoice(slice, j.submit_s, kept);
    if (step == SliceStep::kSkip) continue;
    if (step == SliceStep::kEnd) break;
    j.submit_s -= slice.from_s;
    if (!slice.one_queue.empty()) j.spec.queue = slice.one_queue;
    if (slice.walltime_oracle && j.spec.walltime_ms <= 0) j.spec.walltime_ms = SecondsToMs(j.duration_s);
    if (slice.checkpoint_interval_s > 0 && j.checkpoint_interval_s <= 0) {
      j.checkpoint_interval_s = slice.checkpoint_interval_s;
    }
    if (&jobs[kept] != &j) jobs[kept] = std::move(j);
    ++kept;
  }
  jobs.erase(jobs.begin() + static_cast<std::ptrdiff_t>(kept), jobs.end());
  return jobs;
}

void SplitGang(int gpus, int max_per_task, TraceJob& job) {
  int tasks = 1;
  if (gpus > max_per_task) {
    tasks = (gpus + max_per_task - 1) / max_per_task;
    while (gpus % tasks != 0) ++tasks;
  }
  job.worker().replicas = tasks;
  job.worker().gpu.count = gpus / tasks;
  job.spec.size = {};
}

}  // namespace ringmaster::simulator
