// Elastic training state: the buffers a worker must not lose across a
// membership change (weights, optimizer state, data position, counters).
//
//  - Commit() copies every registered buffer aside (and, with a file path,
//    writes them atomically to disk): the point a failure rolls back to.
//  - Restore() copies the last commit back (after a failed collective).
//  - Sync() broadcasts every buffer from one rank (the lowest rank that held
//    state in the previous generation) so newcomers, and survivors that
//    rolled back to different commits, continue from one identical state.
// Planned changes happen at a step boundary and need no rollback.
#ifndef RINGMASTER_WORKER_SHIM_ELASTIC_STATE_H_
#define RINGMASTER_WORKER_SHIM_ELASTIC_STATE_H_

#include <cstddef>
#include <cstdint>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "worker_shim/collective.h"

namespace ringmaster::shim {

class ElasticState {
 public:
  // `commit_file` empty = commits stay in memory only.
  explicit ElasticState(std::string commit_file = "")
      : commit_file_(std::move(commit_file)) {}

  // Registers a buffer the caller owns and keeps alive. Every rank must
  // register the same names and sizes in the same order. INVALID_ARGUMENT for
  // a duplicate name or a null buffer.
  absl::Status Register(const std::string& name, void* data, size_t bytes);

  absl::Status Commit();
  // FAILED_PRECONDITION when nothing was ever committed (buffers untouched).
  absl::Status Restore();
  absl::Status Sync(CollectiveBackend& backend, int root);
  // Loads the commit file written by an earlier run into the buffers and the
  // in-memory commit. NOT_FOUND when there is none; DATA_LOSS when its layout
  // does not match the registered buffers.
  absl::Status LoadCommitFile();

  int64_t commits() const { return commits_; }
  bool has_commit() const { return commits_ > 0; }
  size_t total_bytes() const;

 private:
  struct Buffer {
    std::string name;
    void* data;
    size_t bytes;
    std::vector<char> committed;
  };
  std::string commit_file_;
  std::vector<Buffer> buffers_;
  int64_t commits_ = 0;
};

}  // namespace ringmaster::shim

#endif  // RINGMASTER_WORKER_SHIM_ELASTIC_STATE_H_
