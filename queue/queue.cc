#include "queue/queue.h"

#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "yaml-cpp/yaml.h"

namespace ringmaster::queue {

std::string ConfigError::ToString() const {
  if (file.empty() && line == 0 && field.empty()) return message;
  std::string where = file.empty() ? "<policy>" : file;
  if (line > 0) absl::StrAppend(&where, ":", line, ":", column);
  return absl::StrCat(where, ": ", field.empty() ? "" : absl::StrCat(field, ": "), message);
}

QueueTree QueueTree::Default() {
  QueueSpec spec;
  spec.name = "default";
  auto tree = Build({spec});
  return *std::move(tree);
}

absl::StatusOr<QueueTree> QueueTree::Build(std::vector<QueueSpec> specs) {
  std::vector<ConfigError> errors;
  ValidateQueueSpecs(specs, "", {}, &errors);
  if (!errors.empty()) {
    std::vector<std::string> lines;
    for (const auto& e : errors) lines.push_back(e.ToString());
    return absl::InvalidArgumentError(absl::StrJoin(lines, "\n"));
  }
  // Topological order: parents first, stable by declaration order.
  QueueTree t;
  std::map<std::string, const QueueSpec*> by_name;
  for (const auto& s : specs) by_name[s.name] = &s;
  std::set<std::string> placed;
  while (t.queues_.size() < specs.size()) {
    for (const auto& s : specs) {
      if (placed.count(s.name)) continue;
      if (!s.parent.empty() && !placed.count(s.parent)) continue;
      placed.insert(s.name);
      const uint32_t idx = static_cast<uint32_t>(t.queues_.size());
      t.queues_.push_back(s);
      t.by_name_[s.name] = idx;
      t.children_.emplace_back();
      if (s.parent.empty()) {
        t.parents_.push_back(-1);
        t.roots_.push_back(idx);
      } else {
        const uint32_t p = t.by_name_.at(s.parent);
        t.parents_.push_back(static_cast<int>(p));
        t.children_[p].push_back(idx);
      }
    }
  }
  return t;
}

std::optional<uint32_t> QueueTree::Find(std::string_view name) const {
  auto it = by_name_.find(name);
  if (it == by_name_.end()) return std::nullopt;
  return it->second;
}

bool WithinCapability(const Resources& r, const Resources& cap) {
  if (r.cpu_milli() > cap.cpu_milli() || r.memory() > cap.memory() || r.gpu_milli() > cap.gpu_milli()) {
    return false;
  }
  for (const auto& [name, v] : cap.scalars()) {
    if (r.scalar(name) > v) return false;
  }
  return true;
}

void ValidateQueueSpecs(const std::vector<QueueSpec>& specs, std::string_view file,
                        const std::map<std::string, std::pair<int, int>>& lines,
                        std::vector<ConfigError>* errors) {
  auto add = [&](const std::string& queue, std::string field, std::string msg) {
    ConfigError e;
    e.file = std::string(file);
    if (auto it = lines.find(queue); it != lines.end()) {
      e.line = it->second.first;
      e.column = it->second.second;
    }
    e.field = absl::StrCat("queues[", queue, "].", field);
    e.message = std::move(msg);
    errors->push_back(std::move(e));
  };
  std::map<std::string, const QueueSpec*> by_name;
  for (const auto& s : specs) {
    if (s.name.empty()) {
      add("", "name", "a queue needs a name");
      continue;
    }
    if (!by_name.emplace(s.name, &s).second) add(s.name, "name", "duplicate queue name");
    if (s.weight <= 0) add(s.name, "weight", absl::StrCat("must be > 0, got ", s.weight));
    if (s.capability && !WithinCapability(s.guarantee, *s.capability)) {
      add(s.name, "guarantee",
          absl::StrCat("guarantee (", s.guarantee.ToString(), ") is above capability (",
                       s.capability->ToString(), ")"));
    }
  }
  for (const auto& s : specs) {
    if (s.parent.empty()) continue;
    if (s.parent == s.name) {
      add(s.name, "parent", "a queue cannot be its own parent");
      continue;
    }
    auto it = by_name.find(s.parent);
    if (it == by_name.end()) {
      add(s.name, "parent", absl::StrCat("unknown parent queue '", s.parent, "'"));
      continue;
    }
    if (it->second->capability && !WithinCapability(s.guarantee, *it->second->capability)) {
      add(s.name, "guarantee", absl::StrCat("guarantee is above the capability of parent '",
                                            s.parent, "'"));
    }
  }
  // Cycles: follow parents from each queue.
  std::set<std::string> reported;
  for (const auto& s : specs) {
    std::vector<std::string> path{s.name};
    std::set<std::string> seen{s.name};
    const QueueSpec* cur = &s;
    while (!cur->parent.empty()) {
      auto it = by_name.find(cur->parent);
      if (it == by_name.end() || cur->parent == cur->name) break;
      if (seen.count(cur->parent)) {
        if (cur->parent == s.name && !reported.count(s.name)) {
          path.push_back(s.name);
          for (const auto& n : path) reported.insert(n);
          add(s.name, "parent", absl::StrCat("cycle in queue parents: ", absl::StrJoin(path, " -> ")));
        }
        break;
      }
      seen.insert(cur->parent);
      path.push_back(cur->parent);
      cur = it->second;
    }
  }
}

namespace {

std::pair<int, int> Where(const YAML::Node& n) {
  const YAML::Mark m = n.Mark();
  return {m.line + 1, m.column + 1};
}

void AddError(std::vector<ConfigError>* errors, std::string_view file, const YAML::Node& at,
              std::string field, std::string msg) {
  ConfigError e;
  e.file = std::string(file);
  auto [l, c] = Where(at);
  e.line = l;
  e.column = c;
  e.field = std::move(field);
  e.message = std::move(msg);
  errors->push_back(std::move(e));
}

}  // namespace

Resources ParseResourceMap(const YAML::Node& node, std::string_view file, std::string_view field,
                           std::vector<ConfigError>* errors) {
  Resources r;
  if (!node.IsMap()) {
    AddError(errors, file, node, std::string(field), "must be a map such as {cpu: 8, memory: 64Gi, gpu: 4}");
    return r;
  }
  for (const auto& kv : node) {
    const std::string key = kv.first.Scalar();
    const std::string sub = absl::StrCat(std::string(field), ".", key);
    if (!kv.second.IsScalar()) {
      AddError(errors, file, kv.second, sub, "must be a quantity");
      continue;
    }
    const bool milli = key == "cpu" || key == "gpu" || key == "nvidia.com/gpu";
    auto q = topology::ParseQuantity(kv.second.Scalar(), milli);
    if (!q.ok()) {
      AddError(errors, file, kv.second, sub, std::string(q.status().message()));
      continue;
    }
    if (key == "cpu") {
      r.set_cpu_milli(*q);
    } else if (key == "memory") {
      r.set_memory(*q);
    } else if (key == "gpu" || key == "nvidia.com/gpu") {
      r.set_gpu_milli(*q);
    } else {
      r.set_scalar(key, *q);
    }
  }
  return r;
}

std::vector<QueueSpec> LoadQueueSpecs(const YAML::Node& queues, std::string_view file,
                                      std::vector<ConfigError>* errors) {
  std::vector<QueueSpec> specs;
  std::map<std::string, std::pair<int, int>> lines;
  if (!queues.IsSequence()) {
    AddError(errors, file, queues, "queues", "must be a list of queues");
    return specs;
  }
  static const std::set<std::string> kFields = {"name",     "parent",      "weight",  "guarantee",
                                                "capability", "priority", "reclaimable"};
  for (size_t i = 0; i < queues.size(); ++i) {
    const YAML::Node q = queues[i];
    const std::string base = absl::StrCat("queues[", i, "]");
    if (!q.IsMap()) {
      AddError(errors, file, q, base, "each queue must be a map with at least a name");
      continue;
    }
    QueueSpec s;
    bool ok = true;
    for (const auto& kv : q) {
      const std::string key = kv.first.Scalar();
      const std::string field = absl::StrCat(base, ".", key);
      const YAML::Node v = kv.second;
      if (!kFields.count(key)) {
        AddError(errors, file, kv.first, field,
                 "unknown field (known: name, parent, weight, guarantee, capability, priority, reclaimable)");
        ok = false;
        continue;
      }
      try {
        if (key == "name") {
          s.name = v.as<std::string>();
        } else if (key == "parent") {
          s.parent = v.as<std::string>();
        } else if (key == "weight") {
          s.weight = v.as<int64_t>();
        } else if (key == "priority") {
          s.priority = v.as<int32_t>();
        } else if (key == "reclaimable") {
          s.reclaimable = v.as<bool>();
        } else if (key == "guarantee") {
          s.guarantee = ParseResourceMap(v, file, field, errors);
        } else if (key == "capability") {
          Resources cap = ParseResourceMap(v, file, field, errors);
          // Dimensions the admin left out are not limited.
          if (!v["cpu"]) cap.set_cpu_milli(topology::kUnlimited);
          if (!v["memory"]) cap.set_memory(topology::kUnlimited);
          if (!v["gpu"] && !v["nvidia.com/gpu"]) cap.set_gpu_milli(topology::kUnlimited);
          s.capability = cap;
        }
      } catch (const YAML::Exception&) {
        const char* want = key == "reclaimable" ? "a boolean"
                           : (key == "name" || key == "parent") ? "a string"
                                                                : "an integer";
        AddError(errors, file, v, field, absl::StrCat("wrong type: expected ", want));
        ok = false;
      }
    }
    if (s.name.empty()) {
      AddError(errors, file, q, absl::StrCat(base, ".name"), "a queue needs a name");
      continue;
    }
    lines[s.name] = Where(q);
    (void)ok;
    specs.push_back(std::move(s));
  }
  ValidateQueueSpecs(specs, file, lines, errors);
  return specs;
}

}  // namespace ringmaster::queue
