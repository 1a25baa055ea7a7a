// `ringmaster policy import volcano FILE`: a volcano-scheduler.conf (the
// scheduler's actions, tiers of plugins with their `enable*` switches and
// arguments, and `configurations` of the actions) as a ringmaster policy.
// Each Volcano plugin maps to the ringmaster plugin that does its job; what
// has no counterpart is left out and listed with what to do instead, never
// dropped silently.
#ifndef RINGMASTER_CLI_VOLCANO_IMPORT_H_
#define RINGMASTER_CLI_VOLCANO_IMPORT_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster::cli {

struct VolcanoImport {
  std::string policy_yaml;         // a ringmaster policy (`policy check` accepts it)
  std::vector<std::string> notes;  // each part not carried over, and what to do instead
};

// `source` names the file in errors. InvalidArgument when the text is not a
// YAML map with at least actions or tiers.
absl::StatusOr<VolcanoImport> ImportVolcanoConf(std::string_view text, std::string_view source);

// True when `text` looks like a volcano-scheduler.conf rather than a
// ringmaster policy (Volcano-only plugins or `enable*` switches): `policy
// check` then points to the import.
bool LooksLikeVolcanoConf(std::string_view text);

}  // namespace ringmaster::cli

#endif  // RINGMASTER_CLI_VOLCANO_IMPORT_H_
