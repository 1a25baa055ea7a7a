// Subcommands of the `ringmaster` binary. Each Register* function adds one
// subcommand (with its flags and callback) to the app; main.cc lists them.
#ifndef RINGMASTER_CLI_COMMANDS_H_
#define RINGMASTER_CLI_COMMANDS_H_

#include <string>
#include <string_view>

#include <CLI/CLI.hpp>

namespace ringmaster::cli {

// Exit code a subcommand's callback leaves here; main returns it.
int& ExitCode();

// --log-level on the subcommands that run for long (serve, coordinator,
// shim run): common/logging.h's level, over RINGMASTER_LOG.
void AddLogLevelOption(CLI::App& cmd, std::string& level);
// Sets up logging at that level. A bad level prints "COMMAND: what" on
// stderr, sets exit code 2 and returns false.
bool StartLogging(const std::string& level, std::string_view command);

void RegisterScheduleCommand(CLI::App& app);
void RegisterPolicyCommand(CLI::App& app);
void RegisterTopoCommand(CLI::App& app);
void RegisterSimulateCommand(CLI::App& app);
void RegisterCompareCommand(CLI::App& app);
void RegisterCoordinatorCommand(CLI::App& app);
void RegisterShimCommand(CLI::App& app);
void RegisterServeCommand(CLI::App& app);
// submit, jobs, job, queues, nodes, cancel: clients of the daemon's admin API.
void RegisterAdminCommands(CLI::App& app);
// `state backup DIR OUT`: a safe copy of a (live) journal.
void RegisterStateCommand(CLI::App& app);
// `policy update FILE` (the policy command calls it).
void RegisterPolicyUpdateCommand(CLI::App& policy);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_COMMANDS_H_
