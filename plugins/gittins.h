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
//      in the order they ended, those a daemon restored from its journal
//      first) Completed or Failed after running adds its
//      service S to a histogram over service quanta: bin 0 = [0, q), bin k =
//      [q r^(k-1), q r^k), the last bin from q r^(B-1) on (`quantum` q,
//      `growth` r, B bins up to 1e9 s). Each bin keeps the count and the sum
//      of the services that ended in it. A cancelled job teaches nothing.
//      With `countRunning` (default true) the active jobs that have run count
//      too, as survivors of every bin below the one their service is in (half
//      of them at risk in their own bin: the actuarial Kaplan-Meier
//      estimate): the jobs seen to end first are the short ones, and without
//      the survivors every job would look short.
//   2. Index. Per bin i the hazard h_i = ended in i / at risk in i and the
//      mean service past a_i of those that ended in it. For the bin k a job
//      is in (lower edge a_k), over the bins' upper edges a_j and infinity:
//        index(k) = max_j P(S < a_j | S >= a_k) / E[min(S, a_j) - a_k | S >= a_k]
//      (the chance to end within the next quantum per second of service
//      spent on it); remaining(k) = E[S - a_k | S >= a_k], where a survivor
//      of the last bin in which a job ended is expected to run as long again
//      as it has (a Pareto tail). A bin that fewer than `minSamples` ended
//      jobs reached takes the last learned bin K's figures scaled as that
//      tail: index(K) x U(K) / U(k), remaining x U(k) / U(K), U the bin's
//      upper edge. Before minSamples jobs have ended, index(k) = 1 / U(k):
//      LAS over the quanta. Recomputed, O(B^2), only when a count changed.
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
//      Before minSamples jobs have ended no stop is known to be worth it:
//      none is made for a job of the same priority.
//      A job of a higher priority is never held back by 4 or 5.
// A job's index and worth change only when a job's service crosses a bin
// edge, a job ends or is submitted (events), or (a job without checkpoints)
// its loss passes the limit: NextChange names the first of these and of the
// preemptAfter ends.
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
    bool learned = false;  // from at least minSamples jobs that ended past a_k
  };
  // `cuts`: the bins' lower edges after 0, strictly increasing, > 0.
  GittinsTable(std::vector<double> cuts, int64_t min_samples);
  // A job seen to end after `service` seconds.
  void Add(double service);
  // The active jobs that have run, by the bin their service is in (`at`),
  // and those of them strictly past the bin's lower edge (`inside`): they
  // survived every bin below theirs (empty vectors: none).
  void SetRunning(std::vector<int64_t> at, std::vector<int64_t> inside);
  // The bin of an attained service: the number of cuts at or below it.
  int BinOf(double service) const;
  // The figures of bin k (recomputed after a change).
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
  std::vector<int64_t> running_at_, running_inside_;
  std::vector<Entry> entries_;
  int64_t min_samples_;
  int64_t samples_ = 0;
  bool dirty_ = true;
};

struct GittinsOptions {
  double quantum_s = 60;
  double growth = 2;
  int64_t min_samples = 20;
  bool count_running = true;
  double gpu_exponent = 1;  // byTime: 0
  scheduler::Timestamp preempt_after_ms = 0;
  double margin = 1;
  scheduler::Timestamp restart_cost_ms = 60'000;
  double stop_worth = 1;  // 0: no worth gate
};

class GittinsPlugin : public scheduler::Plugin {
 public:
  static constexpr const char* kName = "gittins";
  // Quanta up to this much service (s).
  static constexpr double kMaxService = 1e9;
  // Arguments: quantum (s, >= 1), growth (>= 1.05), minSamples (>= 1),
  // countRunning, byTime, gpuExponent ([0, 1]), preemptAfter (s), margin
  // (>= 1), restartCost (s), stopWorth (>= 0).
  static absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Create(const scheduler::PluginArgs& args);
  explicit GittinsPlugin(GittinsOptions o);
  std::string_view name() const override { return kName; }
  void OnSessionOpen(scheduler::Session& s) override;
  bool UsesTime() const override { return true; }
  scheduler::Timestamp NextChange(const scheduler::State& state, scheduler::Timestamp now) const override;

  // Service in micro-units (1e6 per second of service: GPU-milli x ms with
  // GPU-time, ms x 1000 with byTime), as las counts it.
  int64_t Attained(const scheduler::Job& job, scheduler::Timestamp now) const;
  // The same of `attained` GPU-milli x ms by a job whose minimum holds
  // `min_gpu_milli` (Job::AttainedMilliMs, Job::min_request).
  int64_t Service(int64_t attained, int64_t min_gpu_milli) const;
  // Micro-units of service per ms while the job holds what it holds now
  // (rounded up; 0 when it holds no GPU).
  int64_t Rate(const scheduler::Job& job) const;
  int Bin(const scheduler::Job& job, scheduler::Timestamp now) const;
  double Index(const scheduler::Job& job, scheduler::Timestamp now);
  // Higher goes first: priority, then the index (its float's bits).
  int64_t Rank(const scheduler::Job& job, scheduler::Timestamp now);
  // What preempt compares (step 4).
  int64_t PreemptRank(const scheduler::Job& job, scheduler::Timestamp now);
  // Step 5: whether stopping the running `job` at `now` is worth its cost.
  bool WorthStopping(const scheduler::Job& job, scheduler::Timestamp now);
  // The active jobs' service into the table (countRunning).
  void CountActive(const scheduler::State& state, scheduler::Timestamp now);
  // Reads the jobs that ended since the last call (State::ended_jobs:
  // restored ones too) into the table.
  void Learn(const scheduler::State& state);
  GittinsTable& table() { return table_; }
  const GittinsOptions& options() const { return o_; }

 private:
  // Step 5's bound on the work lost (ms): worth stopping while the loss is at
  // or below it (kNoChange: always; -1: never).
  int64_t LossLimitMs(const scheduler::Job& job, int bin) const;
  int64_t LossMs(const scheduler::Job& job, scheduler::Timestamp now) const;

  GittinsOptions o_;
  std::vector<int64_t> cuts_;  // bin edges after 0, micro-units
  mutable GittinsTable table_;
  uint64_t seen_ = 0;  // State::ended_job records read so far (an index from the first ever)
};

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_GITTINS_H_
