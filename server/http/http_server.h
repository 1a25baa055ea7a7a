// A small HTTP/1.1 server (Boost.Beast) for the daemon's JSON endpoints: the
// scheduler extender and /healthz. One handler answers every request; it may
// be called from several threads at once. Keep-alive, request size limits
// (413 for the body, 431 for the headers), 400 for a request that does not
// parse, a read timeout, and Stop() that closes every connection and joins
// the threads. Listens on loopback unless told otherwise.
#ifndef RINGMASTER_SERVER_HTTP_HTTP_SERVER_H_
#define RINGMASTER_SERVER_HTTP_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ringmaster::server {

// Bytes of capacity the server leaves past the end of a request body that
// came with a Content-Length (HttpRequest::body.capacity() - size() >= this):
// a JSON parser may read the body in place (simdjson reads up to 64 bytes
// past the end).
inline constexpr size_t kHttpBodyPadding = 64;

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query
  std::string body;    // see kHttpBodyPadding
  // The client's address, "IP:PORT" (for audit lines); empty when unknown.
  std::string peer;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

// A handler may take the request's body (move it out).
using HttpHandler = std::function<HttpResponse(HttpRequest&)>;

// A server's certificate and key (PEM files), and optionally the CA that
// must have signed every client's certificate (mutual TLS).
struct TlsFiles {
  std::string cert_file;  // empty: no TLS
  std::string key_file;
  std::string client_ca_file;  // empty: clients are not asked for a certificate
};

struct HttpServerOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 0;  // 0: an ephemeral port (see HttpServer::port())
  int threads = 2;
  // Requests with a larger body get 413.
  uint64_t body_limit = 64ull << 20;
  // Requests whose request line and headers together are larger get 431.
  uint32_t header_limit = 16u << 10;
  // A connection idle (or slow to send its request) this long is closed.
  int idle_timeout_ms = 30'000;
  // HTTPS when tls.cert_file is set.
  TlsFiles tls;
};

class HttpServer {
 public:
  // Binds and starts serving on `options.threads` threads. Fails when the
  // address does not parse, the port cannot be bound, or a TLS file cannot
  // be read (the error names it).
  static absl::StatusOr<std::unique_ptr<HttpServer>> Start(HttpServerOptions options, HttpHandler handler);
  virtual ~HttpServer() = default;
  // The bound port.
  virtual uint16_t port() const = 0;
  // Stops accepting, closes connections, joins the threads. Idempotent; the
  // destructor calls it.
  virtual void Stop() = 0;
};

// Parses "HOST:PORT" ("127.0.0.1:8080", "[::1]:8080", ":8080" = loopback).
absl::StatusOr<std::pair<std::string, uint16_t>> ParseHostPort(const std::string& text);

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_HTTP_HTTP_SERVER_H_
