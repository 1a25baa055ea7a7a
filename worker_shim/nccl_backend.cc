// NCCL backend; see nccl_backend.h.
#include "worker_shim/nccl_backend.h"

#include <cstring>
#include <string>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::shim {
namespace {

constexpr char kUniqueIdKey[] = "nccl_unique_id";

ncclDataType_t ToNccl(DataType t) {
  switch (t) {
    case DataType::kFloat32:
      return ncclFloat32;
    case DataType::kFloat64:
      return ncclFloat64;
    case DataType::kInt64:
      return ncclInt64;
  }
  return ncclFloat32;
}

}  // namespace

NcclBackend::NcclBackend(NcclApi api, NcclOptions options)
    : api_(std::move(api)), options_(options) {
  stream_ = api_.stream_create();
  scratch_ = api_.device_alloc(sizeof(float));
}

NcclBackend::~NcclBackend() {
  Abort();
  if (scratch_ != nullptr) api_.device_free(scratch_);
  api_.stream_destroy(stream_);
}

ncclConfig_t NcclBackend::Config() const {
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  return config;
}

absl::Status NcclBackend::Check(ncclResult_t r, const char* what) {
  if (r == ncclSuccess || r == ncclInProgress) return absl::OkStatus();
  return absl::UnavailableError(
      absl::StrCat("nccl ", what, ": ", api_.error_string(r)));
}

bool NcclBackend::Revoked() const {
  return revoke_generation_.load() > generation_;
}

absl::Status NcclBackend::RevokedError() const {
  return absl::UnavailableError(absl::StrCat(
      "nccl: revoked: generation ", revoke_generation_.load(),
      " was published after a peer failed"));
}

void NcclBackend::Revoke(int64_t failure_generation) {
  int64_t seen = revoke_generation_.load();
  while (seen < failure_generation &&
         !revoke_generation_.compare_exchange_weak(seen, failure_generation)) {
  }
}

absl::Status NcclBackend::Await(ncclComm_t comm, cudaStream_t stream,
                                const char* what, bool revocable) {
  const absl::Time deadline = absl::Now() + options_.timeout;
  while (true) {
    if (revocable && Revoked()) return RevokedError();
    ncclResult_t async = ncclSuccess;
    ncclResult_t r = api_.comm_get_async_error(comm, &async);
    if (r != ncclSuccess) return Check(r == ncclInProgress ? ncclSystemError : r, what);
    if (async != ncclSuccess && async != ncclInProgress) {
      return Check(async, what);
    }
    if (async == ncclSuccess) {
      const int q = stream == nullptr ? 0 : api_.stream_query(stream);
      if (q < 0) return absl::UnavailableError(absl::StrCat("cuda ", what));
      if (q == 0) return absl::OkStatus();
    }
    if (absl::Now() >= deadline) {
      return absl::DeadlineExceededError(absl::StrCat(
          "nccl ", what, " not done within ",
          absl::FormatDuration(options_.timeout)));
    }
    absl::SleepFor(options_.poll_interval);
  }
}

void NcclBackend::Abort() {
  if (comm_ != nullptr) (void)api_.comm_abort(comm_);
  comm_ = nullptr;
  healthy_ = false;
}

absl::Status NcclBackend::Reform(const ReformPlan& plan,
                                 gloo::rendezvous::Store& store) {
  if (plan.rank < 0 || plan.rank >= plan.world_size) {
    return absl::InvalidArgumentError(absl::StrCat(
        "nccl: rank ", plan.rank, " not in a world of ", plan.world_size));
  }
  if (comm_ != nullptr && plan.only_removals) {
    if (plan.excluded.empty() && !plan.failure && healthy_) {
      generation_ = plan.generation;
      return absl::OkStatus();  // same members: keep the communicator
    }
    if (!plan.excluded.empty()) {
      if (Shrink(plan).ok()) return absl::OkStatus();
      // Fall through: a fresh communicator (Shrink aborted the old one).
    }
  }
  return Fresh(plan, store);
}

