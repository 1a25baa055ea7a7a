// `ringmaster state backup DIR OUT`: copies the journal of a state directory
// (`serve --state DIR`), live or not, into OUT with SQLite's online backup
// API (server/journal/journal.h BackupJournal). Copying journal.db with cp while
// serve runs is not safe: the last commits are in journal.db-wal (see
// docs/ADMIN.md, "What an operator may copy or delete"). Exit codes: 0 the
// copy is made and checked, 1 it could not be made, 2 bad command line.
#include <iostream>

#include "cli/commands.h"
#include "server/journal/journal.h"

namespace ringmaster::cli {

void RegisterStateCommand(CLI::App& app, int* exit_code) {
  CLI::App* state = app.add_subcommand("state", "the daemon's state directory (serve --state)");
  state->require_subcommand(1);
  auto dir = std::make_shared<std::string>();
  auto out = std::make_shared<std::string>();
  CLI::App* backup = state->add_subcommand(
      "backup", "copy the journal in DIR to OUT/journal.db, safely while serve runs (SQLite's online backup)");
  backup->add_option("DIR", *dir, "state directory (serve --state)")->required()->check(CLI::ExistingDirectory);
  backup->add_option("OUT", *out, "an existing directory without a journal: the copy is a state directory")
      ->required()
      ->check(CLI::ExistingDirectory);
  backup->callback([dir, out, exit_code] {
    auto done = server::BackupJournal(*dir, *out);
    if (!done.ok()) {
      std::cerr << "state backup: " << done.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    std::cout << "backed up " << *dir << "/journal.db to " << done->to << ": " << done->jobs << " jobs, "
              << done->extender << " extender records (quick_check ok)\n";
    *exit_code = 0;
  });
}

}  // namespace ringmaster::cli
