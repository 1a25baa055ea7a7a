// Reading and writing the extender v1 wire types (see extender_wire.h).
#include "server/extender/extender_wire.h"

#include "server/extender/extender_wire_fast.h"

#include <cctype>
#include <utility>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::server {
namespace {

using nlohmann::json;

bool EqualFold(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

absl::Status TypeError(std::string_view path, std::string_view want, const json& got) {
  return absl::InvalidArgumentError(
      absl::StrCat(std::string(path), ": expected ", std::string(want), ", got ", got.type_name()));
}

// Kubernetes objects nest a few dozen levels at most. nlohmann::json parses
// any depth without recursion, but copying, comparing and writing a value
// recurse once per level: a body of a few hundred KiB of '[' would overflow
// the stack of the thread answering it.
constexpr int kMaxJsonDepth = 128;

// The byte offset where `body` first nests deeper than kMaxJsonDepth, if it
// does (brackets inside strings do not count).
std::optional<size_t> TooDeep(std::string_view body) {
  int depth = 0;
  bool in_string = false;
  for (size_t i = 0; i < body.size(); ++i) {
    const char c = body[i];
    if (in_string) {
      if (c == '\\') {
        ++i;
      } else if (c == '"') {
        in_string = false;
      }
    } else if (c == '"') {
      in_string = true;
    } else if (c == '[' || c == '{') {
      if (++depth > kMaxJsonDepth) return i;
    } else if (c == ']' || c == '}') {
      --depth;
    }
  }
  return std::nullopt;
}

// Parses the body; a syntax error names the byte where it was found.
absl::StatusOr<json> ParseBody(std::string_view body) {
  if (const std::optional<size_t> at = TooDeep(body)) {
    return absl::InvalidArgumentError(
        absl::StrCat("JSON nested deeper than ", kMaxJsonDepth, " levels at byte ", *at));
  }
  json j = json::parse(body.begin(), body.end(), nullptr, /*allow_exceptions=*/false);
  if (!j.is_discarded()) return j;
  // Parse again with exceptions to learn where it broke.
  try {
    const json again = json::parse(body.begin(), body.end());
    (void)again;
  } catch (const json::parse_error& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed JSON at byte ", e.byte, ": ", e.what()));
  } catch (const std::exception& e) {
    return absl::InvalidArgumentError(absl::StrCat("malformed JSON: ", e.what()));
  }
  return absl::InvalidArgumentError("malformed JSON");
}

// FindKey for a DOM the parser owns and hands on by moving its parts.
json* MutableKey(json& obj, std::string_view key) { return const_cast<json*>(FindKey(obj, key)); }

absl::Status WantObject(const json& j, std::string_view path) {
  return j.is_object() ? absl::OkStatus() : TypeError(path, "an object", j);
}

absl::StatusOr<int64_t> IntAt(const json& obj, std::string_view key, std::string_view path) {
  const json* v = FindKey(obj, key);
  if (v == nullptr || v->is_null()) return 0;
  if (!v->is_number_integer()) return TypeError(path, "an integer", *v);
  return v->get<int64_t>();
}

// A list of strings, or nullopt when absent or null.
absl::StatusOr<std::optional<std::vector<std::string>>> StringListAt(const json& obj, std::string_view key,
                                                                     std::string_view path) {
  const json* v = FindKey(obj, key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_array()) return TypeError(path, "an array of strings", *v);
  std::vector<std::string> out;
  out.reserve(v->size());
  for (size_t i = 0; i < v->size(); ++i) {
    const json& e = (*v)[i];
    if (!e.is_string()) return TypeError(absl::StrCat(std::string(path), "[", i, "]"), "a string", e);
    out.push_back(e.get<std::string>());
  }
  return out;
}

// A Pod (or Node) object: must be an object when present.
absl::StatusOr<json> ObjectAt(json& obj, std::string_view key, std::string_view path) {
  json* v = MutableKey(obj, key);
  if (v == nullptr || v->is_null()) return json::object();
  if (!v->is_object()) return TypeError(path, "an object", *v);
  return std::move(*v);  // the request's DOM is not used again: move, not copy
}

// A NodeList's items, or nullopt when the list is absent or null.
absl::StatusOr<std::optional<std::vector<json>>> NodeListAt(json& obj, std::string_view key,
                                                            std::string_view path) {
  json* v = MutableKey(obj, key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_object()) return TypeError(path, "a NodeList object", *v);
  json* items = MutableKey(*v, "items");
  std::vector<json> out;
  if (items == nullptr || items->is_null()) return out;
  const std::string items_path = absl::StrCat(std::string(path), ".items");
  if (!items->is_array()) return TypeError(items_path, "an array", *items);
  out.reserve(items->size());
  for (size_t i = 0; i < items->size(); ++i) {
    if (!(*items)[i].is_object()) return TypeError(absl::StrCat(items_path, "[", i, "]"), "a Node object", (*items)[i]);
    out.push_back(std::move((*items)[i]));
  }
  return out;
}

absl::StatusOr<std::map<std::string, std::string>> StringMapAt(const json& obj, std::string_view key,
                                                               std::string_view path) {
  std::map<std::string, std::string> out;
  const json* v = FindKey(obj, key);
  if (v == nullptr || v->is_null()) return out;
  if (!v->is_object()) return TypeError(path, "an object of strings", *v);
  for (const auto& [k, e] : v->items()) {
    if (!e.is_string()) return TypeError(absl::StrCat(std::string(path), ".", k), "a string", e);
    out[k] = e.get<std::string>();
  }
  return out;
}

// Victims (full pods) or MetaVictims (UIDs) of one node.
absl::StatusOr<MetaVictims> ParseMetaVictims(const json& v, const std::string& path) {
  RM_RETURN_IF_ERROR(WantObject(v, path));
  MetaVictims out;
  RM_ASSIGN_OR_RETURN(out.num_pdb_violations, IntAt(v, "NumPDBViolations", path + ".NumPDBViolations"));
  const json* pods = FindKey(v, "Pods");
  if (pods == nullptr || pods->is_null()) return out;
  if (!pods->is_array()) return TypeError(path + ".Pods", "an array", *pods);
  for (size_t i = 0; i < pods->size(); ++i) {
    const std::string p = absl::StrCat(path, ".Pods[", i, "]");
    if (!(*pods)[i].is_object()) return TypeError(p, "a MetaPod object", (*pods)[i]);
    RM_ASSIGN_OR_RETURN(std::string uid, StringAt((*pods)[i], "UID", p + ".UID"));
    out.pod_uids.push_back(std::move(uid));
  }
  return out;
}

absl::StatusOr<Victims> ParseVictims(const json& v, const std::string& path) {
  RM_RETURN_IF_ERROR(WantObject(v, path));
  Victims out;
  RM_ASSIGN_OR_RETURN(out.num_pdb_violations, IntAt(v, "NumPDBViolations", path + ".NumPDBViolations"));
  const json* pods = FindKey(v, "Pods");
  if (pods == nullptr || pods->is_null()) return out;
  if (!pods->is_array()) return TypeError(path + ".Pods", "an array", *pods);
  for (size_t i = 0; i < pods->size(); ++i) {
    if (!(*pods)[i].is_object()) return TypeError(absl::StrCat(path, ".Pods[", i, "]"), "a Pod object", (*pods)[i]);
    out.pods.push_back((*pods)[i]);
  }
  return out;
}

template <typename V, typename F>
absl::StatusOr<std::optional<std::map<std::string, V>>> VictimMapAt(const json& obj, std::string_view key, F parse) {
  const json* v = FindKey(obj, key);
  if (v == nullptr || v->is_null()) return std::nullopt;
  if (!v->is_object()) return TypeError(key, "an object keyed by node name", *v);
  std::map<std::string, V> out;
  for (const auto& [node, e] : v->items()) {
    RM_ASSIGN_OR_RETURN(V parsed, parse(e, absl::StrCat(std::string(key), ".", node)));
    out.emplace(node, std::move(parsed));
  }
  return out;
}

json NodeListJson(const std::optional<std::vector<json>>& items) {
  if (!items) return nullptr;
  return json{{"metadata", json::object()}, {"items", *items}};
}

json NodeListJson(const std::optional<std::vector<NodeObject>>& items) {
  if (!items) return nullptr;
  json list = json::array();
  for (const NodeObject& n : *items) list.push_back(n.json());
  return json{{"metadata", json::object()}, {"items", std::move(list)}};
}

json StringListJson(const std::optional<std::vector<std::string>>& names) {
  if (!names) return nullptr;
  return *names;
}

json MetaVictimsJson(const MetaVictims& v) {
  json pods = json::array();
  for (const std::string& uid : v.pod_uids) pods.push_back({{"UID", uid}});
  return {{"Pods", std::move(pods)}, {"NumPDBViolations", v.num_pdb_violations}};
}

}  // namespace

const json* FindKey(const json& obj, std::string_view key) {
  if (!obj.is_object()) return nullptr;
  auto it = obj.find(key);
  if (it != obj.end()) return &*it;
  for (auto i = obj.begin(); i != obj.end(); ++i) {
    if (EqualFold(i.key(), key)) return &*i;
  }
  return nullptr;
}

absl::StatusOr<std::string> StringAt(const json& obj, std::string_view key, std::string_view path) {
  const json* v = FindKey(obj, key);
  if (v == nullptr || v->is_null()) return std::string();
  if (!v->is_string()) return TypeError(path, "a string", *v);
  return v->get<std::string>();
}

namespace {
// A node's Text with a text of its own (which `text` points into: the
// object is made in place and never moves).
struct OwnedText {
  NodeObject::Text read;
  std::string text;
};
std::shared_ptr<const NodeObject::Text> MakeOwned(std::string name, std::string uid, std::string text) {
  auto owned = std::make_shared<OwnedText>();
  owned->text = std::move(text);
  owned->read = {std::move(name), std::move(uid), owned->text, {}};
  return std::shared_ptr<const NodeObject::Text>(owned, &owned->read);
}
}  // namespace

NodeObject::NodeObject(nlohmann::json object) {
  const nlohmann::json* meta = FindKey(object, "metadata");
  const nlohmann::json* name = meta ? FindKey(*meta, "name") : nullptr;
  const nlohmann::json* uid = meta ? FindKey(*meta, "uid") : nullptr;
  read_ = MakeOwned(name && name->is_string() ? name->get<std::string>() : std::string(),
                    uid && uid->is_string() ? uid->get<std::string>() : std::string(),
                    object.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace));
  json_ = std::move(object);
}

