// The fast path of ParseExtenderArgs (filter and prioritize, the requests
// kube-scheduler sends for every pod it schedules): simdjson reads the body
// and the parts the extender keeps become nlohmann::json / strings directly,
// without a DOM of the whole request.
//
// It answers only what it can answer exactly as the nlohmann path would (the
// reference, ParseExtenderArgsDom): a well-formed ExtenderArgs with no key
// outside Pod / Nodes / NodeNames, no two keys that fold to one name, numbers
// nlohmann reads the same way and nesting within the limit. Anything else —
// every error included — returns nullopt and ParseExtenderArgs takes the
// reference path, so errors keep their byte offsets and key paths. A unit
// test and the extender_wire fuzzer check that both paths agree.
#ifndef RINGMASTER_SERVER_EXTENDER_EXTENDER_WIRE_FAST_H_
#define RINGMASTER_SERVER_EXTENDER_EXTENDER_WIRE_FAST_H_

#include <cstdint>
#include <memory>
#include <optional>
#include <string>
#include <string_view>

#include "absl/status/statusor.h"
#include "server/extender/extender_wire.h"

namespace ringmaster::server::internal {

// `readable_past_end`: bytes readable past the body's end; with
// simdjson::SIMDJSON_PADDING (64) or more the body is parsed in place.
// `owned`, when it holds `body` itself, is where the nodes' texts point
// (no copy of the body is made).
//
// The node list read last on the calling thread is remembered: a request
// whose Nodes value is byte for byte that list (kube-scheduler sends the same
// candidates for pod after pod) reuses its nodes, and only the rest of the
// request is parsed. So are the Node objects read lately on the thread (a
// memo, by exact text, bounded to about twice the longest list): a request
// whose list changed (a Node updated, another subset offered) reads in full
// only its items that are not among them.
std::optional<ExtenderArgs> ParseExtenderArgsFast(std::string_view body, size_t readable_past_end = 0,
                                                  const std::shared_ptr<const std::string>& owned = nullptr);
// Requests answered from the remembered node list on this thread (tests),
// and forgetting it and the memo.
int64_t NodeListCacheHits();
void ForgetNodeList();
// The memo of this thread (tests): requests read with it, the nodes they
// took from it and read in full, the nodes it holds and may hold.
struct NodeMemoStats {
  int64_t requests = 0;
  int64_t reused = 0;
  int64_t read = 0;
  size_t size = 0;
  size_t capacity = 0;
};
NodeMemoStats NodeMemoCounts();
absl::StatusOr<ExtenderArgs> ParseExtenderArgsDom(std::string_view body);

// Both paths' results compare equal (tests).
bool SameArgs(const ExtenderArgs& a, const ExtenderArgs& b);

}  // namespace ringmaster::server::internal

#endif  // RINGMASTER_SERVER_EXTENDER_EXTENDER_WIRE_FAST_H_
