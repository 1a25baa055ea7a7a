// The C API over Shim; see ringmaster_shim.h.
#include <atomic>
#include <chrono>
#include <cstdlib>
#include <memory>
#include <new>
#include <string>
#include <thread>
#include <vector>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/time/time.h"
#include "worker_shim/backend_factory.h"
#include "worker_shim/ringmaster_shim.h"
#include "worker_shim/shim.h"

using ringmaster::shim::DataType;
using ringmaster::shim::ReduceOp;
using ringmaster::shim::Shim;

struct rm_shim {
  std::unique_ptr<Shim> shim;
  std::string error;
  std::string kv_value;  // the last rm_shim_kv_get's value
  // Read by the re-formation hook (training or preparing thread).
  std::shared_ptr<std::atomic<int>> reform_delay_ms =
      std::make_shared<std::atomic<int>>(0);
};

namespace {

std::string FromArgOrEnv(const char* arg, const char* env) {
  if (arg != nullptr) return arg;
  const char* v = std::getenv(env);
  return v == nullptr ? "" : v;
}

// RINGMASTER_MEMBERSHIP_TIMEOUT: seconds ("90", "2.5") or a duration with
// its unit ("90s", "2m", "1500ms"); positive.
absl::StatusOr<absl::Duration> MembershipTimeoutFromEnv(absl::Duration dflt) {
  const char* v = std::getenv("RINGMASTER_MEMBERSHIP_TIMEOUT");
  if (v == nullptr || *v == '\0') return dflt;
  double seconds = 0;
  absl::Duration d;
  if (absl::SimpleAtod(v, &seconds)) {
    d = absl::Seconds(seconds);
  } else if (!absl::ParseDuration(v, &d)) {
    d = -absl::InfiniteDuration();
  }
  if (d <= absl::ZeroDuration() || d == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "RINGMASTER_MEMBERSHIP_TIMEOUT='", v,
        "': not a positive number of seconds (or a duration such as 90s, 2m)"));
  }
  return d;
}

rm_status Report(rm_shim* h, const absl::Status& s) {
  if (s.ok()) {
    h->error.clear();
    return RM_OK;
  }
  h->error = s.ToString();
  return RM_ERROR;
}

rm_status Boundary(rm_shim* h, const absl::StatusOr<Shim::Boundary>& b) {
  if (!b.ok()) return Report(h, b.status());
  h->error.clear();
  switch (*b) {
    case Shim::Boundary::kContinue:
      return RM_OK;
    case Shim::Boundary::kReformed:
      return RM_REFORMED;
    case Shim::Boundary::kRemoved:
      return RM_REMOVED;
  }
  return RM_ERROR;
}

bool Usable(rm_shim* h) {
  if (h == nullptr) return false;
  if (h->shim == nullptr) {
    if (h->error.empty()) h->error = "shim was not created";
    return false;
  }
  return true;
}

}  // namespace

extern "C" {

rm_shim* rm_shim_create(const char* coordinator, const char* job,
                        const char* worker, int desired_workers,
                        const char* backend) {
  auto* h = new (std::nothrow) rm_shim;
  if (h == nullptr) return nullptr;
  ringmaster::shim::ShimOptions o;
  o.client.address = FromArgOrEnv(coordinator, "RINGMASTER_COORDINATOR");
  o.client.job = FromArgOrEnv(job, "RINGMASTER_JOB");
  o.client.worker_id = FromArgOrEnv(worker, "RINGMASTER_WORKER");
  o.client.desired_workers = desired_workers;
  auto timeout = MembershipTimeoutFromEnv(o.membership_timeout);
  if (!timeout.ok()) {
    h->error = timeout.status().ToString();
    return h;
  }
  o.membership_timeout = *timeout;
  o.on_reform_start = [delay = h->reform_delay_ms](const auto&) {
    if (const int ms = delay->load(); ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(ms));
    }
  };
  auto b = ringmaster::shim::MakeBackend(backend == nullptr ? "gloo" : backend,
                                         absl::Seconds(30));
  if (!b.ok()) {
    h->error = b.status().ToString();
    return h;
  }
  auto s = Shim::Create(o, *std::move(b));
  if (!s.ok()) {
    h->error = s.status().ToString();
    return h;
  }
  h->shim = *std::move(s);
  return h;
}

