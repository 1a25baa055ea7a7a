// elastic_trainer: data-parallel SGD on a synthetic linear-regression data
// set, with gradients all-reduced through the worker shim, surviving
// membership changes without a restart and without losing a sample.
//
// Data: sample i (0 <= i < samples) has features x_i in [-1, 1]^dim and
// label y_i = w_true . x_i + small noise, all derived from (seed, i) alone.
// Training walks `epochs` passes over the data as one stream of global
// indices g = 0 .. samples*epochs-1 (sample g % samples), in global batches
// of `batch`: the step at committed position p covers [p, p + batch).
//
// Sharding: in a world of W ranks, rank r takes the indices p + j with
// j % W == r. The step's all-reduced buffer carries, besides the gradient,
// one indicator slot per index of the batch (1 where a rank processed it) and
// sums of p and p^2 (equal positions on every rank <=> sum(p^2)*W ==
// sum(p)^2). So every step checks, across ranks, that each sample of the
// batch was processed exactly once: a 0 is a skipped sample, a 2 a
// duplicate. Position, weights and these counters are the elastic state:
// committed every `commit_every` steps, rolled back on failure, synced to
// newcomers. The update is w -= lr * (sum of gradients) / batch, which does
// not depend on W, so any sequence of memberships must end at the weights of
// the serial run (`--reference`), up to floating-point summation order.
//
// Output (--out, written by the final rank 0): JSON with samples_processed,
// duplicate_samples, skipped_samples, final_loss, weights, generations, ...
#include <unistd.h>

#include <array>
#include <chrono>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>
#include <thread>
#include <vector>

#include <CLI/CLI.hpp>
#include <nlohmann/json.hpp>

#include "worker_shim/backend_factory.h"
#include "worker_shim/shim.h"

