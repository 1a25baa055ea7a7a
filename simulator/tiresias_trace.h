// The Tiresias simulator's job CSV (NSDI'19, data/traces/tiresias/60_job.csv):
//   job_id,num_gpu,submit_time,iterations,model_name,duration,interval
// submit_time and duration in seconds; gangs above 8 GPUs split as Philly's;
// the other columns are ignored. Job ids are "tiresias-<job_id>".
#ifndef RINGMASTER_SIMULATOR_TIRESIAS_TRACE_H_
#define RINGMASTER_SIMULATOR_TIRESIAS_TRACE_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "simulator/trace.h"

namespace ringmaster::simulator {

struct TiresiasTraceReader {
  static constexpr TraceFormat kFormat = TraceFormat::kTiresias;
  static constexpr int kMaxGpusPerTask = 8;
  static bool Recognizes(std::string_view first_line);
  static absl::StatusOr<std::vector<TraceJob>> Parse(std::string_view text, std::string_view filename);
};

}  // namespace ringmaster::simulator

#endif  // RINGMASTER_SIMULATOR_TIRESIAS_TRACE_H_
