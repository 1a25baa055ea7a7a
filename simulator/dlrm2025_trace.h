// Alibaba's GPU-disaggregated DLRM inference instances (cluster-trace-gpu-
// v2025, NSDI'25; data/traces/alibaba-gpu-v2025-dlrm/):
//   instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,
//   rdma_request,rdma_limit,memory_request,memory_limit,disk_request,
//   disk_limit,max_instance_per_node,creation_time,scheduled_time,
//   deletion_time
// One instance is one job of one task: gpu_request whole GPUs, cpu_request
// vCPUs (x1000 milli), memory_request GiB (x1024 MiB). Times are seconds
// from the trace start and empty outside its window: an empty creation_time
// means the instance existed before the start (submit 0); an empty
// deletion_time means it outlived the trace (it ends at the trace's last
// time, the largest time in the file). RDMA, disk and the per-node cap are
// not modeled.
#ifndef RINGMASTER_SIMULATOR_DLRM2025_TRACE_H_
#define RINGMASTER_SIMULATOR_DLRM2025_TRACE_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "simulator/trace.h"

namespace ringmaster::simulator {

struct Dlrm2025TraceReader {
  static constexpr TraceFormat kFormat = TraceFormat::kDlrm2025;
  static bool Recognizes(std::string_view first_line);
  static absl::StatusOr<std::vector<TraceJob>> Parse(std::string_view text, std::string_view filename);
};

}  // namespace ringmaster::simulator

#endif  // RINGMASTER_SIMULATOR_DLRM2025_TRACE_H_
