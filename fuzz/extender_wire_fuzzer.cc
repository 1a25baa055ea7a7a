// Fuzzes the extender's JSON wire types (server/extender/extender_wire.h) and the Pod
// and Node readers (server/extender/kube_objects.h). The first byte picks the message;
// the rest is its body. Properties: parsing never crashes or throws; what
// parses writes back to JSON that parses again and writes the same text; the
// fast path of ExtenderArgs agrees with the reference.
#include <string>

#include "fuzz/fuzz_input.h"
#include "server/extender/extender_wire.h"
#include "server/extender/extender_wire_fast.h"
#include "server/extender/kube_objects.h"

namespace ringmaster::fuzz {
namespace {

using server::ToJson;

// Parse -> write -> parse -> write must reach a fixed point at once.
template <typename T, typename ParseFn>
void RoundTrip(std::string_view body, ParseFn parse) {
  absl::StatusOr<T> first = parse(body);
  if (!first.ok()) return;
  const std::string written = ToJson(*first);
  absl::StatusOr<T> second = parse(written);
  if (!second.ok()) Fail("our own JSON does not parse", std::string(second.status().message()) + "\n" + written);
  const std::string again = ToJson(*second);
  if (again != written) Fail("writing is not stable", written + "\n" + again);
}

// The simdjson fast path accepts only what the nlohmann reference reads the
// same way, and gives the same values.
void FastAgrees(std::string_view body) {
  std::optional<server::ExtenderArgs> fast = server::internal::ParseExtenderArgsFast(body);
  if (!fast) return;
  absl::StatusOr<server::ExtenderArgs> ref = server::internal::ParseExtenderArgsDom(body);
  if (!ref.ok()) Fail("the fast path accepted what the reference refuses", std::string(ref.status().message()));
  if (!server::internal::SameArgs(*fast, *ref)) Fail("the fast path and the reference disagree", std::string(body));
}

void ReadObjects(std::string_view body) {
  auto args = server::ParseExtenderArgs(body);
  if (!args.ok()) return;
  (void)server::ReadPod(args->pod);
  (void)args->CandidateNames();
  if (!args->nodes) return;
  const server::TopologyLabels labels = server::DefaultTopologyLabels();
  for (const server::NodeObject& node : *args->nodes) (void)server::ReadNode(node.json(), labels);
}

}  // namespace
}  // namespace ringmaster::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringmaster::server;
  using ringmaster::fuzz::RoundTrip;
  if (size == 0) return 0;
  const std::string_view body = ringmaster::fuzz::AsText(data + 1, size - 1);
  switch (data[0] % 8) {
    case 0:
      ringmaster::fuzz::FastAgrees(body);
      RoundTrip<ExtenderArgs>(body, ParseExtenderArgs);
      break;
    case 1: RoundTrip<ExtenderBindingArgs>(body, ParseExtenderBindingArgs); break;
    case 2: RoundTrip<ExtenderPreemptionArgs>(body, ParseExtenderPreemptionArgs); break;
    case 3: RoundTrip<ExtenderFilterResult>(body, ParseExtenderFilterResult); break;
    case 4: RoundTrip<HostPriorityList>(body, ParseHostPriorityList); break;
    case 5: RoundTrip<ExtenderBindingResult>(body, ParseExtenderBindingResult); break;
    case 6: RoundTrip<ExtenderPreemptionResult>(body, ParseExtenderPreemptionResult); break;
    default: ringmaster::fuzz::ReadObjects(body); break;
  }
  return 0;
}
