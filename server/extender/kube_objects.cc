// Reading Pod and Node objects (see kube_objects.h).
#include "server/extender/kube_objects.h"

#include <algorithm>
#include <cctype>
#include <charconv>
#include <climits>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "server/extender/extender_wire.h"
#include "common/status_macros.h"

namespace ringmaster::server {
namespace {

using nlohmann::json;
using topology::Quantity;

constexpr std::string_view kGroupKeys[] = {
    "scheduling.x-k8s.io/pod-group",
    "pod-group.scheduling.sigs.k8s.io",
    "scheduling.k8s.io/group-name",
    "scheduling.volcano.sh/group-name",
};

absl::StatusOr<std::map<std::string, std::string>> StringMap(const json& obj, std::string_view key,
                                                             const std::string& path) {
  std::map<std::string, std::string> out;
  const json* v = FindKey(obj, key);
  if (v == nullptr || v->is_null()) return out;
  if (!v->is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": expected an object"));
  for (const auto& [k, e] : v->items()) {
    if (!e.is_string()) return absl::InvalidArgumentError(absl::StrCat(path, ".", k, ": expected a string"));
    out[k] = e.get<std::string>();
  }
  return out;
}

// One resource list (requests or limits): cpu milli, memory bytes, GPUs.
struct Amounts {
  Quantity cpu = -1;  // -1: not given
  Quantity memory = -1;
  Quantity gpus = -1;
};

absl::StatusOr<Amounts> ReadAmounts(const json& list, const std::string& path) {
  Amounts a;
  if (list.is_null()) return a;
  if (!list.is_object()) return absl::InvalidArgumentError(absl::StrCat(path, ": expected an object"));
  for (const auto& [k, e] : list.items()) {
    Quantity* field = k == "cpu" ? &a.cpu : k == "memory" ? &a.memory : k == kGpuResource ? &a.gpus : nullptr;
    if (field == nullptr) continue;
    std::string text;
    if (e.is_string()) {
      text = e.get<std::string>();
    } else if (e.is_number()) {
      text = e.dump();
    } else {
      return absl::InvalidArgumentError(absl::StrCat(path, ".", k, ": expected a quantity"));
    }
    // GPUs are read in thousandths first: a fraction is refused, not
    // rounded up (pods get whole devices; see docs/EXTENDER.md).
    const bool gpus = field == &a.gpus;
    auto q = ParseKubeQuantity(text, field == &a.cpu || gpus);
    if (!q.ok()) return absl::InvalidArgumentError(absl::StrCat(path, ".", k, ": ", q.status().message()));
    if (gpus && *q % topology::kMilliPerGpu != 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          path, ".", k, ": '", text,
          "' is not a whole number of GPUs (ringmaster gives pods whole devices; GPU shares are for admin API jobs)"));
    }
    *field = gpus ? *q / topology::kMilliPerGpu : *q;
  }
  return a;
}

// A container's effective amounts: requests, else limits (Kubernetes
// defaults requests to limits).
absl::StatusOr<Amounts> ContainerAmounts(const json& c, const std::string& path) {
  const json* res = FindKey(c, "resources");
  if (res == nullptr || res->is_null()) return Amounts{};
  const json* req = FindKey(*res, "requests");
  const json* lim = FindKey(*res, "limits");
  RM_ASSIGN_OR_RETURN(auto r, ReadAmounts(req ? *req : json(), path + ".resources.requests"));
  RM_ASSIGN_OR_RETURN(auto l, ReadAmounts(lim ? *lim : json(), path + ".resources.limits"));
  Amounts out = r;
  if (out.cpu < 0) out.cpu = l.cpu;
  if (out.memory < 0) out.memory = l.memory;
  if (out.gpus < 0) out.gpus = l.gpus;
  return out;
}