NodeObject NodeObject::FromShared(std::shared_ptr<const Text> read) { return NodeObject(std::move(read)); }

NodeObject NodeObject::Owning(std::string name, std::string uid, std::string_view text) {
  return NodeObject(MakeOwned(std::move(name), std::move(uid), std::string(text)));
}

const nlohmann::json& NodeObject::json() const {
  if (!json_) {
    // The text was valid JSON when it was read (or written by dump).
    json_ = nlohmann::json::parse(text(), nullptr, /*allow_exceptions=*/false);
  }
  return *json_;
}

std::vector<NodeObject> NodeObjects(const std::vector<nlohmann::json>& objects) {
  return std::vector<NodeObject>(objects.begin(), objects.end());
}

std::vector<std::string> ExtenderArgs::CandidateNames() const {
  if (node_names) return *node_names;
  std::vector<std::string> out;
  if (!nodes) return out;
  out.reserve(nodes->size());
  for (const NodeObject& n : *nodes) out.push_back(n.name());
  return out;
}

absl::StatusOr<ExtenderArgs> ParseExtenderArgs(std::string_view body) { return ParseExtenderArgsPadded(body, 0); }

absl::StatusOr<ExtenderArgs> ParseExtenderArgsPadded(std::string_view body, size_t readable_past_end) {
  if (std::optional<ExtenderArgs> fast = internal::ParseExtenderArgsFast(body, readable_past_end)) {
    return *std::move(fast);
  }
  return internal::ParseExtenderArgsDom(body);
}

