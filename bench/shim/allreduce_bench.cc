// allreduce_bench: all-reduce bus bandwidth of the worker shim (Gloo backend)
// against raw Gloo and Open MPI's MPI_Allreduce, same processes, same run.
// Launched by bench/allreduce.sh under mpirun: MPI provides the process set
// and the barriers between timings; the three variants run one after the
// other at each size, float32 sum, in place.
//
//  - mpi:  MPI_Allreduce(MPI_IN_PLACE, ..., MPI_FLOAT, MPI_SUM).
//  - gloo: a gloo::rendezvous::Context over a FileStore, TCP on 127.0.0.1,
//          gloo::allreduce with the algorithm the shim picks (bcube up to
//          GlooBackend::kSmallAllReduceBytes, ring above).
//  - shim: ringmaster::shim::Shim::AllReduce (rank 0 runs an in-process
//          coordinator; the Gloo communicator comes from the shim's
//          rendezvous over the coordinator's key-value store).
// busbw = size / time * 2 (n - 1) / n (nccl-tests' definition).
//
// Resolving a 2 % difference on a shared machine: at each size the
// iterations per sample are scaled so that one sample takes about
// `target_ms`, and `rounds` rounds each time every variant once, in an order
// that rotates from round to round (so drift hits all alike). Besides mpi,
// gloo and shim, a second raw-Gloo sample per round ("gloo2", the same code
// as "gloo") measures the noise floor: the spread of gloo2/gloo is what any
// shim/gloo difference must exceed to mean anything. Reported per variant:
// the minimum and the median sample; per comparison: the median of the
// per-round ratios and their interquartile range, and the ratio of minima.
// The 2-rank comparison cannot resolve a few percent on a loaded machine,
// so rank 0 first measures the shim's own cost directly: the same 1 KiB
// all-reduce in a one-rank world (no transfer) through GlooBackend and
// through gloo::allreduce, interleaved; the difference per call is what the
// shim adds to every all-reduce, whatever its size.
// Usage: allreduce_bench [MAX_BYTES] [ROUNDS] [TARGET_MS]
// Prints one JSON line for the per-call cost, then one per size.
#include <mpi.h>

#include <gloo/allreduce.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>
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
#include "worker_shim/gloo_backend.h"
#include "worker_shim/shim.h"

namespace {

using Clock = std::chrono::steady_clock;

// Seconds per all-reduce of `fn`, averaged over `iters` (ranks start together
// after a barrier; the slowest rank's time).
template <typename Fn>
double Time(int iters, Fn fn) {
  MPI_Barrier(MPI_COMM_WORLD);
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) fn();
  double s = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
  double slowest = 0;
  MPI_Allreduce(&s, &slowest, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
  return slowest;
}

double Quantile(std::vector<double> v, double q) {
  std::sort(v.begin(), v.end());
  const double pos = q * static_cast<double>(v.size() - 1);
  const size_t lo = static_cast<size_t>(pos);
  const size_t hi = std::min(lo + 1, v.size() - 1);
  return v[lo] + (v[hi] - v[lo]) * (pos - static_cast<double>(lo));
}

// Percent differences b/a - 1 per round: median and interquartile range.
nlohmann::json Compare(const std::vector<double>& a,
                       const std::vector<double>& b) {
  std::vector<double> pct;
  for (size_t i = 0; i < a.size(); ++i) pct.push_back((b[i] / a[i] - 1) * 100);
  const double min_a = *std::min_element(a.begin(), a.end());
  const double min_b = *std::min_element(b.begin(), b.end());
  return {{"median_pct", Quantile(pct, 0.5)},
          {"q25_pct", Quantile(pct, 0.25)},
          {"q75_pct", Quantile(pct, 0.75)},
          {"min_vs_min_pct", (min_b / min_a - 1) * 100}};
}

// Rank 0's one-rank measurement of the shim's per-call cost (see the file
// comment); prints one JSON line.
void PerCallCost(int rounds) {
  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::HashStore raw_store;
  auto ctx = std::make_shared<gloo::rendezvous::Context>(0, 1);
  ctx->connectFullMesh(raw_store, device);
  ringmaster::shim::GlooOptions o;
  auto backend = *ringmaster::shim::GlooBackend::Create(o);
  gloo::rendezvous::HashStore shim_store;
  ringmaster::shim::ReformPlan plan;
  plan.generation = 1;
  plan.rank = 0;
  plan.world_size = 1;
  if (!backend->Reform(plan, shim_store).ok()) std::abort();
  std::vector<float> data(256, 1.0f);
  uint32_t tag = 0;
  auto raw = [&] {
    gloo::AllreduceOptions opts(ctx);
    opts.setOutput(data.data(), data.size());
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(
            &gloo::sum<float>));
    opts.setTag(++tag);
    opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::BCUBE);  // as shim
    gloo::allreduce(opts);
  };
  auto shim = [&] {
    if (!backend
             ->AllReduce(data.data(), data.size(),
                         ringmaster::shim::DataType::kFloat32,
                         ringmaster::shim::ReduceOp::kSum)
             .ok()) {
      std::abort();
    }
  };
  constexpr int kCalls = 20000;
  auto ns_per_call = [&](auto fn) {
    const auto t0 = Clock::now();
    for (int i = 0; i < kCalls; ++i) fn();
    return std::chrono::duration<double, std::nano>(Clock::now() - t0)
               .count() /
           kCalls;
  };
  std::vector<double> raw_ns, shim_ns, diff;
  for (int r = 0; r < rounds; ++r) {
    const double a = r % 2 ? ns_per_call(raw) : ns_per_call(shim);
    const double b = r % 2 ? ns_per_call(shim) : ns_per_call(raw);
    raw_ns.push_back(r % 2 ? a : b);
    shim_ns.push_back(r % 2 ? b : a);
    diff.push_back(shim_ns.back() - raw_ns.back());
  }
  nlohmann::json j = {
      {"per_call_one_rank_1KiB",
       {{"calls_per_sample", kCalls},
        {"rounds", rounds},
        {"gloo_ns_min", *std::min_element(raw_ns.begin(), raw_ns.end())},
        {"gloo_ns_median", Quantile(raw_ns, 0.5)},
        {"shim_ns_min", *std::min_element(shim_ns.begin(), shim_ns.end())},
        {"shim_ns_median", Quantile(shim_ns, 0.5)},
        {"shim_minus_gloo_ns_median", Quantile(diff, 0.5)},
        {"shim_minus_gloo_ns_q25", Quantile(diff, 0.25)},
        {"shim_minus_gloo_ns_q75", Quantile(diff, 0.75)}}}};
  std::cout << j.dump() << std::endl;
}

}  // namespace

