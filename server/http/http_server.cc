// The HTTP server on Boost.Beast (see http_server.h): one io_context per
// thread (each run by its thread alone, so asio takes no locks and wakes no
// other thread for a connection's work), an acceptor that hands each new
// connection to the next context in turn, and a session per connection that
// reads a request, calls the handler and writes the answer, until the peer
// closes; over TLS when a certificate is given.
#include "server/http/http_server.h"

#include <array>
#include <atomic>
#include <charconv>
#include <memory>
#include <optional>
#include <type_traits>
#include <thread>
#include <vector>

#include <boost/asio/executor_work_guard.hpp>
#include <boost/asio/ip/tcp.hpp>
#include <boost/asio/post.hpp>
#include <boost/beast/core.hpp>
#include <boost/beast/http.hpp>
#include <boost/beast/ssl.hpp>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::server {
namespace {

namespace beast = boost::beast;
namespace http = boost::beast::http;
namespace net = boost::asio;
namespace ssl = boost::asio::ssl;
using tcp = boost::asio::ip::tcp;

// http::string_body without its zero fill (its reader resizes the string,
// then copies into it): appends what arrives, and with a Content-Length
// reserves kHttpBodyPadding bytes past the body's end.
struct PaddedStringBody {
  using value_type = std::string;
  static std::uint64_t size(const value_type& body) { return body.size(); }
  class reader {
   public:
    template <bool isRequest, class Fields>
    reader(http::header<isRequest, Fields>&, value_type& body) : body_(body) {}
    void init(const boost::optional<std::uint64_t>& length, beast::error_code& ec) {
      ec = {};
      if (!length) return;
      if (*length > body_.max_size() - kHttpBodyPadding) {
        ec = http::error::buffer_overflow;
        return;
      }
      body_.reserve(static_cast<size_t>(*length) + kHttpBodyPadding);
    }
    template <class ConstBufferSequence>
    std::size_t put(const ConstBufferSequence& buffers, beast::error_code& ec) {
      ec = {};
      std::size_t n = 0;
      for (const auto b : beast::buffers_range_ref(buffers)) {
        body_.append(static_cast<const char*>(b.data()), b.size());
        n += b.size();
      }
      return n;
    }
    void finish(beast::error_code& ec) { ec = {}; }

   private:
    value_type& body_;
  };
};

// One connection: (TLS: the handshake, then) read a request, answer it,
// and again while keep-alive. Stream: beast::tcp_stream, or
// beast::ssl_stream over one.
template <class Stream>
class Session : public std::enable_shared_from_this<Session<Stream>> {
  static constexpr bool kTls = !std::is_same_v<Stream, beast::tcp_stream>;
  static constexpr size_t kReadBuffer = 64 * 1024;  // Beast reads at most 64 KiB at a time

 public:
  Session(Stream stream, const HttpHandler& handler, const HttpServerOptions& options)
      : stream_(std::move(stream)), handler_(handler), options_(options) {}

  void Start() {
    // Room for a whole request per read: a flat_buffer starts empty and
    // Beast then reads 512 bytes at a time (a 13 KB filter request took 27
    // recvmsg, 28 timer updates and 28 epoll_waits).
    buffer_.reserve(kReadBuffer);
    if constexpr (kTls) {
      // The handshake is bounded like a request: a peer that stalls it (or
      // speaks plain HTTP to it) is dropped.
      Lowest().expires_after(std::chrono::milliseconds(options_.idle_timeout_ms));
      stream_.async_handshake(ssl::stream_base::server, [self = this->shared_from_this()](beast::error_code ec) {
        if (ec) {
          self->Lowest().socket().close(ec);
          return;
        }
        self->Read();
      });
    } else {
      Read();
    }
  }

  void Read() {
    parser_.emplace();
    parser_->body_limit(options_.body_limit);
    parser_->header_limit(options_.header_limit);
    Lowest().expires_after(std::chrono::milliseconds(options_.idle_timeout_ms));
    http::async_read(stream_, buffer_, *parser_, beast::bind_front_handler(&Session::OnRead, this->shared_from_this()));
  }

 private:
  beast::tcp_stream& Lowest() { return beast::get_lowest_layer(stream_); }

