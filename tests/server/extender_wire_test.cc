// Tests for server/extender/extender_wire.h: kube-scheduler-shaped requests and
// answers in both nodeCacheCapable modes, keys in any case, bad input.
#include "server/extender/extender_wire.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <atomic>
#include <random>
#include <thread>

#include "server/extender/extender_wire_fast.h"
#include "server/extender/kube_objects.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::server {
namespace {

using nlohmann::json;

// What kube-scheduler POSTs to /filter with nodeCacheCapable: false: the pod
// and every candidate Node object, NodeNames null.
constexpr char kFilterFullNodes[] = R"({
  "Pod": {"metadata": {"name": "w-0", "namespace": "ml", "uid": "u-0",
                       "labels": {"scheduling.x-k8s.io/pod-group": "bert"}},
          "spec": {"containers": [{"name": "t", "resources": {"limits": {"nvidia.com/gpu": "4"}}}]}},
  "Nodes": {"metadata": {}, "items": [
    {"metadata": {"name": "n1", "labels": {"nvidia.com/gpu.product": "H100"}},
     "status": {"allocatable": {"cpu": "96", "memory": "1Ti", "nvidia.com/gpu": "8", "pods": "110"}}},
    {"metadata": {"name": "n2"}, "status": {"allocatable": {"nvidia.com/gpu": "8"}}}]},
  "NodeNames": null
})";

// nodeCacheCapable: true: names only, Nodes null.
constexpr char kFilterNames[] = R"({"Pod": {"metadata": {"name": "w-0"}}, "Nodes": null, "NodeNames": ["n1", "n2", "n3"]})";

TEST(ExtenderWire, FilterArgsWithNodeObjects) {
  auto a = ParseExtenderArgs(kFilterFullNodes);
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_TRUE(a->nodes.has_value());
  EXPECT_FALSE(a->node_names.has_value());
  EXPECT_EQ(a->CandidateNames(), (std::vector<std::string>{"n1", "n2"}));
  // Written back as kube-scheduler writes it, it reads the same.
  const std::string out = ToJson(*a);
  const json j = json::parse(out);
  EXPECT_TRUE(j.at("NodeNames").is_null());
  EXPECT_EQ(j.at("Nodes").at("items").size(), 2u);
  auto again = ParseExtenderArgs(out);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->pod, a->pod);
  EXPECT_EQ(*again->nodes, *a->nodes);
}

TEST(ExtenderWire, FilterArgsWithNodeNames) {
  auto a = ParseExtenderArgs(kFilterNames);
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_FALSE(a->nodes.has_value());
  EXPECT_EQ(a->CandidateNames(), (std::vector<std::string>{"n1", "n2", "n3"}));
  const json j = json::parse(ToJson(*a));
  EXPECT_TRUE(j.at("Nodes").is_null());
  EXPECT_EQ(j.at("NodeNames"), json({"n1", "n2", "n3"}));
}

