// The Pollux workload CSV: name, arrival, application, GPUs, batch size.
#include "simulator/pollux_trace.h"

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "simulator/trace_table.h"

namespace ringmaster::simulator {

bool PolluxTraceReader::Recognizes(std::string_view first_line) {
  const TraceTable t = TraceTable::Split(first_line, "", ',', true);
  return t.Column("name") >= 0 && t.Column("time") >= 0 && t.Column("application") >= 0 &&
         t.Column("num_replicas") >= 0 && t.Column("batch_size") >= 0;
}

absl::StatusOr<std::vector<TraceJob>> PolluxTraceReader::Parse(std::string_view text,
                                                               std::string_view filename) {
  const TraceTable t = TraceTable::Split(text, filename, ',', true);
  int cols[5];
  const char* names[5] = {"name", "time", "application", "num_replicas", "batch_size"};
  for (int i = 0; i < 5; ++i) {
    RM_ASSIGN_OR_RETURN(cols[i], t.RequireColumn(names[i]));
  }
  std::vector<TraceJob> jobs;
  jobs.reserve(t.rows().size());
  for (const TableRow& r : t.rows()) {
    TraceJob j;
    j.line = r.line;
    RM_ASSIGN_OR_RETURN(auto id, t.Text(r, cols[0], "name", true));
    j.spec.name = std::string(id);
    RM_ASSIGN_OR_RETURN(auto submit, t.Double(r, cols[1], "time", 0, true));
    if (!(submit >= 0 && submit < 1e12)) return t.Error(r.line, "time", "must be in [0, 1e12) seconds");
    j.submit_s = submit;
    RM_ASSIGN_OR_RETURN(auto app, t.Text(r, cols[2], "application", true));
    j.application = std::string(app);
    RM_ASSIGN_OR_RETURN(auto replicas, t.Int(r, cols[3], "num_replicas", 0, true));
    if (replicas < 1 || replicas > kMaxReplicas) {
      return t.Error(r.line, "num_replicas", absl::StrCat("must be in [1, ", kMaxReplicas, "]"));
    }
    j.worker().replicas = static_cast<int>(replicas);  // one GPU each, a rigid gang (size {})
    RM_ASSIGN_OR_RETURN(auto batch, t.Int(r, cols[4], "batch_size", 0, true));
    if (batch < 1 || batch > (int64_t{1} << 30)) return t.Error(r.line, "batch_size", "must be in [1, 2^30]");
    j.batch_size = static_cast<int>(batch);
    jobs.push_back(std::move(j));
  }
  return FinishTrace(std::move(jobs), filename);
}

}  // namespace ringmaster::simulator
