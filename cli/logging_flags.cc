// --log-level for the long-running subcommands (see commands.h).
#include <iostream>

#include "cli/commands.h"
#include "common/logging.h"

namespace ringmaster::cli {

void AddLogLevelOption(CLI::App& cmd, std::string& level) {
  cmd.add_option("--log-level", level,
                 "trace, debug, info, warn, error, critical or off (default: $RINGMASTER_LOG, else info); "
                 "logs go to stderr as key=value lines");
}

bool StartLogging(const std::string& level, std::string_view command) {
  if (absl::Status s = common::InitLogging(level); !s.ok()) {
    std::cerr << command << ": " << s.message() << "\n";
    return false;
  }
  return true;
}

}  // namespace ringmaster::cli