// Found by fuzz/extender_wire_fuzzer.cc (docs/FUZZING.md): 200,000 nested
// arrays in a Pod parsed (nlohmann::json parses without recursion), then
// overflowed the stack when the request was copied or written back.
TEST(ExtenderWire, DeepNestingIsRejectedWithWhere) {
  const std::string deep = std::string(200'000, '[') + std::string(200'000, ']');
  auto a = ParseExtenderArgs(R"({"Pod": {"metadata": {"name": "p"}, "x": )" + deep + "}}");
  ASSERT_ERROR(a, absl::StatusCode::kInvalidArgument, "JSON nested deeper than 128 levels at byte 167");
  // Byte 167 is the '[' that opens level 129: the outer object and the
  // Pod's are levels 1 and 2, the arrays from byte 41 on levels 3, 4, ...
  EXPECT_EQ(a.status().message(), "JSON nested deeper than 128 levels at byte 167");
  // Brackets inside strings do not count; 128 levels are fine.
  const std::string ok = std::string(127, '[') + std::string(127, ']');
  EXPECT_TRUE(ParseExtenderArgs(R"({"Pod": {"metadata": {"name": "[[[[\"[["}}, "x": )" + ok + "}").ok());
  EXPECT_ERROR(ParseExtenderBindingArgs(deep), absl::StatusCode::kInvalidArgument, "JSON nested deeper than 128 levels at byte 128");
  EXPECT_ERROR(ParseExtenderPreemptionArgs(deep), absl::StatusCode::kInvalidArgument, "JSON nested deeper than 128 levels at byte 128");
}

TEST(ExtenderWire, KeysAreReadInAnyCaseAndAnExactMatchWins) {
  auto a = ParseExtenderArgs(R"({"pod": {"METADATA": {"Name": "p"}}, "nodenames": ["a"]})");
  ASSERT_TRUE(a.ok()) << a.status();
  EXPECT_EQ(a->CandidateNames(), std::vector<std::string>{"a"});
  auto pod = ReadPod(a->pod);
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->Key(), "default/p");
  // Go's encoding/json prefers the exact key over a case-insensitive one.
  auto b = ParseExtenderArgs(R"({"nodenames": ["lower"], "NodeNames": ["exact"]})");
  ASSERT_TRUE(b.ok());
  EXPECT_EQ(b->CandidateNames(), std::vector<std::string>{"exact"});
  auto bind = ParseExtenderBindingArgs(R"({"podname": "p", "PODNAMESPACE": "ns", "poduid": "u", "node": "n1"})");
  ASSERT_TRUE(bind.ok());
  EXPECT_EQ(bind->pod_name, "p");
  EXPECT_EQ(bind->pod_namespace, "ns");
  EXPECT_EQ(bind->pod_uid, "u");
  EXPECT_EQ(bind->node, "n1");
}

TEST(ExtenderWire, MalformedJsonSaysWhere) {
  auto a = ParseExtenderArgs(R"({"Pod": {"metadata": )");
  ASSERT_ERROR(a, absl::StatusCode::kInvalidArgument, "malformed JSON at byte 22: [json.exception.parse_error.101]");
  EXPECT_EQ(a.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(a.status().message().find("malformed JSON at byte"), std::string_view::npos) << a.status();
  for (const char* bad : {"", "[", "nul", "{\"Pod\": 1}", "[1,2]", "{\"NodeNames\": \"n1\"}",
                          "{\"NodeNames\": [1]}", "{\"Nodes\": {\"items\": 3}}", "\xff\xfe"}) {
    auto r = ParseExtenderArgs(bad);
    EXPECT_ERROR(r, absl::StatusCode::kInvalidArgument, "") << bad;
  }
  auto typed = ParseExtenderArgs(R"({"NodeNames": ["a", 7]})");
  ASSERT_FALSE(typed.ok());
  EXPECT_NE(typed.status().message().find("NodeNames[1]: expected a string, got number"), std::string_view::npos)
      << typed.status();
  EXPECT_ERROR(ParseExtenderBindingArgs(R"({"PodName": 3})"), absl::StatusCode::kInvalidArgument, "PodName: expected a string, got number");
  EXPECT_ERROR(ParseExtenderPreemptionArgs(R"({"NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": 5}]}}})"), absl::StatusCode::kInvalidArgument, "NodeNameToMetaVictims.n1.Pods[0].UID: expected a string");
}

// The simdjson fast path answers only what it reads exactly as the nlohmann
// reference does; everything else (errors included) goes to the reference.
// Either way ParseExtenderArgs must equal the reference: same status, same
// values.
void ExpectSameAsReference(const std::string& body) {
  SCOPED_TRACE(body.substr(0, 200));
  const absl::StatusOr<ExtenderArgs> ref = internal::ParseExtenderArgsDom(body);
  const absl::StatusOr<ExtenderArgs> got = ParseExtenderArgs(body);
  ASSERT_EQ(got.status(), ref.status());
  if (ref.ok()) {
    EXPECT_TRUE(internal::SameArgs(*got, *ref));
  }
  // What the fast path does accept must be exactly the reference's answer.
  if (std::optional<ExtenderArgs> fast = internal::ParseExtenderArgsFast(body)) {
    ASSERT_TRUE(ref.ok()) << "fast path accepted what the reference refuses: " << ref.status();
    EXPECT_TRUE(internal::SameArgs(*fast, *ref));
  }
}

TEST(ExtenderWire, FastPathTakesTheCommonRequests) {
  // The two request shapes kube-scheduler sends must not fall back.
  for (const char* body : {kFilterFullNodes, kFilterNames}) {
    const std::optional<ExtenderArgs> fast = internal::ParseExtenderArgsFast(body);
    ASSERT_TRUE(fast.has_value()) << body;
    const absl::StatusOr<ExtenderArgs> ref = internal::ParseExtenderArgsDom(body);
    ASSERT_TRUE(ref.ok());
    EXPECT_TRUE(internal::SameArgs(*fast, *ref));
  }
  const std::optional<ExtenderArgs> names = internal::ParseExtenderArgsFast(kFilterNames);
  EXPECT_EQ(*names->node_names, (std::vector<std::string>{"n1", "n2", "n3"}));
  EXPECT_FALSE(names->nodes.has_value());
}

TEST(ExtenderWire, FastPathAgreesWithTheReference) {
  std::vector<std::string> bodies = {
      kFilterFullNodes, kFilterNames, "{}", "null", "[]", "", "{", R"({"Pod": 3})",
      R"({"pod": {"metadata": {"name": "a"}}, "nodenames": ["x"]})",
      R"({"POD": {"a": 1}, "Pod": {"b": 2}})",                 // the exact match wins
      R"({"pod": {"a": 1}, "POD": {"b": 2}})",                 // two spellings, no exact one
      R"({"Pod": {"a": 1}, "Pod": {"a": 2}})",                 // repeated key: the last
      R"({"Pod": {"n": [0, -0, 1, -1, 18446744073709551615, -9223372036854775808, 1.5, 1e3, -2.5e-3]}})",
      R"({"Pod": {"n": 18446744073709551616}})",               // past 64 bits
      R"({"Pod": {"n": 1e400}})",
      R"({"Pod": {"s": "\u00e9\ud83d\ude00 \" \\ \n \u0000"}, "NodeNames": []})",
      R"({"Pod": {}, "NodeNames": [1]})",
      R"({"Pod": {}, "NodeNames": {"a": "b"}})",
      R"({"Pod": {}, "Nodes": {"items": null}})",
      R"({"Pod": {}, "Nodes": {"items": [1]}})",
      R"({"Pod": {}, "Nodes": {"ITEMS": [{"metadata": {"name": "n"}}], "metadata": {"x": [[[]]]}}})",
      R"({"Pod": {}, "Nodes": []})",
      R"({"Pod": {}, "Extra": 1})",
      R"({"Pod": {"bad": "\xff"}})",
      "{\"Pod\": {}} trailing",
  };
  // Nesting at the limit and one past it, inside Pod and inside NodeList.metadata.
  for (int depth : {126, 127, 128}) {
    bodies.push_back(R"({"Pod": )" + std::string(depth, '[') + std::string(depth, ']') + "}");
    bodies.push_back(R"({"Nodes": {"metadata": )" + std::string(depth, '[') + std::string(depth, ']') + "}}");
  }
  // ... and inside a Node object, which the fast path keeps as text.
  for (int depth : {123, 124, 125, 126, 127, 128}) {
    bodies.push_back(R"({"Pod": {}, "Nodes": {"items": [{"metadata": {"name": "n1"}, "x": )" + std::string(depth, '[') +
                     std::string(depth, ']') + "}]}}");
  }
  for (const std::string& b : bodies) ExpectSameAsReference(b);

  // Random damage to the real requests: every cut, swap and stray byte must
  // still give the reference's answer.
  std::mt19937 rng(7);
  const std::string alphabet = "{}[]\",:0-9eE.\\ nultrfsaPodNme";
  for (const std::string& base : {std::string(kFilterFullNodes), std::string(kFilterNames)}) {
    for (int i = 0; i < 400; ++i) {
      std::string b = base;
      const int edits = 1 + static_cast<int>(rng() % 3);
      for (int e = 0; e < edits; ++e) {
        const size_t at = rng() % b.size();
        switch (rng() % 3) {
          case 0: b.erase(at, 1 + rng() % 4); break;
          case 1: b.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
          default: b[at] = alphabet[rng() % alphabet.size()]; break;
        }
        if (b.empty()) b = "{";
      }
      ExpectSameAsReference(b);
    }
  }
}

