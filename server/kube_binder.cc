// The API-server Binder (see kube_binder.h): one HTTP/1.1 request per bind
// on a fresh connection, bounded by the timeout.
#include "server/kube_binder.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "server/http_server.h"

namespace ringmaster::server {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
using tcp = boost::asio::ip::tcp;

class ApiServerBinder : public Binder {
 public:
  ApiServerBinder(ApiServerOptions options, std::string host, uint16_t port)
      : options_(std::move(options)), host_(std::move(host)), port_(port) {}

  absl::Status Bind(const ExtenderBindingArgs& b) override {
    const std::string ns = b.pod_namespace.empty() ? "default" : b.pod_namespace;
    nlohmann::json body{{"apiVersion", "v1"},
                        {"kind", "Binding"},
                        {"metadata", {{"name", b.pod_name}, {"namespace", ns}, {"uid", b.pod_uid}}},
                        {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", b.node}}}};
    http::request<http::string_body> req{http::verb::post,
                                         absl::StrCat("/api/v1/namespaces/", ns, "/pods/", b.pod_name, "/binding"), 11};
    req.set(http::field::host, host_);
    req.set(http::field::content_type, "application/json");
    if (!options_.token.empty()) req.set(http::field::authorization, absl::StrCat("Bearer ", options_.token));
    req.body() = body.dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    req.prepare_payload();
    boost::asio::io_context ioc;
    beast::tcp_stream stream(ioc);
    beast::error_code ec;
    stream.expires_after(std::chrono::milliseconds(options_.timeout_ms));
    const auto addr = boost::asio::ip::make_address(host_, ec);
    if (!ec) stream.connect(tcp::endpoint(addr, port_), ec);
    if (!ec) http::write(stream, req, ec);
    beast::flat_buffer buffer;
    http::response<http::string_body> res;
    if (!ec) http::read(stream, buffer, res, ec);
    if (ec) return absl::UnavailableError(absl::StrCat("API server ", options_.url, ": ", ec.message()));
    stream.socket().shutdown(tcp::socket::shutdown_both, ec);
    const unsigned code = res.result_int();
    if (code == 200 || code == 201) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat("API server answered ", code, ": ", res.body().substr(0, 300)));
  }

 private:
  const ApiServerOptions options_;
  const std::string host_;
  const uint16_t port_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Binder>> MakeApiServerBinder(ApiServerOptions options) {
  constexpr std::string_view kScheme = "http://";
  if (!options.url.starts_with(kScheme)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--api-server '", options.url, "': only http://HOST:PORT for now (kubectl proxy); HTTPS is not implemented"));
  }
  std::string rest = options.url.substr(kScheme.size());
  while (!rest.empty() && rest.back() == '/') rest.pop_back();
  auto hp = ParseHostPort(rest);
  if (!hp.ok()) return hp.status();
  std::string host = hp->first;
  const uint16_t port = hp->second;
  return std::unique_ptr<Binder>(new ApiServerBinder(std::move(options), std::move(host), port));
}

}  // namespace ringmaster::server
