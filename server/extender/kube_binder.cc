// The API-server Binder (see kube_binder.h): one HTTP/1.1 request per bind
// on a fresh connection (TLS when https), bounded by the timeout.
#include "server/extender/kube_binder.h"

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cstdlib>
#include <fstream>
#include <map>
#include <sstream>
#include <vector>
#include <nlohmann/json.hpp>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/strip.h"
#include "server/extender/kube_objects.h"
#include "server/extender/volcano_queues.h"
#include "server/http/http_server.h"
#include "common/status_macros.h"

namespace ringmaster::server {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;

absl::StatusOr<std::string> ReadFile(const std::string& path, const char* what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(what, " ", path, ": cannot be read"));
  std::ostringstream s;
  s << in.rdbuf();
  return s.str();
}

class ApiServerBinder : public Binder {
 public:
  ApiServerBinder(ApiServerOptions options, bool tls, std::string host, uint16_t port,
                  std::unique_ptr<ssl::context> ctx)
      : options_(std::move(options)), tls_(tls), host_(std::move(host)), port_(port), ctx_(std::move(ctx)) {}

  absl::Status Bind(const ExtenderBindingArgs& b) override {
    const std::string ns = b.pod_namespace.empty() ? "default" : b.pod_namespace;
    nlohmann::json body{{"apiVersion", "v1"},
                        {"kind", "Binding"},
                        {"metadata", {{"name", b.pod_name}, {"namespace", ns}, {"uid", b.pod_uid}}},
                        {"target", {{"apiVersion", "v1"}, {"kind", "Node"}, {"name", b.node}}}};
    RM_ASSIGN_OR_RETURN(auto res, Post(absl::StrCat("/api/v1/namespaces/", ns, "/pods/", b.pod_name, "/binding"), body));
    const unsigned code = res.result_int();
    if (code == 200 || code == 201) return absl::OkStatus();
    return absl::FailedPreconditionError(absl::StrCat("API server answered ", code, ": ", res.body().substr(0, 300)));
  }

  // policy/v1 Eviction (what `kubectl drain` posts): the API server checks
  // PodDisruptionBudgets and deletes the pod with the grace period given.
  absl::Status Evict(const PodEviction& e) override {
    const std::string ns = e.pod_namespace.empty() ? "default" : e.pod_namespace;
    nlohmann::json options = nlohmann::json::object();
    if (e.grace_period_seconds >= 0) options["gracePeriodSeconds"] = e.grace_period_seconds;
    if (!e.pod_uid.empty()) options["preconditions"] = {{"uid", e.pod_uid}};
    nlohmann::json body{{"apiVersion", "policy/v1"},
                        {"kind", "Eviction"},
                        {"metadata", {{"name", e.pod_name}, {"namespace", ns}}},
                        {"deleteOptions", options}};
    RM_ASSIGN_OR_RETURN(auto res, Post(absl::StrCat("/api/v1/namespaces/", ns, "/pods/", e.pod_name, "/eviction"), body));
    const unsigned code = res.result_int();
    if (code == 200 || code == 201) return absl::OkStatus();
    if (code == 404) return absl::OkStatus();  // already gone
    const std::string why = absl::StrCat("evicting pod ", ns, "/", e.pod_name, ": API server answered ", code, ": ",
                                         res.body().substr(0, 300));
    // 429: a disruption budget forbids it now; try again later.
    if (code == 429) return absl::UnavailableError(why);
    return absl::FailedPreconditionError(why);
  }

