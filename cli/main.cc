// ringmaster: one binary, one subcommand per driver of the engine.
#include <iostream>

#include "cli/commands.h"

int main(int argc, char** argv) {
  CLI::App app{"ringmaster: a gang scheduler for distributed GPU training"};
  app.require_subcommand(1);
  int exit_code = 0;  // the chosen subcommand's callback sets it
  ringmaster::cli::RegisterScheduleCommand(app, &exit_code);
  ringmaster::cli::RegisterPolicyCommand(app, &exit_code);
  ringmaster::cli::RegisterTopoCommand(app, &exit_code);
  ringmaster::cli::RegisterSimulateCommand(app, &exit_code);
  ringmaster::cli::RegisterCompareCommand(app, &exit_code);
  ringmaster::cli::RegisterCoordinatorCommand(app, &exit_code);
  ringmaster::cli::RegisterShimCommand(app, &exit_code);
  ringmaster::cli::RegisterServeCommand(app, &exit_code);
  ringmaster::cli::RegisterAdminCommands(app, &exit_code);
  ringmaster::cli::RegisterStateCommand(app, &exit_code);
  // Further subcommands register here, one line each.
  try {
    app.parse(argc, argv);  // runs the chosen subcommand's callback
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every bad command line exits 2
    // (docs/ADMIN.md), not the parser's own codes (105, 109, ...).
    return app.exit(e) == 0 ? 0 : 2;
  }
  return exit_code;
}
