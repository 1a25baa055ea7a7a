// Binding pods through the Kubernetes API server: POST of a v1 Binding to
// the pod's `binding` subresource (what kube-scheduler's DefaultBinder does),
// with a bearer token when one is given. Plain HTTP only for now: point it
// at `kubectl proxy` (http://127.0.0.1:8001), which adds the credentials;
// in-cluster HTTPS with the service-account CA is not implemented yet.
#ifndef RINGMASTER_SERVER_KUBE_BINDER_H_
#define RINGMASTER_SERVER_KUBE_BINDER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/extender.h"

namespace ringmaster::server {

struct ApiServerOptions {
  std::string url;    // "http://HOST:PORT"
  std::string token;  // sent as "Authorization: Bearer TOKEN" when not empty
  int timeout_ms = 5'000;
};

// Fails when the URL is not http://HOST:PORT (https is refused for now).
absl::StatusOr<std::unique_ptr<Binder>> MakeApiServerBinder(ApiServerOptions options);

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_KUBE_BINDER_H_
