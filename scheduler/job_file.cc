#include "scheduler/job_file.h"

#include <algorithm>

#include <fstream>
#include <set>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "yaml-cpp/yaml.h"

namespace ringmaster::scheduler {
namespace {

struct Ctx {
  std::string_view file;
  absl::Status Err(const YAML::Node& at, std::string_view field, std::string_view msg) const {
    const YAML::Mark m = at.Mark();
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(file), ":", m.line + 1, ":", m.column + 1, ": ", std::string(field), ": ", std::string(msg)));
  }
};

template <typename T>
absl::Status Get(const Ctx& c, const YAML::Node& n, std::string_view field, T* out, const char* want) {
  try {
    *out = n.as<T>();
    return absl::OkStatus();
  } catch (const YAML::Exception&) {
    return c.Err(n, field, absl::StrCat("wrong type: expected ", want));
  }
}

absl::Status ParseQty(const Ctx& c, const YAML::Node& n, std::string_view field, bool milli,
                      topology::Quantity* out) {
  if (!n.IsScalar()) return c.Err(n, field, "must be a quantity");
  auto q = topology::ParseQuantity(n.Scalar(), milli);
  if (!q.ok()) return c.Err(n, field, std::string(q.status().message()));
  *out = *q;
  return absl::OkStatus();
}

absl::Status CheckKeys(const Ctx& c, const YAML::Node& n, std::string_view field,
                       const std::set<std::string>& known) {
  for (const auto& kv : n) {
    if (!known.count(kv.first.Scalar())) {
      return c.Err(kv.first, absl::StrCat(std::string(field), ".", kv.first.Scalar()), "unknown field");
    }
  }
  return absl::OkStatus();
}

absl::StatusOr<RoleSpec> ParseRole(const Ctx& c, const YAML::Node& n, const std::string& field) {
  if (!n.IsMap()) return c.Err(n, field, "a role is a map");
  RM_RETURN_IF_ERROR(CheckKeys(c, n, field, {"name", "replicas", "gpus", "cpu", "memory", "scalars"}));
  RoleSpec r;
  if (n["name"]) {
    RM_RETURN_IF_ERROR(Get(c, n["name"], field + ".name", &r.name, "a string"));
  }
  if (n["replicas"]) {
    RM_RETURN_IF_ERROR(Get(c, n["replicas"], field + ".replicas", &r.replicas, "an integer"));
  }
  if (n["gpus"]) {
    topology::Quantity milli = 0;
    RM_RETURN_IF_ERROR(ParseQty(c, n["gpus"], field + ".gpus", true, &milli));
    if (milli >= topology::kMilliPerGpu) {
      if (milli % topology::kMilliPerGpu != 0) {
        return c.Err(n["gpus"], field + ".gpus", "more than one GPU must be a whole number");
      }
      r.gpu.count = static_cast<int>(milli / topology::kMilliPerGpu);
      r.gpu.milli = topology::kMilliPerGpu;
    } else if (milli > 0) {
      r.gpu.count = 1;
      r.gpu.milli = milli;
    }
  }
  topology::Quantity v = 0;
  if (n["cpu"]) {
    RM_RETURN_IF_ERROR(ParseQty(c, n["cpu"], field + ".cpu", true, &v));
    r.request.set_cpu_milli(v);
  }
  if (n["memory"]) {
    RM_RETURN_IF_ERROR(ParseQty(c, n["memory"], field + ".memory", false, &v));
    r.request.set_memory(v);
  }
  if (n["scalars"]) {
    if (!n["scalars"].IsMap()) return c.Err(n["scalars"], field + ".scalars", "must be a map");
    for (const auto& kv : n["scalars"]) {
      const std::string f = absl::StrCat(field, ".scalars.", kv.first.Scalar());
      RM_RETURN_IF_ERROR(ParseQty(c, kv.second, f, false, &v));
      r.request.set_scalar(kv.first.Scalar(), v);
    }
  }
  return r;
}

