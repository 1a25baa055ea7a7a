// Routing HTTP requests to the extender (see extender_http.h).
#include "server/extender/extender_http.h"

#include <string_view>

#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"

namespace ringmaster::server {
namespace {

// Every error answer is JSON {"Error": "..."}, as the answers are.
HttpResponse ErrorAnswer(int status, std::string_view message) {
  nlohmann::json j{{"Error", std::string(message)}};
  return {status, "application/json", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

HttpResponse BadRequest(const absl::Status& s) { return ErrorAnswer(400, std::string(s.message())); }

// The Pod of a filter, prioritize or preempt request: absent or null is a
// request that asks nothing.
bool NoPod(const nlohmann::json& pod) { return pod.is_null() || (pod.is_object() && pod.empty()); }

// The last path segment, without a query: "/scheduler/filter?x" -> "filter".
std::string_view Verb(std::string_view target) {
  target = target.substr(0, target.find('?'));
  while (!target.empty() && target.back() == '/') target.remove_suffix(1);
  const size_t slash = target.rfind('/');
  return slash == std::string_view::npos ? target : target.substr(slash + 1);
}

}  // namespace

HttpResponse HandleHealthRequest(const HttpRequest& request) {
  if (Verb(request.target) != "healthz" || request.target.rfind("/healthz", 0) != 0) {
    return ErrorAnswer(404, "not found: this port serves GET /healthz and /metrics only");
  }
  if (request.method != "GET" && request.method != "HEAD") return ErrorAnswer(405, "healthz: use GET");
  return {200, "text/plain", "ok\n"};
}

HttpResponse HandleExtenderRequest(Extender& extender, HttpRequest& request) {
  const std::string_view verb = Verb(request.target);
  if (verb == "healthz") {
    if (request.method != "GET" && request.method != "HEAD") return ErrorAnswer(405, "healthz: use GET");
    return {200, "text/plain", "ok\n"};
  }
  const bool known = verb == "filter" || verb == "prioritize" || verb == "preempt" || verb == "bind";
  if (!known) return ErrorAnswer(404, "not found: POST filter, prioritize, preempt, bind; GET healthz, metrics");
  if (request.method != "POST") return ErrorAnswer(405, absl::StrCat(std::string(verb), ": use POST"));
  if (verb == "filter" || verb == "prioritize") {
    auto args = ParseExtenderArgsOwned(std::move(request.body));
    if (!args.ok()) return BadRequest(args.status());
    if (NoPod(args->pod)) return ErrorAnswer(400, "Pod: missing (ExtenderArgs carries the Pod to schedule)");
    if (verb == "filter") return {200, "application/json", ToJson(extender.Filter(*args, request.peer))};
    return {200, "application/json", ToJson(extender.Prioritize(*args))};
  }
  if (verb == "preempt") {
    auto args = ParseExtenderPreemptionArgs(request.body);
    if (!args.ok()) return BadRequest(args.status());
    if (NoPod(args->pod)) return ErrorAnswer(400, "Pod: missing (ExtenderPreemptionArgs carries the preemptor Pod)");
    return {200, "application/json", ToJson(extender.Preempt(*args))};
  }
  auto args = ParseExtenderBindingArgs(request.body);
  if (!args.ok()) return BadRequest(args.status());
  if (args->pod_name.empty()) return ErrorAnswer(400, "PodName: missing (ExtenderBindingArgs names the pod to bind)");
  if (args->node.empty()) return ErrorAnswer(400, "Node: missing (ExtenderBindingArgs names the node to bind to)");
  return {200, "application/json", ToJson(extender.Bind(*args, request.peer))};
}

}  // namespace ringmaster::server
