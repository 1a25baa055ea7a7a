// BM_Cycle/N: one scheduling cycle on N nodes x 8 GPUs (racks of 32), the
// cluster 70 % full of running jobs, 2,000 pending gangs whose sizes follow
// the Philly job-size distribution (1-128 GPUs). Setup is untimed.
// BM_Cycle/16384/5000: 131,072 GPUs (today's largest training clusters) with
// 5,000 pending gangs.
// BM_PreemptCycle/N: one cycle on N nodes x 8 GPUs (racks of 40), full: 2N running tasks of
// 4 GPUs, half in elastic jobs (8 tasks, minimum 2) at their maximum, half in
// rigid 2-task gangs; N/20 pending priority-10 gangs of 4 x 4 GPUs that can
// start only by preemption (shrinks, here). No eviction cap.
// BM_PreemptCycleBacklog/N/P: the same with P pending gangs whatever N (the
// cluster grows, the backlog does not: how BM_Cycle's growth is measured).
// BM_CycleBacklog/N/P/F: N nodes x 8 GPUs (racks of 32), every node running a
// 7-GPU job (one GPU free per node), P pending gangs of 8-GPU tasks (Philly's
// sizes from 8 GPUs up) that cannot fit; one cycle has tried them all, then
// the timed cycle: with F = 0 nothing changed since a cycle that changed
// nothing; with F = 1 one 7-GPU job ended first (its node has 8 GPUs free:
// one 8-GPU gang could start there); with F = 2 nothing changed since the
// cycle that tried them all and set the reservation.
// BM_RunningTasks: memory with 100,000 running tasks (peak RSS counter).
//
// Every cycle benchmark counts the heap allocations of its timed cycle
// (`allocs` per cycle): a counting operator new in this binary, on only
// while the cycle runs.
#include <benchmark/benchmark.h>
#include <sys/resource.h>

#include <execinfo.h>
#include <unistd.h>

#include <atomic>
#include <cstdlib>
#include <new>
#include <random>

#include "tests/support/builders.h"

namespace ringmaster::bench {
// Heap allocations while `counting` is on (the timed cycle only).
std::atomic<bool> counting{false};
std::atomic<int64_t> allocations{0};
// RM_ALLOC_STACKS=1: each counted allocation's call stack goes to stderr
// (backtrace_symbols_fd: binary(+offset) lines, for addr2line -f -C -e),
// to find what allocates in a timed cycle.
bool log_stacks = false;
thread_local bool in_trace = false;
void LogStack() {
  if (in_trace) return;
  in_trace = true;
  void* frames[24];
  const int n = backtrace(frames, 24);
  static const char kSep[] = "--\n";
  backtrace_symbols_fd(frames, n, STDERR_FILENO);
  (void)!write(STDERR_FILENO, kSep, sizeof kSep - 1);
  in_trace = false;
}
}  // namespace ringmaster::bench

void* operator new(std::size_t n) {
  if (ringmaster::bench::counting.load(std::memory_order_relaxed)) {
    ringmaster::bench::allocations.fetch_add(1, std::memory_order_relaxed);
    if (ringmaster::bench::log_stacks) ringmaster::bench::LogStack();
  }
  if (void* p = std::malloc(n == 0 ? 1 : n)) return p;
  throw std::bad_alloc();
}
void* operator new[](std::size_t n) { return operator new(n); }
void* operator new(std::size_t n, const std::nothrow_t&) noexcept {
  try {
    return operator new(n);
  } catch (...) {
    return nullptr;
  }
}
void* operator new[](std::size_t n, const std::nothrow_t& t) noexcept { return operator new(n, t); }
// The replacements pair malloc with free; gcc cannot see that operator new
// here is malloc, and warns where inlined deletes meet it.
#if defined(__GNUC__) && !defined(__clang__)
#pragma GCC diagnostic ignored "-Wmismatched-new-delete"
#endif
void operator delete(void* p) noexcept { std::free(p); }
void operator delete[](void* p) noexcept { std::free(p); }
void operator delete(void* p, std::size_t) noexcept { std::free(p); }
void operator delete[](void* p, std::size_t) noexcept { std::free(p); }