void rm_shim_destroy(rm_shim* h) { delete h; }

const char* rm_shim_last_error(const rm_shim* h) {
  return h == nullptr ? "null handle" : h->error.c_str();
}

rm_status rm_shim_register(rm_shim* h, const char* name, void* data,
                           size_t bytes) {
  if (!Usable(h)) return RM_ERROR;
  if (name == nullptr) return Report(h, absl::InvalidArgumentError("null name"));
  return Report(h, h->shim->state().Register(name, data, bytes));
}

rm_status rm_shim_start(rm_shim* h) {
  if (!Usable(h)) return RM_ERROR;
  return Report(h, h->shim->Start());
}

rm_status rm_shim_allreduce(rm_shim* h, void* data, size_t count,
                            rm_dtype dtype, rm_op op) {
  if (!Usable(h)) return RM_ERROR;
  DataType t;
  switch (dtype) {
    case RM_FLOAT32: t = DataType::kFloat32; break;
    case RM_FLOAT64: t = DataType::kFloat64; break;
    case RM_INT64: t = DataType::kInt64; break;
    default:
      return Report(h, absl::InvalidArgumentError("unknown dtype"));
  }
  if (op != RM_SUM && op != RM_MAX) {
    return Report(h, absl::InvalidArgumentError("unknown op"));
  }
  return Report(h, h->shim->AllReduce(data, count, t,
                                      op == RM_SUM ? ReduceOp::kSum
                                                   : ReduceOp::kMax));
}

rm_status rm_shim_broadcast(rm_shim* h, void* data, size_t bytes, int root) {
  if (!Usable(h)) return RM_ERROR;
  return Report(h, h->shim->Broadcast(data, bytes, root));
}

rm_status rm_shim_barrier(rm_shim* h) {
  if (!Usable(h)) return RM_ERROR;
  return Report(h, h->shim->Barrier());
}

rm_status rm_shim_commit(rm_shim* h, int64_t step, int64_t position) {
  if (!Usable(h)) return RM_ERROR;
  return Report(h, h->shim->Commit(step, position));
}

rm_status rm_shim_report_step(rm_shim* h, double seconds, double samples) {
  if (!Usable(h)) return RM_ERROR;
  return Report(h, h->shim->ReportStep(seconds, samples));
}

rm_status rm_shim_step_boundary(rm_shim* h) {
  if (!Usable(h)) return RM_ERROR;
  return Boundary(h, h->shim->StepBoundary());
}

rm_status rm_shim_recover(rm_shim* h) {
  if (!Usable(h)) return RM_ERROR;
  return Boundary(h, h->shim->Recover("reported through the C API"));
}

rm_status rm_shim_leave(rm_shim* h, int finished) {
  if (!Usable(h)) return RM_ERROR;
  return Report(h, h->shim->Leave(finished != 0));
}

rm_status rm_shim_kv_set(rm_shim* h, int64_t generation, const char* key,
                         const void* value, size_t bytes) {
  if (!Usable(h)) return RM_ERROR;
  if (key == nullptr || (value == nullptr && bytes > 0)) {
    return Report(h, absl::InvalidArgumentError("null key or value"));
  }
  return Report(h, h->shim->client().KvSet(
                       generation, key,
                       std::string(static_cast<const char*>(value), bytes)));
}

rm_status rm_shim_kv_get(rm_shim* h, int64_t generation, const char* key,
                         int64_t timeout_ms, const void** value,
                         size_t* bytes) {
  if (!Usable(h)) return RM_ERROR;
  if (key == nullptr || value == nullptr || bytes == nullptr) {
    return Report(h, absl::InvalidArgumentError("null argument"));
  }
  *value = nullptr;
  *bytes = 0;
  if (timeout_ms < 0) {
    auto v = h->shim->client().KvGet(generation, key);
    if (!v.ok()) return Report(h, v.status());
    if (!v->has_value()) return Report(h, absl::OkStatus());
    h->kv_value = **std::move(v);
  } else {
    auto v = h->shim->client().KvWaitGet(generation, key,
                                         absl::Milliseconds(timeout_ms));
    if (!v.ok()) return Report(h, v.status());
    h->kv_value = *std::move(v);
  }
  *value = h->kv_value.data();
  *bytes = h->kv_value.size();
  return Report(h, absl::OkStatus());
}

