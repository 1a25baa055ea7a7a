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
// `chosen`, when given, gets the spelling of the key read (the last member
// of that spelling is the one read).
bool Lookup(const dom::object& obj, std::string_view key, std::optional<dom::element>& out,
            std::string_view* chosen = nullptr) {
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
  if (chosen != nullptr) *chosen = exact ? key : folded_key;
  return true;
}

// The JSON text of each item of the node list, as (offset, length) in
// `text`: the members `nodes_key` of the top object and `items_key` of it
// (the last of each spelling, as the DOM read them). `text` is valid JSON
// (the DOM parsed it) readable SIMDJSON_PADDING bytes past its end. False
// when the items found are not `count` objects.
bool ItemSpans(std::string_view text, std::string_view nodes_key, std::string_view items_key, size_t count,
               std::vector<std::pair<size_t, size_t>>& spans) {
  namespace od = simdjson::ondemand;
  thread_local od::parser parser;
  od::document doc;
  if (parser.iterate(text.data(), text.size(), text.size() + simdjson::SIMDJSON_PADDING).get(doc)) return false;
  od::object top;
  if (doc.get_object().get(top)) return false;
  bool found = false;
  for (auto field : top) {
    std::string_view key;
    if (field.unescaped_key().get(key)) return false;
    if (key != nodes_key) continue;
    od::object list;
    if (field.value().get_object().get(list)) return false;
    for (auto member : list) {
      std::string_view k;
      if (member.unescaped_key().get(k)) return false;
      if (k != items_key) continue;
      od::array items;
      if (member.value().get_array().get(items)) return false;
      spans.clear();
      for (auto item : items) {
        od::object node;
        std::string_view raw;
        if (item.get_object().get(node) || node.raw_json().get(raw)) return false;
        spans.emplace_back(static_cast<size_t>(raw.data() - text.data()), raw.size());
      }
      found = true;
    }
  }
  return found && spans.size() == count;
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
  // One parser per thread: it keeps its buffers between requests. Its depth
  // limit is the reference's, so a document nested deeper fails here
  // (DEPTH_ERROR) and the reference says where; node objects need no walk.
  thread_local dom::parser parser;
  thread_local const bool depth_set = parser.allocate(simdjson::dom::MINIMAL_DOCUMENT_CAPACITY, kMaxJsonDepth) ==
                                      simdjson::SUCCESS;
  if (!depth_set) return std::nullopt;
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
  std::string_view nodes_key, items_key;
  if (!Lookup(top, "Pod", pod) || !Lookup(top, "Nodes", nodes, &nodes_key) || !Lookup(top, "NodeNames", names)) {
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
    if (!Lookup(list, "items", items, &items_key)) return std::nullopt;
    for (dom::key_value_pair kv : list) {
      if (!EqualFold(kv.key, "items") && !DepthOk(kv.value, 2)) return std::nullopt;
    }
    a.nodes.emplace();
    if (!IsNull(items)) {
      if (items->type() != dom::element_type::ARRAY) return std::nullopt;
      const dom::array arr(*items);
      a.nodes->reserve(arr.size());
      // One copy of the body, padded for the on-demand pass, that the nodes'
      // texts point into.
      auto buffer = std::make_shared<std::string>();
      buffer->reserve(body.size() + simdjson::SIMDJSON_PADDING);
      buffer->assign(body);
      std::vector<std::pair<size_t, size_t>> spans;
      if (!ItemSpans(*buffer, nodes_key, items_key, arr.size(), spans)) return std::nullopt;
      size_t i = 0;
      for (dom::element n : arr) {
        if (n.type() != dom::element_type::OBJECT) return std::nullopt;
        // Only metadata.name and .uid are read now (as FindKey would); the
        // object stays text until it is needed (NodeObject).
        std::string name, uid;
        std::optional<dom::element> meta;
        if (!Lookup(dom::object(n), "metadata", meta)) return std::nullopt;
        if (meta && meta->type() == dom::element_type::OBJECT) {
          std::optional<dom::element> v;
          if (!Lookup(dom::object(*meta), "name", v)) return std::nullopt;
          if (v && v->type() == dom::element_type::STRING) name = std::string_view(*v);
          if (!Lookup(dom::object(*meta), "uid", v)) return std::nullopt;
          if (v && v->type() == dom::element_type::STRING) uid = std::string_view(*v);
        }
        a.nodes->push_back(NodeObject::FromText(std::move(name), std::move(uid), buffer, spans[i].first, spans[i].second));
        ++i;
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
