// `ringmaster policy check FILE`: validates a policy file and prints every
// error with file:line:column and field, or "ok".
#include <iostream>

#include "cli/commands.h"
#include "plugins/registry.h"
#include "scheduler/policy.h"

namespace ringmaster::cli {

void RegisterPolicyCommand(CLI::App& app) {
  CLI::App* policy = app.add_subcommand("policy", "work with policy files");
  policy->require_subcommand(1);
  auto file = std::make_shared<std::string>();
  CLI::App* check = policy->add_subcommand("check", "validate a policy file");
  check->add_option("FILE", *file, "policy file (YAML)")->required();
  check->callback([file] {
    std::vector<queue::ConfigError> errors;
    auto p = scheduler::LoadPolicyFile(*file, plugins::BuiltinRegistry(), &errors);
    if (p.ok()) {
      std::cout << "ok\n";
      ExitCode() = 0;
      return;
    }
    for (const auto& e : errors) std::cout << e.ToString() << "\n";
    ExitCode() = 1;
  });
}

}  // namespace ringmaster::cli