  // GET of the PodGroup in scheduler-plugins' API group, then in Volcano's.
  absl::StatusOr<int> PodGroupMinMember(const std::string& ns, const std::string& group) override {
    std::vector<std::string> tried;
    for (const char* api : {"scheduling.x-k8s.io/v1alpha1", "scheduling.volcano.sh/v1beta1"}) {
      const std::string target = absl::StrCat("/apis/", api, "/namespaces/", ns, "/podgroups/", group);
      RM_ASSIGN_OR_RETURN(auto res, Send(http::verb::get, target, nullptr));
      const unsigned code = res.result_int();
      if (code == 404) {
        tried.push_back(api);
        continue;
      }
      if (code != 200) {
        return absl::FailedPreconditionError(
            absl::StrCat("reading PodGroup ", ns, "/", group, " (", api, "): API server answered ", code, ": ",
                         res.body().substr(0, 300)));
      }
      const nlohmann::json pg = nlohmann::json::parse(res.body(), nullptr, /*allow_exceptions=*/false);
      const nlohmann::json* spec = pg.is_object() ? FindKey(pg, "spec") : nullptr;
      const nlohmann::json* min = spec ? FindKey(*spec, "minMember") : nullptr;
      if (min == nullptr || !min->is_number_integer() || min->get<int64_t>() < 1 || min->get<int64_t>() > 100000) {
        return absl::FailedPreconditionError(absl::StrCat("PodGroup ", ns, "/", group, " (", api,
                                                          "): spec.minMember is not a count in [1, 100000]"));
      }
      return static_cast<int>(min->get<int64_t>());
    }
    return absl::NotFoundError(
        absl::StrCat("PodGroup ", ns, "/", group, " not found (", absl::StrJoin(tried, ", "), ")"));
  }

  // GET of the Node list, metadata only (PartialObjectMetadataList; a
  // server that ignores the Accept header sends a NodeList, read the same).
  absl::StatusOr<std::map<std::string, std::string>> ListNodes() override {
    RM_ASSIGN_OR_RETURN(auto res, Send(http::verb::get, "/api/v1/nodes", nullptr,
                                       "application/json;as=PartialObjectMetadataList;g=meta.k8s.io;v=v1,application/json"));
    if (res.result_int() != 200) {
      return absl::FailedPreconditionError(absl::StrCat("listing Nodes: API server answered ", res.result_int(), ": ",
                                                        res.body().substr(0, 300)));
    }
    const nlohmann::json list = nlohmann::json::parse(res.body(), nullptr, /*allow_exceptions=*/false);
    const nlohmann::json* items = list.is_object() ? FindKey(list, "items") : nullptr;
    if (items == nullptr || !items->is_array()) {
      return absl::FailedPreconditionError("listing Nodes: the answer is not a list with items");
    }
    std::map<std::string, std::string> out;
    for (const nlohmann::json& item : *items) {
      const nlohmann::json* meta = FindKey(item, "metadata");
      if (meta == nullptr) continue;
      auto name = StringAt(*meta, "name", "metadata.name");
      auto uid = StringAt(*meta, "uid", "metadata.uid");
      if (name.ok() && uid.ok() && !name->empty()) out[*name] = *uid;
    }
    return out;
  }

  absl::StatusOr<std::vector<BoundPod>> ListBoundPods() override {
    // spec.nodeName!=,status.phase!=Succeeded,status.phase!=Failed
    RM_ASSIGN_OR_RETURN(auto res, Send(http::verb::get,
                                       "/api/v1/pods?fieldSelector=spec.nodeName%21%3D%2Cstatus.phase%21%3DSucceeded"
                                       "%2Cstatus.phase%21%3DFailed",
                                       nullptr));
    if (res.result_int() != 200) {
      return absl::FailedPreconditionError(absl::StrCat("listing Pods: API server answered ", res.result_int(), ": ",
                                                        res.body().substr(0, 300)));
    }
    const nlohmann::json list = nlohmann::json::parse(res.body(), nullptr, /*allow_exceptions=*/false);
    const nlohmann::json* items = list.is_object() ? FindKey(list, "items") : nullptr;
    if (items == nullptr || !items->is_array()) {
      return absl::FailedPreconditionError("listing Pods: the answer is not a list with items");
    }
    std::vector<BoundPod> out;
    for (const nlohmann::json& item : *items) {
      const nlohmann::json* spec = FindKey(item, "spec");
      if (spec == nullptr || !spec->is_object()) continue;
      auto node = StringAt(*spec, "nodeName", "spec.nodeName");
      if (!node.ok() || node->empty()) continue;
      auto pod = ReadPod(item);
      if (!pod.ok()) continue;  // what it holds cannot be read: not counted
      out.push_back({pod->Key(), pod->uid, *node, pod->request, pod->gpus});
    }
    return out;
  }

