// The real NCCL / CUDA call table; see nccl_api.h. Only this file links
// libnccl and libcudart.
#include <cuda_runtime.h>
#include <dlfcn.h>

#include "worker_shim/nccl_api.h"

namespace ringmaster::shim {
namespace {

// ncclCommShrink and ncclCommRevoke are new in NCCL 2.27 / 2.28. They are
// looked up when the process runs, not linked, so a binary built against
// 2.28 still starts on a machine whose NCCL is older; there the calls answer
// ncclInvalidUsage and the backend falls back to abort + a fresh communicator.
using ShrinkFn = ncclResult_t (*)(ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int);
using RevokeFn = ncclResult_t (*)(ncclComm_t, int);

template <typename Fn>
Fn Lookup(const char* name) {
  return reinterpret_cast<Fn>(dlsym(RTLD_DEFAULT, name));
}

}  // namespace

bool RealNcclHasRevoke() { return Lookup<RevokeFn>("ncclCommRevoke") != nullptr; }

NcclApi RealNcclApi() {
  NcclApi api;
  api.get_unique_id = &ncclGetUniqueId;
  api.comm_init_rank_config = &ncclCommInitRankConfig;
  if (ShrinkFn shrink = Lookup<ShrinkFn>("ncclCommShrink"); shrink != nullptr) {
    api.comm_shrink = shrink;
  } else {
    api.comm_shrink = [](ncclComm_t, int*, int, ncclComm_t*, ncclConfig_t*, int) {
      return ncclInvalidUsage;
    };
  }
  if (RevokeFn revoke = Lookup<RevokeFn>("ncclCommRevoke"); revoke != nullptr) {
    api.comm_revoke = revoke;
  } else {
    api.comm_revoke = [](ncclComm_t, int) { return ncclInvalidUsage; };
  }
  api.comm_abort = &ncclCommAbort;
  api.comm_get_async_error = &ncclCommGetAsyncError;
  api.all_reduce = &ncclAllReduce;
  api.broadcast = &ncclBroadcast;
  api.error_string = &ncclGetErrorString;
  api.stream_create = [] {
    cudaStream_t s = nullptr;
    if (cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) != cudaSuccess) {
      return static_cast<cudaStream_t>(nullptr);
    }
    return s;
  };
  api.stream_destroy = [](cudaStream_t s) {
    if (s != nullptr) cudaStreamDestroy(s);
  };
  api.stream_query = [](cudaStream_t s) {
    const cudaError_t e = cudaStreamQuery(s);
    if (e == cudaSuccess) return 0;
    if (e == cudaErrorNotReady) return 1;
    return -1;
  };
  api.device_alloc = [](size_t bytes) -> void* {
    void* p = nullptr;
    if (cudaMalloc(&p, bytes) != cudaSuccess) return nullptr;
    return p;
  };
  api.device_free = [](void* p) { cudaFree(p); };
  return api;
}

}  // namespace ringmaster::shim
