#include "topology/cluster_file.h"

#include <yaml-cpp/yaml.h>

#include <algorithm>
#include <climits>
#include <fstream>
#include <map>
#include <optional>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "common/status_macros.h"

namespace ringmaster::topology {
namespace {

// Where we are in the file: the file name and the dotted path of the field.
class Reader {
 public:
  explicit Reader(absl::string_view filename) : filename_(filename) {}

  // "file:line:col: field: what", with the mark of `node` (1-based).
  absl::Status Error(const YAML::Node& node, absl::string_view field, absl::string_view what) const {
    return ErrorAt(node.IsDefined() ? node.Mark() : YAML::Mark::null_mark(), field, what);
  }
  absl::Status ErrorAt(const YAML::Mark& m, absl::string_view field, absl::string_view what) const {
    if (m.line < 0) {
      return absl::InvalidArgumentError(absl::StrCat(filename_, ": ", field, ": ", what));
    }
    return absl::InvalidArgumentError(
        absl::StrCat(filename_, ":", m.line + 1, ":", m.column + 1, ": ", field, ": ", what));
  }

  // Fails unless `node` is a map whose keys are all in `allowed`.
  absl::Status CheckKeys(const YAML::Node& node, absl::string_view field,
                         std::initializer_list<absl::string_view> allowed) const {
    if (!node.IsMap()) return Error(node, field, "must be a map");
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string key = it->first.Scalar();
      if (std::find(allowed.begin(), allowed.end(), key) == allowed.end()) {
        return Error(it->first, absl::StrCat(field, ".", key),
                     absl::StrCat("unknown key (allowed: ", absl::StrJoin(allowed, ", "), ")"));
      }
    }
    return absl::OkStatus();
  }

  absl::StatusOr<std::string> String(const YAML::Node& node, absl::string_view field) const {
    if (!node.IsScalar() || node.Scalar().empty()) {
      return Error(node, field, "must be a non-empty string");
    }
    return node.Scalar();
  }

  // Every integer of the file fits an int (callers narrow it to one).
  absl::StatusOr<int64_t> Int(const YAML::Node& node, absl::string_view field, int64_t min,
                              int64_t max = INT32_MAX) const {
    int64_t v = 0;
    if (!node.IsScalar() || !absl::SimpleAtoi(node.Scalar(), &v) || v < min) {
      return Error(node, field, absl::StrCat("must be an integer >= ", min));
    }
    if (v > max) return Error(node, field, absl::StrCat("must be at most ", max));
    return v;
  }

  absl::StatusOr<double> Double(const YAML::Node& node, absl::string_view field) const {
    double v = 0;
    if (!node.IsScalar() || !absl::SimpleAtod(node.Scalar(), &v) || !(v >= 0)) {
      return Error(node, field, "must be a number >= 0");
    }
    return v;
  }

  absl::StatusOr<Quantity> Amount(const YAML::Node& node, absl::string_view field, bool milli) const {
    if (!node.IsScalar()) return Error(node, field, "must be a quantity such as 64, 500m or 16Gi");
    auto q = ParseQuantity(node.Scalar(), milli);
    if (!q.ok()) return Error(node, field, q.status().message());
    if (*q < 0) return Error(node, field, "must be >= 0");
    return *q;
  }

