// The simdjson fast path of ParseExtenderArgs (see extender_wire_fast.h).
#include "server/extender/extender_wire_fast.h"

#include <cctype>
#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include <simdjson.h>

namespace ringmaster::server::internal {
namespace {

using nlohmann::json;
namespace dom = simdjson::dom;

// The reference parser's limit (extender_wire.cc): containers nested deeper
// than this are refused there, so they leave the fast path here.
constexpr int kMaxJsonDepth = 128;

bool EqualFold(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) != std::tolower(static_cast<unsigned char>(b[i]))) return false;
  }
  return true;
}

bool IsContainer(const dom::element& e) {
  return e.type() == dom::element_type::ARRAY || e.type() == dom::element_type::OBJECT;
}

// `key` of `obj` as FindKey reads a parsed object: an exact match (the last
// one, as a parsed object keeps the last of repeated keys), else the one key
// that equals it case-insensitively. False when that is ambiguous (two
// different spellings) — the reference path then decides.
bool Lookup(const dom::object& obj, std::string_view key, std::optional<dom::element>& out) {
  std::optional<dom::element> exact;
  std::optional<dom::element> folded;
  std::string_view folded_key;
  for (dom::key_value_pair kv : obj) {
    if (kv.key == key) {
      exact = kv.value;
    } else if (EqualFold(kv.key, key)) {
      if (folded && kv.key != folded_key) return false;
      folded = kv.value;
      folded_key = kv.key;
    }
  }
  out = exact ? exact : folded;
  return true;
}

// Nesting within the limit below `e` (which sits at `level` containers deep
// when it is one itself).
bool DepthOk(const dom::element& e, int parent_level) {
  if (!IsContainer(e)) return true;
  const int level = parent_level + 1;
  if (level > kMaxJsonDepth) return false;
  if (e.type() == dom::element_type::ARRAY) {
    for (dom::element c : dom::array(e)) {
      if (!DepthOk(c, level)) return false;
    }
  } else {
    for (dom::key_value_pair kv : dom::object(e)) {
      if (!DepthOk(kv.value, level)) return false;
    }
  }
  return true;
}

// `e` as nlohmann::json, as nlohmann's parser would have built it: a
// non-negative integer is unsigned, a negative one signed; the last of
// repeated keys wins. False past the depth limit.
bool Convert(const dom::element& e, int parent_level, json& out) {
  switch (e.type()) {
    case dom::element_type::OBJECT: {
      const int level = parent_level + 1;
      if (level > kMaxJsonDepth) return false;
      out = json::object();
      for (dom::key_value_pair kv : dom::object(e)) {
        json v;
        if (!Convert(kv.value, level, v)) return false;
        out[std::string(kv.key)] = std::move(v);
      }
      return true;
    }
    case dom::element_type::ARRAY: {
      const int level = parent_level + 1;
      if (level > kMaxJsonDepth) return false;
      out = json::array();
      for (dom::element c : dom::array(e)) {
        json v;
        if (!Convert(c, level, v)) return false;
        out.push_back(std::move(v));
      }
      return true;
    }
    case dom::element_type::STRING:
      out = std::string(std::string_view(e));
      return true;
    case dom::element_type::INT64: {
      const int64_t v = int64_t(e);
      if (v >= 0) {
        out = static_cast<uint64_t>(v);
      } else {
        out = v;
      }
      return true;
    }
    case dom::element_type::UINT64:
      out = uint64_t(e);
      return true;
    case dom::element_type::DOUBLE:
      out = double(e);
      return true;
    case dom::element_type::BOOL:
      out = bool(e);
      return true;
    case dom::element_type::NULL_VALUE:
      out = nullptr;
      return true;
  }
  return false;
}

bool IsNull(const std::optional<dom::element>& e) { return !e || e->type() == dom::element_type::NULL_VALUE; }

}  // namespace

std::optional<ExtenderArgs> ParseExtenderArgsFast(std::string_view body, size_t readable_past_end) {
  // One parser per thread: it keeps its buffers between requests.
  thread_local dom::parser parser;
  dom::element root;
  // Without the padding simdjson copies the body into a padded buffer first.
  const bool copy = readable_past_end < simdjson::SIMDJSON_PADDING;
  if (parser.parse(body.data(), body.size(), copy).get(root) != simdjson::SUCCESS) return std::nullopt;
  if (root.type() != dom::element_type::OBJECT) return std::nullopt;
  const dom::object top(root);
  for (dom::key_value_pair kv : top) {
    if (!EqualFold(kv.key, "Pod") && !EqualFold(kv.key, "Nodes") && !EqualFold(kv.key, "NodeNames")) {
      return std::nullopt;
    }
  }
  std::optional<dom::element> pod, nodes, names;
  if (!Lookup(top, "Pod", pod) || !Lookup(top, "Nodes", nodes) || !Lookup(top, "NodeNames", names)) {
    return std::nullopt;
  }
  ExtenderArgs a;
  // Pod: an object, or absent / null.
  if (IsNull(pod)) {
    a.pod = json::object();
  } else if (pod->type() != dom::element_type::OBJECT || !Convert(*pod, 1, a.pod)) {
    return std::nullopt;
  }
  // Nodes: a NodeList object whose items are Node objects.
  if (!IsNull(nodes)) {
    if (nodes->type() != dom::element_type::OBJECT) return std::nullopt;
    const dom::object list(*nodes);
    std::optional<dom::element> items;
    if (!Lookup(list, "items", items)) return std::nullopt;
    for (dom::key_value_pair kv : list) {
      if (!EqualFold(kv.key, "items") && !DepthOk(kv.value, 2)) return std::nullopt;
    }
    a.nodes.emplace();
    if (!IsNull(items)) {
      if (items->type() != dom::element_type::ARRAY) return std::nullopt;
      const dom::array arr(*items);
      a.nodes->reserve(arr.size());
      for (dom::element n : arr) {
        if (n.type() != dom::element_type::OBJECT) return std::nullopt;
        json node;
        if (!Convert(n, 3, node)) return std::nullopt;
        a.nodes->push_back(std::move(node));
      }
    }
  }
  // NodeNames: strings.
  if (!IsNull(names)) {
    if (names->type() != dom::element_type::ARRAY) return std::nullopt;
    const dom::array arr(*names);
    a.node_names.emplace();
    a.node_names->reserve(arr.size());
    for (dom::element n : arr) {
      if (n.type() != dom::element_type::STRING) return std::nullopt;
      a.node_names->emplace_back(std::string_view(n));
    }
  }
  return a;
}

bool SameArgs(const ExtenderArgs& a, const ExtenderArgs& b) {
  return a.pod == b.pod && a.nodes == b.nodes && a.node_names == b.node_names;
}

}  // namespace ringmaster::server::internal
