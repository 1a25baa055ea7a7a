// Gavel's per-VC Philly-derived traces (OSDI'20, `msr/seed=0/<vc>.trace`,
// data/traces/gavel-philly-msr/): tab-separated, no header, 7 fields:
//   job_type, command, num_steps_arg, needs_data_dir, total_steps,
//   arrival_time, scale_factor
// `arrival_time` (s) is the submit time, `scale_factor` the GPUs (gangs above
// 8 GPUs split as Philly's), and `total_steps` the work. Gavel turns steps
// into seconds with per-model throughputs that are not bundled, so a step
// counts as one second of work (duration_s = total_steps). The queue is the
// VC: the file's name without folder and extension. Job ids are
// "<vc>-<row>".
#ifndef RINGMASTER_SIMULATOR_GAVEL_TRACE_H_
#define RINGMASTER_SIMULATOR_GAVEL_TRACE_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "simulator/trace.h"

namespace ringmaster::simulator {

struct GavelTraceReader {
  static constexpr TraceFormat kFormat = TraceFormat::kGavel;
  static constexpr int kMaxGpusPerTask = 8;
  static constexpr double kSecondsPerStep = 1.0;
  // Seven tab-separated fields whose last three are numbers.
  static bool Recognizes(std::string_view first_line);
  static absl::StatusOr<std::vector<TraceJob>> Parse(std::string_view text, std::string_view filename);
};

}  // namespace ringmaster::simulator

#endif  // RINGMASTER_SIMULATOR_GAVEL_TRACE_H_