// kube-scheduler sends the same candidate Node objects for pod after pod:
// a node list byte for byte the one read last is not read again, and the
// rest of the request still is, exactly as the reference reads it.
TEST(ExtenderWire, ARepeatedNodeListIsReadOnceAndTheRestStillChecked) {
  internal::ForgetNodeList();
  const std::string first = kFilterFullNodes;
  const size_t list_at = first.find(R"({"metadata": {}, "items")");
  const size_t list_end = first.find(R"(,
  "NodeNames")");
  ASSERT_NE(list_at, std::string::npos);
  ASSERT_NE(list_end, std::string::npos);
  const std::string list = first.substr(list_at, list_end - list_at);
  const std::string rest = first.substr(list_end);
  const auto with = [&](const std::string& before_list, const std::string& after_list) {
    return before_list + list + after_list;
  };
  const std::string pod_b = R"({"Pod": {"metadata": {"name": "w-1", "namespace": "ml", "uid": "u-1"}}, "Nodes": )";

  ASSERT_TRUE(ParseExtenderArgs(first).ok());
  const int64_t hits = internal::NodeListCacheHits();
  // Another pod, the same list: read from the remembered list.
  const std::string second = with(pod_b, rest);
  auto b = ParseExtenderArgs(second);
  ASSERT_TRUE(b.ok()) << b.status();
  EXPECT_EQ(internal::NodeListCacheHits(), hits + 1);
  EXPECT_EQ(b->pod["metadata"]["name"], "w-1");
  ASSERT_EQ(b->nodes->size(), 2u);
  EXPECT_EQ((*b->nodes)[0].name(), "n1");
  EXPECT_EQ((*b->nodes)[1].json()["status"]["allocatable"]["nvidia.com/gpu"], "8");
  EXPECT_TRUE(internal::SameArgs(*b, *internal::ParseExtenderArgsDom(second)));
  // The key in another case is the same key.
  const std::string lower = with(R"({"Pod": {"metadata": {"name": "w-2"}}, "nodes": )", rest);
  ExpectSameAsReference(lower);
  EXPECT_EQ(internal::NodeListCacheHits(), hits + 3);  // ParseExtenderArgs and the fast path

  // Requests that hold the list's text but must be read as they are: two
  // keys that fold to Nodes, an escaped key, the list inside the Pod, a
  // damaged rest, a damaged list, trailing bytes, a second Nodes after.
  const int64_t before = internal::NodeListCacheHits();
  for (const std::string& body : {
           with(R"({"Pod": {}, "nodes": null, "Nodes": )", rest),
           with(R"({"Pod": {}, "Nod\u0065s": )", rest),
           with(R"({"Pod": {"x": )", R"(}, "Nodes": null, "NodeNames": null})"),
           with(R"({"Pod": {"x": ]}, "Nodes": )", rest),
           with(R"({"Pod": {}, "Nodes": )", R"(, "NodeNames": nul})"),
           with(R"({"Pod": {}, "Nodes": )", rest + " x"),
           with(R"({"Pod": {}, "Nodes": )", R"(, "Nodes": {"items": []}})"),
           R"({"Pod": {}, "Nodes": )" + list.substr(0, list.size() - 1) + rest,
       }) {
    ExpectSameAsReference(body);
  }
  // Only the two bodies whose list is read from the remembered one (the
  // damaged rest is found by that reading, which then leaves it to the
  // reference) could count; none answers from it.
  auto dup = internal::ParseExtenderArgsFast(with(R"({"Pod": {}, "nodes": null, "Nodes": )", rest));
  EXPECT_FALSE(dup.has_value() && internal::NodeListCacheHits() > before);
  auto inside = ParseExtenderArgs(with(R"({"Pod": {"x": )", R"(}, "Nodes": null, "NodeNames": null})"));
  ASSERT_TRUE(inside.ok());
  EXPECT_FALSE(inside->nodes.has_value());  // the list was the Pod's, not the nodes
  EXPECT_EQ(internal::NodeListCacheHits(), before);

  // After another list, the first one is read again in full.
  ASSERT_TRUE(ParseExtenderArgs(std::string(R"({"Pod": {}, "Nodes": {"items": [{"metadata": {"name": "z"}}]}})")).ok());
  const int64_t after_other = internal::NodeListCacheHits();
  auto again = ParseExtenderArgs(second);
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(internal::NodeListCacheHits(), after_other);
  EXPECT_TRUE(internal::SameArgs(*again, *b));
}