absl::StatusOr<ExtenderArgs> ParseExtenderArgsOwned(std::string body) {
  auto owned = std::make_shared<const std::string>(std::move(body));
  const std::string_view text(*owned);
  if (std::optional<ExtenderArgs> fast =
          internal::ParseExtenderArgsFast(text, owned->capacity() - owned->size(), owned)) {
    return *std::move(fast);
  }
  return internal::ParseExtenderArgsDom(text);
}

absl::StatusOr<ExtenderArgs> internal::ParseExtenderArgsDom(std::string_view body) {
  RM_ASSIGN_OR_RETURN(json j, ParseBody(body));
  RM_RETURN_IF_ERROR(WantObject(j, "ExtenderArgs"));
  ExtenderArgs a;
  RM_ASSIGN_OR_RETURN(a.pod, ObjectAt(j, "Pod", "Pod"));
  RM_ASSIGN_OR_RETURN(std::optional<std::vector<json>> nodes, NodeListAt(j, "Nodes", "Nodes"));
  if (nodes) a.nodes.emplace(std::make_move_iterator(nodes->begin()), std::make_move_iterator(nodes->end()));
  RM_ASSIGN_OR_RETURN(a.node_names, StringListAt(j, "NodeNames", "NodeNames"));
  return a;
}

absl::StatusOr<ExtenderBindingArgs> ParseExtenderBindingArgs(std::string_view body) {
  RM_ASSIGN_OR_RETURN(json j, ParseBody(body));
  RM_RETURN_IF_ERROR(WantObject(j, "ExtenderBindingArgs"));
  ExtenderBindingArgs a;
  for (auto [key, field] : {std::pair{"PodName", &a.pod_name}, std::pair{"PodNamespace", &a.pod_namespace},
                            std::pair{"PodUID", &a.pod_uid}, std::pair{"Node", &a.node}}) {
    RM_ASSIGN_OR_RETURN(*field, StringAt(j, key, key));
  }
  return a;
}