// Containers add up; an init container runs alone, so the pod needs the
// larger of the sum and any one init container.
absl::Status ReadRequests(const json& spec, PodInfo& p) {
  Quantity sum[3] = {0, 0, 0};
  Quantity init[3] = {0, 0, 0};
  for (auto [key, acc, add] : {std::tuple{"containers", sum, true}, std::tuple{"initContainers", init, false}}) {
    const json* list = FindKey(spec, key);
    if (list == nullptr || list->is_null()) continue;
    const std::string path = absl::StrCat("Pod.spec.", key);
    if (!list->is_array()) return absl::InvalidArgumentError(path + ": expected an array");
    for (size_t i = 0; i < list->size(); ++i) {
      RM_ASSIGN_OR_RETURN(auto a, ContainerAmounts((*list)[i], absl::StrCat(path, "[", i, "]")));
      const Quantity v[3] = {std::max<Quantity>(a.cpu, 0), std::max<Quantity>(a.memory, 0),
                             std::max<Quantity>(a.gpus, 0)};
      for (int k = 0; k < 3; ++k) acc[k] = add ? acc[k] + v[k] : std::max(acc[k], v[k]);
    }
  }
  p.request.set_cpu_milli(std::max(sum[0], init[0]));
  p.request.set_memory(std::max(sum[1], init[1]));
  const Quantity gpus = std::max(sum[2], init[2]);
  if (gpus > 1024) return absl::InvalidArgumentError("Pod.spec: nvidia.com/gpu: more than 1024 GPUs");
  p.gpus = static_cast<int>(gpus);
  return absl::OkStatus();
}

absl::Status ReadTolerations(const json& spec, PodInfo& p) {
  const json* list = FindKey(spec, "tolerations");
  if (list == nullptr || list->is_null()) return absl::OkStatus();
  if (!list->is_array()) return absl::InvalidArgumentError("Pod.spec.tolerations: expected an array");
  for (size_t i = 0; i < list->size(); ++i) {
    const json& t = (*list)[i];
    const std::string path = absl::StrCat("Pod.spec.tolerations[", i, "]");
    scheduler::Toleration tol;
    auto key = StringAt(t, "key", path + ".key");
    auto op = StringAt(t, "operator", path + ".operator");
    auto value = StringAt(t, "value", path + ".value");
    auto effect = StringAt(t, "effect", path + ".effect");
    for (const auto* s : {&key, &op, &value, &effect}) {
      if (!s->ok()) return s->status();
    }
    tol.key = *key;
    tol.op = *op == "Exists" ? scheduler::TolerationOp::kExists : scheduler::TolerationOp::kEqual;
    tol.value = *value;
    tol.effect = *effect;
    p.tolerations.push_back(std::move(tol));
  }
  return absl::OkStatus();
}

// The first of `keys` found in the labels, then the annotations.
std::string Lookup(const PodInfo& p, std::string_view key) {
  for (const auto* m : {&p.labels, &p.annotations}) {
    auto it = m->find(std::string(key));
    if (it != m->end()) return it->second;
  }
  return "";
}

absl::Status ReadGang(PodInfo& p) {
  for (std::string_view k : kGroupKeys) {
    p.group = Lookup(p, k);
    if (!p.group.empty()) break;
  }
  for (const char ch : p.group) {
    const auto c = static_cast<unsigned char>(ch);
    if (c < 0x20 || c == 0x7f) {
      return absl::InvalidArgumentError("Pod.metadata: the pod group's name holds a control character");
    }
  }
  const std::string min = Lookup(p, kVolcanoMinMember);
  if (!min.empty()) {
    int v = 0;
    auto [end, ec] = std::from_chars(min.data(), min.data() + min.size(), v);
    if (ec != std::errc() || end != min.data() + min.size() || v < 1 || v > 100000) {
      return absl::InvalidArgumentError(
          absl::StrCat("Pod.metadata.annotations.", std::string(kVolcanoMinMember), ": '", min,
                       "' is not a count in [1, 100000]"));
    }
    p.min_member = v;
  }
  p.queue = Lookup(p, kVolcanoQueue);
  return absl::OkStatus();
}

