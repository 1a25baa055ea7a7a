// Microsoft Philly's per-job CSV (2017; 82,247 jobs; as flattened by the
// Pollux artifact, data/traces/philly/):
//   timestamp,duration,num_gpus,gpu_time,cluster
// `timestamp` is "YYYY-MM-DD HH:MM:SS"; submit times count from the earliest
// row (rows are not sorted). `cluster` (the virtual cluster) becomes the
// queue; `gpu_time` is ignored. Jobs above 8 GPUs become gangs of tasks of
// at most 8 GPUs (SplitGang). Job ids are "philly-<row>" (row 1 = the first
// data row).
#ifndef RINGMASTER_SIMULATOR_PHILLY_TRACE_H_
#define RINGMASTER_SIMULATOR_PHILLY_TRACE_H_

#include <cstdint>
#include <optional>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "simulator/trace.h"

namespace ringmaster::simulator {

struct PhillyTraceReader {
  static constexpr TraceFormat kFormat = TraceFormat::kPhilly;
  static constexpr int kMaxGpusPerTask = 8;
  static bool Recognizes(std::string_view first_line);
  static absl::StatusOr<std::vector<TraceJob>> Parse(std::string_view text, std::string_view filename);
  // The same rows checked the same way, but jobs built only for the rows
  // `slice` keeps (its window and its first max_jobs by submit time), in
  // order; SliceTrace then gives what it gives on Parse's whole list. The
  // 82,247-row trace sliced to 10,000 jobs builds 10,000 (ParseTraceSlice).
  static absl::StatusOr<std::vector<TraceJob>> ParseSlice(std::string_view text, std::string_view filename,
                                                          const TraceSlice& slice);
};

// Seconds since 1970-01-01 00:00:00 of "YYYY-MM-DD HH:MM:SS" (no time zone);
// nullopt when the text is not one.
std::optional<int64_t> ParseDateTime(std::string_view text);

}  // namespace ringmaster::simulator

#endif  // RINGMASTER_SIMULATOR_PHILLY_TRACE_H_
