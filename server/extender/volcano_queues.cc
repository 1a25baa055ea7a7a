#include "server/extender/volcano_queues.h"

#include <limits>
#include <set>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "server/extender/kube_objects.h"

namespace ringmaster::server {
namespace {

using nlohmann::json;

const json* Find(const json& obj, const char* key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  return it == obj.end() || it->is_null() ? nullptr : &*it;
}

// A resource map ({cpu: "8", memory: 16Gi, nvidia.com/gpu: 4}) into `out`;
// `unset_unlimited` makes the fixed dimensions it does not name unlimited
// (a capability). `where` is "Volcano Queue 'ml': spec.capability".
absl::Status ReadResources(const json& map, const std::string& where, bool unset_unlimited, topology::Resources* out) {
  if (!map.is_object()) {
    return absl::InvalidArgumentError(
        absl::StrCat(where, ": must be a map of resource names to quantities, e.g. {cpu: \"8\", nvidia.com/gpu: 4}"));
  }
  topology::Resources r;
  bool cpu = false, memory = false, gpu = false;
  for (const auto& [key, value] : map.items()) {
    std::string text;
    if (value.is_string()) {
      text = value.get<std::string>();
    } else if (value.is_number_integer() || value.is_number_unsigned()) {
      text = value.dump();
    } else if (value.is_number_float()) {
      text = value.dump();
    } else {
      return absl::InvalidArgumentError(absl::StrCat(where, ".", key, ": must be a quantity (a string or a number)"));
    }
    const bool is_gpu = key == kGpuResource || key == "gpu";
    const bool milli = key == "cpu" || is_gpu;
    auto q = ParseKubeQuantity(text, milli);
    if (!q.ok()) return absl::InvalidArgumentError(absl::StrCat(where, ".", key, ": ", q.status().message()));
    if (key == "cpu") {
      r.set_cpu_milli(*q);
      cpu = true;
    } else if (key == "memory") {
      r.set_memory(*q);
      memory = true;
    } else if (is_gpu) {
      r.set_gpu_milli(*q);
      gpu = true;
    } else {
      r.set_scalar(key, *q);
    }
  }
  if (unset_unlimited) {
    if (!cpu) r.set_cpu_milli(topology::kUnlimited);
    if (!memory) r.set_memory(topology::kUnlimited);
    if (!gpu) r.set_gpu_milli(topology::kUnlimited);
  }
  *out = r;
  return absl::OkStatus();
}

absl::StatusOr<int64_t> ReadInt(const json& v, const std::string& where, int64_t lo, int64_t hi) {
  int64_t n = 0;
  if (v.is_number_integer()) {
    n = v.get<int64_t>();
  } else if (v.is_number_unsigned()) {
    const uint64_t u = v.get<uint64_t>();
    n = u > static_cast<uint64_t>(std::numeric_limits<int64_t>::max()) ? std::numeric_limits<int64_t>::max()
                                                                        : static_cast<int64_t>(u);
  } else {
    return absl::InvalidArgumentError(absl::StrCat(where, ": must be an integer, not ", v.dump()));
  }
  if (n < lo || n > hi) {
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", n, " is out of range [", lo, ", ", hi, "]"));
  }
  return n;
}

}  // namespace

absl::StatusOr<VolcanoQueues> ReadVolcanoQueueList(const json& list) {
  const json* items = Find(list, "items");
  if (items == nullptr || !items->is_array()) {
    return absl::InvalidArgumentError("Volcano QueueList: not a list with items");
  }
  VolcanoQueues out;
  std::set<std::string> seen;
  for (size_t i = 0; i < items->size(); ++i) {
    const json& item = (*items)[i];
    const json* meta = Find(item, "metadata");
    const json* name_v = meta ? Find(*meta, "name") : nullptr;
    if (name_v == nullptr || !name_v->is_string() || name_v->get<std::string>().empty()) {
      return absl::InvalidArgumentError(absl::StrCat("Volcano QueueList: items[", i, "]: metadata.name: missing"));
    }
    const std::string name = name_v->get<std::string>();
    const std::string where = absl::StrCat("Volcano Queue '", name, "'");
    if (!seen.insert(name).second) return absl::InvalidArgumentError(absl::StrCat(where, ": listed twice"));
    static const json kEmpty = json::object();
    const json* spec_p = Find(item, "spec");
    const json& spec = spec_p ? *spec_p : kEmpty;
    if (!spec.is_object()) return absl::InvalidArgumentError(absl::StrCat(where, ": spec: must be an object"));
    if (name == "root") {
      if (Find(spec, "capability") != nullptr || Find(spec, "guarantee") != nullptr) {
        out.notes.push_back(absl::StrCat(where, ": capability and guarantee not carried over (ringmaster's root is "
                                         "the whole cluster; limit its children instead)"));
      }
      continue;
    }
    queue::QueueSpec q;
    q.name = name;
    for (const auto& [key, value] : spec.items()) {
      if (value.is_null()) continue;
      const std::string field = absl::StrCat(where, ": spec.", key);
      if (key == "weight") {
        RM_ASSIGN_OR_RETURN(q.weight, ReadInt(value, field, 1, std::numeric_limits<int32_t>::max()));
      } else if (key == "capability") {
        topology::Resources cap;
        RM_RETURN_IF_ERROR(ReadResources(value, field, /*unset_unlimited=*/true, &cap));
        q.capability = cap;
      } else if (key == "guarantee") {
        if (!value.is_object()) return absl::InvalidArgumentError(absl::StrCat(field, ": must be {resource: {...}}"));
        if (const json* res = Find(value, "resource")) {
          RM_RETURN_IF_ERROR(ReadResources(*res, field + ".resource", /*unset_unlimited=*/false, &q.guarantee));
        }
      } else if (key == "reclaimable") {
        if (!value.is_boolean()) return absl::InvalidArgumentError(absl::StrCat(field, ": must be true or false"));
        q.reclaimable = value.get<bool>();
      } else if (key == "priority") {
        RM_ASSIGN_OR_RETURN(const int64_t p, ReadInt(value, field, std::numeric_limits<int32_t>::min(),
                                                     std::numeric_limits<int32_t>::max()));
        q.priority = static_cast<int32_t>(p);
      } else if (key == "parent") {
        if (!value.is_string()) return absl::InvalidArgumentError(absl::StrCat(field, ": must be a queue name"));
        const std::string parent = value.get<std::string>();
        q.parent = parent == "root" ? "" : parent;
      } else if (key == "deserved") {
        out.notes.push_back(absl::StrCat(field, ": not carried over (ringmaster's proportion plugin computes each "
                                         "queue's deserved share from weights and guarantees; set weight, or "
                                         "guarantee for a floor)"));
      } else {
        out.notes.push_back(absl::StrCat(field, ": not carried over (no ringmaster counterpart)"));
      }
    }
    if (const json* status = Find(item, "status")) {
      const json* state = Find(*status, "state");
      if (state != nullptr && state->is_string() && state->get<std::string>() != "Open" &&
          !state->get<std::string>().empty()) {
        out.notes.push_back(absl::StrCat(where, ": state ", state->get<std::string>(),
                                         " not carried over (ringmaster accepts jobs into every queue it has; "
                                         "delete the Queue once it is empty to close it)"));
      }
    }
    out.specs.push_back(std::move(q));
  }
  return out;
}

}  // namespace ringmaster::server
