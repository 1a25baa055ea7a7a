// A Gloo rendezvous store (gloo::rendezvous::Store) over the coordinator's
// key-value service, scoped to one generation of one job. Gloo's full-mesh
// rendezvous and the NCCL unique-id exchange both run over it.
//
// A wait() fetches the values of the keys it waited for in the same round
// trip and keeps them, so a get() that follows costs nothing: a rank that
// waits for all its peers' keys at once makes one round trip, not one per
// key. Rendezvous keys are written once per generation, so a kept value
// cannot go stale (set() of a kept key replaces it).
//
// Gloo's Store interface reports errors by exception; this one throws
// gloo::IoException with the coordinator's message (a superseded generation,
// a timeout, an oversized value), which the backends turn back into
// absl::Status at their boundary.
//
// Thread-safe, as Gloo's own stores are (the contract test sets from one
// thread while another waits): the kept values and the counters are guarded;
// no lock is held over a round trip.
#ifndef RINGMASTER_WORKER_SHIM_KV_STORE_H_
#define RINGMASTER_WORKER_SHIM_KV_STORE_H_

#include <chrono>
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
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
  // Returns the value a wait() fetched, or else waits (default timeout) for
  // the key and returns its value.
  std::vector<char> get(const std::string& key) override;
  void wait(const std::vector<std::string>& keys) override;
  void wait(const std::vector<std::string>& keys,
            const std::chrono::milliseconds& timeout) override;

  // Coordinator round trips made so far and the time spent in them.
  int64_t rpcs() const;
  absl::Duration rpc_time() const;

 private:
  // Counts one round trip that began at `start`.
  void Count(absl::Time start);

  CoordinatorClient& client_;
  const int64_t generation_;
  const absl::Duration default_timeout_;
  mutable absl::Mutex mu_;
  std::map<std::string, std::string> fetched_ ABSL_GUARDED_BY(mu_);  // values wait() returned
  int64_t rpcs_ ABSL_GUARDED_BY(mu_) = 0;
  absl::Duration rpc_time_ ABSL_GUARDED_BY(mu_);
};

}  // namespace ringmaster::shim

#endif  // RINGMASTER_WORKER_SHIM_KV_STORE_H_
