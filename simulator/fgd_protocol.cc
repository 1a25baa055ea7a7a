#include "simulator/fgd_protocol.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <limits>
#include <map>
#include <random>
#include <set>
#include <tuple>
#include <sstream>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"

namespace ringmaster::simulator {
namespace {

using topology::Quantity;
using topology::kMilliPerGpu;

constexpr int64_t kMiB = 1024 * 1024;

// Uniform integer in [0, n) from the protocol's generator.
uint64_t Below(std::mt19937_64& rng, uint64_t n) { return rng() % n; }

// The run-time state of one node.
struct NodeRt {
  int model = 0;  // interned GPU model
  Quantity cpu_capacity = 0;
  Quantity cpu_free = 0;
  Quantity memory_free = 0;
  std::vector<Quantity> gpu_free;  // sorted ascending (GPUs are interchangeable)
  std::vector<Quantity> hosted;    // distinct per-GPU milli of GPU pods, sorted
  double frag = 0;                 // expected fragmentation, milli
};

// Key of the score-relevant state (everything but memory).
std::string StateKey(const NodeRt& n, bool with_hosted) {
  std::string k;
  auto put = [&k](int64_t v) { k.append(reinterpret_cast<const char*>(&v), sizeof(v)); };
  put(n.model);
  put(n.cpu_capacity);
  put(n.cpu_free);
  put(static_cast<int64_t>(n.gpu_free.size()));
  for (Quantity f : n.gpu_free) put(f);
  if (with_hosted) {
    for (Quantity h : n.hosted) put(h);
  }
  return k;
}

}  // namespace

double AuthorsFgdScore(double fragment_drop_milli) {
  return std::floor(100.0 / (1.0 + std::exp(-fragment_drop_milli / 1000.0)));
}

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
    auto cpu = number("cpu_milli", 0, int64_t{1} << 40);
    if (!cpu.ok()) return cpu.status();
    auto mem = number("memory_mib", 0, int64_t{1} << 30);
    if (!mem.ok()) return mem.status();
    auto gpus = number("num_gpu", 0, 1024);
    if (!gpus.ok()) return gpus.status();
    auto milli = number("gpu_milli", 0, kMilliPerGpu);
    if (!milli.ok()) return milli.status();
    p.cpu_milli = *cpu;
    p.memory = *mem * kMiB;
    p.num_gpu = static_cast<int>(*gpus);
    p.gpu_milli = p.num_gpu == 0 ? 0 : *milli;
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

absl::StatusOr<FgdResult> RunFgdProtocol(const std::vector<topology::NodeSpec>& nodes,
                                         const std::vector<OpenbPod>& pods, const FgdOptions& options) {
  if (nodes.empty()) return absl::InvalidArgumentError("FGD protocol: no nodes");
  if (pods.empty()) return absl::InvalidArgumentError("FGD protocol: no pods");
  auto model = topology::FragmentationModel::Create(TypicalTaskClasses(pods, options.typical_pct));
  if (!model.ok()) return model.status();
  const topology::SharePolicy policy = options.policy;
  const bool clustering = policy == topology::SharePolicy::kGpuClustering;

  // 1. The cluster.
  FgdResult r;
  r.nodes = static_cast<int64_t>(nodes.size());
  std::map<std::string, int> model_ids;
  std::vector<NodeRt> rt(nodes.size());
  // Per distinct node shape, the GPU list handed to the policies (islands
  // all 0: the list says nothing about links).
  std::vector<std::vector<topology::Gpu>> gpus_of(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    const topology::NodeSpec& n = nodes[i];
    const std::string m = n.gpus.empty() ? "" : n.gpus[0].model;
    rt[i].model = model_ids.try_emplace(m, static_cast<int>(model_ids.size())).first->second;
    rt[i].cpu_capacity = rt[i].cpu_free = n.allocatable.cpu_milli();
    rt[i].memory_free = n.allocatable.memory();
    rt[i].gpu_free.assign(n.gpus.size(), kMilliPerGpu);
    for (size_t g = 0; g < n.gpus.size(); ++g) {
      gpus_of[i].push_back(topology::Gpu{static_cast<int>(g), m, 0, 0, 0, 0});
    }
    r.capacity_milli += static_cast<int64_t>(n.gpus.size()) * kMilliPerGpu;
  }
  if (r.capacity_milli == 0) return absl::InvalidArgumentError("FGD protocol: the cluster has no GPUs");

  auto state_of = [&](size_t i, Quantity memory_free) {
    topology::NodeGpuState s;
    s.gpus = gpus_of[i];
    s.gpu_free_milli = rt[i].gpu_free;
    s.cpu_free_milli = rt[i].cpu_free;
    s.cpu_capacity_milli = rt[i].cpu_capacity;
    s.memory_free = memory_free;
    s.hosted_gpu_milli = rt[i].hosted;
    return s;
  };
  double total_frag = 0;
  for (size_t i = 0; i < rt.size(); ++i) {
    rt[i].frag = model->NodeFragmentation(state_of(i, rt[i].memory_free));
    total_frag += rt[i].frag;
  }

  // 2. Arrivals.
  const std::vector<uint32_t> order = SampleArrivals(pods, r.capacity_milli, options);
  if (order.empty()) return absl::InvalidArgumentError("FGD protocol: no pod requests a GPU");
  std::mt19937_64 rng(options.seed ^ 0x5eed);  // Random policy's draws

  // Nodes grouped by score-relevant state.
  std::map<std::string, std::set<uint32_t>> buckets;
  std::vector<std::string> key_of(rt.size());
  for (uint32_t i = 0; i < rt.size(); ++i) {
    key_of[i] = StateKey(rt[i], clustering);
    buckets[key_of[i]].insert(i);
  }

  // 3. Place pod by pod.
  const Quantity kAnyMemory = std::numeric_limits<Quantity>::max() / 4;
  struct Candidate {
    double score;
    uint32_t node;
    std::vector<int> gpus;
    const std::set<uint32_t>* bucket;
  };
  std::vector<Candidate> cands;
  std::vector<std::pair<uint32_t, size_t>> eligible;  // node, index in cands
  std::mt19937_64 tie_rng(options.seed ^ 0x71e5ULL);
  int next_pct = 0;
  auto record = [&] {
    FgdCurvePoint p;
    p.arrived_pct = 100.0 * static_cast<double>(r.arrived_milli) / static_cast<double>(r.capacity_milli);
    p.alloc_pct = 100.0 * static_cast<double>(r.allocated_milli) / static_cast<double>(r.capacity_milli);
    p.frag_pct = 100.0 * total_frag / static_cast<double>(r.capacity_milli);
    r.curve.push_back(p);
  };
  for (uint32_t k : order) {
    const OpenbPod& pod = pods[k];
    const topology::TaskClass task{pod.cpu_milli, pod.memory, pod.num_gpu, pod.gpu_milli, pod.gpu_models, 1.0};
    cands.clear();
    if (policy == topology::SharePolicy::kRandom) {
      // Random draws per node, so every feasible node is equally likely.
      for (uint32_t i = 0; i < rt.size(); ++i) {
        auto c = topology::ScoreNode(policy, state_of(i, rt[i].memory_free), task, *model, rng);
        if (c) cands.push_back({c->score, i, std::move(c->gpus), nullptr});
      }
    } else {
      for (const auto& [key, members] : buckets) {
        const uint32_t rep = *members.begin();
        auto c = topology::ScoreNode(policy, state_of(rep, kAnyMemory), task, *model, rng);
        if (c) cands.push_back({c->score, rep, std::move(c->gpus), &members});
      }
    }
    if (policy == topology::SharePolicy::kFgd && options.authors_fgd_score) {
      // The authors' FGD score plugin returns an integer node score:
      // int64(sigmoid((frag_before - frag_after) / 1000) * 100), in [0, 100].
      for (Candidate& c : cands) c.score = AuthorsFgdScore(c.score);
    }
    std::sort(cands.begin(), cands.end(), [](const Candidate& a, const Candidate& b) {
      return a.score != b.score ? a.score > b.score : a.node < b.node;
    });
    // The best-scored nodes with memory to spare (all nodes of a bucket
    // score alike): the first of them in (score, representative node index)
    // order, or with random_ties a seeded uniform draw among them (like the
    // Kubernetes framework's selectHost).
    int64_t chosen = -1;
    const std::vector<int>* gpus = nullptr;
    for (size_t i = 0; i < cands.size() && chosen < 0;) {
      size_t j = i;
      eligible.clear();
      for (; j < cands.size() && cands[j].score == cands[i].score; ++j) {
        const Candidate& c = cands[j];
        if (c.bucket == nullptr) {
          if (rt[c.node].memory_free >= pod.memory) eligible.emplace_back(c.node, j);
        } else {
          for (uint32_t m : *c.bucket) {
            if (rt[m].memory_free >= pod.memory) eligible.emplace_back(m, j);
          }
        }
      }
      if (!eligible.empty()) {
        const auto& pick =
            eligible.size() == 1 || !options.random_ties ? eligible[0] : eligible[Below(tie_rng, eligible.size())];
        chosen = pick.first;
        gpus = &cands[pick.second].gpus;
      }
      i = j;
    }
    r.arrived_milli += pod.num_gpu * pod.gpu_milli;
    ++r.pods;
    if (chosen < 0) {
      ++r.failed_pods;
    } else {
      NodeRt& n = rt[chosen];
      // GPU indices refer to the sorted free vector, equal across a bucket.
      for (int g : *gpus) n.gpu_free[g] -= pod.gpu_milli;
      std::sort(n.gpu_free.begin(), n.gpu_free.end());
      n.cpu_free -= pod.cpu_milli;
      n.memory_free -= pod.memory;
      if (pod.num_gpu > 0) {
        auto it = std::lower_bound(n.hosted.begin(), n.hosted.end(), pod.gpu_milli);
        if (it == n.hosted.end() || *it != pod.gpu_milli) n.hosted.insert(it, pod.gpu_milli);
      }
      r.allocated_milli += pod.num_gpu * pod.gpu_milli;
      total_frag -= n.frag;
      n.frag = model->NodeFragmentation(state_of(chosen, n.memory_free));
      total_frag += n.frag;
      auto& old = buckets[key_of[chosen]];
      old.erase(static_cast<uint32_t>(chosen));
      if (old.empty()) buckets.erase(key_of[chosen]);
      key_of[chosen] = StateKey(n, clustering);
      buckets[key_of[chosen]].insert(static_cast<uint32_t>(chosen));
    }
    while (100 * r.arrived_milli >= static_cast<int64_t>(next_pct) * r.capacity_milli) {
      record();
      ++next_pct;
    }
  }
  record();
  const FgdCurvePoint& end = r.curve.back();
  r.gpu_alloc_ratio = end.alloc_pct;
  r.arrived_ratio = end.arrived_pct;
  r.frag_pct = end.frag_pct;
  return r;
}

}  // namespace ringmaster::simulator