// A body handed over is where the nodes' texts point: they outlive the
// caller's string, and the answer is the reference's.
TEST(ExtenderWire, AnOwnedBodyIsNotCopiedAndOutlivesTheRequest) {
  internal::ForgetNodeList();
  std::string body = kFilterFullNodes;
  body.reserve(body.size() + 64);
  const char* data = body.data();
  auto a = ParseExtenderArgsOwned(std::move(body));
  ASSERT_TRUE(a.ok()) << a.status();
  ASSERT_EQ(a->nodes->size(), 2u);
  EXPECT_GE((*a->nodes)[0].text().data(), data);
  EXPECT_LT((*a->nodes)[0].text().data(), data + std::string_view(kFilterFullNodes).size());
  EXPECT_TRUE(internal::SameArgs(*a, *internal::ParseExtenderArgsDom(kFilterFullNodes)));
}

// --- The memo of nodes read before (a list that changed) --------------------

// A Node object as kube-scheduler writes it (compact), `gpus` GPUs of `model`.
std::string MemoNode(int i, int gpus = 8, const std::string& model = "H100", const std::string& version = "") {
  json n{{"metadata", {{"name", "n" + std::to_string(i)}, {"uid", "u-" + std::to_string(i)},
                       {"labels", {{"nvidia.com/gpu.product", model}, {"topology.ringmaster.io/rack", "r" + std::to_string(i / 8)}}}}},
         {"status", {{"allocatable", {{"cpu", "96"}, {"memory", "1Ti"}, {"nvidia.com/gpu", std::to_string(gpus)}}}}}};
  if (!version.empty()) n["metadata"]["resourceVersion"] = version;
  return n.dump();
}
std::string MemoBody(const std::vector<std::string>& items, const std::string& pod = "w-0",
                     const std::string& comma = ", ") {
  std::string b = R"({"Pod": {"metadata": {"name": ")" + pod + R"(", "namespace": "ml"}}, "Nodes": {"metadata": {}, "items": [)";
  for (size_t i = 0; i < items.size(); ++i) b += (i ? comma : "") + items[i];
  return b + R"(]}, "NodeNames": null})";
}
std::vector<std::string> MemoList(int n) {
  std::vector<std::string> items;
  for (int i = 0; i < n; ++i) items.push_back(MemoNode(i));
  return items;
}
std::vector<std::string> Names(const ExtenderArgs& a) { return a.CandidateNames(); }

// One node updated since the last request: only that node is read in full,
// and it is its new allocatable and labels that the extender learns
// (ReadNode of the object, as Extender::LearnNodes reads it); the others are
// the nodes read before, not copies.
TEST(ExtenderNodeMemo, AChangedNodeIsReadAgainAndTheOthersAreReused) {
  internal::ForgetNodeList();
  std::vector<std::string> items = MemoList(40);
  auto first = ParseExtenderArgs(MemoBody(items));
  ASSERT_TRUE(first.ok()) << first.status();
  const internal::NodeMemoStats before = internal::NodeMemoCounts();
  EXPECT_EQ(before.requests, 0);
  EXPECT_EQ(before.size, 40u);

  items[5] = MemoNode(5, 4, "A100", "17");
  const std::string changed = MemoBody(items, "w-1");
  auto second = ParseExtenderArgs(changed);
  ASSERT_TRUE(second.ok()) << second.status();
  const internal::NodeMemoStats after = internal::NodeMemoCounts();
  EXPECT_EQ(after.requests, 1);
  EXPECT_EQ(after.reused, 39);
  EXPECT_EQ(after.read, 1);
  EXPECT_TRUE(internal::SameArgs(*second, *internal::ParseExtenderArgsDom(changed)));
  EXPECT_EQ(second->pod["metadata"]["name"], "w-1");
  const NodeObject& n5 = (*second->nodes)[5];
  EXPECT_EQ(n5.name(), "n5");
  EXPECT_EQ(n5.uid(), "u-5");
  EXPECT_EQ(n5.text(), items[5]);
  auto spec = ReadNode(n5.json(), DefaultTopologyLabels());
  ASSERT_TRUE(spec.ok()) << spec.status();
  EXPECT_EQ(spec->gpus.size(), 4u);
  EXPECT_EQ(spec->gpus[0].model, "A100");
  // An unchanged node is the one read before: the same text, not a copy.
  EXPECT_EQ((*second->nodes)[6].text().data(), (*first->nodes)[6].text().data());
  EXPECT_EQ((*second->nodes)[6].text(), items[6]);

  // Back to the first list (not the last one read): every node is one read before.
  items[5] = MemoNode(5);
  auto third = ParseExtenderArgs(MemoBody(items, "w-2"));
  ASSERT_TRUE(third.ok());
  EXPECT_EQ(internal::NodeMemoCounts().requests, 2);
  EXPECT_EQ(internal::NodeMemoCounts().read, 1);
  EXPECT_EQ((*third->nodes)[5].text().data(), (*first->nodes)[5].text().data());
  auto old = ReadNode((*third->nodes)[5].json(), DefaultTopologyLabels());
  ASSERT_TRUE(old.ok());
  EXPECT_EQ(old->gpus.size(), 8u);
  // And that list again, byte for byte: the remembered list, as before.
  const int64_t hits = internal::NodeListCacheHits();
  ASSERT_TRUE(ParseExtenderArgs(MemoBody(items, "w-3")).ok());
  EXPECT_EQ(internal::NodeListCacheHits(), hits + 1);
}

