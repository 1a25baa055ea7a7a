// allreduce_bench: all-reduce bus bandwidth of the worker shim (Gloo backend)
// against raw Gloo (and, under mpirun, Open MPI's MPI_Allreduce), same
// processes, same run. Two ways to start it (bench/allreduce.sh picks one):
//
//  - MPI mode (only in a build that found MPI; RINGMASTER_BENCH_WITH_MPI):
//      mpirun -np N allreduce_bench [MAX_BYTES] [ROUNDS] [TARGET_MS]
//    MPI provides the process set, the barriers between timings, the
//    broadcasts (store directory, coordinator address) and the slowest
//    rank's time (MPI_MAX); the variants are mpi, gloo, shim, gloo2, backend,
//    gloo_late, gloo_wrapped.
//  - Launcher-free mode (any build, no MPI needed):
//      allreduce_bench --np N [--pin] [MAX_BYTES] [ROUNDS] [TARGET_MS]
//    The process forks N ranks and waits for them. The same control
//    operations run over a separate Gloo context (its own TCP device, a
//    FileStore in a fresh temp directory that the parent removes at the
//    end): gloo::barrier, gloo::broadcast, gloo::allreduce with max. The
//    variants are gloo, shim, gloo2, backend, gloo_late, gloo_wrapped (no
//    mpi fields; instead "pinned"). --pin binds rank r to the r-th CPU this process may run on
//    (CPU r on an unrestricted machine), all its threads included, when
//    there are at least N such CPUs. If a rank fails, the parent kills the
//    others, says which rank failed and how, and exits 1.
//
// The variants, float32 sum, in place:
//  - mpi:  MPI_Allreduce(MPI_IN_PLACE, ..., MPI_FLOAT, MPI_SUM).
//  - gloo: a gloo::rendezvous::Context over a FileStore, TCP on 127.0.0.1,
//          gloo::allreduce with the algorithm the shim picks (bcube up to
//          GlooBackend::kSmallAllReduceBytes, ring above).
//  - shim: ringmaster::shim::Shim::AllReduce (rank 0 runs an in-process
//          coordinator; the Gloo communicator comes from the shim's
//          rendezvous over the coordinator's key-value store).
//  - backend: GlooBackend::AllReduce on a second backend formed over a
//          FileStore, without coordinator or Shim: the backend's own cost
//          apart from the shim process's other threads.
//  - gloo_late: raw Gloo again, on a context and device made after the
//          backends' (a second noise floor: two instances of raw Gloo).
//  - gloo_wrapped: raw Gloo on a device whose contexts are the backend's
//          RevocableContext; gloo_wrapped vs gloo_late is the wrapper's cost.
// busbw = size / time * 2 (n - 1) / n (nccl-tests' definition).
//
// Resolving a 2 % difference on a shared machine: at each size the
// iterations per sample are scaled so that one sample takes about
// `target_ms`, and `rounds` rounds each time every variant once, in an order
// that rotates from round to round (so drift hits all alike), each sample
// after an untimed warm-up of its own variant (see Time()). Besides the
// other variants, a second raw-Gloo sample per round ("gloo2", the same code
// as "gloo") measures the noise floor: the spread of gloo2/gloo is what any
// shim/gloo difference must exceed to mean anything. Reported per variant:
// the minimum and the median sample; per comparison: the median of the
// per-round ratios and their interquartile range, and the ratio of minima.
// The 2-rank comparison cannot resolve a few percent on a loaded machine,
// so rank 0 first measures the shim's own cost directly: the same 1 KiB
// all-reduce in a one-rank world (no transfer) through GlooBackend and
// through gloo::allreduce, interleaved; the difference per call is what the
// shim adds to every all-reduce, whatever its size.
// Prints one JSON line for the per-call cost, then one per size (rank 0).
// `allreduce_bench --has-mpi` exits 0 when MPI mode is available.
#ifdef RINGMASTER_BENCH_WITH_MPI
#include <mpi.h>
#endif