absl::Status NcclBackend::Shrink(const ReformPlan& plan) {
  int flags = NCCL_SHRINK_DEFAULT;
  if (plan.failure || !healthy_) {
    // Stop in-flight work on the broken communicator first.
    absl::Status s = Check(api_.comm_revoke(comm_, 0), "revoke");
    if (s.ok()) s = Await(comm_, nullptr, "revoke");
    flags = NCCL_SHRINK_ABORT;
  }
  std::vector<int> excluded = plan.excluded;
  ncclConfig_t config = Config();
  ncclComm_t child = nullptr;
  absl::Status s = Check(
      api_.comm_shrink(comm_, excluded.data(), static_cast<int>(excluded.size()),
                       &child, &config, flags),
      "shrink");
  if (s.ok() && child != nullptr) s = Await(child, nullptr, "shrink");
  if (s.ok() && child == nullptr) s = absl::InternalError("shrink: no comm");
  Abort();  // the parent, in every case
  if (!s.ok()) {
    if (child != nullptr) (void)api_.comm_abort(child);
    return s;
  }
  comm_ = child;
  healthy_ = true;
  world_size_ = plan.world_size;
  generation_ = plan.generation;
  return absl::OkStatus();
}

absl::Status NcclBackend::Fresh(const ReformPlan& plan,
                                gloo::rendezvous::Store& store) {
  Abort();
  ncclUniqueId id;
  std::memset(&id, 0, sizeof(id));
  try {
    if (plan.rank == 0) {
      RM_RETURN_IF_ERROR(Check(api_.get_unique_id(&id), "get unique id"));
      const char* p = reinterpret_cast<const char*>(&id);
      store.set(kUniqueIdKey, std::vector<char>(p, p + sizeof(id)));
    } else {
      store.wait({kUniqueIdKey});  // Gloo stores' get() does not wait
      std::vector<char> bytes = store.get(kUniqueIdKey);
      if (bytes.size() != sizeof(id)) {
        return absl::DataLossError("nccl: unique id of the wrong size");
      }
      std::memcpy(&id, bytes.data(), sizeof(id));
    }
  } catch (const std::exception& e) {
    return absl::UnavailableError(
        absl::StrCat("nccl: unique id exchange: ", e.what()));
  }
  ncclConfig_t config = Config();
  ncclComm_t comm = nullptr;
  absl::Status s = Check(api_.comm_init_rank_config(&comm, plan.world_size, id,
                                                    plan.rank, &config),
                         "init");
  if (s.ok() && comm != nullptr) s = Await(comm, nullptr, "init");
  if (!s.ok()) {
    if (comm != nullptr) (void)api_.comm_abort(comm);
    return s;
  }
  comm_ = comm;
  healthy_ = true;
  world_size_ = plan.world_size;
  generation_ = plan.generation;
  return absl::OkStatus();
}

absl::Status NcclBackend::AllReduce(void* data, size_t count, DataType type,
                                    ReduceOp op) {
  if (comm_ == nullptr || !healthy_) {
    return absl::FailedPreconditionError("nccl: no communicator");
  }
  if (Revoked()) {
    healthy_ = false;  // kept for revoke + shrink
    return RevokedError();
  }
  absl::Status s = Check(
      api_.all_reduce(data, data, count, ToNccl(type),
                      op == ReduceOp::kSum ? ncclSum : ncclMax, comm_, stream_),
      "allreduce");
  if (s.ok()) s = Await(comm_, stream_, "allreduce", /*revocable=*/true);
  if (!s.ok()) healthy_ = false;  // keep comm_ for revoke + shrink
  return s;
}

absl::Status NcclBackend::Broadcast(void* data, size_t bytes, int root) {
  if (comm_ == nullptr || !healthy_) {
    return absl::FailedPreconditionError("nccl: no communicator");
  }
  if (root < 0 || root >= world_size_) {
    return absl::InvalidArgumentError(absl::StrCat("nccl: bad root ", root));
  }
  if (Revoked()) {
    healthy_ = false;
    return RevokedError();
  }
  absl::Status s = Check(api_.broadcast(data, data, bytes, ncclUint8, root,
                                        comm_, stream_),
                         "broadcast");
  if (s.ok()) s = Await(comm_, stream_, "broadcast", /*revocable=*/true);
  if (!s.ok()) healthy_ = false;
  return s;
}

absl::Status NcclBackend::Barrier() {
  // NCCL has no barrier: an all-reduce of one device float is one.
  return AllReduce(scratch_, 1, DataType::kFloat32, ReduceOp::kSum);
}

}  // namespace ringmaster::shim