// Another subset or order of the cluster: the nodes come out as sent, each
// read in full only when it was not read before.
TEST(ExtenderNodeMemo, NodesRemovedAddedOrReorderedComeOutAsSent) {
  const std::vector<std::string> all = MemoList(40);
  std::vector<std::pair<std::string, std::vector<std::string>>> cases;
  {
    std::vector<std::string> v = all;
    v.erase(v.begin() + 10);
    v.erase(v.begin() + 3);
    cases.push_back({"two removed", v});
  }
  {
    std::vector<std::string> v = all;
    v.insert(v.begin() + 20, MemoNode(100));
    v.push_back(MemoNode(101));
    cases.push_back({"two added", v});
  }
  cases.push_back({"reversed", std::vector<std::string>(all.rbegin(), all.rend())});
  {
    std::vector<std::string> v;
    for (size_t i = 0; i < all.size(); i += 3) v.push_back(all[i]);
    cases.push_back({"every third", v});
  }
  {
    std::vector<std::string> v = all;
    v.insert(v.begin() + 2, all[1]);
    v.push_back(all[0]);
    cases.push_back({"repeated", v});
  }
  {
    std::vector<std::string> v = all;
    std::swap(v[0], v[39]);
    v[20] = MemoNode(20, 2);
    v.erase(v.begin() + 30, v.begin() + 35);
    cases.push_back({"mixed", v});
  }
  for (const auto& [what, items] : cases) {
    SCOPED_TRACE(what);
    internal::ForgetNodeList();
    ASSERT_TRUE(ParseExtenderArgs(MemoBody(all)).ok());
    const std::string body = MemoBody(items, "w-" + what);
    auto got = ParseExtenderArgs(body);
    ASSERT_TRUE(got.ok()) << got.status();
    const auto ref = internal::ParseExtenderArgsDom(body);
    ASSERT_TRUE(ref.ok());
    EXPECT_TRUE(internal::SameArgs(*got, *ref));
    EXPECT_EQ(Names(*got), Names(*ref));
    ASSERT_EQ(got->nodes->size(), items.size());
    for (size_t i = 0; i < items.size(); ++i) EXPECT_EQ((*got->nodes)[i].text(), items[i]) << i;
    // Only the nodes not in the first list were read in full.
    int64_t unseen = 0;
    for (const std::string& item : items) unseen += std::find(all.begin(), all.end(), item) == all.end();
    const internal::NodeMemoStats memo = internal::NodeMemoCounts();
    EXPECT_EQ(memo.requests, 1);
    EXPECT_EQ(memo.read, unseen);
    EXPECT_EQ(memo.reused, static_cast<int64_t>(items.size()) - unseen);
  }
}

