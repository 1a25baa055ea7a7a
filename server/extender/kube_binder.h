// Binding pods through the Kubernetes API server: POST of a v1 Binding to
// the pod's `binding` subresource (what kube-scheduler's DefaultBinder does);
// evicting them by a POST of a policy/v1 Eviction to the pod's `eviction`
// subresource (what `kubectl drain` does: disruption budgets are honoured,
// the grace period is the engine's).
//
// Two ways to reach the API server:
//   - HTTPS, verifying the server's certificate against a CA file (or the
//     system's CAs), with a bearer token: in a pod, InClusterApiServer()
//     reads the service account's token and CA and the address Kubernetes
//     puts in the environment (KUBERNETES_SERVICE_HOST / _PORT);
//   - plain HTTP, e.g. `kubectl proxy` on 127.0.0.1:8001, which adds the
//     credentials itself.
// The token is read again from its file for every request (projected
// service-account tokens are rotated by the kubelet).
#ifndef RINGMASTER_SERVER_EXTENDER_KUBE_BINDER_H_
#define RINGMASTER_SERVER_EXTENDER_KUBE_BINDER_H_

#include <memory>
#include <string>

#include "absl/status/statusor.h"
#include "server/extender/binder.h"

namespace ringmaster::server {

struct ApiServerOptions {
  std::string url;         // "http://HOST:PORT" or "https://HOST:PORT"
  std::string token;       // sent as "Authorization: Bearer TOKEN" when not empty
  std::string token_file;  // read for every request when not empty (wins over token)
  std::string ca_file;     // https: PEM CA bundle to verify the server; empty: the system's
  int timeout_ms = 5'000;
};

// Fails when the URL is not http(s)://HOST:PORT, or when the CA file (https)
// cannot be read or holds no certificate.
absl::StatusOr<std::unique_ptr<Binder>> MakeApiServerBinder(ApiServerOptions options);

// The in-cluster API server as a pod sees it: https://$KUBERNETES_SERVICE_HOST:
// $KUBERNETES_SERVICE_PORT with `secrets_dir`/token and `secrets_dir`/ca.crt.
// Fails, saying what is missing, outside a pod.
absl::StatusOr<ApiServerOptions> InClusterApiServer(
    const std::string& secrets_dir = "/var/run/secrets/kubernetes.io/serviceaccount");

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_EXTENDER_KUBE_BINDER_H_
