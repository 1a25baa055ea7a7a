// Implementation of the elastic state; see elastic_state.h.
#include "worker_shim/elastic_state.h"

#include <cstdio>
#include <cstring>
#include <fstream>
#include <iterator>

#include "absl/strings/str_cat.h"

namespace ringmaster::shim {

absl::Status ElasticState::Register(const std::string& name, void* data,
                                    size_t bytes) {
  if (data == nullptr && bytes > 0) {
    return absl::InvalidArgumentError(
        absl::StrCat("state buffer '", name, "' is null"));
  }
  for (const auto& b : buffers_) {
    if (b.name == name) {
      return absl::InvalidArgumentError(
          absl::StrCat("state buffer '", name, "' registered twice"));
    }
  }
  buffers_.push_back(Buffer{name, data, bytes, {}});
  return absl::OkStatus();
}

size_t ElasticState::total_bytes() const {
  size_t n = 0;
  for (const auto& b : buffers_) n += b.bytes;
  return n;
}

absl::Status ElasticState::Commit() {
  for (auto& b : buffers_) {
    const char* p = static_cast<const char*>(b.data);
    b.committed.assign(p, p + b.bytes);
  }
  ++commits_;
  if (commit_file_.empty()) return absl::OkStatus();
  const std::string tmp = commit_file_ + ".tmp";
  {
    std::ofstream out(tmp, std::ios::binary | std::ios::trunc);
    for (const auto& b : buffers_) {
      const uint64_t n = b.bytes;
      out.write(reinterpret_cast<const char*>(&n), sizeof(n));
      out.write(b.committed.data(), static_cast<std::streamsize>(n));
    }
    if (!out) return absl::InternalError(absl::StrCat("cannot write ", tmp));
  }
  if (std::rename(tmp.c_str(), commit_file_.c_str()) != 0) {
    return absl::InternalError(absl::StrCat("cannot rename ", tmp));
  }
  return absl::OkStatus();
}

absl::Status ElasticState::Restore() {
  if (commits_ == 0) {
    return absl::FailedPreconditionError("no commit to restore");
  }
  for (auto& b : buffers_) {
    if (!b.committed.empty()) {
      std::memcpy(b.data, b.committed.data(), b.bytes);
    }
  }
  return absl::OkStatus();
}

absl::Status ElasticState::Sync(CollectiveBackend& backend, int root) {
  for (auto& b : buffers_) {
    if (auto s = backend.Broadcast(b.data, b.bytes, root); !s.ok()) {
      return absl::Status(s.code(), absl::StrCat("sync of '", b.name,
                                                 "': ", s.message()));
    }
  }
  return absl::OkStatus();
}

absl::Status ElasticState::LoadCommitFile() {
  if (commit_file_.empty()) return absl::NotFoundError("no commit file set");
  std::ifstream in(commit_file_, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("no ", commit_file_));
  std::vector<std::vector<char>> loaded;
  for (const auto& b : buffers_) {
    uint64_t n = 0;
    in.read(reinterpret_cast<char*>(&n), sizeof(n));
    if (!in || n != b.bytes) {
      return absl::DataLossError(absl::StrCat(
          commit_file_, ": buffer '", b.name, "' does not match"));
    }
    std::vector<char> data(n);
    in.read(data.data(), static_cast<std::streamsize>(n));
    if (!in) return absl::DataLossError(absl::StrCat(commit_file_, ": short"));
    loaded.push_back(std::move(data));
  }
  for (size_t i = 0; i < buffers_.size(); ++i) {
    buffers_[i].committed = std::move(loaded[i]);
    if (buffers_[i].bytes > 0) {
      std::memcpy(buffers_[i].data, buffers_[i].committed.data(),
                  buffers_[i].bytes);
    }
  }
  ++commits_;
  return absl::OkStatus();
}

}  // namespace ringmaster::shim
