// Gavel's 7-field TSV: steps as work, arrival as submit, VC from the file name.
#include "simulator/gavel_trace.h"

#include <filesystem>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "simulator/trace_table.h"

namespace ringmaster::simulator {
namespace {

constexpr int kFields = 7;
constexpr int kTotalSteps = 4;
constexpr int kArrival = 5;
constexpr int kScale = 6;

std::string QueueOf(std::string_view filename) {
  std::string stem = std::filesystem::path(std::string(filename)).stem().string();
  return stem.empty() ? "default" : stem;
}

}  // namespace

bool GavelTraceReader::Recognizes(std::string_view first_line) {
  const TraceTable t = TraceTable::Split(first_line, "", '\t', false);
  if (t.rows().size() != 1 || t.rows()[0].fields.size() != kFields) return false;
  const TableRow& r = t.rows()[0];
  return t.Int(r, kTotalSteps, "", 0, true).ok() && t.Double(r, kArrival, "", 0, true).ok() &&
         t.Int(r, kScale, "", 0, true).ok();
}

absl::StatusOr<std::vector<TraceJob>> GavelTraceReader::Parse(std::string_view text,
                                                              std::string_view filename) {
  const TraceTable t = TraceTable::Split(text, filename, '\t', false);
  const std::string queue = QueueOf(filename);
  std::vector<TraceJob> jobs;
  jobs.reserve(t.rows().size());
  for (const TableRow& r : t.rows()) {
    if (r.fields.size() != kFields) {
      return t.Error(r.line, "fields", absl::StrCat("expected 7 tab-separated fields, got ", r.fields.size()));
    }
    TraceJob j;
    j.line = r.line;
    j.spec.name = absl::StrCat(queue, "-", jobs.size() + 1);
    j.spec.queue = queue;
    RM_ASSIGN_OR_RETURN(auto steps, t.Int(r, kTotalSteps, "total_steps", 0, true));
    if (steps < 0) return t.Error(r.line, "total_steps", "must be >= 0");
    j.duration_s = static_cast<double>(steps) * kSecondsPerStep;
    RM_ASSIGN_OR_RETURN(auto arrival, t.Double(r, kArrival, "arrival_time", 0, true));
    if (arrival < 0) return t.Error(r.line, "arrival_time", "must be >= 0");
    j.submit_s = arrival;
    RM_ASSIGN_OR_RETURN(auto gpus, t.Int(r, kScale, "scale_factor", 0, true));
    if (gpus < 1 || gpus > 100000) return t.Error(r.line, "scale_factor", "must be in [1, 100000]");
    SplitGang(static_cast<int>(gpus), kMaxGpusPerTask, j);
    jobs.push_back(std::move(j));
  }
  return FinishTrace(std::move(jobs), filename);
}

}  // namespace ringmaster::simulator