 private:
  std::string filename_;
};

// Intra-node layout: which GPUs share an NVLink island, PCIe switch, socket.
struct LinkProfile {
  // group id per GPU index; empty = not given.
  std::vector<std::vector<int>> islands, switches, numa;
  IntraNodeLinks gbps;
  YAML::Node node;  // for errors raised when applied to a group
};

absl::StatusOr<std::vector<std::vector<int>>> ReadGroups(const Reader& r, const YAML::Node& node,
                                                         absl::string_view field) {
  if (!node.IsSequence()) return r.Error(node, field, "must be a list of lists of GPU indices");
  std::vector<std::vector<int>> groups;
  for (size_t i = 0; i < node.size(); ++i) {
    const std::string f = absl::StrCat(field, "[", i, "]");
    if (!node[i].IsSequence()) return r.Error(node[i], f, "must be a list of GPU indices");
    std::vector<int> g;
    for (size_t j = 0; j < node[i].size(); ++j) {
      RM_ASSIGN_OR_RETURN(auto v, r.Int(node[i][j], absl::StrCat(f, "[", j, "]"), 0));
      g.push_back(static_cast<int>(v));
    }
    groups.push_back(std::move(g));
  }
  return groups;
}

absl::StatusOr<LinkProfile> ReadLinkProfile(const Reader& r, const YAML::Node& node,
                                            const std::string& field) {
  RM_RETURN_IF_ERROR(r.CheckKeys(node, field,
                                 {"nvlink_islands", "pcie_switches", "numa", "nvlink_gbps",
                                  "pcie_switch_gbps", "socket_gbps", "cross_socket_gbps"}));
  LinkProfile p;
  p.node = node;
  if (node["nvlink_islands"]) {
    RM_ASSIGN_OR_RETURN(auto g, ReadGroups(r, node["nvlink_islands"], field + ".nvlink_islands"));
    p.islands = std::move(g);
  }
  if (node["pcie_switches"]) {
    RM_ASSIGN_OR_RETURN(auto g, ReadGroups(r, node["pcie_switches"], field + ".pcie_switches"));
    p.switches = std::move(g);
  }
  if (node["numa"]) {
    RM_ASSIGN_OR_RETURN(auto g, ReadGroups(r, node["numa"], field + ".numa"));
    p.numa = std::move(g);
  }
  const std::pair<const char*, double IntraNodeLinks::*> bws[] = {
      {"nvlink_gbps", &IntraNodeLinks::nvlink_gbps},
      {"pcie_switch_gbps", &IntraNodeLinks::pcie_switch_gbps},
      {"socket_gbps", &IntraNodeLinks::socket_gbps},
      {"cross_socket_gbps", &IntraNodeLinks::cross_socket_gbps}};
  for (const auto& [key, member] : bws) {
    if (!node[key]) continue;
    RM_ASSIGN_OR_RETURN(auto v, r.Double(node[key], absl::StrCat(field, ".", key)));
    p.gbps.*member = v;
  }
  return p;
}

// Assigns group ids to `gpus` GPUs from `groups`. With `partial`, GPUs not
// listed get singleton groups after the listed ones (NVLink islands);
// otherwise an empty list means one group of all and a non-empty list must
// cover every GPU.
absl::StatusOr<std::vector<int>> AssignGroups(const Reader& r, const YAML::Node& where,
                                              const std::string& field,
                                              const std::vector<std::vector<int>>& groups, int gpus,
                                              bool partial) {
  std::vector<int> id(gpus, -1);
  if (groups.empty() && !partial) {
    std::fill(id.begin(), id.end(), 0);
    return id;
  }
  for (size_t g = 0; g < groups.size(); ++g) {
    for (int gpu : groups[g]) {
      if (gpu >= gpus) {
        return r.Error(where, field,
                       absl::StrCat("GPU ", gpu, " in group ", g, " but the node has ", gpus, " GPUs"));
      }
      if (id[gpu] != -1) {
        return r.Error(where, field, absl::StrCat("GPU ", gpu, " is listed twice"));
      }
      id[gpu] = static_cast<int>(g);
    }
  }
  int next = static_cast<int>(groups.size());
  for (int gpu = 0; gpu < gpus; ++gpu) {
    if (id[gpu] != -1) continue;
    if (!partial) {
      return r.Error(where, field, absl::StrCat("GPU ", gpu, " is in no group (list every GPU)"));
    }
    id[gpu] = next++;
  }
  return id;
}

// The literal text before the first '{' or '%' of a name pattern.
std::string PatternPrefix(absl::string_view pattern) {
  const size_t p = pattern.find_first_of("{%");
  return std::string(pattern.substr(0, p));
}

struct Group {
  std::vector<std::string> names;
  NodeSpec base;
  // Domain per tier (0-based) for tiers given by `in`; generated ones by fill.
  std::vector<std::optional<std::string>> in;
  std::vector<int64_t> fill;  // children per domain for tiers 1..fill.size()
  std::string prefix;
};

class ClusterFileParser {
 public:
  ClusterFileParser(absl::string_view filename) : r_(filename) {}