  absl::StatusOr<nlohmann::json> ListVolcanoQueues() override {
    RM_ASSIGN_OR_RETURN(auto res, Send(http::verb::get, kVolcanoQueuesPath, nullptr));
    if (res.result_int() == 404) {
      return absl::NotFoundError(absl::StrCat("listing Volcano Queues: the API server has no ", kVolcanoQueuesPath,
                                              " (is Volcano's Queue CRD installed?)"));
    }
    if (res.result_int() != 200) {
      return absl::FailedPreconditionError(absl::StrCat("listing Volcano Queues: API server answered ",
                                                        res.result_int(), ": ", res.body().substr(0, 300)));
    }
    nlohmann::json list = nlohmann::json::parse(res.body(), nullptr, /*allow_exceptions=*/false);
    if (list.is_discarded()) return absl::FailedPreconditionError("listing Volcano Queues: the answer is not JSON");
    return list;
  }

 private:
  absl::StatusOr<http::response<http::string_body>> Post(const std::string& target, const nlohmann::json& body) {
    return Send(http::verb::post, target, &body);
  }

  // One request (with `body` as JSON when given) with the bearer token; the
  // answer, or Unavailable when the API server could not be reached.
  absl::StatusOr<http::response<http::string_body>> Send(http::verb verb, const std::string& target,
                                                         const nlohmann::json* body,
                                                         const char* accept = "application/json") {
    http::request<http::string_body> req{verb, target, 11};
    req.set(http::field::host, host_);
    if (body != nullptr) req.set(http::field::content_type, "application/json");
    req.set(http::field::accept, accept);
    std::string token = options_.token;
    if (!options_.token_file.empty()) {
      auto t = ReadFile(options_.token_file, "token file");
      if (!t.ok()) return absl::UnavailableError(t.status().message());
      token = std::string(absl::StripAsciiWhitespace(*t));
    }
    if (!token.empty()) req.set(http::field::authorization, absl::StrCat("Bearer ", token));
    if (body != nullptr) req.body() = body->dump(-1, ' ', false, nlohmann::json::error_handler_t::replace);
    req.prepare_payload();
    http::response<http::string_body> res;
    beast::error_code ec = tls_ ? RoundTripTls(req, res) : RoundTripPlain(req, res);
    if (ec) return absl::UnavailableError(absl::StrCat("API server ", options_.url, ": ", ec.message()));
    return res;
  }

  // Reads one answer; a Node list of a large cluster is bigger than Beast's
  // default 8 MB response limit.
  template <class Stream>
  static void ReadResponse(Stream& stream, http::response<http::string_body>& res, beast::error_code& ec) {
    beast::flat_buffer buffer;
    http::response_parser<http::string_body> parser;
    parser.body_limit(std::uint64_t{512} << 20);
    http::read(stream, buffer, parser, ec);
    if (!ec) res = parser.release();
  }

  // Connects the TCP stream under the request's deadline.
  void Connect(beast::tcp_stream& stream, beast::error_code& ec) {
    stream.expires_after(std::chrono::milliseconds(options_.timeout_ms));
    const auto addr = boost::asio::ip::make_address(host_, ec);
    if (ec) {  // a DNS name
      tcp::resolver resolver(stream.get_executor());
      auto results = resolver.resolve(host_, std::to_string(port_), ec);
      if (!ec) stream.connect(results, ec);
      return;
    }
    stream.connect(tcp::endpoint(addr, port_), ec);
  }

  beast::error_code RoundTripPlain(http::request<http::string_body>& req, http::response<http::string_body>& res) {
    boost::asio::io_context ioc;
    beast::tcp_stream stream(ioc);
    beast::error_code ec;
    Connect(stream, ec);
    if (!ec) http::write(stream, req, ec);
    if (!ec) ReadResponse(stream, res, ec);
    beast::error_code ignored;
    stream.socket().shutdown(tcp::socket::shutdown_both, ignored);
    return ec;
  }

