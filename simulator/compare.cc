// Reading replay summaries and putting them side by side.
#include "simulator/compare.h"

#include <algorithm>
#include <cmath>
#include <filesystem>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "common/status_macros.h"
#include "nlohmann/json.hpp"
#include "topology/node_lists.h"

namespace ringmaster::simulator {
namespace {

using Better = ComparedMetric::Better;

struct MetricDef {
  const char* key;
  Better better;
};

constexpr MetricDef kMetrics[] = {
    {"jobs_total", Better::kNeither},         {"jobs_completed", Better::kHigher},
    {"jobs_failed", Better::kLower},          {"avg_jct_s", Better::kLower},
    {"p50_jct_s", Better::kLower},            {"p95_jct_s", Better::kLower},
    {"p99_jct_s", Better::kLower},            {"avg_queue_delay_s", Better::kLower},
    {"p99_queue_delay_s", Better::kLower},    {"makespan_s", Better::kLower},
    {"gpu_alloc_ratio", Better::kHigher},     {"jain_fairness", Better::kHigher},
    {"preemptions", Better::kLower},          {"evictions", Better::kLower},
    {"shrinks", Better::kNeither},            {"grows", Better::kNeither},
    {"cross_tier_jobs", Better::kLower},      {"events", Better::kNeither},
    {"sim_wall_s", Better::kLower},
};

std::string_view BetterName(Better b) {
  switch (b) {
    case Better::kLower: return "lower";
    case Better::kHigher: return "higher";
    case Better::kNeither: return "neither";
  }
  return "neither";
}

std::string FormatValue(const std::optional<double>& v) {
  if (!v) return "-";
  if (*v == std::floor(*v) && std::fabs(*v) < 1e15) return absl::StrFormat("%.0f", *v);
  // Seconds and counts in the thousands read better whole than as 3.379e+04.
  if (std::fabs(*v) >= 1000 && std::fabs(*v) < 1e15) return absl::StrFormat("%.0f", *v);
  return absl::StrFormat("%.4g", *v);
}

}  // namespace

std::optional<double> RunSummary::Get(std::string_view key) const {
  for (const auto& [k, v] : metrics) {
    if (k == key) return v;
  }
  return std::nullopt;
}

absl::StatusOr<RunSummary> ParseRunSummary(std::string_view text, std::string_view filename, std::string name) {
  nlohmann::json j = nlohmann::json::parse(text, nullptr, /*allow_exceptions=*/false);
  if (j.is_discarded() || !j.is_object()) {
    return absl::InvalidArgumentError(absl::StrCat(std::string(filename), ": not a JSON object"));
  }
  RunSummary r;
  r.name = std::move(name);
  for (const MetricDef& m : kMetrics) {
    auto it = j.find(m.key);
    if (it != j.end() && it->is_number()) r.metrics.emplace_back(m.key, it->get<double>());
  }
  if (r.metrics.empty()) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(filename), ": no replay metrics (is it a `simulate --trace` summary?)"));
  }
  return r;
}

absl::StatusOr<RunSummary> ReadRunSummary(const std::string& dir) {
  const std::string path = (std::filesystem::path(dir) / "summary.json").string();
  RM_ASSIGN_OR_RETURN(auto text, topology::ReadTextFile(path));
  std::string name = std::filesystem::path(dir).filename().string();
  if (name.empty()) name = std::filesystem::path(dir).parent_path().filename().string();
  return ParseRunSummary(text, path, name.empty() ? dir : name);
}

Comparison Compare(const std::vector<RunSummary>& runs) {
  Comparison c;
  for (const RunSummary& r : runs) c.runs.push_back(r.name);
  for (const MetricDef& m : kMetrics) {
    ComparedMetric row{m.key, m.better, {}, std::vector<bool>(runs.size(), false)};
    std::optional<double> best;
    for (const RunSummary& r : runs) {
      row.values.push_back(r.Get(m.key));
      const auto& v = row.values.back();
      if (!v || m.better == Better::kNeither) continue;
      if (!best || (m.better == Better::kLower ? *v < *best : *v > *best)) best = v;
    }
    bool any = false;
    for (const auto& v : row.values) any |= v.has_value();
    if (!any) continue;
    for (size_t i = 0; i < runs.size(); ++i) row.best[i] = best && row.values[i] && *row.values[i] == *best;
    c.metrics.push_back(std::move(row));
  }
  return c;
}

std::string ComparisonTable(const Comparison& c) {
  size_t key_w = 6;
  for (const auto& m : c.metrics) key_w = std::max(key_w, m.key.size());
  std::vector<size_t> w;
  for (size_t i = 0; i < c.runs.size(); ++i) {
    size_t width = c.runs[i].size();
    for (const auto& m : c.metrics) width = std::max(width, FormatValue(m.values[i]).size() + 1);
    w.push_back(width);
  }
  std::string out = absl::StrFormat("%-*s", static_cast<int>(key_w), "metric");
  for (size_t i = 0; i < c.runs.size(); ++i) absl::StrAppend(&out, "  ", absl::StrFormat("%*s", static_cast<int>(w[i]), c.runs[i]));
  absl::StrAppend(&out, "\n");
  for (const auto& m : c.metrics) {
    absl::StrAppend(&out, absl::StrFormat("%-*s", static_cast<int>(key_w), m.key));
    for (size_t i = 0; i < c.runs.size(); ++i) {
      const std::string v = FormatValue(m.values[i]) + (m.best[i] ? "*" : " ");
      absl::StrAppend(&out, "  ", absl::StrFormat("%*s", static_cast<int>(w[i]), v));
    }
    absl::StrAppend(&out, "\n");
  }
  absl::StrAppend(&out, "* best of the row (lower is better for times, delays, stops and wall; higher for "
                        "completed jobs, GPU allocation and fairness)\n");
  return out;
}

std::string ComparisonJson(const Comparison& c) {
  nlohmann::ordered_json j;
  j["runs"] = c.runs;
  j["metrics"] = nlohmann::ordered_json::array();
  for (const auto& m : c.metrics) {
    nlohmann::ordered_json row;
    row["metric"] = m.key;
    row["better"] = std::string(BetterName(m.better));
    row["values"] = nlohmann::ordered_json::array();
    row["best"] = nlohmann::ordered_json::array();
    for (size_t i = 0; i < m.values.size(); ++i) {
      row["values"].push_back(m.values[i] ? nlohmann::ordered_json(*m.values[i]) : nlohmann::ordered_json());
      if (m.best[i]) row["best"].push_back(c.runs[i]);
    }
    j["metrics"].push_back(std::move(row));
  }
  return j.dump(2) + "\n";
}

}  // namespace ringmaster::simulator
