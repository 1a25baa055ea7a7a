// The project's own trace CSV (docs/TRACE_FORMAT.md): a header naming the
// columns (any order; unknown columns ignored), then one job per row.
// Required: job_id, submit_time_s, duration_s.
#ifndef RINGMASTER_SIMULATOR_NATIVE_TRACE_H_
#define RINGMASTER_SIMULATOR_NATIVE_TRACE_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "simulator/trace.h"

namespace ringmaster::simulator {

struct NativeTraceReader {
  static constexpr TraceFormat kFormat = TraceFormat::kNative;
  // A comma-separated header with job_id, submit_time_s and duration_s.
  static bool Recognizes(std::string_view first_line);
  static absl::StatusOr<std::vector<TraceJob>> Parse(std::string_view text, std::string_view filename);
};

}  // namespace ringmaster::simulator

#endif  // RINGMASTER_SIMULATOR_NATIVE_TRACE_H_
