// Fuzzes the policy file (scheduler/policy.h, with the queues of
// queue/queue.h and every built-in plugin's argument checks). Properties:
// parsing never crashes; a policy that parses schedules a few gangs in its
// queues without breaking an engine invariant.
#include <string>
#include <vector>

#include "fuzz/fuzz_engine.h"
#include "fuzz/fuzz_input.h"
#include "plugins/registry.h"
#include "scheduler/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringmaster;
  static const scheduler::PluginRegistry registry = plugins::BuiltinRegistry();
  std::vector<queue::ConfigError> errors;
  auto policy = scheduler::ParsePolicy(fuzz::AsText(data, size), "fuzz.yaml", registry, &errors);
  if (!policy.ok()) {
    if (errors.empty() && policy.status().message().empty()) fuzz::Fail("rejected without a reason", "");
    return 0;
  }
  std::vector<std::string> queues;
  for (const queue::QueueSpec& q : policy->queues) queues.push_back(q.name);
  fuzz::RunEngine(fuzz::SmallCluster(), *policy, fuzz::SampleJobs(queues));
  return 0;
}