int main(int argc, char** argv) {
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  const size_t max_bytes = argc > 1 ? std::stoull(argv[1]) : (64u << 20);
  const int rounds = argc > 2 ? std::stoi(argv[2]) : 31;
  const double target_ms = argc > 3 ? std::stod(argv[3]) : 20;
  if (rank == 0) PerCallCost(rounds);
  MPI_Barrier(MPI_COMM_WORLD);

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

  uint32_t tag = 0;
  for (size_t bytes = 1024; bytes <= max_bytes; bytes *= 4) {
    const size_t n = bytes / sizeof(float);
    std::vector<float> data(n, 1.0f);
    auto mpi = [&] {
      MPI_Allreduce(MPI_IN_PLACE, data.data(), static_cast<int>(n), MPI_FLOAT,
                    MPI_SUM, MPI_COMM_WORLD);
    };
    auto gloo = [&] {
      gloo::AllreduceOptions opts(gloo_ctx);
      opts.setOutput(data.data(), n);
      opts.setReduceFunction(
          static_cast<void (*)(void*, const void*, const void*, size_t)>(
              &gloo::sum<float>));
      opts.setTag(++tag);
      if (bytes <= ringmaster::shim::GlooBackend::kSmallAllReduceBytes) {
        opts.setAlgorithm(gloo::AllreduceOptions::Algorithm::BCUBE);
      }
      gloo::allreduce(opts);
    };
    auto shim_fn = [&] {
      if (!shim->AllReduce(data.data(), n, ringmaster::shim::DataType::kFloat32,
                           ringmaster::shim::ReduceOp::kSum)
               .ok()) {
        MPI_Abort(MPI_COMM_WORLD, 2);
      }
    };
    // Warm up every variant, then size a sample to about target_ms (the
    // same count on every rank: Time() returns the slowest rank's time).
    for (int i = 0; i < 3; ++i) {
      mpi();
      gloo();
      shim_fn();
    }
    const double one = Time(3, gloo);
    const int iters = std::clamp(
        static_cast<int>(target_ms / 1e3 / std::max(one, 1e-9)), 1, 100000);
    // 0 mpi, 1 gloo, 2 shim, 3 gloo2; round r runs them from r % 4 on.
    std::vector<std::vector<double>> t(4);
    for (int round = 0; round < rounds; ++round) {
      for (int k = 0; k < 4; ++k) {
        const int v = (round + k) % 4;
        if (v == 0) t[0].push_back(Time(iters, mpi));
        if (v == 1) t[1].push_back(Time(iters, gloo));
        if (v == 2) t[2].push_back(Time(iters, shim_fn));
        if (v == 3) t[3].push_back(Time(iters, gloo));
      }
    }
    if (rank == 0) {
      const double factor = 2.0 * (size - 1) / size;
      auto busbw = [&](double sec) { return bytes / sec * factor / 1e9; };
      auto stats = [&](const std::vector<double>& v) {
        const double min = *std::min_element(v.begin(), v.end());
        const double med = Quantile(v, 0.5);
        return nlohmann::json{{"min_us", min * 1e6},
                              {"median_us", med * 1e6},
                              {"busbw_GBps_at_median", busbw(med)}};
      };
      nlohmann::json j = {{"processes", size},
                          {"bytes", bytes},
                          {"iters_per_sample", iters},
                          {"rounds", rounds},
                          {"mpi", stats(t[0])},
                          {"gloo", stats(t[1])},
                          {"shim", stats(t[2])},
                          {"shim_vs_gloo", Compare(t[1], t[2])},
                          {"noise_gloo2_vs_gloo", Compare(t[1], t[3])},
                          {"mpi_vs_gloo", Compare(t[1], t[0])}};
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
