// The API-server binder over HTTPS: the server's certificate is verified
// against the CA file and must name the host; the token is read from its
// file for every request; in-cluster settings come from the pod's
// environment and service-account files. A TLS server on 127.0.0.1 with
// certificates made by the openssl tool stands in for the API server.
#include <gtest/gtest.h>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/ssl.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "server/http/http_server.h"
#include "server/extender/kube_binder.h"

namespace ringmaster::server {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace ssl = boost::asio::ssl;
namespace fs = std::filesystem;
using tcp = boost::asio::ip::tcp;

void Write(const fs::path& p, const std::string& text) { std::ofstream(p) << text; }

// A CA, a server certificate it signs (SAN: IP 127.0.0.1 only), a client
// certificate it signs, and a second CA that signed nothing.
class Certs {
 public:
  Certs() : dir_(fs::temp_directory_path() / ("rm-tls-" + std::to_string(::getpid()))) {
    fs::create_directories(dir_);
    const std::string d = dir_.string();
    const std::string ec = "-newkey ec -pkeyopt ec_paramgen_curve:prime256v1 -nodes";
    Write(dir_ / "san.ext", "subjectAltName=IP:127.0.0.1\n");
    const std::string cmd =
        "cd " + d + " && openssl req -x509 " + ec + " -keyout ca.key -out ca.crt -days 1 -subj /CN=test-ca" +
        " && openssl req -x509 " + ec + " -keyout other.key -out other.crt -days 1 -subj /CN=other-ca" +
        " && openssl req " + ec + " -keyout srv.key -out srv.csr -subj /CN=kube-apiserver" +
        " && openssl x509 -req -in srv.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out srv.crt -days 1"
        " -extfile san.ext" +
        " && openssl req " + ec + " -keyout client.key -out client.csr -subj /CN=admin-client" +
        " && openssl x509 -req -in client.csr -CA ca.crt -CAkey ca.key -CAcreateserial -out client.crt -days 1";
    ok_ = std::system(("(" + cmd + ") >/dev/null 2>&1").c_str()) == 0;
  }
  ~Certs() { fs::remove_all(dir_); }
  bool ok() const { return ok_; }
  std::string path(const char* name) const { return (dir_ / name).string(); }

 private:
  fs::path dir_;
  bool ok_ = false;
};

// Serves `connections` TLS connections one after another, answering each
// request with 201 and recording its target and Authorization header.
class TlsApiServer {
 public:
  TlsApiServer(const Certs& certs, int connections) : ctx_(ssl::context::tls_server), acceptor_(ioc_) {
    ctx_.use_certificate_chain_file(certs.path("srv.crt"));
    ctx_.use_private_key_file(certs.path("srv.key"), ssl::context::pem);
    tcp::endpoint ep(boost::asio::ip::make_address("127.0.0.1"), 0);
    acceptor_.open(ep.protocol());
    acceptor_.bind(ep);
    acceptor_.listen();
    port_ = acceptor_.local_endpoint().port();
    thread_ = std::thread([this, connections] {
      for (int i = 0; i < connections; ++i) {
        beast::error_code ec;
        tcp::socket sock(ioc_);
        acceptor_.accept(sock, ec);
        if (ec) return;
        beast::ssl_stream<tcp::socket> stream(std::move(sock), ctx_);
        stream.handshake(ssl::stream_base::server, ec);
        if (ec) continue;  // the client refused the certificate
        beast::flat_buffer buf;
        http::request<http::string_body> req;
        http::read(stream, buf, req, ec);
        if (ec) continue;
        {
          std::lock_guard<std::mutex> lock(mu_);
          seen_.push_back({std::string(req.target()), std::string(req[http::field::authorization])});
        }
        http::response<http::string_body> res{http::status::created, 11};
        res.set(http::field::content_type, "application/json");
        res.body() = "{}";
        res.prepare_payload();
        http::write(stream, res, ec);
        stream.shutdown(ec);
      }
    });
  }
  ~TlsApiServer() { thread_.join(); }
  uint16_t port() const { return port_; }
  std::vector<std::pair<std::string, std::string>> seen() {
    std::lock_guard<std::mutex> lock(mu_);
    return seen_;
  }

