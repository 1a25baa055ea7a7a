// `ringmaster policy check FILE`: validates a policy file and prints every
// error with file:line:column and field, or "ok". `policy default` prints the
// built-in policy (what schedule, simulate and serve use without --policy).
// `policy update FILE` sends one to the daemon (cli/admin_cmd.cc).
#include <iostream>

#include "cli/commands.h"
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
    *exit_code = 1;
  });
  CLI::App* def = policy->add_subcommand("default", "print the built-in policy (used without --policy)");
  def->callback([exit_code] {
    std::cout << scheduler::DefaultPolicyYaml();
    *exit_code = 0;
  });
  RegisterPolicyUpdateCommand(*policy, exit_code);
}

}  // namespace ringmaster::cli
