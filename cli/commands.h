// Subcommands of the `ringmaster` binary. Each Register* function adds one
// subcommand (with its flags and callback) to the app; main.cc lists them.
// The callback of the command that runs leaves its exit code in *exit_code
// (main's, which main returns; it outlives app.parse).
#ifndef RINGMASTER_CLI_COMMANDS_H_
#define RINGMASTER_CLI_COMMANDS_H_

#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

namespace ringmaster::cli {

// --log-level on the subcommands that run for long (serve, coordinator,
// shim run): common/logging.h's level, over RINGMASTER_LOG.
void AddLogLevelOption(CLI::App& cmd, std::string& level);
// Sets up logging at that level. A bad level prints "COMMAND: what" on
// stderr and returns false: the command then exits 2 (a bad command line).
bool StartLogging(const std::string& level, std::string_view command);

void RegisterScheduleCommand(CLI::App& app, int* exit_code);
void RegisterPolicyCommand(CLI::App& app, int* exit_code);
void RegisterTopoCommand(CLI::App& app, int* exit_code);
void RegisterSimulateCommand(CLI::App& app, int* exit_code);
void RegisterCompareCommand(CLI::App& app, int* exit_code);
void RegisterCoordinatorCommand(CLI::App& app, int* exit_code);
void RegisterShimCommand(CLI::App& app, int* exit_code);
void RegisterServeCommand(CLI::App& app, int* exit_code);
// submit, jobs, job, queues, nodes, cancel: clients of the daemon's admin API.
void RegisterAdminCommands(CLI::App& app, int* exit_code);
// `state backup DIR OUT`: a safe copy of a (live) journal.
void RegisterStateCommand(CLI::App& app, int* exit_code);
// `policy update FILE` (the policy command calls it).
void RegisterPolicyUpdateCommand(CLI::App& policy, int* exit_code);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_COMMANDS_H_