// A decimal index in [0, kMaxIndex), or -1.
constexpr int64_t kMaxIndex = 1'000'000;
int64_t ParseIndex(std::string_view text) {
  int64_t v = -1;
  auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), v);
  if (text.empty() || ec != std::errc() || end != text.data() + text.size() || v < 0 || v >= kMaxIndex) return -1;
  return v;
}

// PodInfo::rank (the header comment): an index that does not read is
// ignored (the pod then keeps the place it arrived in), never an error.
void ReadRank(PodInfo& p) {
  if (const int64_t i = ParseIndex(Lookup(p, kReplicaIndex)); i >= 0) {
    std::string type = Lookup(p, kReplicaType);
    for (char& c : type) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    const int64_t order = type == "master" || type == "chief" || type == "launcher" ? 0 : type == "worker" ? 1 : 2;
    p.rank = order * kMaxIndex + i;
    return;
  }
  if (const int64_t i = ParseIndex(Lookup(p, kCompletionIndex)); i >= 0) {
    p.rank = i;
    return;
  }
  const size_t at = p.name.rfind("-worker-");
  if (at != std::string::npos) p.rank = ParseIndex(std::string_view(p.name).substr(at + 8));
}

}  // namespace

absl::StatusOr<Quantity> ParseKubeQuantity(std::string_view text, bool milli) {
  const std::string bad = absl::StrCat("'", std::string(text), "' is not a quantity");
  if (!text.empty() && text[0] == '-') {
    return absl::InvalidArgumentError(
        absl::StrCat("'", std::string(text), "' is negative (a resource amount is 0 or more)"));
  }
  size_t i = 0;
  if (i < text.size() && text[i] == '+') ++i;
  __int128 mantissa = 0;
  int digits = 0;
  int exp10 = milli ? 3 : 0;
  bool dot = false;
  for (; i < text.size() && (std::isdigit(static_cast<unsigned char>(text[i])) || text[i] == '.'); ++i) {
    if (text[i] == '.') {
      if (dot) return absl::InvalidArgumentError(bad);
      dot = true;
      continue;
    }
    if (++digits > 30) return absl::InvalidArgumentError(bad);
    mantissa = mantissa * 10 + (text[i] - '0');
    if (dot) --exp10;
  }
  if (digits == 0) return absl::InvalidArgumentError(bad);
  std::string_view suffix = text.substr(i);
  int64_t binary = 1;
  if (suffix.size() > 1 && (suffix[0] == 'e' || suffix[0] == 'E')) {
    int e = 0;
    auto [end, ec] = std::from_chars(suffix.data() + 1, suffix.data() + suffix.size(), e);
    if (ec != std::errc() || end != suffix.data() + suffix.size() || e < -30 || e > 30) {
      return absl::InvalidArgumentError(bad);
    }
    exp10 += e;
  } else if (suffix.size() == 2 && suffix[1] == 'i') {
    const std::string_view units = "KMGTPE";
    const size_t k = units.find(suffix[0]);
    if (k == std::string_view::npos) return absl::InvalidArgumentError(bad);
    binary = int64_t{1} << (10 * (k + 1));
  } else if (!suffix.empty()) {
    static const std::pair<std::string_view, int> kDecimal[] = {{"n", -9}, {"u", -6}, {"m", -3}, {"k", 3},
                                                                {"M", 6},  {"G", 9},  {"T", 12}, {"P", 15},
                                                                {"E", 18}};
    auto it = std::find_if(std::begin(kDecimal), std::end(kDecimal), [&](const auto& d) { return d.first == suffix; });
    if (it == std::end(kDecimal)) return absl::InvalidArgumentError(bad);
    exp10 += it->second;
  }
  __int128 v = mantissa * binary;
  constexpr __int128 kMax = __int128{1} << 62;
  if (exp10 >= 0) {
    for (int k = 0; k < exp10; ++k) {
      v *= 10;
      if (v > kMax) return absl::InvalidArgumentError(absl::StrCat(bad, " (too large)"));
    }
  } else {
    __int128 div = 1;
    for (int k = 0; k < -exp10 && div < kMax; ++k) div *= 10;
    v = (v + div - 1) / div;
  }
  if (v > kMax) return absl::InvalidArgumentError(absl::StrCat(bad, " (too large)"));
  return static_cast<Quantity>(v);
}