absl::StatusOr<JobSpec> ParseJob(const Ctx& c, const YAML::Node& n, const std::string& field) {
  if (!n.IsMap()) return c.Err(n, field, "a job is a map");
  RM_RETURN_IF_ERROR(CheckKeys(c, n, field, {"name", "queue", "priority", "min_member", "elastic", "topology",
                                             "gpu_model", "walltime", "checkpoint_interval", "submit", "duration",
                                             "node_selector", "tolerations", "roles", "command"}));
  JobSpec j;
  if (!n["name"]) return c.Err(n, field + ".name", "a job needs a name");
  RM_RETURN_IF_ERROR(Get(c, n["name"], field + ".name", &j.name, "a string"));
  if (n["queue"]) {
    RM_RETURN_IF_ERROR(Get(c, n["queue"], field + ".queue", &j.queue, "a string"));
  }
  if (n["priority"]) {
    RM_RETURN_IF_ERROR(Get(c, n["priority"], field + ".priority", &j.priority, "an integer"));
  }
  int min_member = 0, elastic_min = 0, elastic_max = 0;
  if (n["min_member"]) {
    RM_RETURN_IF_ERROR(Get(c, n["min_member"], field + ".min_member", &min_member, "an integer"));
  }
  if (const YAML::Node e = n["elastic"]; e) {
    if (!e.IsMap() || !e["min"] || !e["max"]) return c.Err(e, field + ".elastic", "must be {min: N, max: M}");
    RM_RETURN_IF_ERROR(Get(c, e["min"], field + ".elastic.min", &elastic_min, "an integer"));
    RM_RETURN_IF_ERROR(Get(c, e["max"], field + ".elastic.max", &elastic_max, "an integer"));
  }
  if (auto size = GangSize::FromMinMember(min_member, elastic_min, elastic_max); size.ok()) {
    j.size = *size;
  } else {
    return c.Err(n, field, absl::StrCat("job '", j.name, "': ", size.status().message()));
  }
  if (const YAML::Node t = n["topology"]; t) {
    if (!t.IsMap()) return c.Err(t, field + ".topology", "must be {mode: hard|soft, highest_tier: N}");
    RM_RETURN_IF_ERROR(CheckKeys(c, t, field + ".topology", {"mode", "highest_tier"}));
    std::string mode = "hard";
    if (t["mode"]) {
      RM_RETURN_IF_ERROR(Get(c, t["mode"], field + ".topology.mode", &mode, "a string"));
    }
    if (mode == "hard") {
      j.topology_mode = TopologyMode::kHard;
    } else if (mode == "soft") {
      j.topology_mode = TopologyMode::kSoft;
    } else {
      return c.Err(t["mode"], field + ".topology.mode", absl::StrCat("'", mode, "' is not hard or soft"));
    }
    if (t["highest_tier"]) {
      RM_RETURN_IF_ERROR(Get(c, t["highest_tier"], field + ".topology.highest_tier", &j.highest_tier, "an integer"));
    }
  }
  if (const YAML::Node m = n["gpu_model"]; m) {
    // One model, or a list of models the job accepts.
    if (m.IsSequence()) {
      for (size_t k = 0; k < m.size(); ++k) {
        std::string one;
        RM_RETURN_IF_ERROR(Get(c, m[k], absl::StrCat(field, ".gpu_model[", k, "]"), &one, "a string"));
        j.gpu_models.push_back(std::move(one));
      }
      if (j.gpu_models.empty()) return c.Err(m, field + ".gpu_model", "an empty list allows no GPU model");
    } else {
      std::string one;
      RM_RETURN_IF_ERROR(Get(c, m, field + ".gpu_model", &one, "a string or a list of strings"));
      j.gpu_models.push_back(std::move(one));
    }
  }
  if (const YAML::Node m = n["command"]; m) {
    // argv as a list, or one string run by /bin/sh -c.
    if (m.IsSequence()) {
      for (size_t k = 0; k < m.size(); ++k) {
        std::string one;
        RM_RETURN_IF_ERROR(Get(c, m[k], absl::StrCat(field, ".command[", k, "]"), &one, "a string"));
        j.command.push_back(std::move(one));
      }
    } else {
      std::string one;
      RM_RETURN_IF_ERROR(Get(c, m, field + ".command", &one, "a string or a list of strings"));
      j.command = {"/bin/sh", "-c", std::move(one)};
    }
    if (j.command.empty() || j.command.front().empty()) {
      return c.Err(m, field + ".command", "an empty command");
    }
  }
  if (n["walltime"]) {
    double secs = 0;
    RM_RETURN_IF_ERROR(Get(c, n["walltime"], field + ".walltime", &secs, "seconds"));
    if (secs < 0) return c.Err(n["walltime"], field + ".walltime", "must be >= 0");
    j.walltime_ms = static_cast<int64_t>(secs * 1000);
  }
  if (n["checkpoint_interval"]) {
    double secs = 0;
    RM_RETURN_IF_ERROR(Get(c, n["checkpoint_interval"], field + ".checkpoint_interval", &secs, "seconds"));
    if (secs < 0) return c.Err(n["checkpoint_interval"], field + ".checkpoint_interval", "must be >= 0");
    j.checkpoint_interval_ms = static_cast<int64_t>(secs * 1000);
  }
  if (const YAML::Node ns = n["node_selector"]; ns) {
    if (!ns.IsMap()) return c.Err(ns, field + ".node_selector", "must be a map of labels");
    for (const auto& kv : ns) j.node_selector[kv.first.Scalar()] = kv.second.Scalar();
  }
  if (const YAML::Node ts = n["tolerations"]; ts) {
    if (!ts.IsSequence()) return c.Err(ts, field + ".tolerations", "must be a list");
    for (size_t i = 0; i < ts.size(); ++i) {
      const std::string tf = absl::StrCat(field, ".tolerations[", i, "]");
      if (!ts[i].IsMap()) return c.Err(ts[i], tf, "must be a map");
      RM_RETURN_IF_ERROR(CheckKeys(c, ts[i], tf, {"key", "operator", "value", "effect"}));
      Toleration t;
      if (ts[i]["key"]) t.key = ts[i]["key"].Scalar();
      if (ts[i]["value"]) t.value = ts[i]["value"].Scalar();
      if (ts[i]["effect"]) t.effect = ts[i]["effect"].Scalar();
      if (ts[i]["operator"]) {
        const std::string op = ts[i]["operator"].Scalar();
        if (op == "Exists") {
          t.op = TolerationOp::kExists;
        } else if (op != "Equal") {
          return c.Err(ts[i]["operator"], tf + ".operator", "must be Equal or Exists");
        }
      }
      j.tolerations.push_back(std::move(t));
    }
  }
  if (!n["roles"] || !n["roles"].IsSequence()) return c.Err(n, field + ".roles", "a job needs a list of roles");
  for (size_t i = 0; i < n["roles"].size(); ++i) {
    RM_ASSIGN_OR_RETURN(auto r, ParseRole(c, n["roles"][i], absl::StrCat(field, ".roles[", i, "]")));
    j.roles.push_back(std::move(r));
  }
  if (auto s = j.Validate(); !s.ok()) return c.Err(n, field, std::string(s.message()));
  return j;
}

}  // namespace