  absl::StatusOr<Cluster> Parse(absl::string_view text) {
    YAML::Node root;
    try {
      root = YAML::Load(std::string(text));
    } catch (const YAML::Exception& e) {
      return r_.ErrorAt(e.mark, "(yaml syntax)", e.msg);
    }
    if (!root || root.IsNull()) return r_.Error(root, "(root)", "empty cluster file");
    RM_RETURN_IF_ERROR(r_.CheckKeys(root, "(root)", {"tiers", "link_profiles", "node_groups"}));
    if (root["tiers"]) RM_RETURN_IF_ERROR(ReadTiers(root["tiers"]));
    if (root["link_profiles"]) RM_RETURN_IF_ERROR(ReadProfiles(root["link_profiles"]));
    const YAML::Node groups = root["node_groups"];
    if (!groups) return r_.Error(root, "node_groups", "missing (a list of node groups)");
    if (!groups.IsSequence() || groups.size() == 0) {
      return r_.Error(groups, "node_groups", "must be a non-empty list");
    }
    std::vector<NodeSpec> nodes;
    for (size_t i = 0; i < groups.size(); ++i) {
      RM_RETURN_IF_ERROR(ReadGroup(groups[i], absl::StrCat("node_groups[", i, "]"), nodes));
    }
    auto cluster = Cluster::Build(tiers_, std::move(nodes));
    if (!cluster.ok()) return r_.Error(groups, "node_groups", cluster.status().message());
    return cluster;
  }

 private:
  absl::Status ReadTiers(const YAML::Node& node) {
    if (!node.IsSequence()) return r_.Error(node, "tiers", "must be a list, lowest tier first");
    for (size_t i = 0; i < node.size(); ++i) {
      const std::string f = absl::StrCat("tiers[", i, "]");
      RM_RETURN_IF_ERROR(r_.CheckKeys(node[i], f, {"name", "bandwidth_gbps"}));
      TierSpec t;
      if (!node[i]["name"]) return r_.Error(node[i], f + ".name", "missing");
      RM_ASSIGN_OR_RETURN(auto name, r_.String(node[i]["name"], f + ".name"));
      for (const TierSpec& other : tiers_) {
        if (other.name == name) return r_.Error(node[i]["name"], f + ".name", "duplicate tier name");
      }
      t.name = name;
      if (!node[i]["bandwidth_gbps"]) return r_.Error(node[i], f + ".bandwidth_gbps", "missing");
      RM_ASSIGN_OR_RETURN(auto bw, r_.Double(node[i]["bandwidth_gbps"], f + ".bandwidth_gbps"));
      t.bandwidth_gbps = bw;
      tiers_.push_back(t);
    }
    return absl::OkStatus();
  }

  absl::Status ReadProfiles(const YAML::Node& node) {
    if (!node.IsMap()) return r_.Error(node, "link_profiles", "must be a map of name to links");
    for (auto it = node.begin(); it != node.end(); ++it) {
      const std::string name = it->first.Scalar();
      RM_ASSIGN_OR_RETURN(auto p, ReadLinkProfile(r_, it->second, "link_profiles." + name));
      profiles_[name] = std::move(p);
    }
    return absl::OkStatus();
  }

  int TierIndex(absl::string_view name) const {
    for (size_t t = 0; t < tiers_.size(); ++t) {
      if (tiers_[t].name == name) return static_cast<int>(t);
    }
    return -1;
  }

