// The Pollux (OSDI'21) workload CSV (data/traces/pollux/workloads*/):
//   name,time,application,num_replicas,batch_size
// time in seconds from the workload's start; application names a model of
// the folder given to `simulate --apps` (simulator/app_model.h);
// num_replicas the GPUs the job asks for (one task each), batch_size its
// global batch. The rows carry no duration: a job runs until its model's
// epochs are done. The reader gives each job `num_replicas` tasks, rigid;
// AttachAppModels resolves the model and makes the job elastic when the
// policy resizes jobs.
#ifndef RINGMASTER_SIMULATOR_POLLUX_TRACE_H_
#define RINGMASTER_SIMULATOR_POLLUX_TRACE_H_

#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "simulator/trace.h"

namespace ringmaster::simulator {

struct PolluxTraceReader {
  static constexpr TraceFormat kFormat = TraceFormat::kPollux;
  static constexpr int kMaxReplicas = 64;
  static bool Recognizes(std::string_view first_line);
  static absl::StatusOr<std::vector<TraceJob>> Parse(std::string_view text, std::string_view filename);
};

}  // namespace ringmaster::simulator

#endif  // RINGMASTER_SIMULATOR_POLLUX_TRACE_H_
