// The jobs file (YAML) the demo and tests submit:
//
//   jobs:
//   - name: llm-pretrain
//     queue: research          # default: default
//     priority: 10
//     min_member: 8            # the gang minimum; default: every replica
//     # or, for an elastic job: elastic: {min: 4, max: 16} (the range gives
//     # the minimum; a min_member beside it must repeat it)
//     topology: {mode: hard, highest_tier: 1}   # hard | soft
//     gpu_model: H100          # or a list of accepted models: [H100, A100]
//     walltime: 3600           # seconds, optional
//     checkpoint_interval: 600 # seconds, optional: preemption prefers jobs that lose least
//     submit: 120              # seconds on the virtual clock (schedule); default 0
//     duration: 1800           # seconds it runs once started; default: until the end
//     node_selector: {pool: training}
//     tolerations: [{key: dedicated, value: ml}]
//     roles:
//     - {name: worker, replicas: 8, gpus: 8, cpu: 32, memory: 256Gi}
//     - {name: launcher, replicas: 1, cpu: 2, memory: 4Gi}
//     # gpus: 0.5 asks for half of one GPU (a share)
//     command: [python, train.py]  # what each task runs (serve --local-executor);
//                                  # a single string runs through /bin/sh -c
//
// Errors carry file:line:column and the field.
#ifndef RINGMASTER_SCHEDULER_JOB_FILE_H_
#define RINGMASTER_SCHEDULER_JOB_FILE_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/job.h"

namespace ringmaster::scheduler {

// A job with when it arrives and how long it runs (the virtual clock of
// `ringmaster schedule`). duration_ms < 0: runs until the end.
struct TimedJob {
  JobSpec spec;
  int64_t submit_ms = 0;
  int64_t duration_ms = -1;
};

absl::StatusOr<std::vector<JobSpec>> ParseJobFile(std::string_view text, std::string_view file);
absl::StatusOr<std::vector<JobSpec>> LoadJobFile(const std::string& path);
// The same file with each job's `submit` and `duration`, in submit order
// (stable: file order among equal times).
absl::StatusOr<std::vector<TimedJob>> ParseTimedJobFile(std::string_view text, std::string_view file);
absl::StatusOr<std::vector<TimedJob>> LoadTimedJobFile(const std::string& path);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_JOB_FILE_H_
