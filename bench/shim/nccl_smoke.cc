// nccl_smoke: the NCCL backend on a real GPU (bench/gpu_smoke.sh). One rank:
//  1. NcclBackend::Reform (fresh unique id, non-blocking ncclCommInitRankConfig,
//     polled) — timed;
//  2. AllReduce of 64 MiB of float32 in device memory, checked — timed;
//  3. the failure sequence on the raw NCCL 2.28 API: ncclCommRevoke (polled),
//     ncclCommAbort, then a fresh id and ncclCommInitRankConfig — timed;
//  4. NcclBackend re-form after a failure (abort + fresh init) — timed.
// Prints one JSON line. Exits non-zero (with the NCCL / CUDA error) when
// there is no GPU.
#include <cuda_runtime.h>

#include <chrono>
#include <iostream>
#include <vector>

#include <gloo/rendezvous/hash_store.h>
#include <nlohmann/json.hpp>

#include "worker_shim/nccl_backend.h"

namespace {

using ringmaster::shim::NcclApi;
using Clock = std::chrono::steady_clock;

double Ms(Clock::time_point t0) {
  return std::chrono::duration<double, std::milli>(Clock::now() - t0).count();
}

int Fail(const std::string& what) {
  std::cout << nlohmann::json({{"ok", false}, {"error", what}}).dump()
            << std::endl;
  return 1;
}

// Polls a non-blocking communicator until it leaves ncclInProgress.
ncclResult_t Poll(const NcclApi& api, ncclComm_t comm) {
  ncclResult_t state = ncclInProgress;
  const auto deadline = Clock::now() + std::chrono::seconds(60);
  while (state == ncclInProgress && Clock::now() < deadline) {
    if (api.comm_get_async_error(comm, &state) != ncclSuccess) {
      return ncclSystemError;
    }
  }
  return state;
}

}  // namespace

int main() {
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    return Fail("no CUDA device");
  }
  cudaSetDevice(0);
  int runtime_version = 0;
  ncclGetVersion(&runtime_version);
  nlohmann::json out = {{"ok", true},
                        {"nccl_version_built", NCCL_VERSION_CODE},
                        {"nccl_version_runtime", runtime_version}};
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  out["gpu"] = prop.name;

  NcclApi api = ringmaster::shim::RealNcclApi();
  ringmaster::shim::NcclOptions opts;
  opts.timeout = absl::Seconds(60);
  ringmaster::shim::NcclBackend backend(api, opts);
  gloo::rendezvous::HashStore store;
  ringmaster::shim::ReformPlan plan;
  plan.generation = 1;
  plan.rank = 0;
  plan.world_size = 1;

  auto t0 = Clock::now();
  if (auto s = backend.Reform(plan, store); !s.ok()) return Fail(s.ToString());
  out["init_ms"] = Ms(t0);

  const size_t n = (64u << 20) / sizeof(float);
  std::vector<float> host(n, 1.5f);
  float* dev = static_cast<float*>(api.device_alloc(n * sizeof(float)));
  if (dev == nullptr) return Fail("cudaMalloc failed");
  cudaMemcpy(dev, host.data(), n * sizeof(float), cudaMemcpyHostToDevice);
  auto reduce = [&] {
    return backend.AllReduce(dev, n, ringmaster::shim::DataType::kFloat32,
                             ringmaster::shim::ReduceOp::kSum);
  };
  if (auto s = reduce(); !s.ok()) return Fail(s.ToString());  // warm-up
  t0 = Clock::now();
  constexpr int kIters = 10;
  for (int i = 0; i < kIters; ++i) {
    if (auto s = reduce(); !s.ok()) return Fail(s.ToString());
  }
  out["allreduce_64MiB_ms"] = Ms(t0) / kIters;
  cudaMemcpy(host.data(), dev, sizeof(float), cudaMemcpyDeviceToHost);
  out["allreduce_result_ok"] = host[0] == 1.5f;  // one rank: unchanged

  // The failure path on the raw API: revoke, abort, fresh id, init.
  ncclUniqueId id;
  ncclComm_t comm = nullptr;
  ncclConfig_t config = NCCL_CONFIG_INITIALIZER;
  config.blocking = 0;
  api.get_unique_id(&id);
  t0 = Clock::now();
  api.comm_init_rank_config(&comm, 1, id, 0, &config);
  if (Poll(api, comm) != ncclSuccess) return Fail("raw init");
  out["raw_init_ms"] = Ms(t0);
  if (ringmaster::shim::RealNcclHasRevoke()) {
    t0 = Clock::now();
    ncclResult_t r = api.comm_revoke(comm, 0);
    if (r != ncclSuccess && r != ncclInProgress) {
      return Fail(std::string("revoke: ") + api.error_string(r));
    }
    if (Poll(api, comm) != ncclSuccess) return Fail("revoke poll");
    out["revoke_ms"] = Ms(t0);
  } else {
    out["revoke_ms"] = "ncclCommRevoke not in this NCCL runtime";
  }
  t0 = Clock::now();
  api.comm_abort(comm);
  out["abort_ms"] = Ms(t0);
  t0 = Clock::now();
  api.get_unique_id(&id);
  api.comm_init_rank_config(&comm, 1, id, 0, &config);
  if (Poll(api, comm) != ncclSuccess) return Fail("re-init");
  out["reinit_ms"] = Ms(t0);
  api.comm_abort(comm);

  // The backend's own failure re-form (abort + fresh id + init).
  gloo::rendezvous::HashStore store2;
  plan.generation = 2;
  plan.old_rank = 0;
  plan.old_world_size = 1;
  plan.failure = true;
  plan.only_removals = true;
  t0 = Clock::now();
  if (auto s = backend.Reform(plan, store2); !s.ok()) return Fail(s.ToString());
  out["backend_failure_reform_ms"] = Ms(t0);
  if (auto s = reduce(); !s.ok()) return Fail(s.ToString());
  api.device_free(dev);
  std::cout << out.dump() << std::endl;
  return 0;
}
