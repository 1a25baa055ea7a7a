// An in-process fake of the NCCL calls in worker_shim/nccl_api.h, for testing
// the NCCL backend's sequencing without a GPU. Ranks are threads; "device
// memory" is host memory. Each participant (by name) gets its own NcclApi
// whose calls are logged in order, e.g.
//   "GetUniqueId", "InitRankConfig(n=3,rank=0,blocking=0)",
//   "Shrink(exclude=[2,3],flags=0)", "Revoke", "Abort".
// Collectives really reduce across the participating threads, so the
// collective contract test can run over this fake like over Gloo. Kill(name)
// makes every communicator that contains that participant fail (peers see
// ncclRemoteError through ncclCommGetAsyncError), like a dead process.
#ifndef RINGMASTER_TESTS_WORKER_SHIM_FAKE_NCCL_H_
#define RINGMASTER_TESTS_WORKER_SHIM_FAKE_NCCL_H_

#include <condition_variable>
#include <map>
#include <memory>
#include <mutex>
#include <set>
#include <string>
#include <vector>

#include "worker_shim/nccl_api.h"

namespace ringmaster::shim::testing {

class FakeNccl {
 public:
  // Knobs for the sequencing tests.
  struct Faults {
    bool fail_shrink = false;    // ncclCommShrink returns ncclInternalError
    bool init_never_completes = false;  // stays ncclInProgress forever
    int in_progress_polls = 1;   // GetAsyncError says InProgress this often
    // Collectives are enqueued but never complete (a peer that never joins,
    // on a non-blocking communicator) until the communicator is revoked.
    bool collectives_hang = false;
  };

  FakeNccl();
  ~FakeNccl();
  FakeNccl(const FakeNccl&) = delete;
  FakeNccl& operator=(const FakeNccl&) = delete;

  // The call table for one participant (a thread playing one process).
  NcclApi Api(const std::string& participant);
  std::vector<std::string> Log(const std::string& participant) const;
  void ClearLogs();
  void Kill(const std::string& participant);
  Faults& faults() { return faults_; }
  // Communicators with a collective left hanging (collectives_hang) that
  // neither a revocation nor an abort has stopped yet.
  int HangingComms() const;

  struct Group;
  struct Comm;

 private:
  void Record(const std::string& who, std::string call);
  std::shared_ptr<Group> InitGroup(const std::string& key, int n);
  ncclResult_t Exchange(Comm* comm, const void* in, size_t bytes,
                        std::vector<std::vector<char>>* all);
  // The start of a collective: false when the call must return *result now
  // (refused, left hanging, or failed asynchronously); true with every
  // rank's contribution in *all.
  bool Gather(Comm* comm, const void* send, size_t bytes,
              std::vector<std::vector<char>>* all, ncclResult_t* result);

  mutable std::mutex mu_;
  std::condition_variable cv_;
  std::map<std::string, std::vector<std::string>> logs_;
  std::map<std::string, std::shared_ptr<Group>> groups_;  // by id / key
  std::set<std::string> dead_;
  std::vector<std::unique_ptr<Comm>> comms_;
  int next_id_ = 1;
  Faults faults_;
};

}  // namespace ringmaster::shim::testing

#endif  // RINGMASTER_TESTS_WORKER_SHIM_FAKE_NCCL_H_
