#include "scheduler/actions/learned_walltime.h"

#include <algorithm>

#include "common/status_macros.h"

namespace ringmaster::scheduler {

absl::StatusOr<BackfillArgs> ReadBackfillArgs(const PluginArgs& args) {
  BackfillArgs out;
  RM_ASSIGN_OR_RETURN(auto p, args.Int("learnedWalltimePercentile", out.learned_percentile));
  RM_ASSIGN_OR_RETURN(auto n, args.Int("learnedWalltimeMinSamples", out.learned_min_samples));
  if (p < 0 || p > 100) return args.Error("learnedWalltimePercentile", "must be an integer in [0, 100] (0: off)");
  if (n < 1 || n > 1'000'000) return args.Error("learnedWalltimeMinSamples", "must be an integer in [1, 1000000]");
  RM_RETURN_IF_ERROR(args.Finish());  // a misspelled key first: it explains the rest
  if (args.Has("learnedWalltimeMinSamples") && p == 0) {
    return args.Error("learnedWalltimeMinSamples", "needs learnedWalltimePercentile (1-100)");
  }
  out.learned_percentile = static_cast<int>(p);
  out.learned_min_samples = static_cast<int>(n);
  return out;
}

void WalltimeEstimator::Learn(const State& state) {
  // Records dropped before they were read are not read (State keeps many
  // more than one cycle ends).
  for (seen_ = std::max<uint64_t>(seen_, state.ended_begin()); seen_ < state.ended_end(); ++seen_) {
    const EndedJob& e = state.ended_job(seen_);
    if (!e.Teaches() || e.last_stopped < e.started) continue;
    const int64_t sample = e.last_stopped - e.started;
    const int64_t gpus = e.min_gpu_milli;
    Add(by_queue_[e.queue][gpus], sample);
    Add(by_gpus_[gpus], sample);
    ++version_;
  }
}

void WalltimeEstimator::Add(Group& g, int64_t sample) const {
  if (!g.low.empty() && sample <= g.low.top()) {
    g.low.push(sample);
  } else {
    g.high.push(sample);
  }
  // Nearest rank: the k-th smallest of n, k = ceil(p n / 100) (at least 1).
  const int64_t n = g.size();
  const size_t k = static_cast<size_t>(std::max<int64_t>(1, (percentile_ * n + 99) / 100));
  while (g.low.size() > k) {
    g.high.push(g.low.top());
    g.low.pop();
  }
  while (g.low.size() < k) {
    g.low.push(g.high.top());
    g.high.pop();
  }
}

int64_t WalltimeEstimator::Estimate(const Group* g) const {
  if (g == nullptr || g->size() < min_samples_) return 0;
  // A run of 0 ms (ended in the cycle it started) still says "ends at once".
  return std::max<int64_t>(g->low.top(), 1);
}

int64_t WalltimeEstimator::Walltime(const Job& job) const {
  if (job.spec().walltime_ms > 0) return job.spec().walltime_ms;
  if (percentile_ <= 0) return 0;
  const int64_t gpus = job.min_request().gpu_milli();
  if (auto q = by_queue_.find(job.spec().queue); q != by_queue_.end()) {
    auto g = q->second.find(gpus);
    if (const int64_t e = Estimate(g == q->second.end() ? nullptr : &g->second); e > 0) return e;
  }
  auto c = by_gpus_.find(gpus);
  return Estimate(c == by_gpus_.end() ? nullptr : &c->second);
}

}  // namespace ringmaster::scheduler