  // "IP:PORT" of the client, once per connection.
  const std::string& Peer() {
    if (peer_.empty()) {
      beast::error_code ec;
      const tcp::endpoint ep = Lowest().socket().remote_endpoint(ec);
      if (!ec) peer_ = absl::StrCat(ep.address().to_string(), ":", ep.port());
    }
    return peer_;
  }

  void OnRead(beast::error_code ec, size_t) {
    if (ec == http::error::body_limit) {
      Refuse(413, absl::StrCat("request body too large: the limit is ", options_.body_limit, " bytes"));
      return;
    }
    if (ec == http::error::header_limit) {
      Refuse(431, absl::StrCat("request header fields too large: the limit is ", options_.header_limit, " bytes"));
      return;
    }
    // A request that does not parse (request line, header, chunk framing)
    // gets 400 and the connection is closed: where the next request would
    // start is unknown. The peer closing or going quiet gets no answer.
    if (ec && ec != http::error::end_of_stream && ec != http::error::partial_message &&
        &ec.category() == &http::make_error_code(http::error::bad_target).category()) {
      Refuse(400, absl::StrCat("malformed HTTP request: ", ec.message()));
      return;
    }
    if (ec) {
      Lowest().socket().shutdown(tcp::socket::shutdown_both, ec);
      return;
    }
    http::request<PaddedStringBody> req = parser_->release();
    HttpRequest r{std::string(req.method_string()), std::string(req.target()), std::move(req.body()), Peer()};
    HttpResponse out;
    try {
      out = handler_(r);
    } catch (const std::exception& e) {
      out = {500, "text/plain", absl::StrCat("internal error: ", e.what(), "\n")};
    }
    Answer(std::move(out), req.version(), req.keep_alive());
  }

  // An error answer, then the connection closes.
  void Refuse(int status, const std::string& why) {
    Answer({status, "application/json", absl::StrCat(R"({"Error":")", why, R"("})")}, 11, false);
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
                      beast::bind_front_handler(&Session::OnWrite, this->shared_from_this(), !keep_alive));
  }

  void OnWrite(bool close, beast::error_code ec, size_t) {
    if (ec) return;
    if (close) {
      if constexpr (kTls) {
        Lowest().expires_after(std::chrono::seconds(1));
        stream_.async_shutdown([self = this->shared_from_this()](beast::error_code) {});
        return;
      }
      Lowest().socket().shutdown(tcp::socket::shutdown_send, ec);
      // Read what the peer still sends (a refused request's rest) for a
      // moment before closing: closing with unread data resets the
      // connection, and the peer might lose the answer.
      Lowest().expires_after(std::chrono::seconds(1));
      Drain();
      return;
    }
    Read();
  }

  void Drain() {
    Lowest().async_read_some(net::buffer(drain_), [self = this->shared_from_this()](beast::error_code ec, size_t) {
      if (!ec) self->Drain();
    });
  }

  Stream stream_;
  beast::flat_buffer buffer_;
  std::optional<http::request_parser<PaddedStringBody>> parser_;
  http::response<http::string_body> res_;
  std::array<char, 4096> drain_;
  std::string peer_;
  const HttpHandler& handler_;
  const HttpServerOptions& options_;
};

class BeastServer : public HttpServer {
 public:
  BeastServer(HttpServerOptions options, HttpHandler handler)
      : options_(std::move(options)), handler_(std::move(handler)) {
    for (int i = 0; i < std::max(1, options_.threads); ++i) {
      iocs_.push_back(std::make_unique<net::io_context>(1));  // run by one thread
      work_.push_back(net::make_work_guard(*iocs_.back()));
    }
    acceptor_.emplace(*iocs_.front());
  }
  ~BeastServer() override { Stop(); }