#include <errno.h>
#include <sched.h>
#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#include <gloo/allreduce.h>
#include <gloo/barrier.h>
#include <gloo/broadcast.h>
#include <gloo/math.h>
#include <gloo/rendezvous/context.h>
#include <gloo/rendezvous/file_store.h>
#include <gloo/rendezvous/hash_store.h>
#include <gloo/transport/tcp/device.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <iostream>
#include <string>
#include <type_traits>
#include <vector>

#include <nlohmann/json.hpp>

#include "server/coordinator/coordinator_service.h"
#include "worker_shim/backend_factory.h"
#include "worker_shim/gloo_backend.h"
#include "worker_shim/gloo_transport.h"
#include "worker_shim/shim.h"

namespace {

using Clock = std::chrono::steady_clock;

// A TCP device whose contexts are the shim's RevocableContext around Gloo's
// (for variant gloo_wrapped: raw Gloo's algorithms and rendezvous, only the
// transport wrapped as the Gloo backend wraps it).
class WrappingDevice final : public gloo::transport::Device {
 public:
  explicit WrappingDevice(std::shared_ptr<gloo::transport::Device> inner)
      : inner_(std::move(inner)) {}
  std::string str() const override { return inner_->str(); }
  const std::string& getPCIBusID() const override {
    return inner_->getPCIBusID();
  }
  std::shared_ptr<gloo::transport::Context> createContext(int rank,
                                                          int size) override {
    // Gloo's rendezvous sets the timeout on the context it gets, the
    // wrapper; the pairs and buffers read the inner one's.
    auto inner = inner_->createContext(rank, size);
    inner->setTimeout(std::chrono::seconds(60));
    return std::make_shared<ringmaster::shim::RevocableContext>(
        std::move(inner));
  }

 private:
  std::shared_ptr<gloo::transport::Device> inner_;
};

// What the ranks need from each other besides the timed all-reduces: MPI in
// MPI mode, a control Gloo context in the launcher-free mode.
class Control {
 public:
  Control(int rank, int size) : rank_(rank), size_(size) {}
  virtual ~Control() = default;
  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual void Barrier() = 0;
  // The maximum of `v` over all ranks.
  virtual double Max(double v) = 0;
  // Rank 0's `s` (at most 511 bytes) on every rank.
  virtual std::string Broadcast(const std::string& s) = 0;
  // Ends every rank (MPI) or this one (the parent ends the others).
  [[noreturn]] virtual void Abort(const std::string& why, int code) = 0;

