// allreduce_bench: all-reduce bus bandwidth of the worker shim (Gloo backend)
// against raw Gloo and Open MPI's MPI_Allreduce, same processes, same run.
// Launched by bench/allreduce.sh under mpirun: MPI provides the process set
// and the barriers between timings; the three variants run one after the
// other at each size, float32 sum, in place.
//
//  - mpi:  MPI_Allreduce(MPI_IN_PLACE, ..., MPI_FLOAT, MPI_SUM).
//  - gloo: a gloo::rendezvous::Context over a FileStore, TCP on 127.0.0.1,
//          gloo::allreduce (the algorithm the shim uses).
//  - shim: ringmaster::shim::Shim::AllReduce (rank 0 runs an in-process
//          coordinator; the Gloo communicator comes from the shim's
//          rendezvous over the coordinator's key-value store).
// busbw = size / time * 2 (n - 1) / n (nccl-tests' definition).
// Prints one JSON line per size.
#include <mpi.h>

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/coordinator_service.h"
#include "worker_shim/backend_factory.h"
#include "worker_shim/shim.h"

namespace {

using Clock = std::chrono::steady_clock;

// Seconds per all-reduce of `fn`, averaged over `iters` after a warm-up,
// the slowest rank's time (ranks start together after a barrier).
template <typename Fn>
double Time(int iters, Fn fn) {
  for (int i = 0; i < 2; ++i) fn();
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) fn();
  double s = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
  double slowest = 0;
  MPI_Allreduce(&s, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const size_t max_bytes = argc > 1 ? std::stoull(argv[1]) : (64u << 20);

  // Raw Gloo: rendezvous through a FileStore in a shared temp directory.
  std::string store_dir;
  if (rank == 0) {
    store_dir = (std::filesystem::temp_directory_path() /
                 ("rm_allreduce_" + std::to_string(::getpid())))
                    .string();
    std::filesystem::create_directories(store_dir);
  }
  char buf[512] = {};
  std::snprintf(buf, sizeof(buf), "%s", store_dir.c_str());
  MPI_Bcast(buf, sizeof(buf), MPI_CHAR, 0, MPI_COMM_WORLD);
  store_dir = buf;
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore file_store(store_dir);
  auto gloo_ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  gloo_ctx->connectFullMesh(file_store, device);

  // The shim: rank 0 hosts the coordinator.
  std::unique_ptr<ringmaster::server::CoordinatorServer> server;
  char addr[128] = {};
  if (rank == 0) {
    server = *ringmaster::server::CoordinatorServer::Start(
        "127.0.0.1:0", ringmaster::server::CoordinatorOptions());
    std::snprintf(addr, sizeof(addr), "%s", server->address().c_str());
  }
  MPI_Bcast(addr, sizeof(addr), MPI_CHAR, 0, MPI_COMM_WORLD);
  ringmaster::shim::ShimOptions so;
  so.client.address = addr;
  so.client.job = "allreduce";
  so.client.worker_id = "r" + std::to_string(rank);
  so.client.desired_workers = size;
  auto shim = *ringmaster::shim::Shim::Create(
      so, *ringmaster::shim::MakeBackend("gloo", absl::Seconds(60)));
  if (auto s = shim->Start(); !s.ok()) {
    std::cerr << "shim start: " << s << "\n";
    MPI_Abort(MPI_COMM_WORLD, 1);
  }

  for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
    const size_t n = bytes / sizeof(float);
    std::vector<float> data(n, 1.0f);
    const int iters = static_cast<int>(
        std::max<size_t>(3, std::min<size_t>(100, (64u << 20) / bytes)));
    // Five interleaved rounds of mpi, gloo, shim; the median of each.
    std::vector<double> mpi_t, gloo_t, shim_t;
    uint32_t tag = 0;
    for (int round = 0; round < 5; ++round) {
    mpi_t.push_back(Time(iters, [&] {
      MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(n), MPI_FLOAT,
                    MPI_SUM, MPI_COMM_WORLD);
    }));
    gloo_t.push_back(Time(iters, [&] {
      gloo::AllreduceOptions opts(gloo_ctx);
      opts.setOutput(data.data(), n);
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(
              &gloo::sum<float>));
      opts.setTag(++tag);
      gloo::allreduce(opts);
    }));
    shim_t.push_back(Time(iters, [&] {
      if (!shim->AllReduce(data.data(), n, ringmaster::shim::DataType::kFloat32,
                           ringmaster::shim::ReduceOp::kSum)
               .ok()) {
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
    }));
    }
    auto median = [](std::vector<double> v) {
      std::sort(v.begin(), v.end());
      return v[v.size() / 2];
    };
    const double t_mpi = median(mpi_t);
    const double t_gloo = median(gloo_t);
    const double t_shim = median(shim_t);
    if (rank == 0) {
      const double factor = 2.0 * (size - 1) / size;
      auto busbw = [&](double t) { return bytes / t * factor / 1e9; };
      nlohmann::json j = {{"processes", size},
                          {"bytes", bytes},
                          {"iters", iters},
                          {"mpi_busbw_GBps", busbw(t_mpi)},
                          {"gloo_busbw_GBps", busbw(t_gloo)},
                          {"shim_busbw_GBps", busbw(t_shim)},
                          {"mpi_us", t_mpi * 1e6},
                          {"gloo_us", t_gloo * 1e6},
                          {"shim_us", t_shim * 1e6},
                          {"shim_overhead_vs_gloo_pct",
                           (t_shim / t_gloo - 1.0) * 100.0}};
      std::cout << j.dump() << std::endl;
    }
  }
  MPI_Barrier(MPI_COMM_WORLD);
  (void)shim->Leave(/*finished=*/true);
  shim.reset();
  gloo_ctx.reset();
  MPI_Barrier(MPI_COMM_WORLD);
  if (rank == 0) {
    server->Stop();
    std::filesystem::remove_all(store_dir);
  }
  MPI_Finalize();
  return 0;
}
