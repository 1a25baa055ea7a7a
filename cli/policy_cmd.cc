// `ringmaster policy check FILE`: validates a policy file and prints every
// error with file:line:column and field, or "ok". `policy default` prints the
// built-in policy (what schedule, simulate and serve use without --policy).
// `policy update FILE` sends one to the daemon (cli/admin_cmd.cc).
#include <fstream>
#include <iostream>
#include <sstream>

#include "cli/commands.h"
#include "cli/volcano_import.h"
#include "plugins/registry.h"
#include "scheduler/policy.h"

namespace ringmaster::cli {

void RegisterPolicyCommand(CLI::App& app, int* exit_code) {
  CLI::App* policy = app.add_subcommand("policy", "work with policy files");
  policy->require_subcommand(1);
  auto file = std::make_shared<std::string>();
  CLI::App* check = policy->add_subcommand("check", "validate a policy file");
  check->add_option("FILE", *file, "policy file (YAML)")->required();
  check->callback([file, exit_code] {
    std::vector<queue::ConfigError> errors;
    auto p = scheduler::LoadPolicyFile(*file, plugins::BuiltinRegistry(), &errors);
    if (p.ok()) {
      std::cout << "ok\n";
      *exit_code = 0;
      return;
    }
    for (const auto& e : errors) std::cout << e.ToString() << "\n";
    std::ifstream in(*file);
    std::stringstream text;
    text << in.rdbuf();
    if (LooksLikeVolcanoConf(text.str())) {
      std::cout << "hint: " << *file << " looks like a volcano-scheduler.conf: convert it with "
                << "`ringmaster policy import volcano " << *file << "`\n";
    }
    *exit_code = 1;
  });
  auto import_file = std::make_shared<std::string>();
  CLI::App* import = policy->add_subcommand("import", "convert another scheduler's configuration into a policy");
  import->require_subcommand(1);
  CLI::App* volcano = import->add_subcommand(
      "volcano", "a volcano-scheduler.conf as a ringmaster policy on stdout; what is not carried over on stderr");
  volcano->add_option("FILE", *import_file, "volcano-scheduler.conf (YAML)")->required();
  volcano->callback([import_file, exit_code] {
    std::ifstream in(*import_file);
    std::stringstream text;
    text << in.rdbuf();
    if (!in) {
      std::cerr << *import_file << ": cannot read\n";
      *exit_code = 2;
      return;
    }
    auto imported = ImportVolcanoConf(text.str(), *import_file);
    if (!imported.ok()) {
      std::cerr << imported.status().message() << "\n";
      *exit_code = 1;
      return;
    }
    std::cout << imported->policy_yaml;
    for (const std::string& n : imported->notes) std::cerr << "not carried over: " << n << "\n";
    *exit_code = 0;
  });
  CLI::App* def = policy->add_subcommand("default", "print the built-in policy (used without --policy)");
  def->callback([exit_code] {
    std::cout << scheduler::DefaultPolicyYaml();
    *exit_code = 0;
  });
  RegisterPolicyUpdateCommand(*policy, exit_code);
}

}  // namespace ringmaster::cli
