#include "simulator/fgd_protocol.h"

#include <algorithm>
#include <fstream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"

namespace ringmaster::simulator {
namespace {

using topology::Quantity;
using topology::kMilliPerGpu;

constexpr int64_t kMiB = 1024 * 1024;

// Uniform integer in [0, n) from the protocol's generator.
uint64_t Below(std::mt19937_64& rng, uint64_t n) { return rng() % n; }

}  // namespace

absl::StatusOr<std::vector<OpenbPod>> ParseOpenbPodList(std::string_view text_in,
                                                        std::string_view filename_in) {
  const absl::string_view text(text_in.data(), text_in.size());
  const std::string filename(filename_in);
  std::vector<absl::string_view> lines = absl::StrSplit(text, '\n');
  auto cells_of = [](absl::string_view line) {
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    std::vector<std::string> cells;
    for (absl::string_view c : absl::StrSplit(line, ',')) cells.emplace_back(absl::StripAsciiWhitespace(c));
    return cells;
  };
  if (lines.empty() || absl::StripAsciiWhitespace(lines[0]).empty()) {
    return absl::InvalidArgumentError(absl::StrCat(filename, ": empty file (no header)"));
  }
  const std::vector<std::string> header = cells_of(lines[0]);
  std::map<std::string, size_t> col;
  for (size_t i = 0; i < header.size(); ++i) col[header[i]] = i;
  for (const char* need : {"name", "cpu_milli", "memory_mib", "num_gpu", "gpu_milli"}) {
    if (!col.count(need)) {
      return absl::InvalidArgumentError(absl::StrCat(filename, ":1: header has no column '", need, "'"));
    }
  }
  const bool has_spec = col.count("gpu_spec") > 0;
  std::vector<OpenbPod> pods;
  for (size_t ln = 1; ln < lines.size(); ++ln) {
    if (absl::StripAsciiWhitespace(lines[ln]).empty()) continue;
    const std::vector<std::string> cells = cells_of(lines[ln]);
    auto where = [&](const std::string& name) {
      return absl::StrCat(filename, ":", ln + 1, ": column ", col[name] + 1, " (", name, "): ");
    };
    if (cells.size() != header.size()) {
      return absl::InvalidArgumentError(absl::StrCat(filename, ":", ln + 1, ": row has ", cells.size(),
                                                     " columns, the header has ", header.size()));
    }
    auto number = [&](const std::string& name, int64_t lo, int64_t hi) -> absl::StatusOr<int64_t> {
      int64_t v = 0;
      const std::string& c = cells[col[name]];
      if (!absl::SimpleAtoi(c, &v) || v < lo || v > hi) {
        return absl::InvalidArgumentError(
            absl::StrCat(where(name), "'", c, "' is not an integer in [", lo, ", ", hi, "]"));
      }
      return v;
    };
    OpenbPod p;
    p.name = cells[col["name"]];
    if (p.name.empty()) return absl::InvalidArgumentError(absl::StrCat(where("name"), "empty name"));
    RM_ASSIGN_OR_RETURN(auto cpu, number("cpu_milli", 0, int64_t{1} << 40));
    RM_ASSIGN_OR_RETURN(auto mem, number("memory_mib", 0, int64_t{1} << 30));
    RM_ASSIGN_OR_RETURN(auto gpus, number("num_gpu", 0, 1024));
    RM_ASSIGN_OR_RETURN(auto milli, number("gpu_milli", 0, kMilliPerGpu));
    p.cpu_milli = cpu;
    p.memory = mem * kMiB;
    p.num_gpu = static_cast<int>(gpus);
    p.gpu_milli = p.num_gpu == 0 ? 0 : milli;
    if (p.num_gpu > 0 && p.gpu_milli == 0) {
      return absl::InvalidArgumentError(absl::StrCat(where("gpu_milli"), "a pod with GPUs needs gpu_milli > 0"));
    }
    if (p.num_gpu > 1 && p.gpu_milli != kMilliPerGpu) {
      return absl::InvalidArgumentError(
          absl::StrCat(where("gpu_milli"), "a pod with ", p.num_gpu, " GPUs must use whole GPUs (1000)"));
    }
    if (has_spec) {
      std::set<std::string> models;
      for (absl::string_view m : absl::StrSplit(cells[col["gpu_spec"]], '|', absl::SkipEmpty())) {
        models.emplace(absl::StripAsciiWhitespace(m));
      }
      p.gpu_models.assign(models.begin(), models.end());
    }
    pods.push_back(std::move(p));
  }
  if (pods.empty()) return absl::InvalidArgumentError(absl::StrCat(filename, ": no pods"));
  return pods;
}

absl::StatusOr<std::vector<OpenbPod>> ReadOpenbPodList(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseOpenbPodList(ss.str(), path);
}

std::vector<topology::TaskClass> TaskClassesOf(const std::vector<OpenbPod>& pods) {
  std::vector<topology::TaskClass> classes;
  classes.reserve(pods.size());
  for (const OpenbPod& p : pods) {
    classes.push_back({p.cpu_milli, p.memory, p.num_gpu, p.gpu_milli, p.gpu_models, 1.0});
  }
  return classes;
}

std::vector<topology::TaskClass> TypicalTaskClasses(const std::vector<OpenbPod>& pods, double typical_pct) {
  // Count pods per class (memory is not part of the measure).
  std::map<std::tuple<Quantity, int, Quantity, std::vector<std::string>>, double> count;
  for (const OpenbPod& p : pods) {
    std::vector<std::string> models = p.gpu_models;
    std::sort(models.begin(), models.end());
    count[{p.cpu_milli, p.num_gpu, p.num_gpu == 0 ? 0 : p.gpu_milli, models}] += 1;
  }
  std::vector<topology::TaskClass> classes;
  for (const auto& [k, n] : count) {
    classes.push_back({std::get<0>(k), 0, std::get<1>(k), std::get<2>(k), std::get<3>(k), n});
  }
  // Most popular first (ties: the map's order), then keep classes until
  // they cover typical_pct of the pods.
  std::stable_sort(classes.begin(), classes.end(),
                   [](const topology::TaskClass& a, const topology::TaskClass& b) { return a.popularity > b.popularity; });
  if (typical_pct >= 100) return classes;
  const double want = typical_pct / 100.0 * static_cast<double>(pods.size());
  double covered = 0;
  size_t keep = 0;
  while (keep < classes.size() && covered < want) covered += classes[keep++].popularity;
  classes.resize(std::max<size_t>(keep, 1));
  return classes;
}

std::vector<uint32_t> SampleArrivals(const std::vector<OpenbPod>& pods, int64_t capacity_milli,
                                     const FgdOptions& options) {
  std::mt19937_64 rng(options.seed);
  const double target = options.tune * static_cast<double>(capacity_milli);
  std::vector<uint32_t> order;
  const bool any_gpu = std::any_of(pods.begin(), pods.end(), [](const OpenbPod& p) { return p.num_gpu > 0; });
  if (!any_gpu || capacity_milli <= 0) return order;
  int64_t requested = 0;
  for (;;) {
    const uint32_t k = static_cast<uint32_t>(Below(rng, pods.size()));
    const int64_t req = pods[k].num_gpu * pods[k].gpu_milli;
    if (static_cast<double>(requested + req) > target) break;
    requested += req;
    order.push_back(k);
  }
  for (size_t i = order.size(); i > 1; --i) std::swap(order[i - 1], order[Below(rng, i)]);
  return order;
}

}  // namespace ringmaster::simulator
