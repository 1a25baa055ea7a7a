#include "scheduler/policy.h"

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "scheduler/actions/action.h"
#include "yaml-cpp/yaml.h"

namespace ringmaster::scheduler {
namespace {

using queue::ConfigError;

void AddError(std::vector<ConfigError>* errors, std::string_view file, const YAML::Mark& m,
              std::string field, std::string msg) {
  ConfigError e;
  e.file = std::string(file);
  e.line = m.line + 1;
  e.column = m.column + 1;
  e.field = std::move(field);
  e.message = std::move(msg);
  errors->push_back(std::move(e));
}

// Reads a plugin's or action's `arguments:` map into `values`; false (with
// errors appended) when it is not a map of single values.
bool ReadArguments(const YAML::Node& args, std::string_view file, const std::string& field,
                   std::vector<ConfigError>* errors, std::map<std::string, PluginArgs::Value>* values) {
  if (!args) return true;
  if (!args.IsMap()) {
    AddError(errors, file, args.Mark(), absl::StrCat(field, ".arguments"), "must be a map");
    return false;
  }
  bool ok = true;
  for (const auto& kv : args) {
    if (!kv.second.IsScalar()) {
      AddError(errors, file, kv.second.Mark(), absl::StrCat(field, ".arguments.", kv.first.Scalar()),
               "wrong type: expected a single value");
      ok = false;
      continue;
    }
    (*values)[kv.first.Scalar()] = {kv.second.Scalar(), kv.second.Mark().line + 1, kv.second.Mark().column + 1};
  }
  return ok;
}

// The `configurations:` list: [{name: ACTION, arguments: {...}}].
void ParseConfigurations(const YAML::Node& list, std::string_view file, Policy* p,
                         std::vector<ConfigError>* errors) {
  if (!list.IsSequence()) {
    AddError(errors, file, list.Mark(), "configurations", "must be a list of {name: ACTION, arguments: {...}}");
    return;
  }
  std::set<std::string> seen;
  for (size_t i = 0; i < list.size(); ++i) {
    const YAML::Node c = list[i];
    const std::string field = absl::StrCat("configurations[", i, "]");
    if (!c.IsMap() || !c["name"] || !c["name"].IsScalar()) {
      AddError(errors, file, c.Mark(), field, "each configuration needs the name of an action");
      continue;
    }
    for (const auto& kv : c) {
      const std::string key = kv.first.Scalar();
      if (key != "name" && key != "arguments") {
        AddError(errors, file, kv.first.Mark(), absl::StrCat(field, ".", key), "unknown field (known: name, arguments)");
      }
    }
    const std::string name = c["name"].Scalar();
    if (std::find(p->actions.begin(), p->actions.end(), name) == p->actions.end()) {
      AddError(errors, file, c["name"].Mark(), absl::StrCat(field, ".name"),
               absl::StrCat("configures action '", name, "', which `actions` does not list"));
      continue;
    }
    if (!seen.insert(name).second) {
      AddError(errors, file, c["name"].Mark(), absl::StrCat(field, ".name"),
               absl::StrCat("action '", name, "' is configured twice"));
      continue;
    }
    std::map<std::string, PluginArgs::Value> values;
    if (!ReadArguments(c["arguments"], file, field, errors, &values)) continue;
    PluginArgs args(name, std::string(file), std::move(values), "configurations");
    if (auto made = MakeAction(name, args); !made.ok()) {
      ConfigError e;
      e.message = std::string(made.status().message());  // already says file:line:col and field
      errors->push_back(std::move(e));
      continue;
    }
    p->action_args[name] = std::move(args);
  }
}

}  // namespace

absl::StatusOr<double> PluginArgs::Double(std::string_view key, double def) const {
  auto it = values_.find(std::string(key));
  if (it == values_.end()) return def;
  read_[it->first] = true;
  try {
    size_t pos = 0;
    double v = std::stod(it->second.text, &pos);
    if (pos != it->second.text.size()) throw std::invalid_argument("trailing");
    return v;
  } catch (const std::exception&) {
    return Error(key, absl::StrCat("wrong type: expected a number, got '", it->second.text, "'"));
  }
}

absl::StatusOr<int64_t> PluginArgs::Int(std::string_view key, int64_t def) const {
  auto it = values_.find(std::string(key));
  if (it == values_.end()) return def;
  read_[it->first] = true;
  try {
    size_t pos = 0;
    long long v = std::stoll(it->second.text, &pos);
    if (pos != it->second.text.size()) throw std::invalid_argument("trailing");
    return static_cast<int64_t>(v);
  } catch (const std::exception&) {
    return Error(key, absl::StrCat("wrong type: expected an integer, got '", it->second.text, "'"));
  }
}

absl::StatusOr<bool> PluginArgs::Bool(std::string_view key, bool def) const {
  auto it = values_.find(std::string(key));
  if (it == values_.end()) return def;
  read_[it->first] = true;
  const std::string& t = it->second.text;
  if (t == "true" || t == "True" || t == "yes") return true;
  if (t == "false" || t == "False" || t == "no") return false;
  return Error(key, absl::StrCat("wrong type: expected true or false, got '", t, "'"));
}

absl::StatusOr<std::string> PluginArgs::String(std::string_view key, std::string def) const {
  auto it = values_.find(std::string(key));
  if (it == values_.end()) return def;
  read_[it->first] = true;
  return it->second.text;
}

absl::Status PluginArgs::Finish() const {
  for (const auto& [k, v] : values_) {
    if (!read_.count(k)) return Error(k, "unknown argument");
  }
  return absl::OkStatus();
}

absl::Status PluginArgs::Error(std::string_view key, std::string_view msg) const {
  auto it = values_.find(std::string(key));
  std::string where = file_.empty() ? "<policy>" : file_;
  if (it != values_.end() && it->second.line > 0) {
    absl::StrAppend(&where, ":", it->second.line, ":", it->second.column);
  }
  return absl::InvalidArgumentError(
      absl::StrCat(where, ": ", section_, "[", plugin_, "].arguments.", std::string(key), ": ", std::string(msg)));
}

Policy DefaultPolicy() {
  // DefaultPolicyYaml() (default_policy.cc.in: examples/policies/ringmaster.yaml)
  // parsed as any policy file, with every argument and configuration. The
  // plugins' own factories check their arguments where the engine builds
  // them (tests/scheduler/default_policy_test.cc parses the text with the
  // real registry); here a registry that knows the names is enough.
  static const Policy* const parsed = [] {
    const YAML::Node root = YAML::Load(std::string(DefaultPolicyYaml()));
    PluginRegistry names;
    for (const auto& tier : root["tiers"]) {
      for (const auto& pl : tier["plugins"]) {
        names.Add(pl["name"].Scalar(), [](const PluginArgs&) -> absl::StatusOr<std::unique_ptr<Plugin>> {
          return std::unique_ptr<Plugin>();
        });
      }
    }
    std::vector<ConfigError> errors;
    auto p = ParsePolicy(DefaultPolicyYaml(), "<default policy>", names, &errors);
    if (!p.ok()) {
      // A build whose examples/policies/ringmaster.yaml does not parse: the
      // default-policy test fails first; never run half a policy.
      std::fprintf(stderr, "the built-in policy does not parse: %s\n", std::string(p.status().message()).c_str());
      std::abort();
    }
    return new Policy(*std::move(p));
  }();
  return *parsed;
}

absl::StatusOr<Policy> ParsePolicy(std::string_view text, std::string_view file,
                                   const PluginRegistry& registry,
                                   std::vector<ConfigError>* errors) {
  const size_t before = errors->size();
  Policy p;
  p.file = std::string(file);
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    AddError(errors, file, e.mark, "", absl::StrCat("not valid YAML: ", e.msg));
    return absl::InvalidArgumentError(errors->back().ToString());
  }
  if (!root.IsMap()) {
    AddError(errors, file, root.Mark(), "", "a policy file is a map with actions, tiers and queues");
    return absl::InvalidArgumentError(errors->back().ToString());
  }
  static const std::set<std::string> kTop = {"actions", "tiers", "queues", "nodesToScore", "configurations"};
  for (const auto& kv : root) {
    if (!kTop.count(kv.first.Scalar())) {
      AddError(errors, file, kv.first.Mark(), kv.first.Scalar(),
               "unknown field (known: actions, configurations, tiers, queues, nodesToScore)");
    }
  }
  if (const YAML::Node n = root["nodesToScore"]; n) {
    int v = -1;
    if (!n.IsScalar() || !absl::SimpleAtoi(n.Scalar(), &v) || v < 0 || v > 1000000) {
      AddError(errors, file, n.Mark(), "nodesToScore",
               "must be an integer in [0, 1000000] (0: score every feasible node)");
    } else {
      p.nodes_to_score = v;
    }
  }
  // actions
  if (!root["actions"]) {
    p.actions = DefaultPolicy().actions;
  } else if (!root["actions"].IsScalar()) {
    AddError(errors, file, root["actions"].Mark(), "actions",
             "must be a string such as \"enqueue, allocate, backfill\"");
  } else {
    for (absl::string_view a : absl::StrSplit(root["actions"].Scalar(), ',')) {
      std::string name(absl::StripAsciiWhitespace(a));
      if (name.empty()) continue;
      if (!MakeAction(name).ok()) {
        AddError(errors, file, root["actions"].Mark(), "actions",
                 absl::StrCat("unknown action '", name, "' (known: ",
                              absl::StrJoin(KnownActions(), ", "), ")"));
        continue;
      }
      p.actions.push_back(std::move(name));
    }
  }
  // tiers
  if (!root["tiers"]) {
    p.tiers = DefaultPolicy().tiers;
  } else if (!root["tiers"].IsSequence()) {
    AddError(errors, file, root["tiers"].Mark(), "tiers", "must be a list of {plugins: [...]}");
  } else {
    const YAML::Node tiers = root["tiers"];
    for (size_t t = 0; t < tiers.size(); ++t) {
      const YAML::Node tier = tiers[t];
      const std::string tf = absl::StrCat("tiers[", t, "]");
      if (!tier.IsMap() || !tier["plugins"] || !tier["plugins"].IsSequence()) {
        AddError(errors, file, tier.Mark(), tf, "must be a map with a 'plugins' list");
        continue;
      }
      for (const auto& kv : tier) {
        if (kv.first.Scalar() != "plugins") {
          AddError(errors, file, kv.first.Mark(), absl::StrCat(tf, ".", kv.first.Scalar()),
                   "unknown field (known: plugins)");
        }
      }
      std::vector<PluginConfig> list;
      const YAML::Node plugins = tier["plugins"];
      for (size_t i = 0; i < plugins.size(); ++i) {
        const YAML::Node pl = plugins[i];
        const std::string pf = absl::StrCat(tf, ".plugins[", i, "]");
        if (!pl.IsMap() || !pl["name"] || !pl["name"].IsScalar()) {
          AddError(errors, file, pl.Mark(), pf, "each plugin needs a name");
          continue;
        }
        PluginConfig c;
        c.name = pl["name"].Scalar();
        c.line = pl.Mark().line + 1;
        c.column = pl.Mark().column + 1;
        for (const auto& kv : pl) {
          const std::string key = kv.first.Scalar();
          if (key != "name" && key != "arguments") {
            AddError(errors, file, kv.first.Mark(), absl::StrCat(pf, ".", key),
                     "unknown field (known: name, arguments)");
          }
        }
        const PluginFactory* factory = registry.Find(c.name);
        if (!factory) {
          AddError(errors, file, pl["name"].Mark(), absl::StrCat(pf, ".name"),
                   absl::StrCat("unknown plugin '", c.name, "' (known: ",
                                absl::StrJoin(registry.Names(), ", "), ")"));
          continue;
        }
        std::map<std::string, PluginArgs::Value> values;
        if (!ReadArguments(pl["arguments"], file, pf, errors, &values)) continue;
        c.args = PluginArgs(c.name, std::string(file), std::move(values));
        auto built = (*factory)(c.args);
        if (!built.ok()) {
          ConfigError e;
          e.message = std::string(built.status().message());
          errors->push_back(std::move(e));  // already says file:line:col and field
          continue;
        }
        list.push_back(std::move(c));
      }
      p.tiers.push_back(std::move(list));
    }
  }
  if (root["configurations"]) ParseConfigurations(root["configurations"], file, &p, errors);
  if (root["queues"]) p.queues = queue::LoadQueueSpecs(root["queues"], file, errors);
  if (errors->size() > before) {
    std::vector<std::string> lines;
    for (size_t i = before; i < errors->size(); ++i) lines.push_back((*errors)[i].ToString());
    return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
  }
  return p;
}

absl::StatusOr<Policy> LoadPolicyFile(const std::string& path, const PluginRegistry& registry,
                                      std::vector<ConfigError>* errors) {
  std::ifstream in(path);
  if (!in) {
    ConfigError e;
    e.file = path;
    e.message = "cannot open the policy file";
    errors->push_back(e);
    return absl::NotFoundError(e.ToString());
  }
  std::stringstream ss;
  ss << in.rdbuf();
  return ParsePolicy(ss.str(), path, registry, errors);
}

absl::StatusOr<Policy> LoadPolicyOrDefault(const std::string& path, const PluginRegistry& registry) {
  if (path.empty()) return DefaultPolicy();
  std::vector<ConfigError> errors;
  return LoadPolicyFile(path, registry, &errors);
}

}  // namespace ringmaster::scheduler