namespace {

// Reads `key` (seconds, >= 0) of job node n into *ms; absent leaves *ms.
absl::Status Seconds(const Ctx& c, const YAML::Node& n, const std::string& field, const char* key,
                     int64_t* ms) {
  if (!n[key]) return absl::OkStatus();
  double secs = 0;
  RM_RETURN_IF_ERROR(Get(c, n[key], absl::StrCat(field, ".", key), &secs, "seconds"));
  if (secs < 0) return c.Err(n[key], absl::StrCat(field, ".", key), "must be >= 0");
  *ms = static_cast<int64_t>(secs * 1000);
  return absl::OkStatus();
}

}  // namespace

absl::StatusOr<std::vector<TimedJob>> ParseTimedJobFile(std::string_view text, std::string_view file) {
  RM_ASSIGN_OR_RETURN(auto specs, ParseJobFile(text, file));
  Ctx c{file};
  YAML::Node root = YAML::Load(std::string(text));  // parsed once above: cannot fail here
  std::vector<TimedJob> out;
  for (size_t i = 0; i < specs.size(); ++i) {
    const std::string field = absl::StrCat("jobs[", i, "]");
    TimedJob t;
    t.spec = std::move(specs[i]);
    RM_RETURN_IF_ERROR(Seconds(c, root["jobs"][i], field, "submit", &t.submit_ms));
    RM_RETURN_IF_ERROR(Seconds(c, root["jobs"][i], field, "duration", &t.duration_ms));
    out.push_back(std::move(t));
  }
  std::stable_sort(out.begin(), out.end(),
                   [](const TimedJob& a, const TimedJob& b) { return a.submit_ms < b.submit_ms; });
  return out;
}

absl::StatusOr<std::vector<TimedJob>> LoadTimedJobFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the jobs file"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseTimedJobFile(ss.str(), path);
}

absl::StatusOr<std::vector<JobSpec>> ParseJobFile(std::string_view text, std::string_view file) {
  Ctx c{file};
  YAML::Node root;
  try {
    root = YAML::Load(std::string(text));
  } catch (const YAML::ParserException& e) {
    return absl::InvalidArgumentError(
        absl::StrCat(std::string(file), ":", e.mark.line + 1, ":", e.mark.column + 1, ": not valid YAML: ", e.msg));
  }
  if (!root.IsMap() || !root["jobs"] || !root["jobs"].IsSequence()) {
    return c.Err(root, "jobs", "a jobs file is a map with a 'jobs' list");
  }
  std::vector<JobSpec> out;
  std::set<std::string> names;
  for (size_t i = 0; i < root["jobs"].size(); ++i) {
    const std::string field = absl::StrCat("jobs[", i, "]");
    RM_ASSIGN_OR_RETURN(auto j, ParseJob(c, root["jobs"][i], field));
    if (!names.insert(j.name).second) return c.Err(root["jobs"][i], field + ".name", "duplicate job name");
    out.push_back(std::move(j));
  }
  return out;
}

absl::StatusOr<std::vector<JobSpec>> LoadJobFile(const std::string& path) {
  std::ifstream in(path);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot open the jobs file"));
  std::stringstream ss;
  ss << in.rdbuf();
  return ParseJobFile(ss.str(), path);
}

}  // namespace ringmaster::scheduler
