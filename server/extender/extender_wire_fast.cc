// The simdjson fast path of ParseExtenderArgs (see extender_wire_fast.h).
#include "server/extender/extender_wire_fast.h"

#include <algorithm>
#include <cctype>
#include <cstdint>
#include <cstring>
#include <limits>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include <simdjson.h>

#include "absl/container/flat_hash_map.h"

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

// The last node list read on this thread, and the body it was read from:
// a request whose node list is byte for byte that one reuses its nodes (the
// memo's last list, below) without reading them again.
struct NodeListCache {
  std::shared_ptr<const std::string> buffer;
  Span list;  // the Nodes value's JSON text in `buffer`
};
thread_local NodeListCache node_list_cache;
thread_local int64_t node_list_cache_hits = 0;

// The Node objects this thread read lately, by their exact text: a request
// whose list differs from the last one (a Node updated, another subset of
// the cluster) reads in full only the items not among them.
//
// Bounded: past twice the longest list read (plus a little), the nodes not
// in the current request's list are dropped. A full read of a list starts it
// again from that list alone (its nodes point into that one body), so it
// holds at most one request body and copies of the items read since.
//
// Per thread like the parser: nothing here is shared between HTTP threads,
// and the nodes it hands out share only what never changes (NodeObject).
struct MemoEntry {
  NodeObject node;
  uint64_t seen = 0;  // the last list (generation) that held it
  size_t index = 0;   // its place in that list
};
struct NodeMemo {
  std::vector<MemoEntry> entries;
  // entries by text: built on the first item that is not where the last
  // list had it (a list in the last one's order needs no hashing at all).
  absl::flat_hash_map<std::string_view, uint32_t> by_text;
  bool indexed = false;
  std::vector<uint32_t> last;  // the last list read, as entries
  uint64_t generation = 0;     // lists read
  size_t longest = 0;
  NodeMemoStats stats;
};
thread_local NodeMemo node_memo;

size_t MemoCapacity(const NodeMemo& memo) { return 2 * memo.longest + 64; }

// A list read in full: the memo is that list.
void MemoRestart(const std::vector<NodeObject>& nodes) {
  NodeMemo& memo = node_memo;
  memo.entries.clear();
  memo.by_text.clear();
  memo.indexed = false;
  memo.last.clear();
  ++memo.generation;
  memo.longest = std::max(memo.longest, nodes.size());
  memo.entries.reserve(nodes.size());
  memo.last.reserve(nodes.size());
  for (size_t i = 0; i < nodes.size(); ++i) {
    memo.last.push_back(static_cast<uint32_t>(memo.entries.size()));
    memo.entries.push_back({nodes[i], memo.generation, i});
  }
}

// Keeps the entries the current list holds, when the memo outgrew its bound.
void MemoSweep() {
  NodeMemo& memo = node_memo;
  if (memo.entries.size() <= MemoCapacity(memo)) return;
  std::vector<uint32_t> moved(memo.entries.size(), 0);
  size_t kept = 0;
  for (size_t i = 0; i < memo.entries.size(); ++i) {
    if (memo.entries[i].seen != memo.generation) continue;
    moved[i] = static_cast<uint32_t>(kept);
    if (kept != i) memo.entries[kept] = std::move(memo.entries[i]);
    ++kept;
  }
  memo.entries.resize(kept);
  for (uint32_t& e : memo.last) e = moved[e];
  memo.by_text.clear();
  memo.indexed = false;
}

const MemoEntry* MemoFind(std::string_view text) {
  NodeMemo& memo = node_memo;
  if (!memo.indexed) {
    memo.by_text.reserve(memo.entries.size());
    for (size_t i = 0; i < memo.entries.size(); ++i) {
      memo.by_text.try_emplace(memo.entries[i].node.text(), static_cast<uint32_t>(i));
    }
    memo.indexed = true;
  }
  auto it = memo.by_text.find(text);
  return it == memo.by_text.end() ? nullptr : &memo.entries[it->second];
}

// How ParseFull makes the list's nodes when a request is read with the
// memo's nodes put back: each item of the text's list stands at `at`, and is
// either a stand-in `{}` for `count` remembered nodes in a row (nodes[first],
// ...) or, with count 0, an item to read. `list` gets the Nodes value's span
// in the text.
struct Reuse {
  struct Item {
    size_t at = 0;
    size_t first = 0;
    size_t count = 0;
  };
  std::vector<Item> items;
  std::vector<const NodeObject*> nodes;
  Span list;
};

