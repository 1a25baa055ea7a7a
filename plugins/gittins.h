// gittins: jobs ordered by a Gittins index learned from the jobs seen to end
// (Tiresias' Gittins-index policy without given durations), and level
// preemption gated by whether a stop is worth its cost.
//
// Service is what las counts: time run x GPUs^gpuExponent (1: GPU-time, the
// default; 0 or byTime: time run), on the engine's clock, kept across
// evictions (Job::AttainedMilliMs).
//
// The algorithm, per session:
//   1. Learn. Every job that ended since the last session (State::ended_jobs,
//      in the order they ended) Completed or Failed after running adds its
//      service S to a histogram over service quanta: bin 0 = [0, q), bin k =
//      [q r^(k-1), q r^k), the last bin from q r^(B-1) on (`quantum` q,
//      `growth` r, B bins up to 1e9 s). Each bin keeps the count and the sum
//      of the services that ended in it. A cancelled job teaches nothing.
//   2. Index. For bin k (lower edge a_k) with at least `minSamples` jobs seen
//      to run past a_k, over the bins' upper edges a_j (and infinity):
//        index(k) = max_j P(S < a_j | S >= a_k) / E[min(S, a_j) - a_k | S >= a_k]
//      (the chance to end within the next quantum per unit of service spent
//      on it); quantum(k) is the E[...] of the best j, remaining(k) =
//      E[S - a_k | S >= a_k]. A bin with fewer survivors takes the last
//      learned bin K's figures scaled as a Pareto tail (a job that has run
//      longer than most is expected to run as long again): index(K) x
//      U(K) / U(k), remaining and quantum x U(k) / U(K), U the bin's upper
//      edge. Before minSamples jobs have ended, index(k) = 1 / U(k): LAS over
//      the quanta. Recomputed, O(B^2), only in a session after a job ended.
//   3. Order (a job-order key): a higher priority first, then the higher
//      index of the job's bin; equal indices tie (first come first served).
//   4. Preempt rank (JobPriority): priority, then the index; a running job
//      counts `margin` x its index, so a waiting job of its priority stops it
//      only when its own index is more than margin times the victim's. A
//      waiting job short of `preemptAfter` ranks lowest in its priority.
//   5. Worth a stop (`stopWorth` > 0, Preemptable): a running job of the
//      preemptor's priority is a victim only while its expected remaining
//      service is at least stopWorth times what stopping it costs:
//      (`restartCost` + the work lost: half the checkpoint interval where
//      the job declares one, else everything since it last started) x its
//      service rate. An elastic job that is not worth stopping may still be
//      shrunk to its minimum (it offers every member but its first).
//      A job of a higher priority is never held back by 4 or 5.
// A job's index and worth change only when it crosses a bin edge, a job
// ends (an event), or (a job without checkpoints) its loss passes the limit:
// NextChange names the first of these and of the preemptAfter ends.
#ifndef RINGMASTER_PLUGINS_GITTINS_H_
#define RINGMASTER_PLUGINS_GITTINS_H_

#include <cstdint>
#include <vector>

#include "scheduler/session.h"

namespace ringmaster::plugins {

// The learned distribution of service over quanta and each quantum's Gittins
// index (steps 1 and 2 above). Service in seconds (of time run x GPUs^e).
class GittinsTable {
 public:
  struct Entry {
    double index = 0;      // per second of service
    double quantum = 0;    // E[min(S, a_j) - a_k | S >= a_k] at the best j (s)
    double remaining = 0;  // E[S - a_k | S >= a_k] (s)
    bool learned = false;  // from at least minSamples survivors
    // The end of the best quantum: the service (s) a job started in this bin
    // runs to before it is stopped for its priority (holdQuantum); 1e300
    // where running to the end is best.
    double hold_to = 0;
    // The index over quanta of at least the horizon (what preemption
    // compares: a job that preempts keeps the GPUs at least that long).
    double horizon_index = 0;
  };
  // `cuts`: the bins' lower edges after 0, strictly increasing, > 0.
  GittinsTable(std::vector<double> cuts, int64_t min_samples, double horizon = 0);
  // A job seen to end after `service` seconds.
  void Add(double service);
  // The bin of an attained service: the number of cuts at or below it.
  int BinOf(double service) const;
  // The figures of bin k (recomputed after Add).
  const Entry& At(int bin);
  int bins() const { return static_cast<int>(lo_.size()); }
  double lower(int bin) const { return lo_[bin]; }
  // The upper edge (the last bin's: twice its lower edge).
  double upper(int bin) const;
  int64_t samples() const { return samples_; }

