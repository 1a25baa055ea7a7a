// BM_Cycle/N: one scheduling cycle on N nodes x 8 GPUs (racks of 32), the
// cluster 70 % full of running jobs, 2,000 pending gangs whose sizes follow
// the Philly job-size distribution (1-128 GPUs). Setup is untimed.
// BM_RunningTasks: memory with 100,000 running tasks (peak RSS counter).
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <random>

#include "tests/support/builders.h"

namespace ringmaster::bench {
namespace {

using testing::EngineHarness;
using testing::JobBuilder;

// Philly job sizes (GPUs) and how many jobs had them (Jeon et al., ATC'19,
// via the Pollux artifact's philly.csv): 82,247 jobs.
constexpr int kSizes[] = {1, 2, 4, 8, 12, 16, 24, 32, 64, 128};
constexpr int kCounts[] = {76627, 1818, 1870, 1643, 7, 199, 7, 67, 6, 3};

scheduler::JobSpec PhillyJob(const std::string& name, int gpus) {
  // Up to 8 GPUs: one task; larger: 8-GPU tasks (12 -> 3 x 4).
  if (gpus <= 8) return JobBuilder(name).GpusPerTask(gpus).CpuPerTask(4000).Build();
  const int per = gpus % 8 == 0 ? 8 : 4;
  return JobBuilder(name).Gang(gpus / per).GpusPerTask(per).CpuPerTask(4000).Build();
}

std::unique_ptr<EngineHarness> Setup(int nodes, int pending, uint32_t seed) {
  testing::ClusterBuilder cb;
  cb.Racks((nodes + 31) / 32).NodesPerRack(32).Gpus(8);
  auto h = std::make_unique<EngineHarness>(cb.Build(), scheduler::DefaultPolicy(), false);
  std::mt19937 rng(seed);
  std::discrete_distribution<int> size(std::begin(kCounts), std::end(kCounts));
  const int64_t target = static_cast<int64_t>(nodes) * 8 * 7 / 10;
  int64_t filled = 0;
  int i = 0;
  while (filled < target) {
    int g = kSizes[size(rng)];
    if (g > 8) g = 8;  // fill with node-sized pieces
    if (filled + g > target) g = static_cast<int>(target - filled);
    h->Submit(PhillyJob("fill" + std::to_string(i++), g));
    filled += g;
  }
  h->Cycle();
  for (int j = 0; j < pending; ++j) h->Submit(PhillyJob("p" + std::to_string(j), kSizes[size(rng)]));
  return h;
}

void BM_Cycle(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  int64_t tasks = 0;
  for (auto _ : state) {
    state.PauseTiming();
    auto h = Setup(nodes, 2000, 42);
    state.ResumeTiming();
    auto d = h->engine().RunCycle();
    benchmark::DoNotOptimize(d);
    tasks += static_cast<int64_t>(d.binds.size());
    state.PauseTiming();
    h.reset();
    state.ResumeTiming();
  }
  state.counters["tasks_placed"] = benchmark::Counter(static_cast<double>(tasks) / state.iterations());
  state.counters["tasks_per_s"] = benchmark::Counter(static_cast<double>(tasks), benchmark::Counter::kIsRate);
}
BENCHMARK(BM_Cycle)->Arg(1000)->Arg(5000)->Arg(10000)->Unit(benchmark::kMillisecond)->Iterations(5);

void BM_RunningTasks(benchmark::State& state) {
  for (auto _ : state) {
    // 12,500 nodes x 8 GPUs, 100,000 one-GPU tasks running.
    testing::ClusterBuilder cb;
    cb.Racks(12500 / 32 + 1).NodesPerRack(32).Gpus(8);
    EngineHarness h(cb.Build(), scheduler::DefaultPolicy(), false);
    for (int j = 0; j < 25000; ++j) h.Submit(JobBuilder("r" + std::to_string(j)).Gang(4).GpusPerTask(1).Build());
    h.Cycle();
    int64_t running = 0;
    for (auto id : h.state().active_jobs()) running += h.state().job(id).ReadyCount();
    state.counters["running_tasks"] = static_cast<double>(running);
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  state.counters["peak_rss_mib"] = static_cast<double>(ru.ru_maxrss) / 1024.0;
}
BENCHMARK(BM_RunningTasks)->Unit(benchmark::kMillisecond)->Iterations(1);

}  // namespace
}  // namespace ringmaster::bench

BENCHMARK_MAIN();
