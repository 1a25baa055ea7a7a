// The Tiresias job CSV: id, GPUs, submit time and duration.
#include "simulator/tiresias_trace.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "simulator/trace_table.h"

namespace ringmaster::simulator {

bool TiresiasTraceReader::Recognizes(std::string_view first_line) {
  const TraceTable t = TraceTable::Split(first_line, "", ',', true);
  return t.Column("job_id") >= 0 && t.Column("num_gpu") >= 0 && t.Column("submit_time") >= 0 &&
         t.Column("duration") >= 0;
}

absl::StatusOr<std::vector<TraceJob>> TiresiasTraceReader::Parse(std::string_view text,
                                                                 std::string_view filename) {
  const TraceTable t = TraceTable::Split(text, filename, ',', true);
  int cols[4];
  const char* names[4] = {"job_id", "num_gpu", "submit_time", "duration"};
  for (int i = 0; i < 4; ++i) {
    RM_ASSIGN_OR_RETURN(cols[i], t.RequireColumn(names[i]));
  }
  std::vector<TraceJob> jobs;
  jobs.reserve(t.rows().size());
  for (const TableRow& r : t.rows()) {
    TraceJob j;
    j.line = r.line;
    RM_ASSIGN_OR_RETURN(auto id, t.Text(r, cols[0], "job_id", true));
    j.spec.name = absl::StrCat("tiresias-", std::string(id));
    RM_ASSIGN_OR_RETURN(auto gpus, t.Int(r, cols[1], "num_gpu", 0, true));
    if (gpus < 0 || gpus > 100000) return t.Error(r.line, "num_gpu", "must be in [0, 100000]");
    SplitGang(static_cast<int>(gpus), kMaxGpusPerTask, j);
    RM_ASSIGN_OR_RETURN(auto submit, t.Double(r, cols[2], "submit_time", 0, true));
    if (submit < 0) return t.Error(r.line, "submit_time", "must be >= 0");
    j.submit_s = submit;
    RM_ASSIGN_OR_RETURN(auto duration, t.Double(r, cols[3], "duration", 0, true));
    if (duration < 0) return t.Error(r.line, "duration", "must be >= 0");
    j.duration_s = duration;
    jobs.push_back(std::move(j));
  }
  return FinishTrace(std::move(jobs), filename);
}

}  // namespace ringmaster::simulator
