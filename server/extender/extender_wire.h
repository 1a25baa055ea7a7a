// kube-scheduler's extender v1 wire types (k8s.io/kube-scheduler/extender/v1),
// as JSON. kube-scheduler POSTs ExtenderArgs to /filter and /prioritize,
// ExtenderPreemptionArgs to /preempt and ExtenderBindingArgs to /bind, and
// decodes our answers with Go's encoding/json.
//
// The Go structs carry no json tags, so the keys are the Go field names
// (PascalCase). We read every key case-insensitively (an exact match wins, as
// in Go) and write PascalCase, with `null` for an absent list, map or object
// as Go writes a nil one. Pod and Node objects stay JSON here (they are echoed
// back as received); server/extender/kube_objects.h reads what the scheduler needs.
//
// Parsing never throws: malformed JSON or a wrong type is an InvalidArgument
// status that says what was expected and where (byte offset or key path).
#ifndef RINGMASTER_SERVER_EXTENDER_EXTENDER_WIRE_H_
#define RINGMASTER_SERVER_EXTENDER_EXTENDER_WIRE_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <nlohmann/json.hpp>

#include "absl/status/statusor.h"

namespace ringmaster::server {

// Scores a prioritize answer may hold (MinExtenderPriority, MaxExtenderPriority).
inline constexpr int64_t kMinExtenderPriority = 0;
inline constexpr int64_t kMaxExtenderPriority = 10;

// A Node object of a filter or prioritize request (nodeCacheCapable
// false: every request carries every candidate's). Its name and UID are read
// with the request; the object is kept as compact JSON text and parsed only
// when it is needed (a node to learn, the passing node echoed back), so a
// node the extender knows costs a name lookup, not a parse.
//
// The name, UID and text are shared by the object's copies (and by the fast
// parser's memo of the nodes it read before, extender_wire_fast.h): a copy is
// one reference count, and what is shared never changes once made, so copies
// on different threads read it without a lock.
class NodeObject {
 public:
  // What the fast parser read of a node: metadata.name and metadata.uid as
  // the reference reads them ("" when absent or not strings), and the
  // object's JSON text as sent. Whoever holds a Text keeps its text alive.
  // A word the reader of a node may keep with it (the extender: the
  // cluster's id for the name, tagged with the cluster's name epoch), so that
  // a node read before costs no name lookup. Atomic: copies of one node on
  // several threads share it; 0 is "nothing kept".
  class Hint {
   public:
    Hint() = default;
    Hint(const Hint& o) : word_(o.get()) {}
    Hint& operator=(const Hint& o) {
      word_.store(o.get(), std::memory_order_relaxed);
      return *this;
    }
    uint64_t get() const { return word_.load(std::memory_order_relaxed); }
    void set(uint64_t w) const { word_.store(w, std::memory_order_relaxed); }

   private:
    mutable std::atomic<uint64_t> word_{0};
  };
  struct Text {
    std::string name;
    std::string uid;
    std::string_view text;
    Hint hint;
  };

  NodeObject() : NodeObject(nlohmann::json::object()) {}
  // From a parsed object (the reference parser, tests).
  NodeObject(nlohmann::json object);  // NOLINT: implicit, a Node object is one
  // From the fast parser: `read` holds the name, UID and text (and keeps the
  // buffer the text points into, e.g. by the aliasing constructor).
  static NodeObject FromShared(std::shared_ptr<const Text> read);
  // From the fast parser, with a copy of the text of its own.
  static NodeObject Owning(std::string name, std::string uid, std::string_view text);

  const std::string& name() const { return read_->name; }
  const std::string& uid() const { return read_->uid; }
  // The object as JSON text: as sent (fast parser), or compact with invalid
  // UTF-8 replaced (from a parsed object).
  std::string_view text() const { return read_->text; }
  // The word its reader kept with it (Hint), shared by every copy.
  uint64_t hint() const { return read_->hint.get(); }
  void set_hint(uint64_t w) const { read_->hint.set(w); }
  // The object; parsed from the text on first use (not thread-safe: one
  // copy is read by one thread; each copy parses for itself).
  const nlohmann::json& json() const;
  bool operator==(const NodeObject& o) const { return json() == o.json(); }

 private:
  explicit NodeObject(std::shared_ptr<const Text> read) : read_(std::move(read)) {}