 private:
  boost::asio::io_context ioc_;
  ssl::context ctx_;
  tcp::acceptor acceptor_;
  uint16_t port_ = 0;
  std::thread thread_;
  std::mutex mu_;
  std::vector<std::pair<std::string, std::string>> seen_;
};

const ExtenderBindingArgs kPod{"w-0", "ml", "u-0", "n1"};

TEST(ApiServerBinderTls, VerifiesTheServerAgainstTheCaAndRereadsTheToken) {
  Certs certs;
  ASSERT_TRUE(certs.ok()) << "openssl could not make the test certificates";
  // 1 and 2 succeed (the token changes between them); 3 uses the wrong CA;
  // 4 names the server as "localhost", which its certificate does not.
  TlsApiServer api(certs, 4);
  const std::string url = "https://127.0.0.1:" + std::to_string(api.port());
  const std::string token = certs.path("token");
  Write(token, "first-token\n");
  auto binder = MakeApiServerBinder({.url = url, .token_file = token, .ca_file = certs.path("ca.crt")});
  ASSERT_TRUE(binder.ok()) << binder.status();
  ASSERT_TRUE((*binder)->Bind(kPod).ok());
  Write(token, "rotated-token");
  ASSERT_TRUE((*binder)->Bind(kPod).ok());
  auto seen = api.seen();
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0].first, "/api/v1/namespaces/ml/pods/w-0/binding");
  EXPECT_EQ(seen[0].second, "Bearer first-token");
  EXPECT_EQ(seen[1].second, "Bearer rotated-token");

  auto wrong_ca = MakeApiServerBinder({.url = url, .ca_file = certs.path("other.crt")});
  ASSERT_TRUE(wrong_ca.ok()) << wrong_ca.status();
  const absl::Status refused = (*wrong_ca)->Bind(kPod);
  EXPECT_EQ(refused.code(), absl::StatusCode::kUnavailable) << refused;
  EXPECT_NE(refused.message().find("certificate verify failed"), std::string_view::npos) << refused;

  auto by_name = MakeApiServerBinder(
      {.url = "https://localhost:" + std::to_string(api.port()), .ca_file = certs.path("ca.crt")});
  ASSERT_TRUE(by_name.ok()) << by_name.status();
  const absl::Status mismatch = (*by_name)->Bind(kPod);
  EXPECT_EQ(mismatch.code(), absl::StatusCode::kUnavailable) << mismatch;
  EXPECT_EQ(api.seen().size(), 2u);  // neither refused client sent its request
}

// GET / over TLS to 127.0.0.1:port verifying the server against `ca`, with
// a client certificate when `cert` is given: the status, or -1 when the
// handshake or the request failed.
int GetOverTls(uint16_t port, const Certs& certs, const char* cert) {
  ssl::context ctx(ssl::context::tls_client);
  ctx.load_verify_file(certs.path("ca.crt"));
  if (cert) {
    ctx.use_certificate_chain_file(certs.path("client.crt"));
    ctx.use_private_key_file(certs.path("client.key"), ssl::context::pem);
  }
  boost::asio::io_context ioc;
  beast::ssl_stream<beast::tcp_stream> stream(ioc, ctx);
  stream.set_verify_mode(ssl::verify_peer);
  beast::get_lowest_layer(stream).expires_after(std::chrono::seconds(5));
  beast::error_code ec;
  beast::get_lowest_layer(stream).connect(tcp::endpoint(boost::asio::ip::make_address("127.0.0.1"), port), ec);
  if (!ec) stream.handshake(ssl::stream_base::client, ec);
  http::request<http::string_body> req{http::verb::get, "/", 11};
  req.set(http::field::host, "127.0.0.1");
  if (!ec) http::write(stream, req, ec);
  beast::flat_buffer buf;
  http::response<http::string_body> res;
  if (!ec) http::read(stream, buf, res, ec);
  return ec ? -1 : static_cast<int>(res.result_int());
}