  absl::Status Listen() {
    RM_RETURN_IF_ERROR(MakeTlsContext());
    beast::error_code ec;
    const net::ip::address addr = net::ip::make_address(options_.address, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("address '", options_.address, "': ", ec.message()));
    const tcp::endpoint ep(addr, options_.port);
    acceptor_->open(ep.protocol(), ec);
    if (!ec) acceptor_->set_option(net::socket_base::reuse_address(true), ec);
    if (!ec) acceptor_->bind(ep, ec);
    if (!ec) acceptor_->listen(net::socket_base::max_listen_connections, ec);
    if (ec) {
      return absl::UnavailableError(
          absl::StrCat("listen on ", options_.address, ":", options_.port, ": ", ec.message()));
    }
    port_ = acceptor_->local_endpoint().port();
    Accept();
    for (auto& ioc : iocs_) threads_.emplace_back([ctx = ioc.get()] { ctx->run(); });
    return absl::OkStatus();
  }

  uint16_t port() const override { return port_; }

  void Stop() override {
    if (stopped_.exchange(true)) return;
    net::post(*iocs_.front(), [this] {
      beast::error_code ec;
      acceptor_->close(ec);
    });
    for (auto& ioc : iocs_) ioc->stop();
    for (std::thread& t : threads_) t.join();
    threads_.clear();
  }

 private:
  void Accept() {
    // The new connection lives on the next context, round robin.
    net::io_context& home = *iocs_[next_++ % iocs_.size()];
    acceptor_->async_accept(home, [this](beast::error_code ec, tcp::socket socket) {
      if (!ec && tls_) {
        using TlsStream = beast::ssl_stream<beast::tcp_stream>;
        std::make_shared<Session<TlsStream>>(TlsStream(beast::tcp_stream(std::move(socket)), *tls_), handler_, options_)
            ->Start();
      } else if (!ec) {
        std::make_shared<Session<beast::tcp_stream>>(beast::tcp_stream(std::move(socket)), handler_, options_)->Start();
      }
      if (acceptor_->is_open() && !stopped_) Accept();
    });
  }

  // The server's TLS context from options_.tls; none when no certificate is
  // given. Errors name the file.
  absl::Status MakeTlsContext() {
    const TlsFiles& t = options_.tls;
    if (t.cert_file.empty() && t.key_file.empty() && t.client_ca_file.empty()) return absl::OkStatus();
    if (t.cert_file.empty() || t.key_file.empty()) {
      return absl::InvalidArgumentError("TLS needs both a certificate (--tls-cert) and its key (--tls-key)");
    }
    tls_ = std::make_unique<ssl::context>(ssl::context::tls_server);
    tls_->set_options(ssl::context::default_workarounds | ssl::context::no_sslv2 | ssl::context::no_sslv3 |
                      ssl::context::no_tlsv1 | ssl::context::no_tlsv1_1);
    beast::error_code ec;
    tls_->use_certificate_chain_file(t.cert_file, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("TLS certificate ", t.cert_file, ": ", ec.message()));
    tls_->use_private_key_file(t.key_file, ssl::context::pem, ec);
    if (ec) return absl::InvalidArgumentError(absl::StrCat("TLS key ", t.key_file, ": ", ec.message()));
    if (!t.client_ca_file.empty()) {
      tls_->load_verify_file(t.client_ca_file, ec);
      if (ec) return absl::InvalidArgumentError(absl::StrCat("TLS client CA ", t.client_ca_file, ": ", ec.message()));
      tls_->set_verify_mode(ssl::verify_peer | ssl::verify_fail_if_no_peer_cert);
    }
    return absl::OkStatus();
  }

  const HttpServerOptions options_;
  const HttpHandler handler_;
  std::unique_ptr<ssl::context> tls_;  // null: plain HTTP
  // Declared before the acceptor and the sessions' sockets, destroyed after.
  std::vector<std::unique_ptr<net::io_context>> iocs_;
  std::vector<net::executor_work_guard<net::io_context::executor_type>> work_;  // run() waits for connections
  std::optional<tcp::acceptor> acceptor_;  // on the first context
  size_t next_ = 0;                        // only the acceptor's handler (one thread) touches it
  std::vector<std::thread> threads_;
  std::atomic<bool> stopped_{false};
  uint16_t port_ = 0;
};

}  // namespace

absl::StatusOr<std::unique_ptr<HttpServer>> HttpServer::Start(HttpServerOptions options, HttpHandler handler) {
  auto server = std::make_unique<BeastServer>(std::move(options), std::move(handler));
  RM_RETURN_IF_ERROR(server->Listen());
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