  std::shared_ptr<const Text> read_;
  mutable std::optional<nlohmann::json> json_;
};
// Node objects from parsed ones (tests).
std::vector<NodeObject> NodeObjects(const std::vector<nlohmann::json>& objects);

// Filter and prioritize request. With nodeCacheCapable false kube-scheduler
// sends every candidate Node object (`Nodes`, a NodeList) and NodeNames null;
// with true only `NodeNames`.
struct ExtenderArgs {
  nlohmann::json pod;  // a v1.Pod object
  std::optional<std::vector<NodeObject>> nodes;  // NodeList items
  std::optional<std::vector<std::string>> node_names;
  // The candidate names either way (Nodes' metadata.name, or NodeNames).
  std::vector<std::string> CandidateNames() const;
};

// Filter answer. `nodes` or `node_names` holds the nodes that pass (answer in
// the form the request came in); the maps give each failed node's reason.
struct ExtenderFilterResult {
  std::optional<std::vector<nlohmann::json>> nodes;
  std::optional<std::vector<std::string>> node_names;
  std::map<std::string, std::string> failed_nodes;
  std::map<std::string, std::string> failed_and_unresolvable_nodes;
  std::string error;
};

struct HostPriority {
  std::string host;
  int64_t score = 0;
};
using HostPriorityList = std::vector<HostPriority>;

struct ExtenderBindingArgs {
  std::string pod_name;
  std::string pod_namespace;
  std::string pod_uid;
  std::string node;
};

struct ExtenderBindingResult {
  std::string error;
};

// Victims on one node: full Pod objects (nodeCacheCapable false) or only
// their UIDs (MetaVictims, nodeCacheCapable true).
struct Victims {
  std::vector<nlohmann::json> pods;
  int64_t num_pdb_violations = 0;
};
struct MetaVictims {
  std::vector<std::string> pod_uids;
  int64_t num_pdb_violations = 0;
};

struct ExtenderPreemptionArgs {
  nlohmann::json pod;
  std::optional<std::map<std::string, Victims>> node_name_to_victims;
  std::optional<std::map<std::string, MetaVictims>> node_name_to_meta_victims;
};

// The extender always answers in the Meta form.
struct ExtenderPreemptionResult {
  std::map<std::string, MetaVictims> node_name_to_meta_victims;
};

// --- Parsing (requests; answers too, for tests and clients) -----------------
absl::StatusOr<ExtenderArgs> ParseExtenderArgs(std::string_view body);
// The same, for a body whose memory stays readable `readable_past_end` bytes
// past its end (an HTTP body, kHttpBodyPadding): with 64 or more the fast
// path parses it in place, without copying it first.
absl::StatusOr<ExtenderArgs> ParseExtenderArgsPadded(std::string_view body, size_t readable_past_end);
// The same, keeping the body: the Node objects' texts point into it, so it
// is not copied (an HTTP body, whose capacity leaves the padding).
absl::StatusOr<ExtenderArgs> ParseExtenderArgsOwned(std::string body);
absl::StatusOr<ExtenderBindingArgs> ParseExtenderBindingArgs(std::string_view body);
absl::StatusOr<ExtenderPreemptionArgs> ParseExtenderPreemptionArgs(std::string_view body);
absl::StatusOr<ExtenderFilterResult> ParseExtenderFilterResult(std::string_view body);
absl::StatusOr<HostPriorityList> ParseHostPriorityList(std::string_view body);
absl::StatusOr<ExtenderBindingResult> ParseExtenderBindingResult(std::string_view body);
absl::StatusOr<ExtenderPreemptionResult> ParseExtenderPreemptionResult(std::string_view body);

// --- Writing, as kube-scheduler writes them ---------------------------------
std::string ToJson(const ExtenderArgs& a);
std::string ToJson(const ExtenderFilterResult& r);
std::string ToJson(const HostPriorityList& l);
std::string ToJson(const ExtenderBindingArgs& a);
std::string ToJson(const ExtenderBindingResult& r);
std::string ToJson(const ExtenderPreemptionArgs& a);
std::string ToJson(const ExtenderPreemptionResult& r);

// --- Reading JSON the way Go does --------------------------------------------
// The member of `obj` named `key`: an exact match first, else the first
// case-insensitive one; nullptr when absent or when `obj` is not an object.
const nlohmann::json* FindKey(const nlohmann::json& obj, std::string_view key);
// A string member ("" when absent or null); an error naming `path` when it
// has another type.
absl::StatusOr<std::string> StringAt(const nlohmann::json& obj, std::string_view key, std::string_view path);

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_EXTENDER_EXTENDER_WIRE_H_