 private:
  const int rank_;
  const int size_;
};

constexpr size_t kBroadcastBytes = 512;

#ifdef RINGMASTER_BENCH_WITH_MPI
class MpiControl final : public Control {
 public:
  MpiControl(int rank, int size) : Control(rank, size) {}
  void Barrier() override { MPI_Barrier(MPI_COMM_WORLD); }
  double Max(double v) override {
    double max = 0;
    MPI_Allreduce(&v, &max, 1, MPI_DOUBLE, MPI_MAX, MPI_COMM_WORLD);
    return max;
  }
  std::string Broadcast(const std::string& s) override {
    char buf[kBroadcastBytes] = {};
    std::snprintf(buf, sizeof(buf), "%s", s.c_str());
    MPI_Bcast(buf, sizeof(buf), MPI_CHAR, 0, MPI_COMM_WORLD);
    return buf;
  }
  [[noreturn]] void Abort(const std::string& why, int code) override {
    std::cerr << "allreduce_bench: rank " << rank() << ": " << why
              << std::endl;
    MPI_Abort(MPI_COMM_WORLD, code);
    std::_Exit(code);
  }
};
#endif

// A Gloo context of its own (TCP on 127.0.0.1, FileStore in `dir`) for the
// barriers, broadcasts and maxima of the launcher-free mode.
class GlooControl final : public Control {
 public:
  GlooControl(int rank, int size, const std::string& dir)
      : Control(rank, size), store_(dir) {
    gloo::transport::tcp::attr attr;
    attr.hostname = "127.0.0.1";
    device_ = gloo::transport::tcp::CreateDevice(attr);
    ctx_ = std::make_shared<gloo::rendezvous::Context>(rank, size);
    // Ranks wait here while rank 0 measures the per-call cost, and a dead
    // rank is the parent's to notice: no need for Gloo's 30 s default.
    ctx_->setTimeout(std::chrono::minutes(10));
    ctx_->connectFullMesh(store_, device_);
  }
  void Barrier() override {
    gloo::BarrierOptions opts(ctx_);
    opts.setTag(++tag_);
    gloo::barrier(opts);
  }
  double Max(double v) override {
    gloo::AllreduceOptions opts(ctx_);
    opts.setOutput(&v, 1);
    opts.setReduceFunction(
        static_cast<void (*)(void*, const void*, const void*, size_t)>(
            &gloo::max<double>));
    opts.setTag(++tag_);
    gloo::allreduce(opts);
    return v;
  }
  std::string Broadcast(const std::string& s) override {
    char buf[kBroadcastBytes] = {};
    if (rank() == 0) std::snprintf(buf, sizeof(buf), "%s", s.c_str());
    gloo::BroadcastOptions opts(ctx_);
    opts.setOutput(buf, sizeof(buf));
    opts.setRoot(0);
    opts.setTag(++tag_);
    gloo::broadcast(opts);
    buf[sizeof(buf) - 1] = '\0';
    return buf;
  }
  [[noreturn]] void Abort(const std::string& why, int code) override {
    std::cerr << "allreduce_bench: rank " << rank() << ": " << why
              << std::endl;
    std::fflush(nullptr);
    std::_Exit(code);
  }

