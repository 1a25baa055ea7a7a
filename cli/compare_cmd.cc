// `ringmaster compare DIR... [--json]`: several replays' summary.json side by
// side (simulator/compare.h), the best value of each metric marked.
#include <iostream>
#include <memory>
#include <vector>

#include "cli/commands.h"
#include "simulator/compare.h"

namespace ringmaster::cli {

void RegisterCompareCommand(CLI::App& app, int* exit_code) {
  struct Flags {
    std::vector<std::string> dirs;
    bool json = false;
  };
  auto f = std::make_shared<Flags>();
  CLI::App* cmd = app.add_subcommand("compare", "compare replays side by side (each DIR holds a summary.json)");
  cmd->add_option("DIR", f->dirs, "output folders of `ringmaster simulate --trace ... --out DIR`")->required();
  cmd->add_flag("--json", f->json, "print JSON instead of a table");
  cmd->callback([f, exit_code] {
    std::vector<simulator::RunSummary> runs;
    for (const std::string& dir : f->dirs) {
      auto r = simulator::ReadRunSummary(dir);
      if (!r.ok()) {
        std::cerr << r.status().message() << "\n";
        *exit_code = 2;
        return;
      }
      runs.push_back(*std::move(r));
    }
    const simulator::Comparison c = simulator::Compare(runs);
    std::cout << (f->json ? simulator::ComparisonJson(c) : simulator::ComparisonTable(c));
  });
}

}  // namespace ringmaster::cli
