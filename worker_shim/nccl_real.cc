// The real NCCL / CUDA call table; see nccl_api.h. Only this file links
// libnccl and libcudart.
#include <cuda_runtime.h>

#include "worker_shim/nccl_api.h"

namespace ringmaster::shim {

NcclApi RealNcclApi() {
  NcclApi api;
  api.get_unique_id = &ncclGetUniqueId;
  api.comm_init_rank_config = &ncclCommInitRankConfig;
  api.comm_shrink = &ncclCommShrink;
  api.comm_revoke = &ncclCommRevoke;
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