rm_status rm_shim_kv_wait(rm_shim* h, int64_t generation,
                          const char* const* keys, size_t count,
                          int64_t timeout_ms) {
  if (!Usable(h)) return RM_ERROR;
  if (keys == nullptr && count > 0) {
    return Report(h, absl::InvalidArgumentError("null keys"));
  }
  std::vector<std::string> k;
  for (size_t i = 0; i < count; ++i) {
    if (keys[i] == nullptr) {
      return Report(h, absl::InvalidArgumentError("null key"));
    }
    k.emplace_back(keys[i]);
  }
  return Report(h, h->shim->client().KvWait(
                       generation, k,
                       absl::Milliseconds(timeout_ms < 0 ? 0 : timeout_ms)));
}

rm_status rm_shim_last_reform(rm_shim* h, rm_reform_info* info) {
  if (!Usable(h)) return RM_ERROR;
  if (info == nullptr) return Report(h, absl::InvalidArgumentError("null info"));
  const auto& reforms = h->shim->reforms();
  if (reforms.empty()) {
    return Report(h, absl::FailedPreconditionError("not formed yet"));
  }
  const ringmaster::shim::ReformRecord& r = reforms.back();
  *info = rm_reform_info{};
  info->generation = r.generation;
  info->rank = r.rank;
  info->world_size = r.world_size;
  info->rolled_back = r.rolled_back ? 1 : 0;
  info->sync_root = r.sync_root;
  info->reason = static_cast<int>(r.reason);
  info->prepared = r.prepared ? 1 : 0;
  info->published_unix_us = r.published_unix_us;
  info->boundary_unix_us = r.boundary_unix_us;
  info->formed_unix_us = r.formed_unix_us;
  info->synced_unix_us = r.synced_unix_us;
  return Report(h, absl::OkStatus());
}

rm_status rm_shim_set_reform_delay(rm_shim* h, int ms) {
  if (h == nullptr) return RM_ERROR;
  h->reform_delay_ms->store(ms < 0 ? 0 : ms);
  return RM_OK;
}

rm_status rm_shim_set_membership_timeout(rm_shim* h, int64_t ms) {
  if (!Usable(h)) return RM_ERROR;
  if (ms <= 0) {
    return Report(h, absl::InvalidArgumentError(absl::StrCat(
                         "membership timeout must be positive, not ", ms,
                         " ms")));
  }
  h->shim->set_membership_timeout(absl::Milliseconds(ms));
  return Report(h, absl::OkStatus());
}

int64_t rm_shim_membership_timeout_ms(const rm_shim* h) {
  return h == nullptr || h->shim == nullptr
             ? 0
             : absl::ToInt64Milliseconds(h->shim->membership_timeout());
}

int64_t rm_shim_latest_generation(const rm_shim* h) {
  return h == nullptr || h->shim == nullptr
             ? 0
             : h->shim->client().LatestGeneration();
}

int64_t rm_shim_latest_failure_generation(const rm_shim* h) {
  return h == nullptr || h->shim == nullptr
             ? 0
             : h->shim->client().LatestFailureGeneration();
}

int rm_shim_rank(const rm_shim* h) {
  return h == nullptr || h->shim == nullptr ? -1 : h->shim->rank();
}

int rm_shim_world_size(const rm_shim* h) {
  return h == nullptr || h->shim == nullptr ? 0 : h->shim->world_size();
}

int64_t rm_shim_generation(const rm_shim* h) {
  return h == nullptr || h->shim == nullptr ? 0 : h->shim->generation();
}

}  // extern "C"
