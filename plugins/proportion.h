// proportion: queues share the cluster by weight, within guarantee and
// capability (water-filling in queue/proportion.h).
//   QueueOrder: lower allocated/deserved share first (Share); with
//               usageHalfLife, lower Share + decayed usage share first
//               (OrderKey, below).
//   Overused:   allocated has reached deserved in every dimension it asks for.
//   Allocatable: allocated + task stays within capability (up the tree).
//   JobEnqueueable: allocated + admitted minimums + this job's minimum stays
//                   within capability (up the tree); otherwise the job waits
//                   Pending with the numbers.
//   Reclaimable: tasks of reclaimable queues that are above their deserved share.
//   With usageWeight (below), deserved shares read decayed usage too.
//
// Time-decayed fair share (`usageHalfLife`, seconds, default 0 = off; as
// Slurm's PriorityDecayHalfLife, Kueue's usageHalfLifeTime, KAI's
// time-based fairshare). With a half-life H > 0 the plugin keeps, per queue
// q, its decayed GPU usage on the engine's clock:
//   U_q(t) = integral over s <= t of gpus_q(s) x 2^(-(t - s) / H) ds
// (GPU-seconds; gpus_q: the GPUs, milli / 1000, that the queue and its
// descendants held), and
// its usage rate R_q = U_q x ln 2 / H: the GPUs the queue held on average,
// weighted by recency (a queue that held g GPUs for ever has R = g; one
// that held 8 GPUs for one half-life has R = 4, and R = 2 one half-life
// after it stopped). The queue order becomes
//   OrderKey(q) = Share(q) + R_q / deserved GPUs of q   (Share(q) alone when
//                                                         q deserves no GPU)
// lower first: past use counts as GPUs held on top of what the queue holds
// now, against the same deserved share, so a queue that used much recently
// yields to one that used little. Without history (R = 0) the order is the
// instantaneous one; only the queue order changes (deserved shares,
// Overused, Allocatable, JobEnqueueable and Reclaimable stay instantaneous).
//
// Algorithm (half-life on), O(queues) per cycle (NextChange: O(queues log
// queues)):
//   1. OnSessionOpen at t: R_q = held_q + (R_q - held_q) x 2^(-(t - t0) / H)
//      for every queue, with held_q the GPUs it held at the close of the
//      session at t0 (exact for an allocation constant since: usage changes
//      between two cycles count from the next cycle on; the engine runs one
//      at once after every event).
//   2. The queue order compares OrderKey with R_q fixed for the session.
//   3. OnSessionClose: held_q, Share(q) and deserved GPUs of every queue.
//   4. NextChange (after a cycle that changed nothing, so allocation and
//      deserved shares stand): each key is A_q + B_q x with x = 2^(-(t - t0)
//      / H) (A_q = Share(q) + held_q / d_q, B_q = (R_q - held_q) / d_q), so
//      two keys cross at most once; the first change of the order is a
//      crossing of two keys adjacent in today's order. Returns that instant
//      (a few ms early), now when two adjacent keys tie and move apart, or
//      kNoChange.
//
// Deserved shares that read decayed usage (`usageWeight`, k in [0, 100],
// default 0 = off; needs usageHalfLife > 0). Without it only the order above
// reads past use, while allocate's Overused and reclaim compare what queues
// hold with the instantaneous deserved share, and the two fight (a queue
// served first by the order is then reclaimed back). With k > 0 each
// queue's weight in the water-filling (queue/proportion.h, step 2) is
// lowered by how far its decayed usage exceeded its fair part of the
// decayed usage of the siblings that compete with it now:
//   competing siblings: queues of one parent (or the roots) asking for GPUs
//     now (allocated + pending, descendants included)
//   rho_q   = (R_q / sum R) / (w_q / sum w)   over the competing siblings
//             (1: it used exactly its weight's part; 0 when sum R = 0)
//   p_q     = 1 + k x max(0, rho_q - 1)       (>= 1: only over-use counts)
//   level_q = floor(8 log2 p_q)               (0, 1, 2, ...: 8 a doubling)
//   w'_q    = w_q x 2^(-level_q / 8)          (in integers: w x 2^16 x
//             2^(-level / 8), rounded, at least 1)
// Guarantees (step 1) and capabilities are untouched, no weight reaches
// zero (p_q <= 1 + k (sum w / w_q - 1)), a queue at or below its part keeps
// its weight, and a queue alone (rho = 1) deserves what it did. Example: a
// and b of weight 1 both ask for the 8-GPU cluster, R_a = 4, R_b = 0, k = 1:
// rho_a = 1 / (1/2) = 2, p_a = 2, level 8, w'_a = 1/2: a deserves 8 x
// (1/2) / (3/2) = 2.667 GPUs, b 5.333 (in milli-GPUs: floors 2,666 and
// 5,333, the 1 left over to the first queue still short: 2,667 and 5,333),
// where without k each deserves 4. Deserved shares are what allocate's Overused, reclaim's victims
// (ReclaimKeepsShares, TakerStaysWithinShare), the queue order and the
// verdict memo's context read, so all of them follow. The level is
// quantized (8 steps a doubling of p, 9 % of weight each) so that deserved
// shares change at discrete instants NextChange can name: with allocation
// and demand standing, rho_q(t) is a ratio of two linear functions of
// 2^(-t / H), monotone in t, so the next change is the first instant some
// rho_q reaches the boundary of its level, LevelRho(level) or
// LevelRho(level + 1). k = 0 (or no argument) computes deserved shares
// exactly as without a half-life.
//
// What survives (DecayedUsages / RestoreDecayedUsages, by queue name): a
// policy reload hands each queue's usage, valued at the reload, to the new
// plugin (Engine::SetPolicy); the daemon journals it and gives it back at
// start (server/daemon/fair_share_history.h). A restored queue keeps its
// rate R (U x ln 2 / H with the H it was valued with), so a changed
// half-life changes U to R x H' / ln 2 and the order does not jump; from
// its valuation to the first session the queue counts as holding nothing
// (a reload: the time to the next cycle; a restart: the time the daemon was
// down), decaying at the new half-life. Queues of no restored name start
// from zero; restored names that are no queue are dropped.
#ifndef RINGMASTER_PLUGINS_PROPORTION_H_
#define RINGMASTER_PLUGINS_PROPORTION_H_

