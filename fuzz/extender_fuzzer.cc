// Fuzzes the extender's request path end to end, minus the socket: an
// engine that learns its nodes from the requests (as `ringmaster serve`
// without a cluster file), HandleExtenderRequest (server/extender/extender_http.h),
// and engine cycles between requests. The input is a series of requests
// separated by a line holding only "--"; each one's first byte picks the verb
// (filter, prioritize, preempt, bind) and the rest is its body. Properties:
// every request gets an answer (no crash, no exception), a 2xx or 4xx one;
// a bind is honoured only for a pod the extender had reserved on that very
// node (a stranger's bind never succeeds); a preempt answer names no node
// but the preemptor's reserved one; the engine's invariants hold after
// every cycle.
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"

#include "fuzz/fuzz_input.h"
#include "plugins/registry.h"
#include "scheduler/engine.h"
#include "scheduler/policy.h"
#include "server/extender/extender.h"
#include "server/extender/extender_http.h"
#include "server/extender/extender_wire.h"
#include "server/extender/kube_objects.h"

namespace ringmaster::fuzz {
namespace {

std::vector<std::string_view> SplitRequests(std::string_view text) {
  std::vector<std::string_view> out;
  while (true) {
    const size_t sep = text.find("\n--\n");
    out.push_back(text.substr(0, sep));
    if (sep == std::string_view::npos) return out;
    text.remove_prefix(sep + 4);
  }
}

void Run(std::string_view input) {
  static const scheduler::PluginRegistry registry = plugins::BuiltinRegistry();
  const server::TopologyLabels labels = server::DefaultTopologyLabels();
  auto cluster = topology::Cluster::Build(server::TierSpecs(labels), {});
  if (!cluster.ok()) Fail("empty cluster", cluster.status().ToString());
  scheduler::ManualClock clock(1'000'000);
  scheduler::EngineOptions opts;
  opts.auto_confirm_binds = false;
  opts.check_invariants = true;
  auto engine = scheduler::Engine::Create(*std::move(cluster), scheduler::DefaultPolicy(), registry, clock, opts);
  if (!engine.ok()) Fail("engine", engine.status().ToString());
  server::ExtenderOptions eo;
  eo.reservation_timeout_ms = 5'000;
  server::Extender extender(**engine, clock, eo, /*binder=*/nullptr);

  static constexpr const char* kVerbs[] = {"/filter", "/prioritize", "/preempt", "/bind"};
  int n = 0;
  for (std::string_view request : SplitRequests(input)) {
    if (request.empty() || ++n > 16) continue;
    const std::string verb = kVerbs[uint8_t(request[0]) % 4];
    server::HttpRequest r{"POST", verb, std::string(request.substr(1)), "fuzz"};
    // What was reserved before the request, for the properties below.
    std::optional<std::string> reserved;
    auto bind = verb == "/bind" ? server::ParseExtenderBindingArgs(r.body)
                                : absl::StatusOr<server::ExtenderBindingArgs>(absl::InvalidArgumentError(""));
    if (bind.ok()) {
      reserved = extender.ReservedNode(
          absl::StrCat(bind->pod_namespace.empty() ? "default" : bind->pod_namespace, "/", bind->pod_name));
    }
    std::optional<std::string> preemptor;
    if (verb == "/preempt") {
      if (auto p = server::ParseExtenderPreemptionArgs(r.body); p.ok()) {
        if (auto pod = server::ReadPod(p->pod); pod.ok()) preemptor = extender.ReservedNode(pod->Key());
      }
    }
    const server::HttpResponse answer = server::HandleExtenderRequest(extender, r);
    if (answer.status != 200 && answer.status != 400) Fail("unexpected status", std::to_string(answer.status));
    if (bind.ok() && answer.status == 200) {
      auto result = server::ParseExtenderBindingResult(answer.body);
      if (!result.ok()) Fail("a bind answer that does not parse", answer.body);
      if (result->error.empty() && reserved != bind->node) {
        Fail("a bind was honoured for a pod not reserved on that node", r.body);
      }
    }
    if (verb == "/preempt" && answer.status == 200) {
      auto result = server::ParseExtenderPreemptionResult(answer.body);
      if (!result.ok()) Fail("a preempt answer that does not parse", answer.body);
      for (const auto& [node, victims] : result->node_name_to_meta_victims) {
        if (preemptor != node) Fail("preempt kept victims off the preemptor's reserved node", node);
      }
    }
    clock.Advance(2'000);
    extender.Tick();
    if (absl::Status s = (*engine)->CheckInvariants(); !s.ok()) Fail("invariants", s.ToString());
  }
}

}  // namespace
}  // namespace ringmaster::fuzz

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ringmaster::fuzz::Run(ringmaster::fuzz::AsText(data, size));
  return 0;
}