  absl::Status ReadNetwork(const YAML::Node& group, const std::string& f, Group& g) {
    g.in.assign(tiers_.size(), std::nullopt);
    const YAML::Node node = group["network"];
    if (!node) {
      if (tiers_.empty()) return absl::OkStatus();
      return r_.Error(group, f, absl::StrCat("missing; the cluster has ", tiers_.size(),
                                            " tiers, say which domains the group is in"));
    }
    RM_RETURN_IF_ERROR(r_.CheckKeys(node, f, {"fill", "in", "prefix"}));
    if (node["prefix"]) {
      RM_ASSIGN_OR_RETURN(auto p, r_.String(node["prefix"], f + ".prefix"));
      g.prefix = p;
    }
    std::vector<int64_t> fill(tiers_.size(), 0);
    if (const YAML::Node fn = node["fill"]) {
      if (!fn.IsMap()) return r_.Error(fn, f + ".fill", "must map tier name to children per domain");
      for (auto it = fn.begin(); it != fn.end(); ++it) {
        const std::string key = it->first.Scalar();
        const int t = TierIndex(key);
        if (t < 0) return r_.Error(it->first, f + ".fill." + key, "no tier has this name");
        RM_ASSIGN_OR_RETURN(auto v, r_.Int(it->second, f + ".fill." + key, 1));
        fill[t] = v;
      }
    }
    if (const YAML::Node in = node["in"]) {
      if (!in.IsMap()) return r_.Error(in, f + ".in", "must map tier name to domain name");
      for (auto it = in.begin(); it != in.end(); ++it) {
        const std::string key = it->first.Scalar();
        const int t = TierIndex(key);
        if (t < 0) return r_.Error(it->first, f + ".in." + key, "no tier has this name");
        if (fill[t] > 0) {
          return r_.Error(it->first, f + ".in." + key, "tier is also in `fill`; give one of the two");
        }
        RM_ASSIGN_OR_RETURN(auto v, r_.String(it->second, f + ".in." + key));
        g.in[t] = v;
      }
    }
    // fill must cover tiers 1..k contiguously; every other tier needs `in`.
    size_t k = 0;
    while (k < tiers_.size() && fill[k] > 0) ++k;
    for (size_t t = 0; t < tiers_.size(); ++t) {
      if (t >= k && fill[t] > 0) {
        return r_.Error(node["fill"], f + ".fill." + tiers_[t].name,
                        "fill must cover the lowest tiers without a gap (fill every tier below)");
      }
      if (t >= k && !g.in[t]) {
        return r_.Error(node, f, absl::StrCat("no domain for tier '", tiers_[t].name,
                                              "' (add it to `fill` or `in`)"));
      }
    }
    g.fill.assign(fill.begin(), fill.begin() + k);
    return absl::OkStatus();
  }

  // A cluster file naming more is a mistake (and would take gigabytes).
  static constexpr int64_t kMaxClusterGpus = int64_t{1} << 22;
  int64_t total_gpus_ = 0;