namespace ringmaster::bench {
namespace {

// Counts the allocations of what runs between Start and Stop.
class AllocCount {
 public:
  void Start() {
    static const bool stacks = [] {
      void* warm[1];
      backtrace(warm, 1);  // loads what backtrace needs before counting starts
      return std::getenv("RM_ALLOC_STACKS") != nullptr;
    }();
    log_stacks = stacks;
    allocations.store(0, std::memory_order_relaxed);
    counting.store(true, std::memory_order_relaxed);
  }
  void Stop() {
    counting.store(false, std::memory_order_relaxed);
    total_ += allocations.load(std::memory_order_relaxed);
  }
  // The average per timed cycle, as a counter.
  void Report(benchmark::State& state) const {
    state.counters["allocs"] = benchmark::Counter(static_cast<double>(total_) / state.iterations());
  }

 private:
  int64_t total_ = 0;
};

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
  const int pending = static_cast<int>(state.range(1));
  int64_t tasks = 0;
  AllocCount allocs;
  for (auto _ : state) {
    state.PauseTiming();
    auto h = Setup(nodes, pending, 42);
    allocs.Start();
    state.ResumeTiming();
    auto d = h->engine().RunCycle();
    benchmark::DoNotOptimize(d);
    state.PauseTiming();
    allocs.Stop();
    tasks += static_cast<int64_t>(d.binds.size());
    d = {};
    h.reset();
    state.ResumeTiming();
  }
  allocs.Report(state);
  state.counters["tasks_placed"] = benchmark::Counter(static_cast<double>(tasks) / state.iterations());
  state.counters["tasks_per_s"] = benchmark::Counter(static_cast<double>(tasks), benchmark::Counter::kIsRate);
}
// BM_Cycle/N/2000 as before; BM_CycleLarge/16384/P is the same cycle on the
// largest clusters (P = 0: a cycle's fixed cost).
BENCHMARK(BM_Cycle)
    ->Args({1000, 2000})
    ->Args({5000, 2000})
    ->Args({10000, 2000})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(5);
BENCHMARK(BM_Cycle)->Name("BM_CycleLarge")->Args({16384, 0})->Args({16384, 5000})->Unit(benchmark::kMillisecond)->Iterations(3);

std::unique_ptr<EngineHarness> SetupPreempt(int nodes, int pending) {
  testing::ClusterBuilder cb;
  cb.Racks(nodes / 40).NodesPerRack(40).Gpus(8);  // exactly N nodes (N a multiple of 40)
  auto policy = testing::PolicyFromYaml(R"(actions: "enqueue, allocate, preempt, backfill"
configurations:
- {name: preempt, arguments: {gracePeriod: 30, cooldown: 0, maxEvictionsPerCycle: 0}}
)");
  auto h = std::make_unique<EngineHarness>(cb.Build(), policy, false);
  // 2N tasks x 4 GPUs = 8N GPUs: half elastic (N / 8 jobs of 8), half rigid
  // (N / 2 jobs of 2).
  for (int i = 0; i < nodes / 2; ++i) h->Submit(JobBuilder("rg" + std::to_string(i)).Gang(2).GpusPerTask(4).Build());
  for (int i = 0; i < nodes / 8; ++i) {
    h->Submit(JobBuilder("el" + std::to_string(i)).Gang(8).Elastic(2, 8).GpusPerTask(4).Build());
  }
  h->Cycle();
  h->Cycle();
  for (int j = 0; j < pending; ++j) {
    h->Submit(JobBuilder("hp" + std::to_string(j)).Gang(4).GpusPerTask(4).Priority(10).Build());
  }
  return h;
}

// The timed cycle out of line, so that a profiler can count it alone
// (valgrind --toggle-collect='*TimedCycle*': see docs/BENCHMARKS.md).
[[gnu::noinline]] scheduler::Decisions TimedCycle(EngineHarness& h) { return h.engine().RunCycle(); }

// Runs the timed cycle of an iteration (timing paused before and after):
// its allocations counted, its decisions returned.
scheduler::Decisions TimeOneCycle(benchmark::State& state, EngineHarness& h, AllocCount& allocs) {
  allocs.Start();
  state.ResumeTiming();
  auto d = TimedCycle(h);
  benchmark::DoNotOptimize(d);
  state.PauseTiming();
  allocs.Stop();
  return d;
}

int64_t MinorFaults() {
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return ru.ru_minflt;
}

void RunPreemptCycles(benchmark::State& state, int nodes, int pending) {
  int64_t evicted = 0, held = 0, free_gpus = 0, faults = 0;
  AllocCount allocs;
  for (auto _ : state) {
    state.PauseTiming();
    auto h = SetupPreempt(nodes, pending);
    free_gpus = h->state().free_index().TotalFree();
    const int64_t faults_before = MinorFaults();
    auto d = TimeOneCycle(state, *h, allocs);
    faults += MinorFaults() - faults_before;
    evicted += static_cast<int64_t>(d.evictions.size());
    for (auto id : h->state().active_jobs()) held += h->state().job(id).nominated();
    h.reset();
    state.ResumeTiming();
  }
  state.counters["evictions"] = benchmark::Counter(static_cast<double>(evicted) / state.iterations());
  state.counters["preemptors_held"] = benchmark::Counter(static_cast<double>(held) / state.iterations());
  // Page faults inside the timed cycle (fresh pages the allocator takes from
  // the kernel): a cost callgrind does not count.
  state.counters["minor_faults"] = benchmark::Counter(static_cast<double>(faults) / state.iterations());
  state.counters["free_gpus_before"] = static_cast<double>(free_gpus);
  allocs.Report(state);
}
// Goal 4's steady state for the two bulk benchmarks above: their setup,
// their bulk cycle (2,000 gangs placed, or 500 preemptors with their
// victims gone after the grace period), one more cycle that changed
// nothing new, then one running job ends and one job arrives (a Philly
// job; for /1 a gang of the preemptors' priority that needs a victim
// beside the freed GPUs), and the timed cycle follows: what a daemon's
// cycle is between bursts.
void BM_SteadyCycle(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const bool preempt = state.range(1) == 1;
  int64_t placed = 0, tried = 0, evicted = 0;
  AllocCount allocs;
  for (auto _ : state) {
    state.PauseTiming();
    auto h = preempt ? SetupPreempt(nodes, nodes / 20) : Setup(nodes, 2000, 42);
    h->Cycle();
    if (preempt) h->clock().Advance(31'000);  // the victims' grace period ends
    h->Cycle();
    h->Cycle();
    const scheduler::JobId done = h->engine().FindJob(preempt ? "rg0" : "fill0");
    if (!h->engine().FinishJob(done, true).ok()) std::abort();
    h->Submit(preempt ? JobBuilder("late").Gang(4).GpusPerTask(4).Priority(10).Build() : PhillyJob("late", 8));
    h->clock().Advance(1000);
    auto d = TimeOneCycle(state, *h, allocs);
    placed += static_cast<int64_t>(d.binds.size());
    evicted += static_cast<int64_t>(d.evictions.size());
    tried += h->engine().last_cycle_work().tried;
    d = {};
    h.reset();
    state.ResumeTiming();
  }
  allocs.Report(state);
  state.counters["tasks_placed"] = benchmark::Counter(static_cast<double>(placed) / state.iterations());
  state.counters["tried"] = benchmark::Counter(static_cast<double>(tried) / state.iterations());
  state.counters["evictions"] = benchmark::Counter(static_cast<double>(evicted) / state.iterations());
}
// /N/0: BM_Cycle's cluster and backlog; /N/1: BM_PreemptCycle's.
BENCHMARK(BM_SteadyCycle)
    ->Args({1000, 0})
    ->Args({10000, 0})
    ->Args({1000, 1})
    ->Args({10000, 1})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// The backlog grows with the cluster: N / 20 pending gangs (500 at 10,000
// nodes, the issue's figure), so the work itself grows x 10 with N.
void BM_PreemptCycle(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  RunPreemptCycles(state, nodes, nodes / 20);
}
BENCHMARK(BM_PreemptCycle)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond)->Iterations(3);
// The same backlog on clusters of every size (as BM_Cycle/N/2000 measures
// its growth): what a larger cluster alone costs a preemption cycle.
void BM_PreemptCycleBacklog(benchmark::State& state) {
  RunPreemptCycles(state, static_cast<int>(state.range(0)), static_cast<int>(state.range(1)));
}
BENCHMARK(BM_PreemptCycleBacklog)
    ->Args({1000, 50})
    ->Args({10000, 50})
    ->Args({1000, 500})
    ->Args({10000, 500})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

// 7-GPU jobs on every node, then `pending` gangs of 8-GPU tasks (1-16 tasks,
// Philly's sizes of 8 GPUs and more) that cannot fit, and one cycle that
// tried them all.
std::unique_ptr<EngineHarness> SetupBacklog(int nodes, int pending, uint32_t seed, bool settle) {
  testing::ClusterBuilder cb;
  cb.Racks((nodes + 31) / 32).NodesPerRack(32).Gpus(8);
  auto h = std::make_unique<EngineHarness>(cb.Build(), scheduler::DefaultPolicy(), false);
  const int real_nodes = (nodes + 31) / 32 * 32;
  for (int i = 0; i < real_nodes; ++i) h->Submit(PhillyJob("fill" + std::to_string(i), 7));
  h->Cycle();
  constexpr int kBig[] = {8, 16, 32, 64, 128};
  constexpr int kBigCounts[] = {1643, 199, 67, 6, 3};
  std::mt19937 rng(seed);
  std::discrete_distribution<int> size(std::begin(kBigCounts), std::end(kBigCounts));
  for (int j = 0; j < pending; ++j) h->Submit(PhillyJob("p" + std::to_string(j), kBig[size(rng)]));
  h->clock().Advance(1000);
  h->Cycle();  // tries every pending gang once: none fits; the first starving one gets a reservation
  if (settle) {
    h->clock().Advance(1000);
    h->Cycle();  // changes nothing (every verdict recalled): the next cycle has nothing new
  }
  return h;
}

void BM_CycleBacklog(benchmark::State& state) {
  const int nodes = static_cast<int>(state.range(0));
  const int pending = static_cast<int>(state.range(1));
  // CHANGE 0: nothing changed since a cycle that changed nothing; 2: since
  // the cycle that set the reservation (every verdict recalled); 1: one job
  // ended after the quiet cycle.
  const bool one_ends = state.range(2) == 1;
  const bool settle = state.range(2) != 2;
  int64_t placed = 0, waiting = 0, ran = 0, tried = 0, recalled = 0;
  AllocCount allocs;
  for (auto _ : state) {
    state.PauseTiming();
    auto h = SetupBacklog(nodes, pending, 42, settle);
    h->clock().Advance(1000);
    if (one_ends) {
      const scheduler::JobId done = h->engine().FindJob("fill0");
      if (!h->engine().FinishJob(done, true).ok()) std::abort();
    }
    auto d = TimeOneCycle(state, *h, allocs);
    placed += static_cast<int64_t>(d.binds.size());
    waiting += static_cast<int64_t>(h->state().waiting_jobs().size());
    ran += h->engine().last_cycle_work().ran;
    tried += h->engine().last_cycle_work().tried;
    recalled += h->engine().last_cycle_work().recalled;
    d = {};
    h.reset();
    state.ResumeTiming();
  }
  allocs.Report(state);
  state.counters["tasks_placed"] = benchmark::Counter(static_cast<double>(placed) / state.iterations());
  state.counters["waiting_after"] = benchmark::Counter(static_cast<double>(waiting) / state.iterations());
  // Engine::last_cycle_work: whether the cycle ran, gangs tried, verdicts recalled.
  state.counters["ran"] = benchmark::Counter(static_cast<double>(ran) / state.iterations());
  state.counters["tried"] = benchmark::Counter(static_cast<double>(tried) / state.iterations());
  state.counters["recalled"] = benchmark::Counter(static_cast<double>(recalled) / state.iterations());
}
BENCHMARK(BM_CycleBacklog)
    ->Args({10000, 2000, 0})
    ->Args({10000, 2000, 1})
    ->Args({10000, 20000, 0})
    ->Args({10000, 20000, 1})
    ->Args({10000, 2000, 2})
    ->Args({10000, 20000, 2})
    ->Unit(benchmark::kMillisecond)
    ->Iterations(3);

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
