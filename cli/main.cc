// ringmaster: one binary, one subcommand per driver of the engine.
#include <iostream>

#include "cli/commands.h"

namespace ringmaster::cli {
int& ExitCode() {
  static int code = 0;
  return code;
}
}  // namespace ringmaster::cli

int main(int argc, char** argv) {
  CLI::App app{"ringmaster: a gang scheduler for distributed GPU training"};
  app.require_subcommand(1);
  ringmaster::cli::RegisterScheduleCommand(app);
  ringmaster::cli::RegisterPolicyCommand(app);
  ringmaster::cli::RegisterTopoCommand(app);
  ringmaster::cli::RegisterSimulateCommand(app);
  ringmaster::cli::RegisterCompareCommand(app);
  ringmaster::cli::RegisterCoordinatorCommand(app);
  ringmaster::cli::RegisterShimCommand(app);
  ringmaster::cli::RegisterServeCommand(app);
  ringmaster::cli::RegisterAdminCommands(app);
  ringmaster::cli::RegisterStateCommand(app);
  // Further subcommands register here, one line each.
  try {
    app.parse(argc, argv);  // runs the chosen subcommand's callback
  } catch (const CLI::ParseError& e) {
    // --help and --version exit 0; every bad command line exits 2
    // (docs/ADMIN.md), not the parser's own codes (105, 109, ...).
    return app.exit(e) == 0 ? 0 : 2;
  }
  return ringmaster::cli::ExitCode();
}
