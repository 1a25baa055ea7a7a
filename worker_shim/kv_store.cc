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

void KvStore::set(const std::string& key, const std::vector<char>& data) {
  auto s = client_.KvSet(generation_, key, std::string(data.begin(), data.end()));
  if (!s.ok()) Throw(s);
}

std::vector<char> KvStore::get(const std::string& key) {
  auto value = client_.KvWaitGet(generation_, key, default_timeout_);
  if (!value.ok()) Throw(value.status());
  return std::vector<char>(value->begin(), value->end());
}

void KvStore::wait(const std::vector<std::string>& keys) {
  wait(keys, std::chrono::milliseconds(
                 absl::ToInt64Milliseconds(default_timeout_)));
}

void KvStore::wait(const std::vector<std::string>& keys,
                   const std::chrono::milliseconds& timeout) {
  auto s = client_.KvWait(generation_, keys, absl::FromChrono(timeout));
  if (!s.ok()) Throw(s);
}

}  // namespace ringmaster::shim
