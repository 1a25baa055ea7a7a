// The NCCL (and the few CUDA runtime) calls the NCCL backend makes, as a
// table of functions. The real table (RealNcclApi, nccl_real.cc) calls
// libnccl and libcudart; tests inject a fake that records every call, which
// is how the re-formation sequencing (who calls what, in which order, with
// which exclude list) is tested on machines without a GPU.
// Built only when NCCL is found (RINGMASTER_HAVE_NCCL).
#ifndef RINGMASTER_WORKER_SHIM_NCCL_API_H_
#define RINGMASTER_WORKER_SHIM_NCCL_API_H_

#include <nccl.h>

#include <cstddef>
#include <functional>

namespace ringmaster::shim {

struct NcclApi {
  std::function<ncclResult_t(ncclUniqueId*)> get_unique_id;
  std::function<ncclResult_t(ncclComm_t*, int nranks, ncclUniqueId, int rank,
                             ncclConfig_t*)>
      comm_init_rank_config;
  std::function<ncclResult_t(ncclComm_t, int* exclude, int count,
                             ncclComm_t*, ncclConfig_t*, int flags)>
      comm_shrink;
  std::function<ncclResult_t(ncclComm_t, int flags)> comm_revoke;
  std::function<ncclResult_t(ncclComm_t)> comm_abort;
  std::function<ncclResult_t(ncclComm_t, ncclResult_t*)> comm_get_async_error;
  std::function<ncclResult_t(const void*, void*, size_t, ncclDataType_t,
                             ncclRedOp_t, ncclComm_t, cudaStream_t)>
      all_reduce;
  std::function<ncclResult_t(const void*, void*, size_t, ncclDataType_t, int,
                             ncclComm_t, cudaStream_t)>
      broadcast;
  std::function<const char*(ncclResult_t)> error_string;
  // CUDA side: a stream for the communicator's work, its completion, and a
  // small device buffer for Barrier(). stream_query: 0 done, 1 running,
  // -1 error.
  std::function<cudaStream_t()> stream_create;
  std::function<void(cudaStream_t)> stream_destroy;
  std::function<int(cudaStream_t)> stream_query;
  std::function<void*(size_t)> device_alloc;
  std::function<void(void*)> device_free;
};

// Calls the real libnccl / libcudart. Defined in nccl_real.cc.
NcclApi RealNcclApi();
// True when the NCCL loaded at run time has ncclCommRevoke (2.28 and later).
bool RealNcclHasRevoke();

}  // namespace ringmaster::shim

#endif  // RINGMASTER_WORKER_SHIM_NCCL_API_H_
