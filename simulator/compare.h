// Side by side: the summaries of several replays (one per policy, say), one
// row per metric, the best value of each row marked. Read by
// `ringmaster compare DIR...` from each DIR/summary.json.
#ifndef RINGMASTER_SIMULATOR_COMPARE_H_
#define RINGMASTER_SIMULATOR_COMPARE_H_

#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster::simulator {

// One run: its name (the folder) and the numbers of its summary.json.
struct RunSummary {
  std::string name;
  std::vector<std::pair<std::string, double>> metrics;  // as in the file
  std::optional<double> Get(std::string_view key) const;
};

// Parses summary.json text (errors name the file).
absl::StatusOr<RunSummary> ParseRunSummary(std::string_view text, std::string_view filename,
                                           std::string name);
// Reads DIR/summary.json; the run is named after DIR.
absl::StatusOr<RunSummary> ReadRunSummary(const std::string& dir);

// A metric compared across runs: which way is better, the values (absent
// where a run lacks the key), the runs holding the best value (ties all
// marked; none when no direction or no value).
struct ComparedMetric {
  enum class Better { kLower, kHigher, kNeither };
  std::string key;
  Better better = Better::kNeither;
  std::vector<std::optional<double>> values;
  std::vector<bool> best;
};

struct Comparison {
  std::vector<std::string> runs;
  std::vector<ComparedMetric> metrics;
};

// The metrics of replay summaries (docs/TRACE_FORMAT.md), in that order,
// each with its direction.
Comparison Compare(const std::vector<RunSummary>& runs);

// A fixed-width table, best values marked with '*'.
std::string ComparisonTable(const Comparison& c);
// {"runs": [...], "metrics": [{"metric", "better", "values", "best"}...]}.
std::string ComparisonJson(const Comparison& c);

}  // namespace ringmaster::simulator

#endif  // RINGMASTER_SIMULATOR_COMPARE_H_