  absl::Status ReadGroup(const YAML::Node& node, const std::string& f, std::vector<NodeSpec>& out) {
    RM_RETURN_IF_ERROR(r_.CheckKeys(node, f,
                                    {"name", "count", "start", "gpus", "gpu_model", "gpu_memory",
                                     "cpu", "memory", "labels", "taints", "links", "network"}));
    Group g;
    if (!node["name"]) return r_.Error(node, f + ".name", "missing (a name or name pattern)");
    RM_ASSIGN_OR_RETURN(auto pattern, r_.String(node["name"], f + ".name"));
    int64_t count = -1, start = 0;
    if (node["count"]) {
      RM_ASSIGN_OR_RETURN(auto c, r_.Int(node["count"], f + ".count", 1, kMaxNodesPerGroup));
      count = c;
    }
    if (node["start"]) {
      RM_ASSIGN_OR_RETURN(auto s, r_.Int(node["start"], f + ".start", 0));
      start = s;
    }
    auto names = ExpandNamePattern(pattern, static_cast<int>(count), static_cast<int>(start));
    if (!names.ok()) return r_.Error(node["name"], f + ".name", names.status().message());
    g.names = std::move(*names);
    g.prefix = PatternPrefix(pattern);

    int64_t gpus = 0;
    if (node["gpus"]) {
      RM_ASSIGN_OR_RETURN(auto v, r_.Int(node["gpus"], f + ".gpus", 0));
      if (v > 1024) return r_.Error(node["gpus"], f + ".gpus", "more than 1024 GPUs on one node");
      gpus = v;
    }
    if (out.size() + g.names.size() > size_t{kMaxNodesPerGroup}) {
      return r_.Error(node["name"], f + ".name", absl::StrCat("the cluster has more than ", kMaxNodesPerGroup, " nodes"));
    }
    total_gpus_ += gpus * static_cast<int64_t>(g.names.size());
    if (total_gpus_ > kMaxClusterGpus) {
      return r_.Error(node, f + ".gpus", absl::StrCat("the cluster has more than ", kMaxClusterGpus, " GPUs"));
    }
    std::string model;
    if (node["gpu_model"]) {
      RM_ASSIGN_OR_RETURN(auto m, r_.String(node["gpu_model"], f + ".gpu_model"));
      model = m;
    }
    Quantity gpu_memory = 0;
    if (node["gpu_memory"]) {
      RM_ASSIGN_OR_RETURN(auto m, r_.Amount(node["gpu_memory"], f + ".gpu_memory", false));
      gpu_memory = m;
    }
    if (!node["cpu"]) return r_.Error(node, f + ".cpu", "missing (cores, e.g. 64 or 500m)");
    RM_ASSIGN_OR_RETURN(auto cpu, r_.Amount(node["cpu"], f + ".cpu", true));
    if (!node["memory"]) return r_.Error(node, f + ".memory", "missing (bytes, e.g. 512Gi)");
    RM_ASSIGN_OR_RETURN(auto mem, r_.Amount(node["memory"], f + ".memory", false));
    g.base.allocatable = Resources(cpu, mem, 0);

    if (const YAML::Node labels = node["labels"]) {
      if (!labels.IsMap()) return r_.Error(labels, f + ".labels", "must be a map of strings");
      for (auto it = labels.begin(); it != labels.end(); ++it) {
        if (!it->second.IsScalar()) {
          return r_.Error(it->second, f + ".labels." + it->first.Scalar(), "must be a string");
        }
        g.base.labels[it->first.Scalar()] = it->second.Scalar();
      }
    }
    if (const YAML::Node taints = node["taints"]) {
      if (!taints.IsSequence()) return r_.Error(taints, f + ".taints", "must be a list");
      for (size_t i = 0; i < taints.size(); ++i) {
        const std::string tf = absl::StrCat(f, ".taints[", i, "]");
        RM_RETURN_IF_ERROR(r_.CheckKeys(taints[i], tf, {"key", "value", "effect"}));
        Taint t;
        if (!taints[i]["key"]) return r_.Error(taints[i], tf + ".key", "missing");
        RM_ASSIGN_OR_RETURN(auto key, r_.String(taints[i]["key"], tf + ".key"));
        t.key = key;
        if (taints[i]["value"]) t.value = taints[i]["value"].Scalar();
        const std::string effect = taints[i]["effect"] ? taints[i]["effect"].Scalar() : "NoSchedule";
        if (effect == "NoSchedule") {
          t.effect = TaintEffect::kNoSchedule;
        } else if (effect == "PreferNoSchedule") {
          t.effect = TaintEffect::kPreferNoSchedule;
        } else if (effect == "NoExecute") {
          t.effect = TaintEffect::kNoExecute;
        } else {
          return r_.Error(taints[i]["effect"], tf + ".effect",
                          "must be NoSchedule, PreferNoSchedule or NoExecute");
        }
        g.base.taints.push_back(std::move(t));
      }
    }

    LinkProfile links;
    if (const YAML::Node ln = node["links"]) {
      if (ln.IsScalar()) {
        auto it = profiles_.find(ln.Scalar());
        if (it == profiles_.end()) {
          return r_.Error(ln, f + ".links", absl::StrCat("no link profile named '", ln.Scalar(), "'"));
        }
        links = it->second;
      } else {
        RM_ASSIGN_OR_RETURN(auto p, ReadLinkProfile(r_, ln, f + ".links"));
        links = std::move(p);
      }
    }
    const YAML::Node where = node["links"] ? node["links"] : node;
    const int n = static_cast<int>(gpus);
    RM_ASSIGN_OR_RETURN(auto island, AssignGroups(r_, where, f + ".links.nvlink_islands", links.islands, n,
                                             /*partial=*/!links.islands.empty()));
    RM_ASSIGN_OR_RETURN(auto sw, AssignGroups(r_, where, f + ".links.pcie_switches", links.switches, n,
                                         /*partial=*/false));
    RM_ASSIGN_OR_RETURN(auto numa, AssignGroups(r_, where, f + ".links.numa", links.numa, n,
                                           /*partial=*/false));
    for (int i = 0; i < n; ++i) {
      g.base.gpus.push_back(Gpu{i, model, gpu_memory, island[i], sw[i], numa[i]});
    }
    g.base.link_gbps = links.gbps;

    RM_RETURN_IF_ERROR(ReadNetwork(node, f + ".network", g));
    Emit(g, out);
    return absl::OkStatus();
  }

  // Creates the group's nodes with their domain names.
  void Emit(const Group& g, std::vector<NodeSpec>& out) {
    for (size_t i = 0; i < g.names.size(); ++i) {
      NodeSpec spec = g.base;
      spec.name = g.names[i];
      spec.domains.resize(tiers_.size());
      int64_t index = static_cast<int64_t>(i);  // position among children at this tier
      for (size_t t = 0; t < tiers_.size(); ++t) {
        if (t < g.fill.size()) {
          index /= g.fill[t];
          spec.domains[t] = absl::StrCat(g.prefix, tiers_[t].name, "-", index);
        } else {
          spec.domains[t] = *g.in[t];
        }
      }
      out.push_back(std::move(spec));
    }
  }