absl::StatusOr<PodInfo> ReadPod(const json& pod) {
  if (!pod.is_object()) return absl::InvalidArgumentError("Pod: expected an object");
  PodInfo p;
  const json* meta = FindKey(pod, "metadata");
  if (meta == nullptr || !meta->is_object()) return absl::InvalidArgumentError("Pod.metadata: missing");
  auto name = StringAt(*meta, "name", "Pod.metadata.name");
  auto ns = StringAt(*meta, "namespace", "Pod.metadata.namespace");
  auto uid = StringAt(*meta, "uid", "Pod.metadata.uid");
  for (const auto* s : {&name, &ns, &uid}) {
    if (!s->ok()) return s->status();
  }
  if (name->empty()) return absl::InvalidArgumentError("Pod.metadata.name: missing");
  // Kubernetes names never hold control characters; a NUL would not even
  // survive the journal (a restart could not read the gang back).
  for (const auto& [field, value] : {std::pair{"Pod.metadata.name", &*name}, std::pair{"Pod.metadata.namespace", &*ns},
                                     std::pair{"Pod.metadata.uid", &*uid}}) {
    for (size_t i = 0; i < value->size(); ++i) {
      const auto c = static_cast<unsigned char>((*value)[i]);
      if (c < 0x20 || c == 0x7f) {
        return absl::InvalidArgumentError(
            absl::StrCat(field, ": a control character (byte ", static_cast<int>(c), " at ", i,
                         ") is not allowed in a Kubernetes name"));
      }
    }
  }
  p.name = *name;
  if (!ns->empty()) p.ns = *ns;
  p.uid = *uid;
  RM_ASSIGN_OR_RETURN(auto labels, StringMap(*meta, "labels", "Pod.metadata.labels"));
  p.labels = std::move(labels);
  RM_ASSIGN_OR_RETURN(auto annotations, StringMap(*meta, "annotations", "Pod.metadata.annotations"));
  p.annotations = std::move(annotations);
  RM_RETURN_IF_ERROR(ReadGang(p));
  ReadRank(p);
  const json* spec = FindKey(pod, "spec");
  if (spec == nullptr || spec->is_null()) return p;
  if (!spec->is_object()) return absl::InvalidArgumentError("Pod.spec: expected an object");
  RM_RETURN_IF_ERROR(ReadRequests(*spec, p));
  RM_RETURN_IF_ERROR(ReadTolerations(*spec, p));
  RM_ASSIGN_OR_RETURN(auto scheduler_name, StringAt(*spec, "schedulerName", "Pod.spec.schedulerName"));
  p.scheduler_name = std::move(scheduler_name);
  RM_ASSIGN_OR_RETURN(auto selector, StringMap(*spec, "nodeSelector", "Pod.spec.nodeSelector"));
  p.node_selector = std::move(selector);
  const json* prio = FindKey(*spec, "priority");
  if (prio != nullptr && !prio->is_null()) {
    if (!prio->is_number_integer()) return absl::InvalidArgumentError("Pod.spec.priority: expected an integer");
    p.priority = static_cast<int32_t>(std::clamp<int64_t>(prio->get<int64_t>(), INT32_MIN, INT32_MAX));
  }
  return p;
}

TopologyLabels DefaultTopologyLabels() {
  return {{{"rack", "topology.ringmaster.io/rack"},
           {"spine", "topology.ringmaster.io/spine"},
           {"zone", std::string(kZoneLabel)}}};
}

absl::StatusOr<TopologyLabels> ParseTopologyLabels(std::string_view text) {
  TopologyLabels out;
  if (text.empty()) return out;
  const std::vector<std::string> parts = absl::StrSplit(std::string(text), ',');
  for (std::string_view part : parts) {
    const size_t eq = part.find('=');
    if (eq == std::string_view::npos || eq == 0 || eq + 1 == part.size()) {
      return absl::InvalidArgumentError(
          absl::StrCat("topology labels: '", std::string(part), "' is not TIER=LABEL_KEY"));
    }
    out.tiers.push_back({std::string(part.substr(0, eq)), std::string(part.substr(eq + 1))});
  }
  return out;
}