// Bad input with nodes read before in it: the reference's error, exactly
// (the memo only ever answers what the reference reads the same way).
TEST(ExtenderNodeMemo, BadItemsGiveTheReferencesErrors) {
  const std::vector<std::string> all = MemoList(40);
  const std::string known = all[7];
  const auto with = [&](size_t at, const std::string& item) {
    std::vector<std::string> v = all;
    v[at] = item;
    return MemoBody(v);
  };
  std::vector<std::string> bodies = {
      with(7, known.substr(0, known.size() - 1)),             // an item cut short
      with(7, "5"),                                           // not an object
      with(7, "null"),
      with(7, known + "}"),                                   // one brace too many
      with(7, known + " x"),                                  // garbage after a known node
      with(7, known.substr(0, known.size() - 2) + ",}}"),     // a trailing comma
      with(7, R"({"metadata": {"name": "n7", "x": "\xff"}})"),  // invalid UTF-8
      with(7, R"({"metadata": {"name": "n7", "x": "\x01"}})"),  // a control character
      with(7, R"({"metadata": {"name": 7}})"),                // valid: the name is not a string
      with(7, R"({"metadata": {"Name": "a", "NAME": "b"}})"),  // two spellings: the reference decides
      with(7, R"({"metadata": {"name": "n7"}, "x": 1e400})"),
      with(7, known + ", " + known),                          // valid: the node twice
      MemoBody(all).substr(0, MemoBody(all).size() - 1),      // the request cut short
      MemoBody(all) + " x",
      MemoBody(all) + "}",
      MemoBody(all, "w\"") ,                                  // damage in the Pod
      // Between known nodes (which one stand-in takes the place of, with
      // what lies between them): any JSON blank, and what is not one.
      MemoBody(all, "w-0", " \t\r\n,\n\t "),
      MemoBody(all, "w-0", ",\v"),
      MemoBody(all, "w-0", ",\f"),
      MemoBody(all, "w-0", ",,"),
      MemoBody(all, "w-0", " "),
      MemoBody(all, "w-0", ", /**/"),
      MemoBody(all, "w-0", std::string(",\0", 2)),
  };
  // The list's items key twice, escaped, or in the Pod; a second Nodes.
  std::string list = MemoBody(all);
  list = list.substr(list.find(R"({"metadata": {}, "items")"));
  list = list.substr(0, list.rfind(R"(, "NodeNames")"));
  bodies.push_back(R"({"Pod": {}, "Nodes": {"items": [], "Items": [)" + known + "]}}");
  bodies.push_back(R"({"Pod": {}, "Nodes": {"it\u0065ms": [)" + known + "]}}");
  bodies.push_back(R"({"Pod": {"x": )" + list + R"(}, "Nodes": {"items": [)" + known + "]}}");
  bodies.push_back(R"({"Pod": {}, "Nodes": )" + list + R"(, "nodes": null})");
  bodies.push_back(R"({"Pod": {}, "Nodes": {"items": [)" + known + R"(]}, "Extra": 1})");
  bodies.push_back(R"({"Pod": {}, "Nodes": {"items": [)" + known + "], \"metadata\": " + std::string(127, '[') +
                   std::string(127, ']') + "}}");
  // Known nodes inside a string (escaped quotes make no item there).
  bodies.push_back(R"({"Pod": {"s": ")" + json(known).dump().substr(1) + R"(}, "Nodes": {"items": [)" + known + "]}}");
  // A new node nested at the limit and one past it, among known ones.
  for (int depth : {123, 124, 125, 126}) {
    bodies.push_back(with(7, R"({"metadata": {"name": "n7"}, "x": )" + std::string(depth, '[') + std::string(depth, ']') + "}"));
  }
  for (const std::string& body : bodies) {
    internal::ForgetNodeList();
    ASSERT_TRUE(ParseExtenderArgs(MemoBody(all)).ok());
    ExpectSameAsReference(body);
  }

  // Random damage to a list that changed, every body read with the memo warm.
  std::vector<std::string> changed = all;
  changed[3] = MemoNode(3, 2);
  const std::string base = MemoBody(changed);
  std::mt19937 rng(11);
  const std::string alphabet = "{}[]\",:0-9eE.\\ nultrfsaPodNmeitms";
  internal::ForgetNodeList();
  ASSERT_TRUE(ParseExtenderArgs(MemoBody(all)).ok());
  const int64_t before = internal::NodeMemoCounts().requests;
  for (int i = 0; i < 300; ++i) {
    std::string b = base;
    for (int e = 0, edits = 1 + static_cast<int>(rng() % 2); e < edits; ++e) {
      const size_t at = rng() % b.size();
      switch (rng() % 3) {
        case 0: b.erase(at, 1 + rng() % 4); break;
        case 1: b.insert(at, 1, alphabet[rng() % alphabet.size()]); break;
        default: b[at] = alphabet[rng() % alphabet.size()]; break;
      }
    }
    ExpectSameAsReference(b);
  }
  // Some damage leaves a valid request, read with the memo.
  EXPECT_GT(internal::NodeMemoCounts().requests, before);
}

// Every HTTP thread has a memo of its own: two threads reading different
// lists at once get their own nodes (and TSan finds nothing shared).
TEST(ExtenderNodeMemo, EachThreadHasItsOwnMemo) {
  internal::ForgetNodeList();
  const std::vector<std::string> all = MemoList(40);
  ASSERT_TRUE(ParseExtenderArgs(MemoBody(all)).ok());
  std::atomic<int> wrong{0};
  const auto run = [&](int gpus) {
    // A fresh thread: its first list is read in full.
    if (internal::NodeMemoCounts().size != 0) ++wrong;
    std::vector<std::string> items = all;
    for (int r = 0; r < 200; ++r) {
      items[r % 40] = MemoNode(r % 40, gpus, "H100", std::to_string(r));
      auto a = ParseExtenderArgs(MemoBody(items));
      if (!a.ok() || a->nodes->size() != 40 || (*a->nodes)[r % 40].text() != items[r % 40]) {
        ++wrong;
        continue;
      }
      auto spec = ReadNode((*a->nodes)[r % 40].json(), DefaultTopologyLabels());
      if (!spec.ok() || spec->gpus.size() != static_cast<size_t>(gpus)) ++wrong;
    }
    if (internal::NodeMemoCounts().requests != 199) ++wrong;
  };
  std::thread a(run, 2);
  std::thread b(run, 4);
  a.join();
  b.join();
  EXPECT_EQ(wrong.load(), 0);
  // This thread's memo is untouched by theirs.
  EXPECT_EQ(internal::NodeMemoCounts().size, 40u);
  EXPECT_EQ(internal::NodeMemoCounts().requests, 0);
}

