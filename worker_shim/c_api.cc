// The C API over Shim; see ringmaster_shim.h.
#include <cstdlib>
#include <memory>
#include <new>
#include <string>

#include "worker_shim/backend_factory.h"
#include "worker_shim/ringmaster_shim.h"
#include "worker_shim/shim.h"

using ringmaster::shim::DataType;
using ringmaster::shim::ReduceOp;
using ringmaster::shim::Shim;

struct rm_shim {
  std::unique_ptr<Shim> shim;
  std::string error;
};

namespace {

std::string FromArgOrEnv(const char* arg, const char* env) {
  if (arg != nullptr) return arg;
  const char* v = std::getenv(env);
  return v == nullptr ? "" : v;
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
