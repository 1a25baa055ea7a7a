#include "cli/volcano_import.h"

#include <map>
#include <set>

#include <yaml-cpp/yaml.h>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ringmaster::cli {
namespace {

// Volcano plugins and the ringmaster plugin that does their job ("" when
// ringmaster does it without a plugin), or what to do instead.
struct PluginMap {
  std::string ringmaster;  // empty: not carried over
  std::string note;        // said when not carried over, or when carried with a difference
};

const std::map<std::string, PluginMap>& Plugins() {
  static const auto* m = new std::map<std::string, PluginMap>{
      {"priority", {"priority", ""}},
      {"gang", {"gang", ""}},
      {"drf", {"drf", ""}},
      {"predicates", {"predicates", ""}},
      {"proportion", {"proportion", "queues are not in a volcano-scheduler.conf: keep the Volcano Queue objects with `serve "
                                    "--api-server URL --volcano-queues` (read beside the policy's `queues:`, re-read "
                                    "on change), or write each Queue's weight, capability and guarantee under "
                                    "`queues:`"}},
      {"binpack", {"binpack", ""}},
      {"network-topology-aware", {"network-topology", ""}},
      {"nodeorder", {"", "ringmaster scores nodes with binpack (most-requested) or most-free (least-requested) and "
                         "places gangs by the network with network-topology: keep one of those in the policy"}},
      {"conformance", {"", "not needed: ringmaster never evicts pods it does not schedule (kube-system's included)"}},
      {"overcommit", {"", "no counterpart: enqueue admits a gang when its minimum fits its queue's capability and "
                          "deserved share; lower a queue's capability to admit less"}},
      {"sla", {"", "no counterpart: use the las plugin's preemptAfter, or priorities, for jobs that must start by "
                   "a deadline"}},
      {"tdm", {"", "no counterpart: time-division of nodes is not built; use node selectors and queues"}},
      {"numaaware", {"", "no counterpart: GPUs are chosen by NVLink / PCIe islands (gpu-affinity, the cluster "
                         "file's topology)"}},
      {"task-topology", {"", "no counterpart: network-topology keeps a gang's tasks close by the network"}},
      {"deviceshare", {"", "GPU shares are the gpu-share plugin and fractional GPUs in the job's request"}},
      {"capacity", {"proportion", "becomes proportion: each queue's capability and guarantee hold as in Volcano, "
                                  "hierarchy included; its `deserved` is not read (proportion water-fills deserved "
                                  "shares from the queues' weights: give weights in the ratio of the deserved "
                                  "values)"}},
      {"cdp", {"", "no counterpart: the preempt and reclaim actions' cooldown keeps a job from being evicted "
                   "again right after it started or resized"}},
      {"rescheduling", {"", "no counterpart: ringmaster does not deschedule running jobs to defragment"}},
      {"extender", {"", "no counterpart: ringmaster is itself the extender of kube-scheduler"}},
      {"resource-quota", {"", "use each queue's capability in `queues:`"}},
      {"usage", {"", "no counterpart: nodes are scored by what is allocated, not measured load"}},
      {"pdb", {"", "PodDisruptionBudgets are honoured by the evictions themselves (the API server's Eviction)"}},
      {"sla-waiting-time", {"", "no counterpart"}},
  };
  return *m;
}

// Volcano actions and ringmaster's ("" when not carried over).
const std::map<std::string, PluginMap>& Actions() {
  static const auto* m = new std::map<std::string, PluginMap>{
      {"enqueue", {"enqueue", ""}},
      {"allocate", {"allocate", ""}},
      {"backfill", {"backfill", ""}},
      {"preempt", {"preempt", ""}},
      {"reclaim", {"reclaim", ""}},
      {"shuffle", {"", "no counterpart: ringmaster does not deschedule running jobs"}},
      {"elect", {"", "no counterpart: allocate reserves nodes for a starving head-of-line gang itself"}},
      {"reserve", {"", "no counterpart: allocate reserves nodes for a starving head-of-line gang itself"}},
  };
  return *m;
}

std::string Quote(const std::string& s) { return absl::StrCat("\"", s, "\""); }

}  // namespace

bool LooksLikeVolcanoConf(std::string_view text) {
  for (std::string_view key : {"enablePreemptable", "enableJobOrder", "enableNodeOrder", "enablePredicate",
                               "name: conformance", "name: overcommit", "name: nodeorder", "name: sla",
                               "name: tdm", "name: numaaware", "name: task-topology", "name: deviceshare"}) {
    if (text.find(key) != std::string_view::npos) return true;
  }
  return false;
}

