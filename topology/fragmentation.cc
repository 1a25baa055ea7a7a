#include "topology/fragmentation.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <tuple>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "topology/gpu_select.h"

namespace ringmaster::topology {
namespace {

bool IsSharing(const TaskClass& t) { return t.num_gpu == 1 && t.gpu_milli < kMilliPerGpu; }

// Per-GPU milli a GPU must have free to hold one member of the task.
Quantity PerGpuNeed(const TaskClass& t) { return IsSharing(t) ? t.gpu_milli : kMilliPerGpu; }

absl::string_view ModelOf(const NodeGpuState& n) {
  return n.gpus.empty() ? absl::string_view() : absl::string_view(n.gpus[0].model);
}

bool ModelAllowed(const NodeGpuState& n, const TaskClass& t) {
  if (t.gpu_models.empty() || t.num_gpu == 0) return true;
  const absl::string_view m = ModelOf(n);
  return std::find(t.gpu_models.begin(), t.gpu_models.end(), m) != t.gpu_models.end();
}

// CPU, model and GPU fit (memory left out: fragmentation is about GPUs).
bool FitsIgnoringMemory(const NodeGpuState& n, const TaskClass& t) {
  if (t.cpu_milli > n.cpu_free_milli || !ModelAllowed(n, t)) return false;
  if (t.num_gpu == 0) return true;
  const Quantity need = PerGpuNeed(t);
  int able = 0;
  for (Quantity f : n.gpu_free_milli) able += f >= need;
  return able >= (IsSharing(t) ? 1 : t.num_gpu);
}

Quantity TotalFree(const NodeGpuState& n) {
  Quantity s = 0;
  for (Quantity f : n.gpu_free_milli) s += f;
  return s;
}

double Uniform01(std::mt19937_64& rng) { return static_cast<double>(rng() >> 11) * 0x1.0p-53; }

}  // namespace

bool TaskFits(const NodeGpuState& node, const TaskClass& task) {
  return task.memory <= node.memory_free && FitsIgnoringMemory(node, task);
}

Quantity TaskFragment(const NodeGpuState& node, const TaskClass& task) {
  if (task.num_gpu == 0 || !FitsIgnoringMemory(node, task)) return TotalFree(node);
  const Quantity need = PerGpuNeed(task);
  Quantity frag = 0;
  for (Quantity f : node.gpu_free_milli) {
    if (f < need) frag += f;
  }
  return frag;
}

absl::StatusOr<FragmentationModel> FragmentationModel::Create(std::vector<TaskClass> classes) {
  std::map<std::tuple<Quantity, int, Quantity, std::vector<std::string>>, size_t> index;
  FragmentationModel m;
  double total = 0;
  for (size_t i = 0; i < classes.size(); ++i) {
    TaskClass& c = classes[i];
    if (c.cpu_milli < 0 || c.memory < 0 || c.num_gpu < 0 || c.gpu_milli < 0 ||
        c.gpu_milli > kMilliPerGpu || !(c.popularity >= 0)) {
      return absl::InvalidArgumentError(absl::StrCat("task class ", i, ": negative or out-of-range amount"));
    }
    if (c.num_gpu > 1 && c.gpu_milli != kMilliPerGpu) {
      return absl::InvalidArgumentError(
          absl::StrCat("task class ", i, ": ", c.num_gpu, " GPUs must each be whole (gpu_milli 1000)"));
    }
    if (c.num_gpu == 0) c.gpu_milli = 0;
    if (c.num_gpu > 0 && c.gpu_milli == 0) {
      return absl::InvalidArgumentError(absl::StrCat("task class ", i, ": GPUs with gpu_milli 0"));
    }
    std::sort(c.gpu_models.begin(), c.gpu_models.end());
    c.gpu_models.erase(std::unique(c.gpu_models.begin(), c.gpu_models.end()), c.gpu_models.end());
    total += c.popularity;
    // Memory is not part of the measure, so classes differing only in it merge.
    auto [it, fresh] = index.try_emplace({c.cpu_milli, c.num_gpu, c.gpu_milli, c.gpu_models}, m.classes_.size());
    if (fresh) {
      c.memory = 0;
      m.classes_.push_back(std::move(c));
    } else {
      m.classes_[it->second].popularity += c.popularity;
    }
  }
  if (m.classes_.empty() || !(total > 0)) {
    return absl::InvalidArgumentError("workload has no task classes with positive popularity");
  }
  for (TaskClass& c : m.classes_) c.popularity /= total;
  return m;
}

bool FragmentationModel::PackKey(const NodeGpuState& node, MemoKey* key) const {
  // model id (8 bits) | free CPU (24 bits) | GPU count (4 bits) | up to 8
  // free GPU shares sorted (10 bits each): 116 bits, exact.
  const size_t n = node.gpu_free_milli.size();
  if (n > 8 || node.cpu_free_milli < 0 || node.cpu_free_milli >= (Quantity{1} << 24)) return false;
  const absl::string_view model = ModelOf(node);
  size_t id = 0;
  while (id < models_.size() && models_[id] != model) ++id;
  if (id == models_.size()) {
    if (models_.size() >= 255) return false;
    models_.emplace_back(std::string(model));
  }
  std::array<Quantity, 8> free{};
  for (size_t i = 0; i < n; ++i) {
    if (node.gpu_free_milli[i] < 0 || node.gpu_free_milli[i] > kMilliPerGpu) return false;
    free[i] = node.gpu_free_milli[i];
  }
  std::sort(free.begin(), free.begin() + n);
  unsigned __int128 k = id;
  k = (k << 24) | static_cast<uint64_t>(node.cpu_free_milli);
  k = (k << 4) | n;
  for (size_t i = 0; i < n; ++i) k = (k << 10) | static_cast<uint64_t>(free[i]);
  key->hi = static_cast<uint64_t>(k >> 64);
  key->lo = static_cast<uint64_t>(k);
  return true;
}

double FragmentationModel::Compute(const NodeGpuState& node) const {
  double sum = 0;
  for (const TaskClass& c : classes_) sum += c.popularity * static_cast<double>(TaskFragment(node, c));
  return sum;
}

double FragmentationModel::NodeFragmentation(const NodeGpuState& node) const {
  // The measure ignores GPU order, so the key holds the free shares sorted.
  MemoKey key;
  if (!PackKey(node, &key)) return Compute(node);
  if (auto it = memo_.find(key); it != memo_.end()) return it->second;
  const double sum = Compute(node);
  memo_.emplace(key, sum);
  return sum;
}

absl::StatusOr<SharePolicy> ParseSharePolicy(std::string_view name_in) {
  const absl::string_view name(name_in.data(), name_in.size());
  std::string n;
  for (char c : name) {
    if (c != '-' && c != '_') n.push_back(absl::ascii_tolower(static_cast<unsigned char>(c)));
  }
  if (n == "fgd") return SharePolicy::kFgd;
  if (n == "fgdbestfit") return SharePolicy::kFgdBestFit;
  if (n == "bestfit") return SharePolicy::kBestFit;
  if (n == "dotprod") return SharePolicy::kDotProd;
  if (n == "gpuclustering") return SharePolicy::kGpuClustering;
  if (n == "gpupacking") return SharePolicy::kGpuPacking;
  if (n == "random") return SharePolicy::kRandom;
  return absl::InvalidArgumentError(absl::StrCat(
      "unknown placement policy '", name, "' (fgd, fgd-bestfit, bestfit, dotprod, gpuclustering, gpupacking, random)"));
}

std::string_view SharePolicyName(SharePolicy policy) {
  switch (policy) {
    case SharePolicy::kFgd:
      return "fgd";
    case SharePolicy::kFgdBestFit:
      return "fgd-bestfit";
    case SharePolicy::kBestFit:
      return "bestfit";
    case SharePolicy::kDotProd:
      return "dotprod";
    case SharePolicy::kGpuClustering:
      return "gpuclustering";
    case SharePolicy::kGpuPacking:
      return "gpupacking";
    case SharePolicy::kRandom:
      return "random";
  }
  return "?";
}

std::optional<NodeChoice> ScoreNode(SharePolicy policy, const NodeGpuState& node,
                                    const TaskClass& task, const FragmentationModel& model,
                                    std::mt19937_64& rng) {
  if (!TaskFits(node, task)) return std::nullopt;
  const size_t n = node.gpu_free_milli.size();
  const Quantity gpu_capacity = static_cast<Quantity>(n) * kMilliPerGpu;
  const Quantity free_before = TotalFree(node);
  std::vector<Quantity> free(node.gpu_free_milli.begin(), node.gpu_free_milli.end());
  NodeGpuState after = node;
  after.cpu_free_milli -= task.cpu_milli;
  after.memory_free -= task.memory;
  NodeChoice choice;

  const bool fgd = policy == SharePolicy::kFgd || policy == SharePolicy::kFgdBestFit;
  const double fit_weight = policy == SharePolicy::kFgdBestFit ? kFgdBestFitWeight : kFgdTieBreakWeight;
  const double cpu_cap = node.cpu_capacity_milli > 0 ? static_cast<double>(node.cpu_capacity_milli) : 1.0;
  const double gpu_cap = gpu_capacity > 0 ? static_cast<double>(gpu_capacity) : 1.0;
  const Quantity task_gpu = static_cast<Quantity>(task.num_gpu) * task.gpu_milli;
  // Minus the CPU and GPU shares left free after placing (BestFit's score).
  const double best_fit = -(static_cast<double>(after.cpu_free_milli) / cpu_cap +
                            static_cast<double>(free_before - task_gpu) / gpu_cap);

  if (IsSharing(task) && fgd) {
    // The GPU where expected fragmentation grows least (ties: lowest index).
    const double before = model.NodeFragmentation(node);
    std::optional<double> best;
    std::vector<Quantity> tried;  // equal free shares give equal growth
    for (size_t g = 0; g < n; ++g) {
      if (free[g] < task.gpu_milli) continue;
      if (std::find(tried.begin(), tried.end(), free[g]) != tried.end()) continue;
      tried.push_back(free[g]);
      free[g] -= task.gpu_milli;
      after.gpu_free_milli = free;
      const double delta = model.NodeFragmentation(after) - before;
      free[g] += task.gpu_milli;
      if (!best || delta < *best) {
        best = delta;
        choice.gpus = {static_cast<int>(g)};
      }
    }
    choice.score = -*best + fit_weight * best_fit;
    return choice;
  }

  if (IsSharing(task)) {
    std::vector<Quantity> used(n);
    for (size_t g = 0; g < n; ++g) used[g] = kMilliPerGpu - free[g];
    const std::optional<int> g = SelectSharedGpu(used, task.gpu_milli);
    if (!g) return std::nullopt;
    choice.gpus = {*g};
    free[*g] -= task.gpu_milli;
  } else if (task.num_gpu > 0) {
    std::vector<Quantity> used(n);
    for (size_t g = 0; g < n; ++g) used[g] = kMilliPerGpu - free[g];
    std::optional<std::vector<int>> gs = SelectWholeGpus(node.gpus, used, task.num_gpu);
    if (!gs) return std::nullopt;
    choice.gpus = *gs;
    for (int g : *gs) free[g] = 0;
  }
  after.gpu_free_milli = free;

  switch (policy) {
    case SharePolicy::kFgd:
    case SharePolicy::kFgdBestFit:
      choice.score = -(model.NodeFragmentation(after) - model.NodeFragmentation(node)) + fit_weight * best_fit;
      break;
    case SharePolicy::kBestFit:
      choice.score = best_fit;
      break;
    case SharePolicy::kDotProd:
      choice.score = -(static_cast<double>(task.cpu_milli) / cpu_cap *
                           static_cast<double>(node.cpu_free_milli) / cpu_cap +
                       static_cast<double>(task_gpu) / gpu_cap * static_cast<double>(free_before) / gpu_cap);
      break;
    case SharePolicy::kGpuClustering: {
      const bool same = task.num_gpu > 0 &&
                        std::binary_search(node.hosted_gpu_milli.begin(), node.hosted_gpu_milli.end(),
                                           task.gpu_milli);
      choice.score = (same ? 1.0 : 0.0) + 1e-3 * best_fit;
      break;
    }
    case SharePolicy::kGpuPacking: {
      double tier = free_before < gpu_capacity ? 1.0 : 0.0;
      if (IsSharing(task) && node.gpu_free_milli[choice.gpus[0]] < kMilliPerGpu) tier = 2.0;
      choice.score = tier + 1e-3 * best_fit;
      break;
    }
    case SharePolicy::kRandom:
      choice.score = Uniform01(rng);
      break;
  }
  return choice;
}

double AuthorsFgdScore(double fragment_drop_milli) {
  return std::floor(100.0 / (1.0 + std::exp(-fragment_drop_milli / 1000.0)));
}

std::string FormatTaskClasses(const std::vector<TaskClass>& classes) {
  std::vector<std::string> out;
  out.reserve(classes.size());
  for (const TaskClass& c : classes) {
    std::string s = absl::StrCat("cpu=", c.cpu_milli);
    if (c.num_gpu > 0) absl::StrAppend(&s, " gpus=", c.num_gpu, " milli=", c.gpu_milli);
    if (!c.gpu_models.empty()) absl::StrAppend(&s, " models=", absl::StrJoin(c.gpu_models, "|"));
    // %.17g reads back as the same double.
    absl::StrAppend(&s, " weight=", absl::StrFormat("%.17g", c.popularity));
    out.push_back(std::move(s));
  }
  return absl::StrJoin(out, "; ");
}

absl::StatusOr<std::vector<TaskClass>> ParseTaskClasses(std::string_view text_in) {
  const absl::string_view text(text_in.data(), text_in.size());
  std::vector<TaskClass> classes;
  int index = 0;
  for (absl::string_view item : absl::StrSplit(text, ';')) {
    ++index;
    item = absl::StripAsciiWhitespace(item);
    auto bad = [&](absl::string_view what, absl::string_view msg) {
      return absl::InvalidArgumentError(absl::StrCat("task class ", index, ": '", what, "': ", msg));
    };
    if (item.empty()) return bad(item, "empty (classes are separated by ';')");
    TaskClass c;
    c.popularity = 1;
    bool has_milli = false;
    std::map<std::string, int, std::less<>> seen;
    for (absl::string_view kv : absl::StrSplit(item, ' ', absl::SkipWhitespace())) {
      const size_t eq = kv.find('=');
      if (eq == absl::string_view::npos) return bad(kv, "expected key=value");
      const absl::string_view key = kv.substr(0, eq);
      const absl::string_view value = kv.substr(eq + 1);
      if (seen[std::string(key)]++ > 0) return bad(kv, "key given twice");
      int64_t v = 0;
      auto integer = [&](int64_t lo, int64_t hi) {
        return absl::SimpleAtoi(value, &v) && v >= lo && v <= hi;
      };
      if (key == "cpu") {
        if (!integer(0, int64_t{1} << 40)) return bad(kv, "cpu must be an integer >= 0 (milli-CPUs)");
        c.cpu_milli = v;
      } else if (key == "gpus") {
        if (!integer(0, 1024)) return bad(kv, "gpus must be an integer in [0, 1024]");
        c.num_gpu = static_cast<int>(v);
      } else if (key == "milli") {
        if (!integer(1, kMilliPerGpu)) return bad(kv, "milli must be an integer in [1, 1000]");
        c.gpu_milli = v;
        has_milli = true;
      } else if (key == "models") {
        for (absl::string_view m : absl::StrSplit(value, '|')) {
          if (m.empty()) return bad(kv, "empty model name");
          c.gpu_models.emplace_back(m);
        }
      } else if (key == "weight") {
        double w = 0;
        if (!absl::SimpleAtod(value, &w) || !(w > 0) || !std::isfinite(w)) return bad(kv, "weight must be a number > 0");
        c.popularity = w;
      } else {
        return bad(kv, "unknown key (known: cpu, gpus, milli, models, weight)");
      }
    }
    if (c.num_gpu == 0) {
      if (has_milli) return bad(item, "milli needs gpus >= 1");
      if (!c.gpu_models.empty()) return bad(item, "models needs gpus >= 1");
    } else if (!has_milli) {
      c.gpu_milli = kMilliPerGpu;
    }
    if (c.num_gpu > 1 && c.gpu_milli != kMilliPerGpu) return bad(item, "more than one GPU must be whole (milli=1000)");
    classes.push_back(std::move(c));
  }
  return classes;
}

}  // namespace ringmaster::topology