// A request's nodes, all read from one body: their Texts in one block that
// also keeps the body (one allocation for the list, not one per node).
struct NodeBlock {
  std::shared_ptr<const std::string> buffer;
  std::vector<NodeObject::Text> texts;
};

std::optional<ExtenderArgs> ParseFull(std::string_view body, size_t readable_past_end,
                                      const std::shared_ptr<const std::string>& owned, bool remember,
                                      Reuse* reuse = nullptr) {
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
  if (reuse != nullptr && IsNull(nodes)) return std::nullopt;
  if (!IsNull(nodes)) {
    if (nodes->type() != dom::element_type::OBJECT) return std::nullopt;
    const dom::object list(*nodes);
    std::optional<dom::element> items;
    if (!Lookup(list, "items", items, &items_key)) return std::nullopt;
    for (dom::key_value_pair kv : list) {
      if (!EqualFold(kv.key, "items") && !DepthOk(kv.value, 2)) return std::nullopt;
    }
    a.nodes.emplace();
    if (reuse != nullptr && IsNull(items)) return std::nullopt;
    if (!IsNull(items)) {
      if (items->type() != dom::element_type::ARRAY) return std::nullopt;
      const dom::array arr(*items);
      a.nodes->reserve(arr.size());
      Span list_span;
      std::vector<Span> spans;
      if (!NodeListSpans(parser, body, nodes_key, items_key, arr.size(), list_span, spans)) return std::nullopt;
      if (reuse != nullptr) {
        // Every item where it was put, each stand-in an item of its own:
        // then the request as sent is this text with valid Node objects put
        // in the stand-ins' places (valid values where valid values stood),
        // and reads as this one does but for those nodes.
        if (reuse->items.size() != spans.size()) return std::nullopt;
        for (size_t i = 0; i < spans.size(); ++i) {
          if (spans[i].offset != reuse->items[i].at) return std::nullopt;
          if (reuse->items[i].count > 0 && spans[i].length != 2) return std::nullopt;
        }
        reuse->list = list_span;
        a.nodes->reserve(reuse->nodes.size() + spans.size());
      }
      // The nodes' texts point into the body: the caller's own (`owned`),
      // else one copy of it. Items read with reused ones are copied each.
      std::shared_ptr<NodeBlock> block;
      if (reuse == nullptr) {
        block = std::make_shared<NodeBlock>();
        block->buffer = owned;
        if (owned == nullptr || owned->data() != body.data() || owned->size() != body.size()) {
          block->buffer = std::make_shared<const std::string>(body);
        }
        block->texts.reserve(arr.size());
      }
      size_t i = 0;
      for (dom::element n : arr) {
        if (n.type() != dom::element_type::OBJECT) return std::nullopt;
        if (reuse != nullptr && reuse->items[i].count > 0) {
          const Reuse::Item& r = reuse->items[i];
          for (size_t k = r.first; k < r.first + r.count; ++k) a.nodes->push_back(*reuse->nodes[k]);
          ++i;
          continue;
        }
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
        if (block != nullptr) {
          block->texts.push_back({std::move(name), std::move(uid),
                                  std::string_view(*block->buffer).substr(spans[i].offset, spans[i].length),
                                  {}});
        } else {
          a.nodes->push_back(NodeObject::Owning(std::move(name), std::move(uid),
                                                body.substr(spans[i].offset, spans[i].length)));
        }
        ++i;
      }
      if (block != nullptr) {
        for (const NodeObject::Text& t : block->texts) {
          a.nodes->push_back(NodeObject::FromShared(std::shared_ptr<const NodeObject::Text>(block, &t)));
        }
      }
      if (remember && !a.nodes->empty()) {
        node_list_cache = {block->buffer, list_span};
        MemoRestart(*a.nodes);
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
  const NodeMemo& memo = node_memo;
  a->nodes->reserve(memo.last.size());
  for (uint32_t e : memo.last) a->nodes->push_back(memo.entries[e].node);
  ++node_list_cache_hits;
  return a;
}

// The request with the nodes this thread read before (NodeMemo): the list's
// skeleton is walked (the one top-level key that folds to "Nodes", no top or
// NodeList key escaped, its one key that folds to "items", each item's
// span), and each item whose bytes are those of a remembered node — the one
// after the last match in the last list, the next few, else any by its text
// — is left out: one stand-in `{}` takes the place of each run of such items
// (their texts and the blanks and commas between them all checked, so a run
// is a valid sequence of array elements, which one element may stand for).
// That text is then read in full, which reads the new and changed items and
// proves the rest valid; and when each stand-in is found to be an item of the
// list where it was put, the request as sent is that text with valid Node
// objects (read before, at the same depth) where the stand-ins stood, so it
// reads the same but for those nodes.
// The walk only places stand-ins: it may be wrong about damaged input (that
// reading then fails, or finds a stand-in elsewhere), never about a result.
std::optional<ExtenderArgs> FromNodeMemo(std::string_view body, const std::shared_ptr<const std::string>& owned) {
  NodeMemo& memo = node_memo;
  if (memo.entries.empty()) return std::nullopt;
  // A list mostly new is read faster in one go.
  constexpr size_t kTryAhead = 4;   // the next remembered nodes tried at an item
  constexpr size_t kMinItems = 16;  // read before giving up on a list mostly new
  struct Item {
    size_t begin = 0;
    size_t end = 0;
    const MemoEntry* entry = nullptr;  // null: read it
  };
  // Kept between requests, as the parser keeps its buffers.
  thread_local std::vector<Item> items;
  thread_local Reuse reuse;
  thread_local std::string text;
  items.clear();
  items.reserve(memo.last.size() + 16);
  size_t reused_bytes = 0;
  size_t new_bytes = 0;
  size_t next = 0;  // where in the last list the next item is expected

  // An object's members, `on_member(key, value position)` returning the
  // position past the value (npos: give up). Past the object, or npos.
  const auto members = [&](size_t pos, const auto& on_member) -> size_t {
    if (pos >= body.size() || body[pos] != '{') return std::string_view::npos;
    pos = SkipSpace(body, pos + 1);
    if (pos < body.size() && body[pos] == '}') return pos + 1;
    while (true) {
      if (pos >= body.size() || body[pos] != '"') return std::string_view::npos;
      bool escaped = false;
      const size_t key_end = SkipString(body, pos, escaped);
      if (key_end == std::string_view::npos || escaped) return std::string_view::npos;
      const std::string_view key = body.substr(pos + 1, key_end - pos - 2);
      pos = SkipSpace(body, key_end);
      if (pos >= body.size() || body[pos] != ':') return std::string_view::npos;
      pos = on_member(key, SkipSpace(body, pos + 1));
      if (pos == std::string_view::npos) return pos;
      pos = SkipSpace(body, pos);
      if (pos >= body.size()) return std::string_view::npos;
      if (body[pos] == '}') return pos + 1;
      if (body[pos] != ',') return std::string_view::npos;
      pos = SkipSpace(body, pos + 1);
    }
  };
  const auto item_at = [&](size_t pos) -> size_t {
    if (pos >= body.size() || body[pos] != '{') return std::string_view::npos;
    const std::string_view rest = body.substr(pos);
    for (size_t k = next; k < memo.last.size() && k < next + kTryAhead; ++k) {
      const MemoEntry& e = memo.entries[memo.last[k]];
      const std::string_view text = e.node.text();
      if (rest.size() >= text.size() && std::memcmp(rest.data(), text.data(), text.size()) == 0) {
        items.push_back({pos, pos + text.size(), &e});
        reused_bytes += text.size();
        next = k + 1;
        return pos + text.size();
      }
    }
    const size_t end = SkipValue(body, pos);
    if (end == std::string_view::npos) return end;
    const MemoEntry* e = MemoFind(body.substr(pos, end - pos));
    items.push_back({pos, end, e});
    if (e != nullptr) {
      reused_bytes += end - pos;
      if (e->seen == memo.generation) next = e->index + 1;
    } else {
      new_bytes += end - pos;
      if (items.size() >= kMinItems && new_bytes > reused_bytes) return std::string_view::npos;
    }
    return end;
  };
  const auto item_list = [&](size_t pos) -> size_t {
    if (pos >= body.size() || body[pos] != '[') return std::string_view::npos;
    pos = SkipSpace(body, pos + 1);
    if (pos < body.size() && body[pos] == ']') return pos + 1;
    while (true) {
      pos = SkipSpace(body, item_at(pos));
      if (pos >= body.size()) return std::string_view::npos;
      if (body[pos] == ']') return pos + 1;
      if (body[pos] != ',') return std::string_view::npos;
      pos = SkipSpace(body, pos + 1);
    }
  };
  bool seen_nodes = false;
  const size_t end = members(SkipSpace(body, 0), [&](std::string_view key, size_t pos) -> size_t {
    if (!EqualFold(key, "Nodes")) return SkipValue(body, pos);
    if (seen_nodes) return std::string_view::npos;
    seen_nodes = true;
    bool seen_items = false;
    return members(pos, [&](std::string_view list_key, size_t at) -> size_t {
      if (!EqualFold(list_key, "items")) return SkipValue(body, at);
      if (seen_items) return std::string_view::npos;
      seen_items = true;
      return item_list(at);
    });
  });
  if (end == std::string_view::npos || reused_bytes == 0) return std::nullopt;

  // The request with stand-ins, and where each item stands in it.
  constexpr std::string_view kStandIn = "{}";
  reuse.items.clear();
  reuse.nodes.clear();
  reuse.nodes.reserve(items.size());
  text.clear();
  text.reserve(body.size() - reused_bytes + kStandIn.size() * items.size() + simdjson::SIMDJSON_PADDING);
  size_t from = 0;
  size_t run_bytes = 0;  // what the stand-ins stand for, past their own 2 bytes
  for (size_t i = 0; i < items.size();) {
    text.append(body.substr(from, items[i].begin - from));
    if (items[i].entry == nullptr) {
      reuse.items.push_back({text.size(), 0, 0});
      from = items[i].begin;
      ++i;
      continue;
    }
    reuse.items.push_back({text.size(), reuse.nodes.size(), 0});
    const size_t run_begin = items[i].begin;
    for (; i < items.size() && items[i].entry != nullptr; ++i) {
      reuse.nodes.push_back(&items[i].entry->node);
      ++reuse.items.back().count;
      from = items[i].end;
    }
    text.append(kStandIn);
    run_bytes += from - run_begin - kStandIn.size();
  }
  text.append(body.substr(from));
  std::optional<ExtenderArgs> a = ParseFull(text, text.capacity() - text.size(), nullptr, /*remember=*/false, &reuse);
  if (!a || !a->nodes || a->nodes->size() != items.size()) return std::nullopt;

  // The list as sent: where it stood in the text read, each stand-in back to
  // its node's length (every item lies inside the list).
  Span list = reuse.list;
  list.length += run_bytes;
  if (owned != nullptr && owned->data() == body.data() && owned->size() == body.size()) {
    node_list_cache = {owned, list};
  } else {
    node_list_cache = {std::make_shared<const std::string>(body.substr(list.offset, list.length)), {0, list.length}};
  }

  // Remember this list: the nodes read now join the memo.
  ++memo.generation;
  memo.longest = std::max(memo.longest, items.size());
  memo.last.clear();
  // Entries by place first: adding the new ones may move them all.
  for (const Item& item : items) {
    memo.last.push_back(item.entry != nullptr ? static_cast<uint32_t>(item.entry - memo.entries.data())
                                              : std::numeric_limits<uint32_t>::max());
  }
  int64_t reused = 0;
  for (size_t i = 0; i < items.size(); ++i) {
    uint32_t& at = memo.last[i];
    if (at != std::numeric_limits<uint32_t>::max()) {
      ++reused;
    } else {
      at = static_cast<uint32_t>(memo.entries.size());
      memo.entries.push_back({(*a->nodes)[i], 0, 0});
      if (memo.indexed) memo.by_text.try_emplace(memo.entries.back().node.text(), at);
    }
    memo.entries[at].seen = memo.generation;
    memo.entries[at].index = i;
  }
  MemoSweep();
  ++memo.stats.requests;
  memo.stats.reused += reused;
  memo.stats.read += static_cast<int64_t>(items.size()) - reused;
  return a;
}

}  // namespace

std::optional<ExtenderArgs> ParseExtenderArgsFast(std::string_view body, size_t readable_past_end,
                                                  const std::shared_ptr<const std::string>& owned) {
  if (std::optional<ExtenderArgs> a = FromNodeListCache(body)) return a;
  if (std::optional<ExtenderArgs> a = FromNodeMemo(body, owned)) return a;
  return ParseFull(body, readable_past_end, owned, /*remember=*/true);
}

int64_t NodeListCacheHits() { return node_list_cache_hits; }
void ForgetNodeList() {
  node_list_cache = {};
  node_memo = {};
}
NodeMemoStats NodeMemoCounts() {
  NodeMemoStats s = node_memo.stats;
  s.size = node_memo.entries.size();
  s.capacity = MemoCapacity(node_memo);
  return s;
}

bool SameArgs(const ExtenderArgs& a, const ExtenderArgs& b) {
  return a.pod == b.pod && a.nodes == b.nodes && a.node_names == b.node_names;
}

}  // namespace ringmaster::server::internal