TEST(HttpServerTls, ServesHttpsWithTheCertificateAndRefusesPlainHttp) {
  Certs certs;
  ASSERT_TRUE(certs.ok()) << "openssl could not make the test certificates";
  auto server = HttpServer::Start({.tls = {certs.path("srv.crt"), certs.path("srv.key"), ""}},
                                  [](const HttpRequest&) { return HttpResponse{201, "application/json", "{}"}; });
  ASSERT_TRUE(server.ok()) << server.status();
  const std::string port = std::to_string((*server)->port());
  // The binder is an HTTPS client that verifies the server: it gets through.
  auto https = MakeApiServerBinder({.url = "https://127.0.0.1:" + port, .ca_file = certs.path("ca.crt")});
  ASSERT_TRUE(https.ok()) << https.status();
  EXPECT_TRUE((*https)->Bind(kPod).ok());
  EXPECT_EQ(GetOverTls((*server)->port(), certs, nullptr), 201);
  // Plain HTTP to the TLS port gets no answer.
  auto plain = MakeApiServerBinder({.url = "http://127.0.0.1:" + port, .timeout_ms = 2'000});
  ASSERT_TRUE(plain.ok());
  EXPECT_FALSE((*plain)->Bind(kPod).ok());
  // A client that trusts another CA refuses the server.
  auto wrong = MakeApiServerBinder({.url = "https://127.0.0.1:" + port, .ca_file = certs.path("other.crt")});
  EXPECT_EQ((*wrong)->Bind(kPod).code(), absl::StatusCode::kUnavailable);
  EXPECT_EQ(GetOverTls((*server)->port(), certs, nullptr), 201);  // still serving
  (*server)->Stop();
}

TEST(HttpServerTls, WithAClientCaOnlyClientsWithACertificateItSignedGetIn) {
  Certs certs;
  ASSERT_TRUE(certs.ok()) << "openssl could not make the test certificates";
  auto server = HttpServer::Start({.tls = {certs.path("srv.crt"), certs.path("srv.key"), certs.path("ca.crt")}},
                                  [](const HttpRequest&) { return HttpResponse{200, "text/plain", "ok"}; });
  ASSERT_TRUE(server.ok()) << server.status();
  EXPECT_EQ(GetOverTls((*server)->port(), certs, "client"), 200);
  EXPECT_EQ(GetOverTls((*server)->port(), certs, nullptr), -1);
  (*server)->Stop();
}

TEST(HttpServerTls, MissingOrHalfGivenTlsFilesAreRefusedNamingThem) {
  Certs certs;
  ASSERT_TRUE(certs.ok()) << "openssl could not make the test certificates";
  const absl::Status no_key = HttpServer::Start({.tls = {certs.path("srv.crt"), "", ""}}, nullptr).status();
  EXPECT_NE(no_key.message().find("--tls-key"), std::string_view::npos) << no_key;
  const absl::Status missing =
      HttpServer::Start({.tls = {"/nonexistent/srv.crt", certs.path("srv.key"), ""}}, nullptr).status();
  EXPECT_NE(missing.message().find("/nonexistent/srv.crt"), std::string_view::npos) << missing;
  const absl::Status wrong_key =
      HttpServer::Start({.tls = {certs.path("srv.crt"), certs.path("other.key"), ""}}, nullptr).status();
  EXPECT_NE(wrong_key.message().find("TLS key"), std::string_view::npos) << wrong_key;
}

TEST(ApiServerBinderTls, RefusesBadUrlsAndCaFiles) {
  EXPECT_NE(MakeApiServerBinder({.url = "ftp://10.0.0.1:6443"}).status().message().find("expected https://"),
            std::string_view::npos);
  EXPECT_FALSE(MakeApiServerBinder({.url = "https://10.0.0.1"}).ok());  // no port
  const absl::Status missing = MakeApiServerBinder({.url = "https://10.0.0.1:6443", .ca_file = "/nonexistent/ca.crt"})
                                   .status();
  EXPECT_NE(missing.message().find("/nonexistent/ca.crt"), std::string_view::npos) << missing;
  const fs::path junk = fs::temp_directory_path() / ("rm-junk-ca-" + std::to_string(::getpid()));
  Write(junk, "not a certificate\n");
  const absl::Status bad = MakeApiServerBinder({.url = "https://10.0.0.1:6443", .ca_file = junk.string()}).status();
  EXPECT_NE(bad.message().find("no usable PEM certificate"), std::string_view::npos) << bad;
  fs::remove(junk);
}

TEST(ApiServerBinderTls, InClusterReadsThePodsEnvironmentAndServiceAccount) {
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  EXPECT_NE(InClusterApiServer("/nonexistent").status().message().find("KUBERNETES_SERVICE_HOST"),
            std::string_view::npos);
  ::setenv("KUBERNETES_SERVICE_HOST", "10.96.0.1", 1);
  ::setenv("KUBERNETES_SERVICE_PORT", "443", 1);
  const fs::path dir = fs::temp_directory_path() / ("rm-sa-" + std::to_string(::getpid()));
  fs::create_directories(dir);
  EXPECT_NE(InClusterApiServer(dir.string()).status().message().find("token cannot be read"), std::string_view::npos);
  Write(dir / "token", "t");
  Write(dir / "ca.crt", "c");
  auto o = InClusterApiServer(dir.string());
  ASSERT_TRUE(o.ok()) << o.status();
  EXPECT_EQ(o->url, "https://10.96.0.1:443");
  EXPECT_EQ(o->token_file, (dir / "token").string());
  EXPECT_EQ(o->ca_file, (dir / "ca.crt").string());
  ::setenv("KUBERNETES_SERVICE_HOST", "fd00::1", 1);
  EXPECT_EQ(InClusterApiServer(dir.string())->url, "https://[fd00::1]:443");
  ::unsetenv("KUBERNETES_SERVICE_HOST");
  ::unsetenv("KUBERNETES_SERVICE_PORT");
  fs::remove_all(dir);
}

}  // namespace
}  // namespace ringmaster::server
