// The HTTP server on Boost.Beast (see http_server.h): one io_context run by
// a few threads, an acceptor, and a session per connection that reads a
// request, calls the handler and writes the answer, until the peer closes.
#include "server/http_server.h"

#include <atomic>
#include <charconv>
#include <optional>
#include <thread>
#include <vector>

#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/asio/strand.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>

#include "absl/strings/str_cat.h"

namespace ringmaster::server {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
using tcp = boost::asio::ip::tcp;

// One connection: read a request, answer it, and again while keep-alive.
class Session : public std::enable_shared_from_this<Session> {
 public:
  Session(tcp::socket socket, const HttpHandler& handler, const HttpServerOptions& options)
      : stream_(std::move(socket)), handler_(handler), options_(options) {}

  void Read() {
    parser_.emplace();
    parser_->body_limit(options_.body_limit);
    stream_.expires_after(std::chrono::milliseconds(options_.idle_timeout_ms));
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::OnRead, shared_from_this()));
  }

 private:
  void OnRead(beast::error_code ec, size_t) {
    if (ec == http::error::body_limit) {
      Answer({413, "application/json",
              absl::StrCat(R"({"Error":"request body too large: the limit is )", options_.body_limit, R"( bytes"})")},
             11, false);
      return;
    }
    if (ec) {
      stream_.socket().shutdown(tcp::socket::shutdown_both, ec);
      return;
    }
    http::request<http::string_body> req = parser_->release();
    HttpRequest r{std::string(req.method_string()), std::string(req.target()), std::move(req.body())};
    HttpResponse out;
    try {
      out = handler_(r);
    } catch (const std::exception& e) {
      out = {500, "text/plain", absl::StrCat("internal error: ", e.what(), "\n")};
    }
    Answer(std::move(out), req.version(), req.keep_alive());
  }

  void Answer(HttpResponse out, unsigned version, bool keep_alive) {
    res_ = {};
    res_.version(version);
    res_.result(static_cast<http::status>(out.status));
    res_.set(http::field::server, "ringmaster");
    res_.set(http::field::content_type, out.content_type);
    res_.keep_alive(keep_alive);
    res_.body() = std::move(out.body);
    res_.prepare_payload();
    http::async_write(stream_, res_,
                      beast::bind_front_handler(&Session::OnWrite, shared_from_this(), !keep_alive));
  }

  void OnWrite(bool close, beast::error_code ec, size_t) {
    if (ec) return;
    if (close) {
      stream_.socket().shutdown(tcp::socket::shutdown_send, ec);
      return;
    }
    Read();
  }

  beast::tcp_stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<http::string_body>> parser_;
  http::response<http::string_body> res_;
  const HttpHandler& handler_;
  const HttpServerOptions& options_;
};

class BeastServer : public HttpServer {
 public:
  BeastServer(HttpServerOptions options, HttpHandler handler)
      : options_(std::move(options)), handler_(std::move(handler)), acceptor_(ioc_) {}
  ~BeastServer() override { Stop(); }

  absl::Status Listen() {
    beast::error_code ec;
    const net::ip::address addr = net::ip::make_address(options_.address, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("address '", options_.address, "': ", ec.message()));
    const tcp::endpoint ep(addr, options_.port);
    acceptor_.open(ep.protocol(), ec);
    if (!ec) acceptor_.set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_.bind(ep, ec);
    if (!ec) acceptor_.listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("listen on ", options_.address, ":", options_.port, ": ", ec.message()));
    }
    port_ = acceptor_.local_endpoint().port();
    Accept();
    for (int i = 0; i < std::max(1, options_.threads); ++i) threads_.emplace_back([this] { ioc_.run(); });
    return absl::OkStatus();
  }

  uint16_t port() const override { return port_; }

  void Stop() override {
    if (stopped_.exchange(true)) return;
    net::post(ioc_, [this] {
      beast::error_code ec;
      acceptor_.close(ec);
    });
    ioc_.stop();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void Accept() {
    acceptor_.async_accept(net::make_strand(ioc_), [this](beast::error_code ec, tcp::socket socket) {
      if (!ec) std::make_shared<Session>(std::move(socket), handler_, options_)->Read();
      if (acceptor_.is_open() && !stopped_) Accept();
    });
  }

  const HttpServerOptions options_;
  const HttpHandler handler_;
  // Declared before the acceptor and the sessions' sockets, destroyed after.
  net::io_context ioc_;
  tcp::acceptor acceptor_;
  std::vector<std::thread> threads_;
  std::atomic<bool> stopped_{false};
  uint16_t port_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options, HttpHandler handler) {
  auto server = std::make_unique<BeastServer>(std::move(options), std::move(handler));
  if (absl::Status s = server->Listen(); !s.ok()) return s;
  return server;
}

absl::StatusOr<std::pair<std::string, uint16_t>> ParseHostPort(const std::string& text) {
  const size_t colon = text.rfind(':');
  if (colon == std::string::npos) return absl::InvalidArgumentError(absl::StrCat("'", text, "': expected HOST:PORT"));
  std::string host = text.substr(0, colon);
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') host = host.substr(1, host.size() - 2);
  if (host.empty()) host = "127.0.0.1";
  int port = -1;
  const char* b = text.data() + colon + 1;
  const char* e = text.data() + text.size();
  auto [p, ec] = std::from_chars(b, e, port);
  if (ec != std::errc() || p != e || port < 0 || port > 65535) {
    return absl::InvalidArgumentError(absl::StrCat("'", text, "': port must be in [0, 65535]"));
  }
  return std::pair{host, static_cast<uint16_t>(port)};
}

}  // namespace ringmaster::server