// A node changed in every request (a new resourceVersion each time): the
// memo keeps to its bound, and still answers every request.
TEST(ExtenderNodeMemo, TheMemoStaysBounded) {
  internal::ForgetNodeList();
  std::vector<std::string> items = MemoList(40);
  ASSERT_TRUE(ParseExtenderArgs(MemoBody(items)).ok());
  size_t largest = 0;
  for (int r = 0; r < 1000; ++r) {
    items[r % 3] = MemoNode(r % 3, 8, "H100", std::to_string(1000 + r));
    auto a = ParseExtenderArgs(MemoBody(items));
    ASSERT_TRUE(a.ok());
    ASSERT_EQ((*a->nodes)[r % 3].text(), items[r % 3]);
    largest = std::max(largest, internal::NodeMemoCounts().size);
  }
  const internal::NodeMemoStats memo = internal::NodeMemoCounts();
  EXPECT_EQ(memo.requests, 1000);
  EXPECT_EQ(memo.read, 1000);
  EXPECT_EQ(memo.capacity, 2 * 40 + 64u);
  EXPECT_LE(largest, memo.capacity);
  EXPECT_GE(largest, 100u);  // it did fill up before it was swept
}

TEST(ExtenderWire, FilterResultIsWrittenInPascalCaseWithNulls) {
  ExtenderFilterResult r;
  r.node_names = std::vector<std::string>{"n1"};
  r.failed_nodes["n2"] = "gang ml/bert: 3 of 4 member pods seen";
  const json j = json::parse(ToJson(r));
  EXPECT_TRUE(j.at("Nodes").is_null());
  EXPECT_EQ(j.at("NodeNames"), json({"n1"}));
  EXPECT_EQ(j.at("FailedNodes").at("n2"), "gang ml/bert: 3 of 4 member pods seen");
  EXPECT_TRUE(j.at("FailedAndUnresolvableNodes").is_object());
  EXPECT_EQ(j.at("Error"), "");
  auto back = ParseExtenderFilterResult(ToJson(r));
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(*back->node_names, *r.node_names);
  EXPECT_EQ(back->failed_nodes, r.failed_nodes);
}

TEST(ExtenderWire, PrioritizeAndBindRoundTrip) {
  const HostPriorityList l = {{"n1", kMaxExtenderPriority}, {"n2", kMinExtenderPriority}};
  EXPECT_EQ(json::parse(ToJson(l)), json::parse(R"([{"Host":"n1","Score":10},{"Host":"n2","Score":0}])"));
  auto back = ParseHostPriorityList(R"([{"host":"n1","score":10}])");
  ASSERT_TRUE(back.ok());
  EXPECT_EQ(back->at(0).host, "n1");
  EXPECT_EQ(back->at(0).score, 10);
  const ExtenderBindingArgs b{"w-0", "ml", "u-0", "n1"};
  EXPECT_EQ(json::parse(ToJson(b)),
            json::parse(R"({"PodName":"w-0","PodNamespace":"ml","PodUID":"u-0","Node":"n1"})"));
  EXPECT_EQ(json::parse(ToJson(ExtenderBindingResult{"no"})), json::parse(R"({"Error":"no"})"));
}

TEST(ExtenderWire, PreemptionArgsInBothForms) {
  // nodeCacheCapable false: full victim pods.
  auto full = ParseExtenderPreemptionArgs(R"({"Pod": {"metadata": {"name": "p"}},
      "NodeNameToVictims": {"n1": {"Pods": [{"metadata": {"name": "v", "uid": "uv"}}], "NumPDBViolations": 1}},
      "NodeNameToMetaVictims": null})");
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_TRUE(full->node_name_to_victims.has_value());
  EXPECT_FALSE(full->node_name_to_meta_victims.has_value());
  EXPECT_EQ(full->node_name_to_victims->at("n1").num_pdb_violations, 1);
  // nodeCacheCapable true: UIDs only.
  auto meta = ParseExtenderPreemptionArgs(R"({"Pod": {"metadata": {"name": "p"}}, "NodeNameToVictims": null,
      "NodeNameToMetaVictims": {"n1": {"Pods": [{"UID": "uv"}], "NumPDBViolations": 0}}})");
  ASSERT_TRUE(meta.ok()) << meta.status();
  EXPECT_EQ(meta->node_name_to_meta_victims->at("n1").pod_uids, std::vector<std::string>{"uv"});
  auto again = ParseExtenderPreemptionArgs(ToJson(*meta));
  ASSERT_TRUE(again.ok());
  EXPECT_EQ(again->node_name_to_meta_victims->at("n1").pod_uids, std::vector<std::string>{"uv"});
  ExtenderPreemptionResult r;
  r.node_name_to_meta_victims["n1"] = {{"uv"}, 0};
  EXPECT_EQ(json::parse(ToJson(r)),
            json::parse(R"({"NodeNameToMetaVictims":{"n1":{"Pods":[{"UID":"uv"}],"NumPDBViolations":0}}})"));
}