std::vector<topology::TierSpec> TierSpecs(const TopologyLabels& labels) {
  std::vector<topology::TierSpec> out;
  for (const auto& t : labels.tiers) out.push_back({t.name, 0});
  return out;
}

absl::StatusOr<topology::NodeSpec> ReadNode(const json& node, const TopologyLabels& topo) {
  topology::NodeSpec n;
  const json* meta = FindKey(node, "metadata");
  if (meta == nullptr || !meta->is_object()) return absl::InvalidArgumentError("Node.metadata: missing");
  RM_ASSIGN_OR_RETURN(auto name, StringAt(*meta, "name", "Node.metadata.name"));
  if (name.empty()) return absl::InvalidArgumentError("Node.metadata.name: missing");
  n.name = name;
  const std::string where = absl::StrCat("Node ", n.name);
  RM_ASSIGN_OR_RETURN(auto labels, StringMap(*meta, "labels", where + ": metadata.labels"));
  n.labels = std::move(labels);
  const json* status = FindKey(node, "status");
  const json* alloc = status ? FindKey(*status, "allocatable") : nullptr;
  RM_ASSIGN_OR_RETURN(auto a, ReadAmounts(alloc ? *alloc : json(), where + ": status.allocatable"));
  n.allocatable.set_cpu_milli(std::max<Quantity>(a.cpu, 0));
  n.allocatable.set_memory(std::max<Quantity>(a.memory, 0));
  if (a.gpus > 1024) return absl::InvalidArgumentError(where + ": nvidia.com/gpu: more than 1024 GPUs");
  const auto product = n.labels.find(std::string(kGpuProductLabel));
  Quantity gpu_memory = 0;
  if (auto m = n.labels.find(std::string(kGpuMemoryLabel)); m != n.labels.end()) {
    auto q = ParseKubeQuantity(m->second, false);
    if (q.ok()) gpu_memory = *q << 20;
  }
  for (int i = 0; i < a.gpus; ++i) {
    topology::Gpu g;
    g.index = i;
    g.model = product == n.labels.end() ? "gpu" : product->second;
    g.memory = gpu_memory;
    n.gpus.push_back(std::move(g));
  }
  // Domains from the top tier down, each name carrying its parent's.
  std::vector<std::string> domains(topo.tiers.size());
  std::string prefix;
  for (size_t t = topo.tiers.size(); t-- > 0;) {
    auto it = n.labels.find(topo.tiers[t].label_key);
    prefix = absl::StrCat(prefix, prefix.empty() ? "" : "/", it == n.labels.end() ? "-" : it->second);
    domains[t] = prefix;
  }
  n.domains = std::move(domains);
  const json* spec = FindKey(node, "spec");
  const json* taints = spec ? FindKey(*spec, "taints") : nullptr;
  if (taints != nullptr && taints->is_array()) {
    for (const json& t : *taints) {
      topology::Taint taint;
      auto key = StringAt(t, "key", where + ": spec.taints.key");
      auto value = StringAt(t, "value", where + ": spec.taints.value");
      auto effect = StringAt(t, "effect", where + ": spec.taints.effect");
      if (!key.ok() || !value.ok() || !effect.ok()) return absl::InvalidArgumentError(where + ": spec.taints: bad taint");
      taint.key = *key;
      taint.value = *value;
      taint.effect = *effect == "NoExecute"          ? topology::TaintEffect::kNoExecute
                     : *effect == "PreferNoSchedule" ? topology::TaintEffect::kPreferNoSchedule
                                                     : topology::TaintEffect::kNoSchedule;
      n.taints.push_back(std::move(taint));
    }
  }
  return n;
}

}  // namespace ringmaster::server
