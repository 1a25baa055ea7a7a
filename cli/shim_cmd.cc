// `ringmaster shim run --coordinator ADDR --job J [--worker W] -- CMD ARGS`:
// runs a training command under the worker shim (worker_shim/launcher.h).
#include <unistd.h>

#include <iostream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "cli/commands.h"
#include "worker_shim/launcher.h"

namespace ringmaster::cli {
namespace {

struct ShimRunFlags {
  std::string coordinator = "127.0.0.1:7070";
  std::string job;
  std::string worker;
  std::string host = "127.0.0.1";
  int workers = 0;
  std::string mode = "restart";
  int grace_ms = 5000;
  std::vector<std::string> command;
  std::string log_level;
};

int RunShim(const ShimRunFlags& f) {
  if (!StartLogging(f.log_level, "shim run")) return 2;
  shim::LaunchOptions o;
  o.client.address = f.coordinator;
  o.client.job = f.job;
  o.client.host = f.host;
  o.client.desired_workers = f.workers;
  char hostname[256] = {};
  ::gethostname(hostname, sizeof(hostname) - 1);
  o.client.worker_id =
      f.worker.empty() ? absl::StrCat(hostname, "-", ::getpid()) : f.worker;
  o.command = f.command;
  o.in_process = f.mode == "inprocess";
  o.grace = absl::Milliseconds(f.grace_ms);
  auto code = shim::RunLauncher(o);
  if (!code.ok()) {
    std::cerr << "shim run: " << code.status() << "\n";
    return 1;
  }
  return *code;
}

}  // namespace

void RegisterShimCommand(CLI::App& app, int* exit_code) {
  CLI::App* shim = app.add_subcommand("shim", "the worker shim");
  shim->require_subcommand(1);
  auto f = std::make_shared<ShimRunFlags>();
  CLI::App* run = shim->add_subcommand(
      "run", "run CMD under the shim: restarted with RANK/WORLD_SIZE/... on "
             "each membership change, or given the in-process API");
  run->add_option("--coordinator", f->coordinator, "coordinator address");
  run->add_option("--job", f->job, "job name")->required();
  run->add_option("--worker", f->worker, "worker id (default host-pid)");
  run->add_option("--host", f->host, "this worker's address for peers");
  run->add_option("--workers", f->workers,
                  "gang size when this worker creates the job");
  run->add_option("--mode", f->mode, "restart or inprocess")
      ->check(CLI::IsMember({"restart", "inprocess"}));
  run->add_option("--grace-ms", f->grace_ms, "SIGTERM to SIGKILL delay");
  AddLogLevelOption(*run, f->log_level);
  run->add_option("command", f->command, "the command, after --")
      ->required();
  run->callback([f, exit_code] { *exit_code = RunShim(*f); });
}

}  // namespace ringmaster::cli
