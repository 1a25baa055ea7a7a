// Learned walltimes: how long a job without a user-given walltime is
// expected to run, learned from the jobs the engine saw end. Backfill reads
// them, and only backfill (docs/POLICY.md, "Learned walltimes for
// backfill"): where it asks whether a job ends before a reservation could
// start (GangPlacer::Usable's rule (a), ReservationStart). An estimate is
// never a limit: nothing stops or kills a job that runs past it.
//
// Algorithm (WalltimeEstimator):
//   1. Learn. Every job that ended Completed or Failed after running
//      (State::ended_jobs, in the order they ended, those a daemon restored
//      from its journal first; a cancelled job or one that never ran
//      teaches nothing: EndedJob::Teaches) adds one sample, its last run: from
//      its last start (Job::started) to when it let go of its nodes
//      (Job::last_stopped), in ms. The sample goes to two groups: the
//      job's queue and GPUs (its minimum's GPU milli), and its GPUs alone.
//      JobSpec has no user; the queue is who submitted it as far as the
//      engine knows (a team's or a virtual cluster's queue).
//   2. Estimate. For a job with no walltime of its own: the `percentile`-th
//      percentile (nearest rank: the ceil(p n / 100)-th smallest of n) of
//      its queue-and-GPUs group when that has at least `minSamples`
//      samples, else of its GPUs group when that has, else none (0).
//      A job that gave a walltime keeps its own.
// Deterministic: the same jobs ending in the same order give the same
// estimates. Each sample costs O(log n) (two heaps per group hold the
// samples split at the percentile's rank), each estimate a lookup.
#ifndef RINGMASTER_SCHEDULER_ACTIONS_LEARNED_WALLTIME_H_
#define RINGMASTER_SCHEDULER_ACTIONS_LEARNED_WALLTIME_H_

#include <cstdint>
#include <functional>
#include <queue>
#include <string>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "scheduler/plugin.h"
#include "scheduler/state.h"

namespace ringmaster::scheduler {

// backfill's arguments.
struct BackfillArgs {
  // learnedWalltimePercentile: 1-100; 0: off (backfill reads only the
  // walltimes users gave).
  int learned_percentile = 0;
  // learnedWalltimeMinSamples: samples a group needs before it estimates.
  int learned_min_samples = 5;
};
absl::StatusOr<BackfillArgs> ReadBackfillArgs(const PluginArgs& args);

class WalltimeEstimator {
 public:
  WalltimeEstimator(int percentile, int min_samples) : percentile_(percentile), min_samples_(min_samples) {}

  // Reads the jobs that ended since the last call (step 1).
  void Learn(const State& state);
  // The job's walltime as backfill reads it: its own when it gave one, else
  // the learned estimate (step 2), else 0 (unknown). In ms.
  int64_t Walltime(const Job& job) const;
  // Samples learned so far: estimates change only when it does.
  uint64_t version() const { return version_; }

 private:
  // One group's samples, split at the percentile's rank: `low` (a max-heap)
  // holds the ceil(p n / 100) smallest, `high` (a min-heap) the rest, so
  // low's top is the nearest-rank percentile.
  struct Group {
    std::priority_queue<int64_t> low;
    std::priority_queue<int64_t, std::vector<int64_t>, std::greater<>> high;
    int64_t size() const { return static_cast<int64_t>(low.size() + high.size()); }
  };
  void Add(Group& g, int64_t sample) const;
  int64_t Estimate(const Group* g) const;

  int percentile_;
  int min_samples_;
  uint64_t seen_ = 0;  // State::ended_job records read so far (an index from the first ever)
  uint64_t version_ = 0;
  // queue -> GPU milli -> samples.
  absl::flat_hash_map<std::string, absl::flat_hash_map<int64_t, Group>> by_queue_;
  absl::flat_hash_map<int64_t, Group> by_gpus_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_ACTIONS_LEARNED_WALLTIME_H_