#include <optional>
#include <span>
#include <string>
#include <vector>

#include "scheduler/session.h"

namespace ringmaster::plugins {

class ProportionPlugin : public scheduler::Plugin {
 public:
  static constexpr const char* kName = "proportion";
  // `usageHalfLife`: seconds in [0, 1e9] (0, the default: no decayed usage,
  // the instantaneous order). `usageWeight`: k in [0, 100] (0, the default:
  // deserved shares from weights alone); > 0 needs usageHalfLife > 0.
  static absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Create(const scheduler::PluginArgs& args);
  explicit ProportionPlugin(scheduler::Timestamp half_life_ms = 0, double usage_weight = 0)
      : half_life_ms_(half_life_ms), usage_weight_(half_life_ms > 0 ? usage_weight : 0) {}
  static constexpr double kMaxUsageWeight = 100;
  static constexpr double kLevelsPerDoubling = 8;
  static constexpr int kMaxLevel = 512;
  std::string_view name() const override { return kName; }
  void OnSessionOpen(scheduler::Session& s) override;
  void OnSessionClose(scheduler::Session& s) override;
  // Only with a half-life: the queue order moves as usage decays.
  bool UsesTime() const override { return half_life_ms_ > 0; }
  // The clock reaches only the queue order: capability checks (Allocatable)
  // read none, so the verdict memo stays on.
  bool VerdictHooksReadTime() const override { return false; }
  // Admission compares the job's minimum with its queues' use and
  // capabilities (WithinCapability): nothing else.
  bool AdmissionReadsOnlyJobAndQueues() const override { return true; }
  // Enqueueable reads the job's queue and min_request, and its refusal
  // names the capabilities on the queue's path, not their use.
  bool AdmissionReadsOnlyMinimum() const override { return true; }
  // Step 4 above.
  scheduler::Timestamp NextChange(const scheduler::State& state, scheduler::Timestamp now) const override;
  // With a half-life: every queue's U brought to `now` (the allocation of
  // the last close held since the last open), or, before the first
  // session, what was restored brought to `now` with nothing held (0 for a
  // queue of no restored name). Without: none.
  std::vector<scheduler::DecayedUsage> DecayedUsages(const scheduler::State& state,
                                                     scheduler::Timestamp now) const override;
  // With a half-life: the next session starts from `usages` (the file
  // comment: by name, R kept); rows with a half-life <= 0 or a U that is
  // negative or not finite are left out. Without: ignored.
  void RestoreDecayedUsages(std::span<const scheduler::DecayedUsage> usages) override;