 private:
  void Recompute();
  std::vector<double> lo_;  // 0, cuts...
  std::vector<int64_t> count_;
  std::vector<double> sum_;
  std::vector<Entry> entries_;
  int64_t min_samples_;
  double horizon_;
  int64_t samples_ = 0;
  bool dirty_ = true;
};

struct GittinsOptions {
  double quantum_s = 60;
  double growth = 2;
  int64_t min_samples = 20;
  double gpu_exponent = 1;  // byTime: 0
  scheduler::Timestamp preempt_after_ms = 0;
  double margin = 1;
  scheduler::Timestamp restart_cost_ms = 60'000;
  double stop_worth = 1;  // 0: no worth gate
  double horizon_s = 0;
  bool per_gpu = false;   // preempt ranks compare the index per GPU of the gang's minimum
  bool hold_quantum = false;  // a job runs the quantum it started for before a stop for its priority
};

class GittinsPlugin : public scheduler::Plugin {
 public:
  static constexpr const char* kName = "gittins";
  // Quanta up to this much service (s).
  static constexpr double kMaxService = 1e9;
  // Arguments: quantum (s, > 0), growth (> 1), minSamples (>= 1), byTime,
  // gpuExponent ([0, 1]), preemptAfter (s), margin (>= 1), restartCost (s),
  // stopWorth (>= 0).
  static absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Create(const scheduler::PluginArgs& args);
  explicit GittinsPlugin(GittinsOptions o);
  std::string_view name() const override { return kName; }
  void OnSessionOpen(scheduler::Session& s) override;
  bool UsesTime() const override { return true; }
  scheduler::Timestamp NextChange(const scheduler::State& state, scheduler::Timestamp now) const override;

  // Service in micro-units (1e6 per second of service: GPU-milli x ms with
  // GPU-time, ms x 1000 with byTime), as las counts it.
  int64_t Attained(const scheduler::Job& job, scheduler::Timestamp now) const;
  // Micro-units of service per ms while the job holds what it holds now
  // (rounded up; 0 when it holds no GPU).
  int64_t Rate(const scheduler::Job& job) const;
  int Bin(const scheduler::Job& job, scheduler::Timestamp now) const;
  double Index(const scheduler::Job& job, scheduler::Timestamp now);
  // Higher goes first: priority, then the index (its float's bits).
  int64_t Rank(const scheduler::Job& job, scheduler::Timestamp now);
  // The index preemption compares: per GPU of the gang's minimum with perGpu.
  double PreemptIndex(const scheduler::Job& job, scheduler::Timestamp now);
  // What preempt compares (step 4).
  int64_t PreemptRank(const scheduler::Job& job, scheduler::Timestamp now);
  // Step 5: whether stopping the running `job` at `now` is worth its cost.
  bool WorthStopping(const scheduler::Job& job, scheduler::Timestamp now);
  // Reads the jobs that ended since the last call into the table.
  void Learn(const scheduler::State& state, scheduler::Timestamp now);
  GittinsTable& table() { return table_; }
  const GittinsOptions& options() const { return o_; }

 private:
  // Step 5's bound on the work lost (ms): worth stopping while the loss is at
  // or below it (kNoChange: always; -1: never).
  int64_t LossLimitMs(const scheduler::Job& job, int bin) const;
  int64_t LossMs(const scheduler::Job& job, scheduler::Timestamp now) const;
  // Service (micro-units) in the convention of the levels.
  int64_t Convert(const scheduler::Job& job, int64_t attained_milli_ms) const;
  // The service at which the quantum the running job was started (or last
  // resized) for ends: hold_to of the bin it was in then (kNoChange: never).
  int64_t HoldEnd(const scheduler::Job& job, scheduler::Timestamp now) const;
  GittinsOptions o_;
  std::vector<int64_t> cuts_;  // bin edges after 0, micro-units
  mutable GittinsTable table_;
  size_t seen_ = 0;  // State::ended_jobs() read so far
};

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_GITTINS_H_