namespace {

using ringmaster::shim::DataType;
using ringmaster::shim::ReduceOp;
using ringmaster::shim::Shim;

struct Config {
  std::string coordinator;
  std::string job = "trainer";
  std::string worker;
  int desired_workers = 0;
  int64_t samples = 4096;
  int epochs = 2;
  int batch = 64;
  int dim = 8;
  double lr = 0.1;
  int commit_every = 4;
  uint64_t seed = 1;
  int step_delay_ms = 0;
  // A stand-in for a model's cost (the scheduler learns its scaling from the
  // step times reported): each step sleeps compute_ms / world size (the
  // batch's compute, split) plus allreduce_ms x (world size - 1) (the
  // synchronization each further worker adds).
  double compute_ms = 0;
  double allreduce_ms = 0;
  int rendezvous_delay_ms = 0;
  std::string backend = "gloo";
  std::string out;
  std::string reform_log;
  bool reference = false;
};

uint64_t SplitMix(uint64_t x) {
  x += 0x9e3779b97f4a7c15ULL;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ULL;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebULL;
  return x ^ (x >> 31);
}

// Uniform in [-1, 1), from (seed, a, b) only.
double Uniform(uint64_t seed, uint64_t a, uint64_t b) {
  const uint64_t h = SplitMix(SplitMix(SplitMix(seed) ^ a) ^ b);
  return static_cast<double>(h >> 11) * 0x1.0p-52 - 1.0;
}

struct Dataset {
  explicit Dataset(const Config& c) : c(c) {
    for (int k = 0; k < c.dim; ++k) w_true.push_back(Uniform(c.seed, 1, k));
  }
  double X(int64_t i, int k) const { return Uniform(c.seed, 2 + i, k); }
  double Y(int64_t i) const {
    double y = 0.01 * Uniform(c.seed, ~0ULL, i);
    for (int k = 0; k < c.dim; ++k) y += w_true[k] * X(i, k);
    return y;
  }
  // Adds sample i's squared-error gradient at w into grad; returns its loss.
  double AddGradient(int64_t i, const std::vector<double>& w,
                     double* grad) const {
    double pred = 0;
    for (int k = 0; k < c.dim; ++k) pred += w[k] * X(i, k);
    const double err = pred - Y(i);
    for (int k = 0; k < c.dim; ++k) grad[k] += err * X(i, k);
    return 0.5 * err * err;
  }
  double Loss(const std::vector<double>& w) const {
    double sum = 0;
    std::vector<double> scratch(c.dim);
    for (int64_t i = 0; i < c.samples; ++i) sum += AddGradient(i, w, scratch.data());
    return sum / static_cast<double>(c.samples);
  }
  const Config& c;
  std::vector<double> w_true;
};

// The elastic state besides the weights.
struct Progress {
  int64_t step = 0;
  int64_t position = 0;
  int64_t samples_processed = 0;
  int64_t duplicate_samples = 0;
  int64_t skipped_samples = 0;
  int64_t inconsistent_steps = 0;
};

void WriteJson(const Config& c, const Dataset& data,
               const std::vector<double>& w, const Progress& p,
               nlohmann::json generations, int world_size) {
  nlohmann::json out;
  out["samples_processed"] = p.samples_processed;
  out["duplicate_samples"] = p.duplicate_samples;
  out["skipped_samples"] = p.skipped_samples;
  out["inconsistent_steps"] = p.inconsistent_steps;
  out["expected_samples"] = c.samples * c.epochs;
  out["steps"] = p.step;
  out["final_loss"] = data.Loss(w);
  out["weights"] = w;
  out["generations"] = std::move(generations);
  out["final_world_size"] = world_size;
  const std::string tmp = c.out + ".tmp." + std::to_string(::getpid());
  {
    std::ofstream f(tmp);
    f << out.dump(1) << "\n";
  }
  std::rename(tmp.c_str(), c.out.c_str());
}

// One step's contribution of this rank: gradient, position checks, and the
// indicator of the batch's samples it processed.
std::vector<double> LocalStep(const Dataset& data, const std::vector<double>& w,
                              const Progress& p, int64_t len, int rank,
                              int world) {
  const int dim = data.c.dim;
  std::vector<double> buf(dim + 4 + len, 0.0);
  for (int64_t j = rank; j < len; j += world) {
    const int64_t g = p.position + j;
    buf[dim] += data.AddGradient(g % data.c.samples, w, buf.data());
    buf[dim + 4 + j] = 1.0;
  }
  const double pos = static_cast<double>(p.position);
  buf[dim + 1] = pos;
  buf[dim + 2] = pos * pos;
  buf[dim + 3] = 1.0;
  return buf;
}

// Applies an all-reduced step buffer to the weights and counters.
void ApplyStep(const Config& c, const std::vector<double>& buf, int64_t len,
               int world, std::vector<double>& w, Progress& p) {
  const int dim = c.dim;
  const double n = buf[dim + 3];
  const double pos = static_cast<double>(p.position);
  if (n != world || buf[dim + 1] != n * pos || buf[dim + 2] != n * pos * pos) {
    ++p.inconsistent_steps;
  }
  for (int64_t j = 0; j < len; ++j) {
    const auto seen = static_cast<int64_t>(std::llround(buf[dim + 4 + j]));
    p.samples_processed += seen;
    if (seen == 0) ++p.skipped_samples;
    if (seen > 1) p.duplicate_samples += seen - 1;
  }
  for (int k = 0; k < dim; ++k) {
    w[k] -= c.lr * buf[k] / static_cast<double>(len);
  }
  p.position += len;
  ++p.step;
}

int RunReference(const Config& c) {
  Dataset data(c);
  std::vector<double> w(c.dim, 0.0);
  Progress p;
  const int64_t total = c.samples * c.epochs;
  while (p.position < total) {
    const int64_t len = std::min<int64_t>(c.batch, total - p.position);
    ApplyStep(c, LocalStep(data, w, p, len, 0, 1), len, 1, w, p);
  }
  if (!c.out.empty()) WriteJson(c, data, w, p, nlohmann::json::array(), 1);
  return 0;
}


const char* ReasonName(ringmaster::api::Reason r) {
  switch (r) {
    case ringmaster::api::REASON_INITIAL: return "initial";
    case ringmaster::api::REASON_PLANNED_SHRINK: return "planned_shrink";
    case ringmaster::api::REASON_GROW: return "grow";
    case ringmaster::api::REASON_FAILURE: return "failure";
    case ringmaster::api::REASON_RECOVERY: return "recovery";
    default: return "unspecified";
  }
}

// Appends the newest re-formation to --reform-log (one JSON object a line),
// for bench/reform.sh.
void LogReform(const Config& c, const Shim& s) {
  if (c.reform_log.empty() || s.reforms().empty()) return;
  const auto& r = s.reforms().back();
  nlohmann::json j = {{"worker", c.worker},
                      {"generation", r.generation},
                      {"reason", ReasonName(r.reason)},
                      {"rank", r.rank},
                      {"world_size", r.world_size},
                      {"rolled_back", r.rolled_back},
                      {"published_us", r.published_unix_us},
                      {"received_us", r.received_unix_us},
                      {"boundary_us", r.boundary_unix_us},
                      {"rendezvous_us", r.rendezvous_unix_us},
                      {"formed_us", r.formed_unix_us},
                      {"synced_us", r.synced_unix_us},
                      {"prepared", r.prepared},
                      {"prepared_us", r.prepared_unix_us},
                      {"kv_rpcs", r.kv_rpcs},
                      {"kv_rpc_us", r.kv_rpc_us}};
  std::ofstream f(c.reform_log, std::ios::app);
  f << j.dump() << "\n";
}

int RunElastic(const Config& c) {
  Dataset data(c);
  std::vector<double> w(c.dim, 0.0);
  Progress p;
  ringmaster::shim::ShimOptions opts;
  opts.client.address = c.coordinator;
  opts.client.job = c.job;
  opts.client.worker_id = c.worker;
  opts.client.desired_workers = c.desired_workers;
  opts.client.heartbeat_interval = absl::Milliseconds(200);
  if (c.rendezvous_delay_ms > 0) {
    opts.on_reform_start = [d = c.rendezvous_delay_ms](const auto&) {
      std::this_thread::sleep_for(std::chrono::milliseconds(d));
    };
  }
  auto backend = ringmaster::shim::MakeBackend(c.backend, absl::Seconds(10));
  if (!backend.ok()) {
    std::cerr << backend.status() << "\n";
    return 1;
  }
  auto shim = Shim::Create(opts, *std::move(backend));
  if (!shim.ok()) {
    std::cerr << shim.status() << "\n";
    return 1;
  }
  Shim& s = **shim;
  if (!s.state().Register("weights", w.data(), w.size() * sizeof(double)).ok() ||
      !s.state().Register("progress", &p, sizeof(p)).ok()) {
    return 1;
  }
  if (auto st = s.Start(); !st.ok()) {
    std::cerr << c.worker << ": start: " << st << "\n";
    return 1;
  }
  LogReform(c, s);
  const int64_t total = c.samples * c.epochs;
  auto removed = [&] {
    std::cerr << c.worker << ": removed at generation " << s.generation()
              << "\n";
    (void)s.Leave(false);
    return 0;
  };
  // The steps' mean time since the last commit of this generation, reported
  // with the next commit (Shim::ReportStep).
  double timed_seconds = 0;
  int64_t timed_steps = 0, timed_generation = s.generation();
  while (p.position < total) {
    const auto step_start = std::chrono::steady_clock::now();
    if (c.step_delay_ms > 0) {
      std::this_thread::sleep_for(std::chrono::milliseconds(c.step_delay_ms));
    }
    if (c.compute_ms > 0 || c.allreduce_ms > 0) {
      const double ms = c.compute_ms / s.world_size() + c.allreduce_ms * (s.world_size() - 1);
      std::this_thread::sleep_for(std::chrono::microseconds(static_cast<int64_t>(ms * 1000)));
    }
    const int64_t len = std::min<int64_t>(c.batch, total - p.position);
    std::vector<double> buf = LocalStep(data, w, p, len, s.rank(), s.world_size());
    absl::Status st =
        s.AllReduce(buf.data(), buf.size(), DataType::kFloat64, ReduceOp::kSum);
    if (!st.ok()) {
      std::cerr << c.worker << ": step " << p.step << " failed: " << st
                << "; recovering\n";
      auto b = s.Recover(std::string(st.message()));
      if (!b.ok()) {
        std::cerr << c.worker << ": recover: " << b.status() << "\n";
        return 1;
      }
      if (*b == Shim::Boundary::kRemoved) return removed();
      LogReform(c, s);
      continue;  // state restored to the last commit and synced
    }
    ApplyStep(c, buf, len, s.world_size(), w, p);
    if (s.generation() != timed_generation) {
      timed_generation = s.generation();
      timed_seconds = 0;
      timed_steps = 0;
    }
    timed_seconds += std::chrono::duration<double>(std::chrono::steady_clock::now() - step_start).count();
    ++timed_steps;
    if (p.step % c.commit_every == 0 || p.position == total) {
      (void)s.ReportStep(timed_seconds / static_cast<double>(timed_steps), static_cast<double>(len));
      if (auto cs = s.Commit(p.step, p.position); !cs.ok()) {
        std::cerr << cs << "\n";
        return 1;
      }
      timed_seconds = 0;
      timed_steps = 0;
    }
    auto b = s.StepBoundary();
    if (!b.ok()) {
      std::cerr << c.worker << ": boundary: " << b.status() << "\n";
      return 1;
    }
    if (*b == Shim::Boundary::kRemoved) return removed();
    if (*b == Shim::Boundary::kReformed) LogReform(c, s);
  }
  // Done: everyone holds the final state.
  nlohmann::json gens = nlohmann::json::array();
  for (const auto& r : s.reforms()) {
    gens.push_back({{"generation", r.generation},
                    {"reason", ReasonName(r.reason)},
                    {"world_size", r.world_size},
                    {"rolled_back", r.rolled_back},
                    {"reform_ms", (r.formed_unix_us - r.published_unix_us) / 1e3}});
  }
  if (s.rank() == 0 && !c.out.empty()) {
    WriteJson(c, data, w, p, gens, s.world_size());
  }
  (void)s.Barrier();
  (void)s.Leave(/*finished=*/true);
  std::cerr << c.worker << ": done, rank " << s.rank() << " of "
            << s.world_size() << ", generation " << s.generation() << "\n";
  return p.inconsistent_steps == 0 ? 0 : 3;
}

}  // namespace