  // Share of a queue: max over dimensions of allocated/deserved.
  static double Share(const scheduler::QueueInfo& q);
  static bool Overused(const scheduler::QueueInfo& q);

  // The half-life in ms (0: off).
  scheduler::Timestamp half_life_ms() const { return half_life_ms_; }
  // R_q at the last session's open: GPUs held on average, weighted by
  // recency (0 before the first session and with the half-life off).
  double UsageGpus(scheduler::QueueId q) const;
  // U_q = R_q x H / ln 2: the decayed GPU-seconds.
  double DecayedGpuSeconds(scheduler::QueueId q) const;
  // What the queue order compares with the half-life on (lower first).
  double OrderKey(const scheduler::QueueInfo& q) const;
  // usageWeight's k (0: off).
  double usage_weight() const { return usage_weight_; }
  // The level of q's weight at the last session's open (0 with usageWeight
  // off): its weight counted w x LevelFactor(level).
  int ShareLevel(scheduler::QueueId q) const;
  // ShareLevel with usageWeight on; nullopt with it off.
  std::optional<int> UsageWeightLevel(scheduler::QueueId q) const override;
  // floor(8 log2(1 + k max(0, rho - 1))), clamped to [0, kMaxLevel].
  static int LevelOf(double rho, double k);
  // The rho at which the level reaches `level` (>= 1): 1 + (2^(level/8) - 1) / k.
  static double LevelRho(int level, double k);
  // 2^(-level / 8).
  static double LevelFactor(int level);

 private:
  // Per queue (by index), kept across sessions with the half-life on.
  struct Usage {
    double gpus = 0;          // R_q at `at_`
    double held = 0;          // GPUs held at the last close
    double share = 0;         // Share(q) at the last close
    double deserved_gpus = 0; // deserved GPUs at the last close
    bool competing = false;   // usageWeight: asked for GPUs at the last open
    int level = 0;            // usageWeight: its level at the last open
  };
  // Restored usage, waiting for the first session.
  struct Restored {
    std::string queue;
    double gpus = 0;  // R at `at`
    scheduler::Timestamp at = 0;
  };
  // Step 1 (the first session: from restored_).
  void Decay(const scheduler::Session& s);
  double GpuSecondsOf(double gpus) const;
  // usageWeight: each queue's level (competing, level) from R at this
  // session, and the weights the water-filling uses.
  std::vector<int64_t> AdjustedWeights(const scheduler::Session& s);
  // usageWeight: the first instant a level changes (NextChange's part);
  // `instant` turns an x = 2^(-(t - at_) / H) into a time, a little early.
  template <typename Instant>
  scheduler::Timestamp NextLevelChange(const scheduler::State& state, scheduler::Timestamp now, double x0,
                                       const Instant& instant) const;
  scheduler::Timestamp half_life_ms_;
  double usage_weight_ = 0;
  std::vector<Usage> usage_;
  scheduler::Timestamp at_ = -1;  // when usage_[].gpus was brought up to date; -1: never
  std::vector<Restored> restored_;  // only while at_ is -1
};

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_PROPORTION_H_
