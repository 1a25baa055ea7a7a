// The simdjson fast path of ParseExtenderArgs (see extender_wire_fast.h).
#include "server/extender/extender_wire_fast.h"

#include <cctype>
#include <memory>
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

// Where the node list sits in `text` (valid JSON, just parsed by `parser`):
// the span of the top object's member `nodes_key` (its value's JSON text) and
// of each item of that value's member `items_key` — the last of each
// spelling, as the DOM read them. Read from the tokens stage 1 found (the
// position of every structural character and of every scalar's first byte),
// so no second parse. False when a key on the way holds an escape (the
// reference path then reads the request) or the items found are not `count`
// objects.
struct Span {
  size_t offset = 0;
  size_t length = 0;
};
bool NodeListSpans(const dom::parser& parser, std::string_view text, std::string_view nodes_key,
                   std::string_view items_key, size_t count, Span& list, std::vector<Span>& spans) {
  const uint32_t* at = parser.implementation->structural_indexes.get();
  const uint32_t n = parser.implementation->n_structural_indexes;
  enum class Key { kNone, kNodes, kItems };
  Key pending = Key::kNone;  // the key whose value comes next
  int depth = 0;
  bool in_list = false;   // inside the value of the top object's nodes_key
  bool in_items = false;  // inside that value's items_key array
  bool found = false;
  size_t list_begin = 0;
  size_t item_begin = 0;
  std::vector<Span> current;
  for (uint32_t i = 0; i < n; ++i) {
    const size_t pos = at[i];
    if (pos >= text.size()) return false;
    const char c = text[pos];
    switch (c) {
      case '{':
      case '[':
        if (depth == 1 && pending == Key::kNodes && c == '{') {
          in_list = true;
          list_begin = pos;
        } else if (depth == 2 && in_list && pending == Key::kItems && c == '[') {
          in_items = true;
          current.clear();
        } else if (depth == 3 && in_items && c == '{') {
          item_begin = pos;
        }
        pending = Key::kNone;
        ++depth;
        break;
      case '}':
      case ']':
        --depth;
        if (depth == 3 && in_items && c == '}') {
          current.push_back({item_begin, pos + 1 - item_begin});
        } else if (depth == 2 && in_items && c == ']') {
          in_items = false;
          spans.swap(current);
          found = true;
        } else if (depth == 1 && in_list && c == '}') {
          in_list = false;
          list = {list_begin, pos + 1 - list_begin};
        }
        break;
      case ':':
        break;
      case '"':
        if (i + 1 < n && at[i + 1] < text.size() && text[at[i + 1]] == ':' && (depth == 1 || depth == 2)) {
          // A key: its text runs to the last quote before the colon.
          size_t close = at[i + 1];
          while (close > pos && text[close] != '"') --close;
          const std::string_view raw = text.substr(pos + 1, close - pos - 1);
          // An escaped key might unescape to the one read.
          if ((depth == 1 || in_list) && raw.find('\\') != std::string_view::npos) return false;
          pending = depth == 1 && raw == nodes_key ? Key::kNodes
                    : depth == 2 && in_list && raw == items_key ? Key::kItems
                                                                 : Key::kNone;
        } else {
          pending = Key::kNone;
        }
        break;
      default:  // a scalar value, or a comma
        pending = Key::kNone;
        break;
    }
  }
  return found && spans.size() == count && list.length > 0;
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

// The last node list read on this thread, and the body it was read from
// (the nodes' texts point into it): a request whose node list is byte for
// byte that one reuses its nodes without reading them again.
struct NodeListCache {
  std::shared_ptr<const std::string> buffer;
  Span list;  // the Nodes value's JSON text in `buffer`
  std::vector<NodeObject> nodes;
};
thread_local NodeListCache node_list_cache;
thread_local int64_t node_list_cache_hits = 0;

std::optional<ExtenderArgs> ParseFull(std::string_view body, size_t readable_past_end,
                                      const std::shared_ptr<const std::string>& owned, bool remember) {
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
      Span list_span;
      std::vector<Span> spans;
      if (!NodeListSpans(parser, body, nodes_key, items_key, arr.size(), list_span, spans)) return std::nullopt;
      // The nodes' texts point into the body: the caller's own (`owned`),
      // else one copy of it.
      std::shared_ptr<const std::string> buffer = owned;
      if (buffer == nullptr || buffer->data() != body.data() || buffer->size() != body.size()) {
        buffer = std::make_shared<const std::string>(body);
      }
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
        a.nodes->push_back(NodeObject::FromText(std::move(name), std::move(uid), buffer, spans[i].offset, spans[i].length));
        ++i;
      }
      if (remember && !a.nodes->empty()) node_list_cache = {buffer, list_span, *a.nodes};
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

bool IsSpace(char c) { return c == ' ' || c == '\t' || c == '\n' || c == '\r'; }
size_t SkipSpace(std::string_view t, size_t pos) {
  while (pos < t.size() && IsSpace(t[pos])) ++pos;
  return pos;
}
// Past the string whose opening quote is at `pos`; npos when it does not
// end. `escaped` tells whether it holds an escape.
size_t SkipString(std::string_view t, size_t pos, bool& escaped) {
  escaped = false;
  for (++pos; pos < t.size(); ++pos) {
    if (t[pos] == '\\') {
      escaped = true;
      ++pos;
    } else if (t[pos] == '"') {
      return pos + 1;
    }
  }
  return std::string_view::npos;
}
// Past the value that starts at `pos`, read as valid JSON; npos when the
// text ends first.
size_t SkipValue(std::string_view t, size_t pos) {
  bool escaped = false;
  if (pos >= t.size()) return std::string_view::npos;
  if (t[pos] == '"') return SkipString(t, pos, escaped);
  if (t[pos] != '{' && t[pos] != '[') {
    while (pos < t.size() && !IsSpace(t[pos]) && t[pos] != ',' && t[pos] != '}' && t[pos] != ']') ++pos;
    return pos;
  }
  int depth = 0;
  while (pos < t.size()) {
    const char c = t[pos];
    if (c == '"') {
      pos = SkipString(t, pos, escaped);
      if (pos == std::string_view::npos) return pos;
      continue;
    }
    if (c == '{' || c == '[') ++depth;
    if (c == '}' || c == ']') {
      if (--depth == 0) return pos + 1;
    }
    ++pos;
  }
  return std::string_view::npos;
}

// The request again with the node list this thread read last: its one
// top-level key that folds to "Nodes" (no key of the top object escaped)
// holds exactly that list's text. The rest of the request is read with a
// stand-in node list in its place (`{"items":[]}`): that reading proves the
// request valid JSON (a valid value put where another valid value stood),
// and its Pod and NodeNames are the request's; the nodes are the list's.
std::optional<ExtenderArgs> FromNodeListCache(std::string_view body) {
  const NodeListCache& cache = node_list_cache;
  if (cache.buffer == nullptr) return std::nullopt;
  const std::string_view list = std::string_view(*cache.buffer).substr(cache.list.offset, cache.list.length);
  if (body.size() < list.size()) return std::nullopt;
  size_t pos = SkipSpace(body, 0);
  if (pos >= body.size() || body[pos] != '{') return std::nullopt;
  pos = SkipSpace(body, pos + 1);
  size_t list_at = std::string_view::npos;
  while (true) {
    if (pos >= body.size() || body[pos] != '"') return std::nullopt;
    bool escaped = false;
    const size_t key_end = SkipString(body, pos, escaped);
    if (key_end == std::string_view::npos || escaped) return std::nullopt;
    const std::string_view key = body.substr(pos + 1, key_end - pos - 2);
    pos = SkipSpace(body, key_end);
    if (pos >= body.size() || body[pos] != ':') return std::nullopt;
    pos = SkipSpace(body, pos + 1);
    if (EqualFold(key, "Nodes")) {
      if (list_at != std::string_view::npos) return std::nullopt;
      if (body.size() - pos < list.size() || body.compare(pos, list.size(), list) != 0) return std::nullopt;
      list_at = pos;
      pos += list.size();
    } else {
      pos = SkipValue(body, pos);
      if (pos == std::string_view::npos) return std::nullopt;
    }
    pos = SkipSpace(body, pos);
    if (pos >= body.size()) return std::nullopt;
    if (body[pos] == '}') break;
    if (body[pos] != ',') return std::nullopt;
    pos = SkipSpace(body, pos + 1);
  }
  if (list_at == std::string_view::npos) return std::nullopt;
  constexpr std::string_view kStandIn = R"({"items":[]})";
  std::string rest;
  rest.reserve(body.size() - list.size() + kStandIn.size() + simdjson::SIMDJSON_PADDING);
  rest.append(body.substr(0, list_at)).append(kStandIn).append(body.substr(list_at + list.size()));
  std::optional<ExtenderArgs> a = ParseFull(rest, rest.capacity() - rest.size(), nullptr, /*remember=*/false);
  if (!a || !a->nodes || !a->nodes->empty()) return std::nullopt;
  a->nodes = cache.nodes;
  ++node_list_cache_hits;
  return a;
}

}  // namespace

std::optional<ExtenderArgs> ParseExtenderArgsFast(std::string_view body, size_t readable_past_end,
                                                  const std::shared_ptr<const std::string>& owned) {
  if (std::optional<ExtenderArgs> a = FromNodeListCache(body)) return a;
  return ParseFull(body, readable_past_end, owned, /*remember=*/true);
}

int64_t NodeListCacheHits() { return node_list_cache_hits; }
void ForgetNodeList() { node_list_cache = {}; }

bool SameArgs(const ExtenderArgs& a, const ExtenderArgs& b) {
  return a.pod == b.pod && a.nodes == b.nodes && a.node_names == b.node_names;
}

}  // namespace ringmaster::server::internal