int main(int argc, char** argv) {
  Config c;
  CLI::App app{"elastic_trainer: data-parallel SGD through the ringmaster shim"};
  app.add_option("--coordinator", c.coordinator,
                 "coordinator address (default: $RINGMASTER_COORDINATOR; likewise --job, --worker, --workers)");
  app.add_option("--job", c.job, "job name");
  app.add_option("--worker", c.worker, "worker id");
  app.add_option("--workers", c.desired_workers,
                 "gang size when this worker creates the job");
  app.add_option("--samples", c.samples, "data set size")->check(CLI::PositiveNumber);
  app.add_option("--epochs", c.epochs, "passes over the data")->check(CLI::PositiveNumber);
  app.add_option("--batch", c.batch, "global batch size")->check(CLI::PositiveNumber);
  app.add_option("--dim", c.dim, "features")->check(CLI::PositiveNumber);
  app.add_option("--lr", c.lr, "learning rate");
  app.add_option("--commit-every", c.commit_every, "steps between commits")
      ->check(CLI::PositiveNumber);
  app.add_option("--seed", c.seed, "data seed");
  app.add_option("--step-delay-ms", c.step_delay_ms, "sleep per step (tests)");
  app.add_option("--compute-ms", c.compute_ms,
                 "a step's compute on one worker, split across the workers (sleeps compute-ms / world size)")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--allreduce-ms", c.allreduce_ms,
                 "synchronization per step that each further worker adds (sleeps allreduce-ms x (world size - 1))")
      ->check(CLI::NonNegativeNumber);
  app.add_option("--rendezvous-delay-ms", c.rendezvous_delay_ms,
                 "sleep before each rendezvous (tests)");
  app.add_option("--backend", c.backend, "gloo or nccl");
  app.add_option("--out", c.out, "JSON result file");
  app.add_option("--reform-log", c.reform_log,
                 "append one JSON line per re-formation (benchmarks)");
  app.add_flag("--reference", c.reference, "serial run, no shim");
  CLI11_PARSE(app, argc, argv);
  if (c.reference) return RunReference(c);
  // Under `ringmaster shim run --mode inprocess` (serve --local-executor):
  // what the flags leave out comes from the launcher's environment.
  auto env = [](const char* name) -> std::string {
    const char* v = std::getenv(name);
    return v ? v : "";
  };
  if (c.coordinator.empty()) c.coordinator = env("RINGMASTER_COORDINATOR");
  if (c.worker.empty()) c.worker = env("RINGMASTER_WORKER");
  if (app.count("--job") == 0 && !env("RINGMASTER_JOB").empty()) c.job = env("RINGMASTER_JOB");
  if (c.desired_workers == 0 && !env("RINGMASTER_WORKERS").empty()) {
    c.desired_workers = std::atoi(env("RINGMASTER_WORKERS").c_str());
  }
  if (c.coordinator.empty() || c.worker.empty()) {
    std::cerr << "--coordinator and --worker are required (or --reference)\n";
    return 2;
  }
  return RunElastic(c);
}