  beast::error_code RoundTripTls(http::request<http::string_body>& req, http::response<http::string_body>& res) {
    boost::asio::io_context ioc;
    beast::ssl_stream<beast::tcp_stream> stream(ioc, *ctx_);
    beast::error_code ec;
    // SNI for names; the certificate must name the host (DNS or IP SAN).
    boost::system::error_code not_ip;
    boost::asio::ip::make_address(host_, not_ip);
    if (not_ip && !SSL_set_tlsext_host_name(stream.native_handle(), host_.c_str())) {
      return beast::error_code(static_cast<int>(::ERR_get_error()), boost::asio::error::get_ssl_category());
    }
    stream.set_verify_mode(ssl::verify_peer);
    stream.set_verify_callback(ssl::host_name_verification(host_));
    Connect(beast::get_lowest_layer(stream), ec);
    if (!ec) stream.handshake(ssl::stream_base::client, ec);
    if (!ec) http::write(stream, req, ec);
    if (!ec) ReadResponse(stream, res, ec);
    if (!ec) {
      beast::error_code ignored;
      stream.shutdown(ignored);  // servers often close without close_notify
    }
    return ec;
  }

  const ApiServerOptions options_;
  const bool tls_;
  const std::string host_;
  const uint16_t port_;
  std::unique_ptr<ssl::context> ctx_;
};

}  // namespace

absl::StatusOr<std::unique_ptr<Binder>> MakeApiServerBinder(ApiServerOptions options) {
  absl::string_view rest = options.url;
  const bool tls = absl::ConsumePrefix(&rest, "https://");
  if (!tls && !absl::ConsumePrefix(&rest, "http://")) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--api-server '", options.url, "': expected https://HOST:PORT, http://HOST:PORT (kubectl proxy) or in-cluster"));
  }
  while (!rest.empty() && rest.back() == '/') rest.remove_suffix(1);
  RM_ASSIGN_OR_RETURN(auto hp, ParseHostPort(std::string(rest)));
  std::unique_ptr<ssl::context> ctx;
  if (tls) {
    ctx = std::make_unique<ssl::context>(ssl::context::tls_client);
    ctx->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                     ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    boost::system::error_code ec;
    if (options.ca_file.empty()) {
      ctx->set_default_verify_paths(ec);
      if (ec) return absl::FailedPreconditionError(absl::StrCat("system CA certificates: ", ec.message()));
    } else {
      RM_ASSIGN_OR_RETURN(auto pem, ReadFile(options.ca_file, "CA file"));
      ctx->add_certificate_authority(boost::asio::buffer(pem), ec);
      if (ec) {
        return absl::InvalidArgumentError(
            absl::StrCat("CA file ", options.ca_file, ": no usable PEM certificate (", ec.message(), ")"));
      }
    }
  }
  std::string host = hp.first;
  const uint16_t port = hp.second;
  return std::unique_ptr<Binder>(new ApiServerBinder(std::move(options), tls, std::move(host), port, std::move(ctx)));
}

absl::StatusOr<ApiServerOptions> InClusterApiServer(const std::string& secrets_dir) {
  const char* host = std::getenv("KUBERNETES_SERVICE_HOST");
  const char* port = std::getenv("KUBERNETES_SERVICE_PORT");
  if (!host || !*host || !port || !*port) {
    return absl::FailedPreconditionError(
        "--api-server in-cluster: KUBERNETES_SERVICE_HOST and KUBERNETES_SERVICE_PORT are not set (not in a pod?)");
  }
  ApiServerOptions o;
  const std::string h = host;
  // An IPv6 service address goes in brackets.
  o.url = absl::StrCat("https://", h.find(':') != std::string::npos ? absl::StrCat("[", h, "]") : h, ":", port);
  o.token_file = secrets_dir + "/token";
  o.ca_file = secrets_dir + "/ca.crt";
  for (const std::string& f : {o.token_file, o.ca_file}) {
    if (!std::ifstream(f)) {
      return absl::FailedPreconditionError(
          absl::StrCat("--api-server in-cluster: ", f, " cannot be read (is a service account token mounted?)"));
    }
  }
  return o;
}

}  // namespace ringmaster::server
