// The launcher behind `ringmaster shim run -- CMD ARGS`: runs a training
// command under the shim, in one of two modes.
//
//  - Restart (torchrun-style, any framework): the launcher joins the
//    coordinator as the worker and, for every generation it is a member of,
//    (re)starts CMD with that generation's environment: RANK, WORLD_SIZE,
//    LOCAL_RANK, LOCAL_WORLD_SIZE, MASTER_ADDR, MASTER_PORT (rank 0's
//    launcher picks a free port and publishes it in the generation's
//    key-value store), RINGMASTER_COORDINATOR, RINGMASTER_JOB,
//    RINGMASTER_WORKER, RINGMASTER_GENERATION. On a new generation the
//    running CMD gets SIGTERM (then SIGKILL after a grace period) and is
//    started again; a removed worker stops. CMD exiting 0 ends the job
//    (Leave, finished); a non-zero exit is reported as a failure, so every
//    member restarts in the next generation.
//  - In-process (Horovod-style, no restart): CMD is exec'd once with
//    RINGMASTER_COORDINATOR / _JOB / _WORKER / _WORKERS (gang size) set;
//    it links the shim (C++ or the C API in ringmaster_shim.h) and joins
//    by itself.
#ifndef RINGMASTER_WORKER_SHIM_LAUNCHER_H_
#define RINGMASTER_WORKER_SHIM_LAUNCHER_H_

#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "worker_shim/coordinator_client.h"

namespace ringmaster::shim {

struct LaunchOptions {
  ClientOptions client;
  std::vector<std::string> command;  // argv; command[0] is looked up in PATH
  bool in_process = false;
  absl::Duration grace = absl::Seconds(5);  // SIGTERM -> SIGKILL
  // Longest wait for a generation this worker is a member of.
  absl::Duration membership_timeout = absl::Minutes(10);
};

// Restart mode: returns the exit code for the launcher (0 when the job
// finished or this worker was removed). In-process mode does not return on
// success (exec). INVALID_ARGUMENT for an empty command.
absl::StatusOr<int> RunLauncher(const LaunchOptions& options);

}  // namespace ringmaster::shim

#endif  // RINGMASTER_WORKER_SHIM_LAUNCHER_H_