TEST(KubeObjects, Quantities) {
  EXPECT_EQ(*ParseKubeQuantity("500m", true), 500);
  EXPECT_EQ(*ParseKubeQuantity("2", true), 2000);
  EXPECT_EQ(*ParseKubeQuantity("1.5", true), 1500);
  EXPECT_EQ(*ParseKubeQuantity("0.1", true), 100);
  EXPECT_EQ(*ParseKubeQuantity("16Gi", false), int64_t{16} << 30);
  EXPECT_EQ(*ParseKubeQuantity("1G", false), 1'000'000'000);
  EXPECT_EQ(*ParseKubeQuantity("1e3", false), 1000);
  EXPECT_EQ(*ParseKubeQuantity("100m", false), 1);  // rounded up
  for (const char* bad : {"", "abc", "1Xi", "1.2.3", "--1", "1e", "99999999999999999999E"}) {
    EXPECT_ERROR(ParseKubeQuantity(bad, false), absl::StatusCode::kInvalidArgument, "") << bad;
  }
}

TEST(KubeObjects, ANegativeQuantityIsCalledNegative) {
  const auto q = ParseKubeQuantity("-8", false);
  ASSERT_ERROR(q, absl::StatusCode::kInvalidArgument, "'-8' is negative (a resource amount is 0 or more)");
  EXPECT_EQ(q.status().message(), "'-8' is negative (a resource amount is 0 or more)");
}

// A pod asking for 8, then a fraction of a GPU (a quantity of its own).
nlohmann::json GpuPod(const nlohmann::json& gpus) {
  return {{"metadata", {{"name", "p"}, {"uid", "u"}}},
          {"spec", {{"containers", {{{"resources", {{"limits", {{"nvidia.com/gpu", gpus}}}}}}}}}}};
}

TEST(KubeObjects, FractionalOrNegativeGpuRequestsAreRefusedNotRoundedUp) {
  ASSERT_EQ(ReadPod(GpuPod("8"))->gpus, 8);
  ASSERT_EQ(ReadPod(GpuPod(2))->gpus, 2);
  ASSERT_EQ(ReadPod(GpuPod("2000m"))->gpus, 2);  // a whole number, however written
  for (const char* fraction : {"0.5", "500m", "1.5"}) {
    const auto pod = ReadPod(GpuPod(fraction));
    ASSERT_FALSE(pod.ok()) << fraction << " read as " << pod->gpus << " GPUs";
    EXPECT_EQ(pod.status().message(),
              std::string("Pod.spec.containers[0].resources.limits.nvidia.com/gpu: '") + fraction +
                  "' is not a whole number of GPUs (ringmaster gives pods whole devices; GPU shares are for admin API "
                  "jobs)");
  }
  const auto negative = ReadPod(GpuPod("-8"));
  ASSERT_FALSE(negative.ok());
  EXPECT_NE(negative.status().message().find("'-8' is negative"), std::string_view::npos) << negative.status();
}

TEST(KubeObjects, PodRequestsAndGang) {
  auto a = ParseExtenderArgs(kFilterFullNodes);
  ASSERT_TRUE(a.ok());
  auto pod = ReadPod(a->pod);
  ASSERT_TRUE(pod.ok()) << pod.status();
  EXPECT_EQ(pod->Key(), "ml/w-0");
  EXPECT_EQ(pod->group, "bert");
  EXPECT_EQ(pod->gpus, 4);  // from limits
  auto volcano = ReadPod(json::parse(R"({"metadata": {"name": "v", "annotations":
      {"scheduling.k8s.io/group-name": "pg", "scheduling.volcano.sh/group-min-member": "3"}},
      "spec": {"containers": [{"resources": {"requests": {"cpu": "1", "nvidia.com/gpu": 1}}},
                              {"resources": {"requests": {"cpu": "500m"}}}],
               "initContainers": [{"resources": {"requests": {"cpu": "4"}}}]}})"));
  ASSERT_TRUE(volcano.ok()) << volcano.status();
  EXPECT_EQ(volcano->group, "pg");
  EXPECT_EQ(volcano->min_member, 3);
  EXPECT_EQ(volcano->request.cpu_milli(), 4000);  // the init container needs more than 1.5
  EXPECT_EQ(volcano->gpus, 1);
  auto bad = ReadPod(json::parse(R"({"metadata": {"name": "v", "annotations":
      {"scheduling.volcano.sh/group-min-member": "x"}}})"));
  ASSERT_FALSE(bad.ok());
  EXPECT_NE(bad.status().message().find("group-min-member"), std::string_view::npos);
}

TEST(KubeObjects, NodeInventoryAndDomains) {
  auto n = ReadNode(json::parse(R"({"metadata": {"name": "n1", "labels": {"nvidia.com/gpu.product": "A100",
      "topology.kubernetes.io/zone": "z1", "topology.ringmaster.io/rack": "r3"}},
      "status": {"allocatable": {"cpu": "64", "memory": "512Gi", "nvidia.com/gpu": "8"}}})"),
                    DefaultTopologyLabels());
  ASSERT_TRUE(n.ok()) << n.status();
  EXPECT_EQ(n->gpus.size(), 8u);
  EXPECT_EQ(n->gpus[0].model, "A100");
  EXPECT_EQ(n->allocatable.cpu_milli(), 64000);
  // rack, spine, zone; names carry their parents, a missing label is "-".
  EXPECT_EQ(n->domains, (std::vector<std::string>{"z1/-/r3", "z1/-", "z1"}));
  auto labels = ParseTopologyLabels("leaf=example.com/leaf,zone=topology.kubernetes.io/zone");
  ASSERT_TRUE(labels.ok());
  EXPECT_EQ(labels->tiers.size(), 2u);
  EXPECT_FALSE(ParseTopologyLabels("leaf").ok());
}

}  // namespace
}  // namespace ringmaster::server
