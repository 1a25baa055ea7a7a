// Implementation of the coordinator-backed Gloo store; see kv_store.h.
#include "worker_shim/kv_store.h"

#include <gloo/common/error.h>

#include "absl/strings/str_cat.h"

namespace ringmaster::shim {
namespace {

[[noreturn]] void Throw(const absl::Status& status) {
  throw gloo::IoException(absl::StrCat("ringmaster kv store: ",
                                       status.ToString()));
}

}  // namespace

int64_t KvStore::rpcs() const {
  absl::MutexLock lock(&mu_);
  return rpcs_;
}

absl::Duration KvStore::rpc_time() const {
  absl::MutexLock lock(&mu_);
  return rpc_time_;
}

void KvStore::Count(absl::Time start) {
  const absl::Duration took = absl::Now() - start;
  absl::MutexLock lock(&mu_);
  ++rpcs_;
  rpc_time_ += took;
}

void KvStore::set(const std::string& key, const std::vector<char>& data) {
  const absl::Time start = absl::Now();
  std::string value(data.begin(), data.end());
  auto s = client_.KvSet(generation_, key, value);
  Count(start);
  if (!s.ok()) Throw(s);
  absl::MutexLock lock(&mu_);
  if (auto it = fetched_.find(key); it != fetched_.end()) {
    it->second = std::move(value);
  }
}

std::vector<char> KvStore::get(const std::string& key) {
  {
    absl::MutexLock lock(&mu_);
    if (auto it = fetched_.find(key); it != fetched_.end()) {
      return std::vector<char>(it->second.begin(), it->second.end());
    }
  }
  const absl::Time start = absl::Now();
  auto value = client_.KvWaitGet(generation_, key, default_timeout_);
  Count(start);
  if (!value.ok()) Throw(value.status());
  return std::vector<char>(value->begin(), value->end());
}

void KvStore::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds(
                 absl::ToInt64Milliseconds(default_timeout_)));
}

void KvStore::wait(const std::vector<std::string>& keys,
                   const std::chrono::milliseconds& timeout) {
  const absl::Time start = absl::Now();
  auto values = client_.KvWaitGet(generation_, keys, absl::FromChrono(timeout));
  Count(start);
  if (!values.ok()) Throw(values.status());
  absl::MutexLock lock(&mu_);
  for (size_t i = 0; i < keys.size(); ++i) {
    fetched_[keys[i]] = std::move((*values)[i]);
  }
}

}  // namespace ringmaster::shim
