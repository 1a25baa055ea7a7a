// Alibaba's GPU pod lists of cluster-trace-gpu-v2023 (openb, FGD ATC'23;
// data/traces/alibaba-gpu-v2023/openb_pod_list_*.csv):
//   name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,
//   creation_time,deletion_time,scheduled_time
// One pod is one job of one task: num_gpu GPUs (0..8) each used gpu_milli
// (a share below 1000 with num_gpu 1), cpu_milli, memory_mib, and gpu_spec
// ('|'-separated allowed models). It is submitted at creation_time and its
// lifetime, deletion_time - creation_time, is its duration. The derived
// `multigpu*` lists have no times and are refused (header error).
#ifndef RINGMASTER_SIMULATOR_ALIBABA2023_TRACE_H_
#define RINGMASTER_SIMULATOR_ALIBABA2023_TRACE_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "simulator/trace.h"

namespace ringmaster::simulator {

struct Alibaba2023TraceReader {
  static constexpr TraceFormat kFormat = TraceFormat::kAlibaba2023;
  // An openb pod-list header (name, num_gpu, gpu_milli).
  static bool Recognizes(std::string_view first_line);
  static absl::StatusOr<std::vector<TraceJob>> Parse(std::string_view text, std::string_view filename);
};

}  // namespace ringmaster::simulator

#endif  // RINGMASTER_SIMULATOR_ALIBABA2023_TRACE_H_