absl::StatusOr<ExtenderPreemptionArgs> ParseExtenderPreemptionArgs(std::string_view body) {
  RM_ASSIGN_OR_RETURN(json j, ParseBody(body));
  RM_RETURN_IF_ERROR(WantObject(j, "ExtenderPreemptionArgs"));
  ExtenderPreemptionArgs a;
  RM_ASSIGN_OR_RETURN(a.pod, ObjectAt(j, "Pod", "Pod"));
  RM_ASSIGN_OR_RETURN(a.node_name_to_victims, VictimMapAt<Victims>(j, "NodeNameToVictims", ParseVictims));
  RM_ASSIGN_OR_RETURN(a.node_name_to_meta_victims, VictimMapAt<MetaVictims>(j, "NodeNameToMetaVictims", ParseMetaVictims));
  return a;
}

absl::StatusOr<ExtenderFilterResult> ParseExtenderFilterResult(std::string_view body) {
  RM_ASSIGN_OR_RETURN(json j, ParseBody(body));
  RM_RETURN_IF_ERROR(WantObject(j, "ExtenderFilterResult"));
  ExtenderFilterResult r;
  RM_ASSIGN_OR_RETURN(r.nodes, NodeListAt(j, "Nodes", "Nodes"));
  RM_ASSIGN_OR_RETURN(r.node_names, StringListAt(j, "NodeNames", "NodeNames"));
  RM_ASSIGN_OR_RETURN(r.failed_nodes, StringMapAt(j, "FailedNodes", "FailedNodes"));
  RM_ASSIGN_OR_RETURN(r.failed_and_unresolvable_nodes, StringMapAt(j, "FailedAndUnresolvableNodes", "FailedAndUnresolvableNodes"));
  RM_ASSIGN_OR_RETURN(r.error, StringAt(j, "Error", "Error"));
  return r;
}