absl::StatusOr<VolcanoImport> ImportVolcanoConf(std::string_view text, std::string_view source) {
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::Exception& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(source), ":", e.mark.line + 1, ":", e.mark.column + 1, ": ", e.msg));
  }
  if (!root.IsMap() || (!root["actions"] && !root["tiers"])) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(source), ": not a volcano-scheduler.conf (a map with actions and tiers)"));
  }
  VolcanoImport out;
  // Actions.
  std::vector<std::string> actions;
  if (root["actions"]) {
    // Two forms: a comma-separated string, or (newer Volcano) a list of
    // {name, arguments} maps.
    std::vector<std::string> names;
    const YAML::Node& node = root["actions"];
    if (node.IsScalar()) {
      for (absl::string_view a : absl::StrSplit(node.Scalar(), ',', absl::SkipWhitespace())) {
        names.emplace_back(absl::StripAsciiWhitespace(a));
      }
    } else if (node.IsSequence()) {
      for (size_t i = 0; i < node.size(); ++i) {
        const YAML::Node& entry = node[i];
        if (!entry.IsMap() || !entry["name"] || !entry["name"].IsScalar()) {
          return absl::InvalidArgumentError(
              absl::StrCat(std::string(source), ": actions[", i, "]: expected a map with a name"));
        }
        const std::string name = entry["name"].Scalar();
        if (entry["arguments"]) {
          out.notes.push_back(absl::StrCat("action ", name,
                                           ": arguments left out (the actions' arguments differ: set ringmaster's "
                                           "in the policy's configurations)"));
        }
        names.push_back(name);
      }
    } else {
      return absl::InvalidArgumentError(
          absl::StrCat(std::string(source), ": actions: expected a string or a list of {name, arguments}"));
    }
    for (const std::string& name : names) {
      auto it = Actions().find(name);
      if (it == Actions().end()) {
        out.notes.push_back(absl::StrCat("action ", name, ": unknown to this import, left out"));
      } else if (it->second.ringmaster.empty()) {
        out.notes.push_back(absl::StrCat("action ", name, ": left out (", it->second.note, ")"));
      } else {
        actions.push_back(it->second.ringmaster);
      }
    }
  }
  if (actions.empty()) actions = {"enqueue", "allocate", "backfill"};
  // Tiers.
  std::vector<std::vector<std::string>> tiers;
  std::vector<std::string> arguments_yaml;
  std::set<std::string> placed;
  if (root["tiers"]) {
    if (!root["tiers"].IsSequence()) {
      return absl::InvalidArgumentError(absl::StrCat(std::string(source), ": tiers: expected a list"));
    }
    for (size_t t = 0; t < root["tiers"].size(); ++t) {
      const YAML::Node plugins = root["tiers"][t]["plugins"];
      if (!plugins || !plugins.IsSequence()) {
        return absl::InvalidArgumentError(
            absl::StrCat(std::string(source), ": tiers[", t, "].plugins: expected a list"));
      }
      std::vector<std::string> tier;
      for (size_t p = 0; p < plugins.size(); ++p) {
        const YAML::Node pl = plugins[p];
        if (!pl.IsMap() || !pl["name"] || !pl["name"].IsScalar()) {
          return absl::InvalidArgumentError(
              absl::StrCat(std::string(source), ": tiers[", t, "].plugins[", p, "].name: expected a name"));
        }
        const std::string name = pl["name"].Scalar();
        auto it = Plugins().find(name);
        if (it == Plugins().end()) {
          out.notes.push_back(absl::StrCat("plugin ", name, ": unknown to this import, left out"));
          continue;
        }
        if (it->second.ringmaster.empty()) {
          out.notes.push_back(absl::StrCat("plugin ", name, ": left out (", it->second.note, ")"));
          continue;
        }
        const std::string& rm = it->second.ringmaster;
        if (!it->second.note.empty()) out.notes.push_back(absl::StrCat("plugin ", name, ": ", it->second.note));
        for (const auto& kv : pl) {
          const std::string key = kv.first.Scalar();
          if (key == "name") continue;
          // Hierarchical queues (`parent:`) are always on in ringmaster.
          if (name == "capacity" && key == "enableHierarchy") continue;
          if (key.rfind("enable", 0) == 0) {
            out.notes.push_back(absl::StrCat("plugin ", name, ": ", key, ": ", kv.second.Scalar(),
                                             " left out (a ringmaster plugin takes part in every extension point "
                                             "it implements; leave the plugin out to drop it)"));
            continue;
          }
          if (key == "arguments") {
            out.notes.push_back(absl::StrCat("plugin ", name, ": arguments left out (Volcano's keys differ from "
                                             "ringmaster's: see `ringmaster policy default` and "
                                             "examples/policies/ for ", rm, "'s)"));
            continue;
          }
          out.notes.push_back(absl::StrCat("plugin ", name, ": ", key, ": unknown, left out"));
        }
        if (placed.insert(rm).second) tier.push_back(rm);
      }
      if (!tier.empty()) tiers.push_back(std::move(tier));
    }
  }
  if (root["configurations"]) {
    out.notes.push_back("configurations: left out (the actions' arguments differ: ringmaster's preempt, reclaim "
                        "and elastic arguments are in examples/policies/elastic.yaml)");
  }
  for (const auto& kv : root) {
    const std::string key = kv.first.Scalar();
    if (key != "actions" && key != "tiers" && key != "configurations") {
      out.notes.push_back(absl::StrCat(key, ": unknown, left out"));
    }
  }
  if (tiers.empty()) tiers.push_back({"priority", "gang"});
  // The policy.
  std::string y = absl::StrCat("# Imported from ", std::string(source), " (ringmaster policy import volcano).\n");
  absl::StrAppend(&y, "actions: ", Quote(absl::StrJoin(actions, ", ")), "\ntiers:\n");
  for (const auto& tier : tiers) {
    absl::StrAppend(&y, "- plugins:\n");
    for (const std::string& p : tier) absl::StrAppend(&y, "  - name: ", p, "\n");
  }
  out.policy_yaml = std::move(y);
  return out;
}

}  // namespace ringmaster::cli
