// A Gloo rendezvous store (gloo::rendezvous::Store) over the coordinator's
// key-value service, scoped to one generation of one job. Gloo's full-mesh
// rendezvous and the NCCL unique-id exchange both run over it.
//
// Gloo's Store interface reports errors by exception; this one throws
// gloo::IoException with the coordinator's message (a superseded generation,
// a timeout, an oversized value), which the backends turn back into
// absl::Status at their boundary.
#ifndef RINGMASTER_WORKER_SHIM_KV_STORE_H_
#define RINGMASTER_WORKER_SHIM_KV_STORE_H_

#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "absl/time/time.h"
#include "worker_shim/coordinator_client.h"

namespace ringmaster::shim {

class KvStore final : public gloo::rendezvous::Store {
 public:
  // Borrows `client`, which must outlive the store.
  KvStore(CoordinatorClient& client, int64_t generation,
          absl::Duration default_timeout = absl::Seconds(30))
      : client_(client),
        generation_(generation),
        default_timeout_(default_timeout) {}

  void set(const std::string& key, const std::vector<char>& data) override;
  // Waits (default timeout) for the key, then returns its value.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

 private:
  CoordinatorClient& client_;
  const int64_t generation_;
  const absl::Duration default_timeout_;
};

}  // namespace ringmaster::shim

#endif  // RINGMASTER_WORKER_SHIM_KV_STORE_H_
