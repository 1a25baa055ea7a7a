// The admin's policy file, in Volcano's shape:
//
//   actions: "enqueue, allocate, backfill"
//   tiers:
//   - plugins:
//     - name: priority
//     - name: gang
//   - plugins:
//     - name: binpack
//       arguments: {gpu: 3, cpu: 1}
//   nodesToScore: 16        # optional; 0 scores every feasible node
//   configurations:         # optional: arguments of actions
//   - name: preempt
//     arguments: {gracePeriod: 30, cooldown: 300, maxEvictionsPerCycle: 64}
//   queues:
//   - name: research
//     weight: 2
//     capability: {gpu: 64}
//
// scheduler/ loads actions and tiers and asks each plugin's factory to accept
// its arguments; queue/ loads the queues. Every error carries file:line:column
// and the field.
#ifndef RINGMASTER_SCHEDULER_POLICY_H_
#define RINGMASTER_SCHEDULER_POLICY_H_

#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "queue/queue.h"
#include "scheduler/plugin.h"
#include "scheduler/session.h"

namespace ringmaster::scheduler {

struct PluginConfig {
  std::string name;
  PluginArgs args;
  int line = 0;
  int column = 0;
};

struct Policy {
  std::string file;
  std::vector<std::string> actions;
  std::vector<std::vector<PluginConfig>> tiers;
  // Arguments of actions by name (`configurations:`); absent: defaults.
  std::map<std::string, PluginArgs> action_args;
  std::vector<queue::QueueSpec> queues;  // empty: a single "default" queue
  // Feasible candidate nodes scored per task (`nodesToScore`; 0 = all), taken
  // in best-fit order. Fewer is faster; more follows the scores more closely.
  int nodes_to_score = kDefaultNodesToScore;
};

// The built-in policy (what serve and simulate run without --policy, printed
// by `ringmaster policy default`): examples/policies/ringmaster.yaml, compiled
// in by scheduler/CMakeLists.txt (default_policy.cc.in), parsed like any
// policy file. docs/POLICY.md says what it does and how it was chosen.
Policy DefaultPolicy();
std::string_view DefaultPolicyYaml();

// Parses and validates policy text. Every problem found is appended to
// `errors` (unknown action, plugin or argument, wrong type, bad queue); the
// result is an error when any was found.
absl::StatusOr<Policy> ParsePolicy(std::string_view text, std::string_view file,
                                   const PluginRegistry& registry,
                                   std::vector<queue::ConfigError>* errors);
// Reads the file and parses it.
absl::StatusOr<Policy> LoadPolicyFile(const std::string& path, const PluginRegistry& registry,
                                      std::vector<queue::ConfigError>* errors);
// The built-in policy when `path` is empty, else the file's (every error in
// the status message, one per line).
absl::StatusOr<Policy> LoadPolicyOrDefault(const std::string& path, const PluginRegistry& registry);

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_POLICY_H_