 private:
  gloo::rendezvous::FileStore store_;
  std::shared_ptr<gloo::transport::Device> device_;
  std::shared_ptr<gloo::rendezvous::Context> ctx_;
  uint32_t tag_ = 0;
};

// Seconds per all-reduce of `fn`, averaged over `iters` (ranks start together
// after a barrier; the slowest rank's time). `warm` untimed calls of the same
// `fn` come first: the rotation always runs the variants in the same cyclic
// order (gloo, shim, gloo2), so without them the shim always paid for the
// switch from raw Gloo's connections to its own, and gloo2 for the switch
// back, while gloo followed gloo2 on the same connections; on a quiet
// 16-core machine that biased both the shim and the noise floor upward by
// 1-2 %.
template <typename Fn>
double Time(Control& ctl, int iters, Fn fn, int warm = 0) {
  ctl.Barrier();
  for (int i = 0; i < warm; ++i) fn();
  ctl.Barrier();
  const auto t0 = Clock::now();
  for (int i = 0; i < iters; ++i) fn();
  double s = std::chrono::duration<double>(Clock::now() - t0).count() / iters;
  return ctl.Max(s);
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

struct Args {
  size_t max_bytes = 64u << 20;
  int rounds = 31;
  double target_ms = 20;
  int np = 0;  // > 0: launcher-free mode with this many ranks
  bool pin = false;
};

// No MPI_Allreduce variant (the launcher-free mode).
struct NoMpi {};

// The measurement proper, on every rank. `store_dir` (existing, shared) holds
// the raw Gloo context's FileStore. `mpi_allreduce(float*, int)` is the mpi
// variant, or NoMpi. `extra` goes into every per-size line.
template <typename MpiAllReduce>
void RunBench(Control& ctl, const Args& a, const std::string& store_dir,
              MpiAllReduce mpi_allreduce, const nlohmann::json& extra) {
  constexpr bool kWithMpi = !std::is_same_v<MpiAllReduce, NoMpi>;
  const int rank = ctl.rank();
  const int size = ctl.size();
  if (rank == 0) PerCallCost(a.rounds);
  ctl.Barrier();

  gloo::transport::tcp::attr attr;
  attr.hostname = "127.0.0.1";
  auto device = gloo::transport::tcp::CreateDevice(attr);
  gloo::rendezvous::FileStore file_store(store_dir);
  auto gloo_ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  gloo_ctx->connectFullMesh(file_store, device);

  // The shim: rank 0 hosts the coordinator.
  std::unique_ptr<ringmaster::server::CoordinatorServer> server;
  std::string addr;
  if (rank == 0) {
    auto started = ringmaster::server::CoordinatorServer::Start(
        "127.0.0.1:0", ringmaster::server::CoordinatorOptions());
    if (!started.ok()) {
      ctl.Abort("coordinator start: " + started.status().ToString(), 1);
    }
    server = *std::move(started);
    addr = server->address();
  }
  addr = ctl.Broadcast(addr);
  ringmaster::shim::ShimOptions so;
  so.client.address = addr;
  so.client.job = "allreduce";
  so.client.worker_id = "r" + std::to_string(rank);
  so.client.desired_workers = size;
  auto backend = ringmaster::shim::MakeBackend("gloo", absl::Seconds(60));
  if (!backend.ok()) ctl.Abort("backend: " + backend.status().ToString(), 1);
  auto created = ringmaster::shim::Shim::Create(so, *std::move(backend));
  if (!created.ok()) {
    ctl.Abort("shim create: " + created.status().ToString(), 1);
  }
  auto shim = *std::move(created);
  if (auto s = shim->Start(); !s.ok()) {
    ctl.Abort("shim start: " + s.ToString(), 1);
  }

  // The backend alone (variant "backend"): a second GlooBackend formed over
  // a FileStore, no coordinator and no Shim around it. With "shim" it tells
  // the backend's own cost (its mesh, the revocable transport context) from
  // that of the shim's process (coordinator client threads, rank 0's
  // in-process coordinator).
  auto bare_made = ringmaster::shim::GlooBackend::Create({});
  if (!bare_made.ok()) {
    ctl.Abort("bare backend: " + bare_made.status().ToString(), 1);
  }
  auto bare = *std::move(bare_made);
  {
    std::filesystem::create_directories(store_dir + "/backend");
    gloo::rendezvous::FileStore bare_store(store_dir + "/backend");
    ringmaster::shim::ReformPlan plan;
    plan.generation = 1;
    plan.rank = rank;
    plan.world_size = size;
    if (auto s = bare->Reform(plan, bare_store); !s.ok()) {
      ctl.Abort("bare backend reform: " + s.ToString(), 1);
    }
  }

  // A second raw Gloo context, on a device of its own made after the
  // backends (variant "gloo_late"): gloo vs gloo_late is the difference
  // between two instances of the same raw code (their device threads, their
  // sockets), the floor for shim and backend, which also run on devices of
  // their own made after raw Gloo's.
  auto late_device = gloo::transport::tcp::CreateDevice(attr);
  std::filesystem::create_directories(store_dir + "/late");
  gloo::rendezvous::FileStore late_store(store_dir + "/late");
  auto late_ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  late_ctx->connectFullMesh(late_store, late_device);

  // Variant gloo_wrapped: like gloo_late, on a device made after it, but
  // through the backend's RevocableContext: gloo_wrapped vs gloo_late is the
  // cost of the wrapper alone.
  std::shared_ptr<gloo::transport::Device> wrapped_device =
      std::make_shared<WrappingDevice>(gloo::transport::tcp::CreateDevice(attr));
  std::filesystem::create_directories(store_dir + "/wrapped");
  gloo::rendezvous::FileStore wrapped_store(store_dir + "/wrapped");
  auto wrapped_ctx = std::make_shared<gloo::rendezvous::Context>(rank, size);
  wrapped_ctx->connectFullMesh(wrapped_store, wrapped_device);

  uint32_t tag = 0;
  for (size_t bytes = 1024; bytes <= a.max_bytes; bytes *= 4) {
    const size_t n = bytes / sizeof(float);
    std::vector<float> data(n, 1.0f);
    auto mpi = [&] {
      if constexpr (kWithMpi) {
        mpi_allreduce(data.data(), static_cast<int>(n));
      }
    };
    auto gloo_on = [&](const std::shared_ptr<gloo::Context>& ctx) {
      gloo::AllreduceOptions opts(ctx);
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
    auto gloo = [&] { gloo_on(gloo_ctx); };
    auto gloo_late = [&] { gloo_on(late_ctx); };
    auto gloo_wrapped = [&] { gloo_on(wrapped_ctx); };
    // Shim::AllReduce or GlooBackend::AllReduce; a failure ends the run.
    auto through = [&](auto& x, const char* what) {
      if (auto s = x.AllReduce(data.data(), n,
                               ringmaster::shim::DataType::kFloat32,
                               ringmaster::shim::ReduceOp::kSum);
          !s.ok()) {
        ctl.Abort(std::string(what) + " all-reduce: " + s.ToString(), 2);
      }
    };
    auto shim_fn = [&] { through(*shim, "shim"); };
    auto backend_fn = [&] { through(*bare, "backend"); };
    // Warm up every variant, then size a sample to about target_ms (the
    // same count on every rank: Time() returns the slowest rank's time).
    for (int i = 0; i < 3; ++i) {
      if constexpr (kWithMpi) mpi();
      gloo();
      shim_fn();
      backend_fn();
      gloo_late();
      gloo_wrapped();
    }
    const double one = Time(ctl, 3, gloo);
    const int iters = std::clamp(
        static_cast<int>(a.target_ms / 1e3 / std::max(one, 1e-9)), 1, 100000);
    const int warm = std::max(1, iters / 4);
    // 0 mpi, 1 gloo, 2 shim, 3 gloo2, 4 backend, 5 gloo_late,
    // 6 gloo_wrapped; round r runs them from the r-th on (mod 7 with mpi,
    // mod 6 over 1..6 without).
    std::vector<std::vector<double>> t(7);
    constexpr int kVariants = kWithMpi ? 7 : 6;
    constexpr int kFirst = kWithMpi ? 0 : 1;
    for (int round = 0; round < a.rounds; ++round) {
      for (int k = 0; k < kVariants; ++k) {
        const int v = kFirst + (round + k) % kVariants;
        if (v == 0) t[0].push_back(Time(ctl, iters, mpi, warm));
        if (v == 1) t[1].push_back(Time(ctl, iters, gloo, warm));
        if (v == 2) t[2].push_back(Time(ctl, iters, shim_fn, warm));
        if (v == 3) t[3].push_back(Time(ctl, iters, gloo, warm));
        if (v == 4) t[4].push_back(Time(ctl, iters, backend_fn, warm));
        if (v == 5) t[5].push_back(Time(ctl, iters, gloo_late, warm));
        if (v == 6) t[6].push_back(Time(ctl, iters, gloo_wrapped, warm));
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
                          {"warmup_per_sample", warm},
                          {"rounds", a.rounds}};
      if constexpr (kWithMpi) j["mpi"] = stats(t[0]);
      j["gloo"] = stats(t[1]);
      j["shim"] = stats(t[2]);
      j["backend"] = stats(t[4]);
      j["shim_vs_gloo"] = Compare(t[1], t[2]);
      j["backend_vs_gloo"] = Compare(t[1], t[4]);
      j["gloo_late"] = stats(t[5]);
      j["noise_gloo_late_vs_gloo"] = Compare(t[1], t[5]);
      j["gloo_wrapped"] = stats(t[6]);
      j["gloo_wrapped_vs_gloo_late"] = Compare(t[5], t[6]);
      j["noise_gloo2_vs_gloo"] = Compare(t[1], t[3]);
      if constexpr (kWithMpi) j["mpi_vs_gloo"] = Compare(t[1], t[0]);
      j.update(extra);
      std::cout << j.dump() << std::endl;
    }
  }
  ctl.Barrier();
  (void)shim->Leave(/*finished=*/true);
  shim.reset();
  gloo_ctx.reset();
  late_ctx.reset();
  wrapped_ctx.reset();
  ctl.Barrier();
  if (rank == 0) server->Stop();
}

constexpr char kUsage[] =
    "usage: mpirun -np N allreduce_bench [MAX_BYTES] [ROUNDS] [TARGET_MS]\n"
    "       allreduce_bench --np N [--pin] [MAX_BYTES] [ROUNDS] [TARGET_MS]\n"
    "       allreduce_bench --has-mpi  (exit 0 when built with MPI)\n"
    "defaults: MAX_BYTES 67108864, ROUNDS 31, TARGET_MS 20\n";

[[noreturn]] void Usage(const std::string& why) {
  std::cerr << "allreduce_bench: " << why << "\n" << kUsage;
  std::exit(2);
}

// The positional and flag arguments (exits 2 on a bad one).
Args Parse(int argc, char** argv) {
  Args a;
  std::vector<std::string> pos;
  for (int i = 1; i < argc; ++i) {
    const std::string arg = argv[i];
    if (arg == "--np") {
      if (++i == argc) Usage("--np needs a number");
      try {
        a.np = std::stoi(argv[i]);
      } catch (const std::exception&) {
        Usage("bad --np " + std::string(argv[i]));
      }
      if (a.np < 1) Usage("--np must be at least 1");
    } else if (arg == "--pin") {
      a.pin = true;
    } else if (arg == "-h" || arg == "--help") {
      std::cout << kUsage;
      std::exit(0);
    } else if (arg.rfind("-", 0) == 0) {
      Usage("unknown option " + arg);
    } else {
      pos.push_back(arg);
    }
  }
  if (pos.size() > 3) Usage("too many arguments");
  try {
    if (pos.size() > 0) a.max_bytes = std::stoull(pos[0]);
    if (pos.size() > 1) a.rounds = std::stoi(pos[1]);
    if (pos.size() > 2) a.target_ms = std::stod(pos[2]);
  } catch (const std::exception&) {
    Usage("MAX_BYTES, ROUNDS and TARGET_MS must be numbers");
  }
  if (a.rounds < 1) Usage("ROUNDS must be at least 1");
  if (a.pin && a.np == 0) {
    Usage("--pin needs --np (under mpirun, bind with --bind-to core)");
  }
  return a;
}

// One rank of the launcher-free mode, in a child of RunForked(); its exit
// status. `cpu` >= 0: run on that CPU only (before any thread starts, so
// every thread of the rank inherits it).
int RunChild(const Args& a, int rank, const std::filesystem::path& dir,
             int cpu) {
  try {
    if (cpu >= 0) {
      cpu_set_t set;
      CPU_ZERO(&set);
      CPU_SET(cpu, &set);
      if (sched_setaffinity(0, sizeof(set), &set) != 0) {
        std::cerr << "allreduce_bench: rank " << rank << ": pin to CPU "
                  << cpu << ": " << strerror(errno) << std::endl;
        return 1;
      }
    }
    GlooControl ctl(rank, a.np, (dir / "control").string());
    RunBench(ctl, a, (dir / "gloo").string(), NoMpi{},
             nlohmann::json{{"pinned", cpu >= 0}});
  } catch (const std::exception& e) {
    std::cerr << "allreduce_bench: rank " << rank << ": " << e.what()
              << std::endl;
    return 1;
  }
  return 0;
}

volatile sig_atomic_t g_signal = 0;
extern "C" void OnSignal(int sig) { g_signal = sig; }

std::string Describe(int status) {
  if (WIFEXITED(status)) {
    return "exited with status " + std::to_string(WEXITSTATUS(status));
  }
  if (WIFSIGNALED(status)) {
    return "was killed by signal " + std::to_string(WTERMSIG(status)) + " (" +
           strsignal(WTERMSIG(status)) + ")";
  }
  return "ended with wait status " + std::to_string(status);
}

// The launcher-free mode: forks a.np ranks, waits for them, removes the temp
// directory. 0 when every rank exited 0; 1 when one failed (the others are
// killed); 128 + signal when this process was interrupted.
int RunForked(const Args& a) {
  std::vector<int> cpus;  // rank r runs on cpus[r]
  if (a.pin) {
    cpu_set_t allowed;
    CPU_ZERO(&allowed);
    if (sched_getaffinity(0, sizeof(allowed), &allowed) != 0) {
      std::cerr << "allreduce_bench: sched_getaffinity: " << strerror(errno)
                << std::endl;
      return 1;
    }
    for (int c = 0; c < CPU_SETSIZE && static_cast<int>(cpus.size()) < a.np;
         ++c) {
      if (CPU_ISSET(c, &allowed)) cpus.push_back(c);
    }
    if (static_cast<int>(cpus.size()) < a.np) {
      std::cerr << "allreduce_bench: not pinning: " << a.np
                << " ranks but only " << CPU_COUNT(&allowed)
                << " CPUs allowed" << std::endl;
      cpus.clear();
    }
  }
  std::string tmpl =
      (std::filesystem::temp_directory_path() / "rm_allreduce_XXXXXX")
          .string();
  if (mkdtemp(tmpl.data()) == nullptr) {
    std::cerr << "allreduce_bench: mkdtemp " << tmpl << ": "
              << strerror(errno) << std::endl;
    return 1;
  }
  const std::filesystem::path dir = tmpl;
  std::filesystem::create_directories(dir / "control");
  std::filesystem::create_directories(dir / "gloo");
  {
    std::string where;
    for (size_t r = 0; r < cpus.size(); ++r) {
      where += (r ? "," : "") + std::to_string(cpus[r]);
    }
    std::cerr << "allreduce_bench: " << a.np << " ranks, forked, "
              << (cpus.empty() ? std::string("not pinned")
                               : "pinned to CPUs " + where)
              << std::endl;
  }

  // Signals that end the run are blocked until the handlers are in place
  // (children get the old mask back, and the default handlers).
  sigset_t stop, old;
  sigemptyset(&stop);
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaddset(&stop, sig);
  sigprocmask(SIG_BLOCK, &stop, &old);
  std::fflush(nullptr);
  std::vector<pid_t> pids(a.np, -1);
  int rc = 0;
  auto kill_all = [&] {
    for (pid_t& p : pids) {
      if (p > 0) ::kill(p, SIGKILL);
    }
  };
  for (int r = 0; r < a.np; ++r) {
    const pid_t pid = fork();
    if (pid == 0) {
      sigprocmask(SIG_SETMASK, &old, nullptr);
      const int status = RunChild(a, r, dir, cpus.empty() ? -1 : cpus[r]);
      std::cout.flush();
      std::fflush(nullptr);
      std::_Exit(status);
    }
    if (pid < 0) {
      std::cerr << "allreduce_bench: fork: " << strerror(errno) << std::endl;
      rc = 1;
      kill_all();
      break;
    }
    pids[r] = pid;
  }
  struct sigaction sa = {};
  sa.sa_handler = OnSignal;
  sigemptyset(&sa.sa_mask);
  sa.sa_flags = 0;  // no SA_RESTART: waitpid returns EINTR
  for (int sig : {SIGINT, SIGTERM, SIGHUP}) sigaction(sig, &sa, nullptr);
  sigprocmask(SIG_SETMASK, &old, nullptr);

  // Reaps `pid`; reports an abnormal end unless it is our own SIGKILL.
  int left = 0;
  for (pid_t p : pids) left += p > 0;
  bool killed = rc != 0;  // kill_all() has run
  auto reaped = [&](pid_t pid, int status) {
    const auto it = std::find(pids.begin(), pids.end(), pid);
    if (it == pids.end()) return true;
    *it = -1;
    --left;
    const bool ok = WIFEXITED(status) && WEXITSTATUS(status) == 0;
    if (!ok && !(killed && WIFSIGNALED(status) && WTERMSIG(status) == SIGKILL)) {
      std::cerr << "allreduce_bench: rank " << (it - pids.begin()) << " (pid "
                << pid << ") " << Describe(status) << std::endl;
    }
    return ok;
  };
  auto stop_the_rest = [&] {
    if (left > 0) {
      std::cerr << "allreduce_bench: stopping the other " << left
                << " rank(s)" << std::endl;
    }
    kill_all();
    killed = true;
  };
  while (left > 0) {
    if (g_signal != 0 && !killed) {
      std::cerr << "allreduce_bench: " << strsignal(g_signal)
                << "; stopping the ranks" << std::endl;
      rc = 128 + g_signal;
      kill_all();
      killed = true;
    }
    int status = 0;
    const pid_t pid = waitpid(-1, &status, 0);
    if (pid < 0) {
      if (errno == EINTR) continue;
      std::cerr << "allreduce_bench: waitpid: " << strerror(errno)
                << std::endl;
      if (rc == 0) rc = 1;
      break;
    }
    if (reaped(pid, status) || killed) continue;
    // The first failure. The ranks that it brings down end on their own
    // within moments and may be reaped before the cause: wait a second for
    // them, so that every rank that failed by itself is reported, then kill
    // the rest.
    rc = 1;
    const auto deadline = Clock::now() + std::chrono::seconds(1);
    while (left > 0 && Clock::now() < deadline && g_signal == 0) {
      const pid_t p = waitpid(-1, &status, WNOHANG);
      if (p > 0) {
        reaped(p, status);
      } else {
        ::usleep(20000);
      }
    }
    stop_the_rest();
  }
  std::error_code ec;
  std::filesystem::remove_all(dir, ec);
  if (ec) {
    std::cerr << "allreduce_bench: remove " << dir << ": " << ec.message()
              << std::endl;
  }
  return rc;
}

}  // namespace

int main(int argc, char** argv) {
  for (int i = 1; i < argc; ++i) {
    if (std::string(argv[i]) == "--has-mpi") {
#ifdef RINGMASTER_BENCH_WITH_MPI
      return 0;
#else
      return 1;
#endif
    }
  }
  const Args a = Parse(argc, argv);
  if (a.np > 0) return RunForked(a);
#ifdef RINGMASTER_BENCH_WITH_MPI
  MPI_Init(&argc, &argv);
  int rank = 0, size = 1;
  MPI_Comm_rank(MPI_COMM_WORLD, &rank);
  MPI_Comm_size(MPI_COMM_WORLD, &size);
  MpiControl ctl(rank, size);
  // Raw Gloo: rendezvous through a FileStore in a shared temp directory.
  std::string store_dir;
  if (rank == 0) {
    store_dir = (std::filesystem::temp_directory_path() /
                 ("rm_allreduce_" + std::to_string(::getpid())))
                    .string();
    std::filesystem::create_directories(store_dir);
  }
  store_dir = ctl.Broadcast(store_dir);
  try {
    RunBench(
        ctl, a, store_dir,
        [](float* data, int n) {
          MPI_Allreduce(MPI_IN_PLACE, data, n, MPI_FLOAT, MPI_SUM,
                        MPI_COMM_WORLD);
        },
        nlohmann::json::object());
  } catch (const std::exception& e) {
    ctl.Abort(e.what(), 3);
  }
  if (rank == 0) std::filesystem::remove_all(store_dir);
  MPI_Finalize();
  return 0;
#else
  Usage("built without MPI: start it with --np N");
#endif
}
