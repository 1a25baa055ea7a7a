// The collective backend interface the shim drives: one communicator per
// membership generation, re-formed on every change. Gloo (TCP, CPU memory)
// and NCCL (GPU memory; built when NCCL is found) implement it.
#ifndef RINGMASTER_WORKER_SHIM_COLLECTIVE_H_
#define RINGMASTER_WORKER_SHIM_COLLECTIVE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include <gloo/rendezvous/store.h>

#include "absl/status/status.h"

namespace ringmaster::shim {

enum class DataType { kFloat32, kFloat64, kInt64 };
enum class ReduceOp { kSum, kMax };

size_t SizeOf(DataType type);

// What changed between the communicator a rank holds and the generation it
// must join; computed by PlanReform() identically on every rank from the
// coordinator's member lists.
struct ReformPlan {
  int64_t generation = 0;
  int rank = -1;        // rank in the new generation
  int world_size = 0;
  int old_rank = -1;    // rank in the previous communicator, -1 if none
  int old_world_size = 0;
  // The previous communicator may be broken (a failure generation, or this
  // rank saw a collective fail): it must be revoked/aborted, not reused as is.
  bool failure = false;
  // New members are exactly the previous members minus some, in the same
  // relative order, and this rank had the previous communicator: the new
  // communicator can be carved out of the old one (NCCL ncclCommShrink).
  bool only_removals = false;
  // Ranks of the previous communicator that are not in the new generation,
  // ascending. Identical on every survivor.
  std::vector<int> excluded;
};

// `old_members` is empty when this rank holds no communicator.
ReformPlan PlanReform(const std::vector<std::string>& old_members,
                      const std::vector<std::string>& new_members,
                      const std::string& self, int64_t generation,
                      bool failure);

// Contract (tests/worker_shim/collective_contract_test.cc runs it over every
// backend):
//  1. Reform() is called by every member of the new generation with the same
//     plan fields except rank/old_rank; on OK the communicator has
//     plan.world_size ranks and this process is plan.rank.
//  2. Collectives are blocking from the caller's view and in place; they
//     return UNAVAILABLE (or DEADLINE_EXCEEDED) when a peer failed and never
//     hang past the backend's timeout. After such an error the communicator
//     is unhealthy until the next Reform().
//  3. Abort() drops the communicator without talking to peers; idempotent.
//  4. Not thread-safe: one thread drives a backend; only Interrupt(),
//     Prepare() (rule 6) and Revoke() (rule 7) may be called from another
//     thread.
//  5. Interrupt(g) makes a Reform() into a generation older than g return an
//     error soon instead of waiting out its timeout; it does nothing to a
//     Reform() into g or newer, or when no Reform() is running. The same
//     holds for Prepare().
//  6. Optional (can_prepare()): a planned re-formation overlapped with the
//     step in progress. Prepare(plan) builds the communicator for `plan`
//     (plan.failure false) on a thread of its own while the driving thread
//     goes on using the current one; AdoptPrepared(g) then replaces the
//     current communicator (dropped as by Reform()) with the one prepared
//     for generation g, or returns false when there is none (the caller
//     falls back to Reform()); DropPrepared() discards it. Prepare() never
//     runs concurrently with Reform(), AdoptPrepared() or another Prepare().
//  7. Revoke(f), from any thread: generation f was published after a peer
//     failed. If the communicator in use belongs to an older generation, a
//     collective running on it (blocked on a dead or on a live peer) and
//     every later one returns UNAVAILABLE soon instead of waiting out the
//     timeout; the communicator is then unhealthy. A communicator of
//     generation f or newer, and a rendezvous, are left alone.
class CollectiveBackend {
 public:
  virtual ~CollectiveBackend() = default;
  virtual std::string_view name() const = 0;
  // `store` is scoped to plan.generation.
  virtual absl::Status Reform(const ReformPlan& plan,
                              gloo::rendezvous::Store& store) = 0;
  virtual absl::Status AllReduce(void* data, size_t count, DataType type,
                                 ReduceOp op) = 0;
  virtual absl::Status Broadcast(void* data, size_t bytes, int root) = 0;
  virtual absl::Status Barrier() = 0;
  virtual void Abort() = 0;
  virtual bool healthy() const = 0;
  // Thread-safe; see rule 5. The default does nothing (the backend's own
  // timeouts bound its rendezvous and collectives).
  virtual void Interrupt(int64_t newer_generation) { (void)newer_generation; }
  // Thread-safe; see rule 7. Every backend must keep it: a survivor must not
  // sit in a collective with a dead peer once the failure is known.
  virtual void Revoke(int64_t failure_generation) = 0;
  // Rule 6. The defaults prepare nothing.
  virtual bool can_prepare() const { return false; }
  virtual absl::Status Prepare(const ReformPlan& plan,
                               gloo::rendezvous::Store& store) {
    (void)plan;
    (void)store;
    return absl::UnimplementedError("this backend cannot prepare");
  }
  virtual bool AdoptPrepared(int64_t generation) {
    (void)generation;
    return false;
  }
  virtual void DropPrepared() {}
};

}  // namespace ringmaster::shim

#endif  // RINGMASTER_WORKER_SHIM_COLLECTIVE_H_