absl::StatusOr<HostPriorityList> ParseHostPriorityList(std::string_view body) {
  RM_ASSIGN_OR_RETURN(json j, ParseBody(body));
  HostPriorityList out;
  if (j.is_null()) return out;
  if (!j.is_array()) return TypeError("HostPriorityList", "an array", j);
  for (size_t i = 0; i < j.size(); ++i) {
    const std::string path = absl::StrCat("HostPriorityList[", i, "]");
    const json& e = j[i];
    RM_RETURN_IF_ERROR(WantObject(e, path));
    RM_ASSIGN_OR_RETURN(std::string host, StringAt(e, "Host", path + ".Host"));
    RM_ASSIGN_OR_RETURN(int64_t score, IntAt(e, "Score", path + ".Score"));
    out.push_back({std::move(host), score});
  }
  return out;
}

absl::StatusOr<ExtenderBindingResult> ParseExtenderBindingResult(std::string_view body) {
  RM_ASSIGN_OR_RETURN(json j, ParseBody(body));
  RM_RETURN_IF_ERROR(WantObject(j, "ExtenderBindingResult"));
  RM_ASSIGN_OR_RETURN(std::string error, StringAt(j, "Error", "Error"));
  return ExtenderBindingResult{std::move(error)};
}

absl::StatusOr<ExtenderPreemptionResult> ParseExtenderPreemptionResult(std::string_view body) {
  RM_ASSIGN_OR_RETURN(json j, ParseBody(body));
  RM_RETURN_IF_ERROR(WantObject(j, "ExtenderPreemptionResult"));
  RM_ASSIGN_OR_RETURN(auto meta, VictimMapAt<MetaVictims>(j, "NodeNameToMetaVictims", ParseMetaVictims));
  ExtenderPreemptionResult r;
  if (meta) r.node_name_to_meta_victims = *std::move(meta);
  return r;
}

std::string ToJson(const ExtenderArgs& a) {
  json j{{"Pod", a.pod}, {"Nodes", NodeListJson(a.nodes)}, {"NodeNames", StringListJson(a.node_names)}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ToJson(const ExtenderFilterResult& r) {
  json j{{"Nodes", NodeListJson(r.nodes)},
         {"NodeNames", StringListJson(r.node_names)},
         {"FailedNodes", r.failed_nodes},
         {"FailedAndUnresolvableNodes", r.failed_and_unresolvable_nodes},
         {"Error", r.error}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ToJson(const HostPriorityList& l) {
  json j = json::array();
  for (const HostPriority& h : l) j.push_back({{"Host", h.host}, {"Score", h.score}});
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ToJson(const ExtenderBindingArgs& a) {
  json j{{"PodName", a.pod_name}, {"PodNamespace", a.pod_namespace}, {"PodUID", a.pod_uid}, {"Node", a.node}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ToJson(const ExtenderBindingResult& r) { return json{{"Error", r.error}}.dump(-1, ' ', false, json::error_handler_t::replace); }

std::string ToJson(const ExtenderPreemptionArgs& a) {
  json full = nullptr;
  if (a.node_name_to_victims) {
    full = json::object();
    for (const auto& [node, v] : *a.node_name_to_victims) {
      full[node] = {{"Pods", v.pods}, {"NumPDBViolations", v.num_pdb_violations}};
    }
  }
  json meta = nullptr;
  if (a.node_name_to_meta_victims) {
    meta = json::object();
    for (const auto& [node, v] : *a.node_name_to_meta_victims) meta[node] = MetaVictimsJson(v);
  }
  json j{{"Pod", a.pod}, {"NodeNameToVictims", std::move(full)}, {"NodeNameToMetaVictims", std::move(meta)}};
  return j.dump(-1, ' ', false, json::error_handler_t::replace);
}

std::string ToJson(const ExtenderPreemptionResult& r) {
  json meta = json::object();
  for (const auto& [node, v] : r.node_name_to_meta_victims) meta[node] = MetaVictimsJson(v);
  return json{{"NodeNameToMetaVictims", std::move(meta)}}.dump(-1, ' ', false, json::error_handler_t::replace);
}

}  // namespace ringmaster::server
