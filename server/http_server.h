// A small HTTP/1.1 server (Boost.Beast) for the daemon's JSON endpoints: the
// scheduler extender and /healthz. One handler answers every request; it may
// be called from several threads at once. Keep-alive, a request size limit,
// a read timeout, and Stop() that closes every connection and joins the
// threads. Listens on loopback unless told otherwise.
#ifndef RINGMASTER_SERVER_HTTP_SERVER_H_
#define RINGMASTER_SERVER_HTTP_SERVER_H_

#include <cstdint>
#include <functional>
#include <memory>
#include <string>

#include "absl/status/statusor.h"

namespace ringmaster::server {

struct HttpRequest {
  std::string method;  // "GET", "POST", ...
  std::string target;  // path and query
  std::string body;
};

struct HttpResponse {
  int status = 200;
  std::string content_type = "application/json";
  std::string body;
};

using HttpHandler = std::function<HttpResponse(const HttpRequest&)>;

struct HttpServerOptions {
  std::string address = "127.0.0.1";
  uint16_t port = 0;  // 0: an ephemeral port (see HttpServer::port())
  int threads = 2;
  // Requests with a larger body get 413.
  uint64_t body_limit = 64ull << 20;
  // A connection idle (or slow to send its request) this long is closed.
  int idle_timeout_ms = 30'000;
};

class HttpServer {
 public:
  // Binds and starts serving on `options.threads` threads. Fails when the
  // address does not parse or the port cannot be bound.
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

#endif  // RINGMASTER_SERVER_HTTP_SERVER_H_