  Reader r_;
  std::vector<TierSpec> tiers_;
  std::map<std::string, LinkProfile> profiles_;
};

}  // namespace

absl::StatusOr<std::vector<std::string>> ExpandNamePattern(std::string_view pattern_in, int count,
                                                           int start) {
  const absl::string_view pattern(pattern_in.data(), pattern_in.size());
  std::vector<std::string> names;
  const size_t brace = pattern.find('{');
  const size_t pct = pattern.find('%');
  if (brace != absl::string_view::npos) {
    const size_t close = pattern.find('}', brace);
    const size_t dots = pattern.find("..", brace);
    if (close == absl::string_view::npos || dots == absl::string_view::npos || dots > close) {
      return absl::InvalidArgumentError(
          absl::StrCat("pattern '", pattern, "': a range is written {FIRST..LAST}"));
    }
    int64_t first = 0, last = 0;
    const absl::string_view a = pattern.substr(brace + 1, dots - brace - 1);
    const absl::string_view b = pattern.substr(dots + 2, close - dots - 2);
    if (!absl::SimpleAtoi(a, &first) || !absl::SimpleAtoi(b, &last) || first < 0 || last < first) {
      return absl::InvalidArgumentError(
          absl::StrCat("pattern '", pattern, "': range bounds must be integers, FIRST <= LAST"));
    }
    if (last - first >= kMaxNodesPerGroup) {
      return absl::InvalidArgumentError(absl::StrCat("pattern '", pattern, "': range too large"));
    }
    const int64_t n = last - first + 1;
    if (count >= 0 && count != n) {
      return absl::InvalidArgumentError(
          absl::StrCat("pattern '", pattern, "' names ", n, " nodes but count is ", count));
    }
    const absl::string_view head = pattern.substr(0, brace);
    const absl::string_view tail = pattern.substr(close + 1);
    if (tail.find_first_of("{}%") != absl::string_view::npos) {
      return absl::InvalidArgumentError(absl::StrCat("pattern '", pattern, "': one range at most"));
    }
    // Zero padding when FIRST is written with leading zeros ("{00..15}").
    const int width = (a.size() > 1 && a[0] == '0') ? static_cast<int>(a.size()) : 0;
    for (int64_t v = first; v <= last; ++v) {
      names.push_back(absl::StrCat(head, absl::StrFormat("%0*d", width, v), tail));
    }
    return names;
  }
  if (pct != absl::string_view::npos) {
    // Accept exactly one "%d" or "%0Nd".
    size_t p = pct + 1;
    int width = 0;
    while (p < pattern.size() && pattern[p] >= '0' && pattern[p] <= '9') {
      width = width * 10 + (pattern[p] - '0');
      if (width > 32) break;
      ++p;
    }
    if (p >= pattern.size() || pattern[p] != 'd' || width > 32 ||
        pattern.substr(p + 1).find('%') != absl::string_view::npos) {
      return absl::InvalidArgumentError(
          absl::StrCat("pattern '", pattern, "': use one %d or %0Nd (e.g. node-%03d)"));
    }
    if (count < 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("pattern '", pattern, "' needs `count` (how many nodes)"));
    }
    if (count > kMaxNodesPerGroup) {
      return absl::InvalidArgumentError(absl::StrCat("pattern '", pattern, "': count too large"));
    }
    const absl::string_view head = pattern.substr(0, pct);
    const absl::string_view tail = pattern.substr(p + 1);
    for (int64_t v = start; v < static_cast<int64_t>(start) + count; ++v) {
      names.push_back(absl::StrCat(head, absl::StrFormat("%0*d", width, v), tail));
    }
    return names;
  }
  if (count > 1) {
    return absl::InvalidArgumentError(absl::StrCat(
        "name '", pattern, "' has no {FIRST..LAST} or %d but count is ", count));
  }
  names.emplace_back(pattern);
  return names;
}

absl::StatusOr<Cluster> ParseClusterFile(std::string_view text, std::string_view filename) {
  ClusterFileParser parser(absl::string_view(filename.data(), filename.size()));
  return parser.Parse(absl::string_view(text.data(), text.size()));
}

absl::StatusOr<Cluster> LoadClusterFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read the cluster file"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseClusterFile(ss.str(), path);
}

}  // namespace ringmaster::topology
