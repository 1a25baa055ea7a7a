// Routing HTTP requests to the extender (see extender_http.h).
#include "server/extender_http.h"

#include <string_view>

#include <nlohmann/json.hpp>

namespace ringmaster::server {
namespace {

HttpResponse BadRequest(const absl::Status& s) {
  nlohmann::json j{{"Error", std::string(s.message())}};
  return {400, "application/json", j.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace)};
}

// The last path segment, without a query: "/scheduler/filter?x" -> "filter".
std::string_view Verb(std::string_view target) {
  target = target.substr(0, target.find('?'));
  while (!target.empty() && target.back() == '/') target.remove_suffix(1);
  const size_t slash = target.rfind('/');
  return slash == std::string_view::npos ? target : target.substr(slash + 1);
}

}  // namespace

HttpResponse HandleExtenderRequest(Extender& extender, const HttpRequest& request) {
  const std::string_view verb = Verb(request.target);
  if (verb == "healthz") {
    if (request.method != "GET" && request.method != "HEAD") return {405, "text/plain", "use GET\n"};
    return {200, "text/plain", "ok\n"};
  }
  const bool known = verb == "filter" || verb == "prioritize" || verb == "preempt" || verb == "bind";
  if (!known) return {404, "text/plain", "not found: POST filter, prioritize, preempt, bind; GET healthz\n"};
  if (request.method != "POST") return {405, "text/plain", "use POST\n"};
  if (verb == "filter" || verb == "prioritize") {
    auto args = ParseExtenderArgsPadded(request.body, request.body.capacity() - request.body.size());
    if (!args.ok()) return BadRequest(args.status());
    if (verb == "filter") return {200, "application/json", ToJson(extender.Filter(*args))};
    return {200, "application/json", ToJson(extender.Prioritize(*args))};
  }
  if (verb == "preempt") {
    auto args = ParseExtenderPreemptionArgs(request.body);
    if (!args.ok()) return BadRequest(args.status());
    return {200, "application/json", ToJson(extender.Preempt(*args))};
  }
  auto args = ParseExtenderBindingArgs(request.body);
  if (!args.ok()) return BadRequest(args.status());
  return {200, "application/json", ToJson(extender.Bind(*args))};
}

}  // namespace ringmaster::server
