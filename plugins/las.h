// las: discretized two-dimensional least attained service (Tiresias'
// 2D-LAS). A job's attained service is GPUs x time it has run
// (Job::AttainedMilliMs, kept by the engine on its clock, across evictions).
// K thresholds t1 < t2 < ... < tK (GPU-seconds, the `thresholds` argument)
// cut it into K+1 levels: level 0 below t1, level i in [ti, ti+1), level K
// from tK on. A job starts at level 0 and is demoted as it crosses each
// threshold. Starvation (Tiresias' STARVELIMIT, the `starveLimit`
// argument, a multiple; 0, the default, turns it off): a job that has run,
// was stopped below the top level and has waited at least starveLimit times
// the length of its last run is promoted to level 0; from then on its level
// counts only the service it attains after the promotion (it is demoted
// again as that crosses the thresholds, and may be promoted again).
//   - Job order: a higher job priority (JobSpec::priority) first, then the
//     lower level; inside a level the session's tie-break, first come first
//     served.
//   - Preemption: the plugin ranks jobs for `preempt` (JobPriority) by the
//     same key, so a waiting gang of a lower level may stop running jobs of a
//     higher level in its queue, through the engine's preempt action and its
//     rules (victim cost, cooldown, eviction cap, docs/PREEMPTION.md).
//   - `fifoPreempt` (default false): inside a level the earlier job also
//     outranks the later one for preemption, so a waiting job may stop
//     running jobs of its own level that arrived after it (the Tiresias of
//     the Pollux authors' simulator: each interval the jobs in queue order
//     run while their GPUs fit, the rest are stopped).
//   - `preemptAfter` (seconds, default 0): a waiting job may preempt only
//     once it has waited this long (since it was submitted, or since it was
//     last stopped); before that it waits for GPUs to free as jobs end. Jobs
//     end often in a busy cluster, so most waits end without a preemption.
//   - `byTime` (default false): attained service counts time run, not GPUs
//     x time (one-dimensional LAS; thresholds are then seconds): a big gang
//     is demoted no faster than a small job, so it is not the first victim
//     merely for being big (a preempted big gang waits longest to get all its
//     GPUs back).
//   - `gpuExponent` (default 1, in [0, 1]): attained service is time run x
//     GPUs^gpuExponent (1: GPU-time; 0: time, the same as byTime; 0.5: a
//     16-GPU gang is demoted 4x, not 16x, as fast as a 1-GPU job), in between
//     Tiresias' two dimensions and one.
//   - `levelCooldown` (seconds, default 0): a running job can be a victim
//     of level preemption (a waiting job of the same priority) only once it
//     has run this long since it last started or was resized, so a long job
//     is not stopped again and again; preemption for a higher priority is
//     not limited by it (the preempt action's own `cooldown` still applies).
//   - `shrinkInCooldown` (default false): with levelCooldown, an elastic job
//     in its cooldown may still be shrunk for level preemption (down to its
//     gang minimum: a re-formation, no work lost), though not stopped whole.
//   - `victimGpuExponent` (in [0, 1], default: gpuExponent): a running
//     job's level as a victim of level preemption counts time run x
//     GPUs^victimGpuExponent, while the job order and a waiting job's
//     preemption rank keep gpuExponent. With byTime and 1, a big gang that
//     has run an hour is a victim before a 1-GPU job that has run a day:
//     one stop frees GPUs for several newcomers.
//   - `stoppedPreempts` (default true): false: a job that ran and was
//     stopped (it waits again) never level-preempts; it waits for GPUs to
//     free (a job of a higher priority still preempts).
//   - `stoppedAhead` (default false): a stopped job waits at level 0 of its
//     priority in job order; first come first served inside the level puts
//     it ahead of every job submitted after it, so it is the head-of-line
//     gang that keeps the GPUs that free (allocate's reservation; backfill
//     may still use them where it does not delay it), and it restarts once
//     enough GPUs free as jobs end, without stopping anyone. Once it runs
//     its level counts all it attained again (nothing is forgiven).
//   - `freeHorizon` (seconds, default 0: off): a waiting job that has
//     waited preemptAfter may level-preempt only when the GPUs expected to
//     free within freeHorizon do not cover it: the free GPUs plus, over the
//     running jobs, GPUs x P(the job ends within freeHorizon | it has run
//     this long), are fewer than the GPUs of the waiting jobs ahead of it
//     and its own. The chance comes from the time run of the jobs seen to
//     end (State::ended_jobs, as gittins and backfill's learned walltimes
//     learn it; RunLengths below); with fewer than `freeMinSamples`
//     (default 20) of them, or no job seen to run longer, a job is not
//     expected to end. A job held this way may preempt once it has waited
//     preemptAfter + freeHorizon (its wait stays bounded). Ages are read at
//     the last whole minute, so the answer changes only at events and on
//     the minute.
//   - `freeByNode` (default "off"; "expected" or "floor"): with
//     freeHorizon, a waiting job whose tasks need g > 1 whole GPUs each (a
//     gang of 8-GPU tasks needs whole nodes) is held only when, besides the
//     GPU count above, the tasks of g GPUs expected to fit within the
//     horizon cover the tasks of g or more GPUs of the waiting jobs ahead of
//     it and its own (a task of c >= g GPUs counts ceil(c / g)). Expected
//     to fit, per node: with "expected", E[floor(F / g)] where F is the
//     node's free GPUs plus those of each running job there that ends
//     within the horizon (each job by itself, with the chance above); with
//     "floor", floor(E[F] / g). A job of 1-GPU tasks is held as without it.
//   - `freeGangHorizon` (seconds, default: freeHorizon): with freeHorizon,
//     the horizon (and the hold's window) of a job whose tasks need g > 1
//     whole GPUs each; a job of 1-GPU tasks keeps freeHorizon.
//   - `freeGangCharge` (seconds per GPU, default 0: off): with
//     freeHorizon, a job whose tasks need g > 1 whole GPUs each stays held
//     only while the wait its hold charges to the jobs behind it is at most
//     freeGangCharge x its GPUs: the charge sums, over the waiting jobs after
//     it in job order (it keeps the GPUs that free, allocate's reservation,
//     and they queue behind it), the time each has waited since the held
//     job's window opened (preemptAfter after it began waiting) or since it
//     began waiting itself, the later, read at the last whole minute. The
//     budget is what a preemption risks: with checkpoints every C seconds, a
//     stop loses at most C of work on each GPU it frees (freeGangCharge C).
//     Past it the job may preempt; a job of 1-GPU tasks is held as before.
//     `freeGangChargeBy: idle` (default "waits") charges instead the GPUs
//     the hold keeps idle from the jobs behind it: min(the free whole GPUs,
//     the GPUs those jobs need together) times its time in its window, both
//     read at the last whole minute.
//   - `freeGangChance` (default "off"; "share" or "survival"): with
//     freeGangCharge, the budget is freeGangCharge x its GPUs x the chance
//     that its hold ends with it started (a stop saved), learned from the
//     gang holds seen to end: a hold begins in the first session that holds
//     a job of g > 1 GPUs a task (in this wait), and ends when the job
//     starts: with it started if it was held in the session before it
//     started and never preempted (nominated, or placed on releasing GPUs)
//     meanwhile, else not. A hold that freeGangCharge ended at some session
//     is not counted (nobody knows whether it would have succeeded). Gangs
//     are counted by size class (2, 3-4, 5-8, 9-16, ... GPUs); with fewer
//     than freeMinSamples holds of its class seen to end the chance is 1
//     (freeGangCharge as is). "share": the share of those holds that ended
//     started. "survival": of those that lasted at least as long as this
//     one has so far (held from its first session to its start, or to its
//     last held session when it did not start held; counted in RunLengths'
//     bins, the age read at the last whole minute), the share that ended
//     started; 0 when none lasted that long. Expected value: holding saves
//     a stop (freeGangCharge x GPUs) with that chance, and costs the waits
//     behind it in any case.
//   - `wayBack` (a multiple, default 0: off): a stopped job that has
//     waited at least wayBack times the time it ran in its last run (from
//     its last start to its stop), or `wayBackMax` seconds if that is less
//     (0, the default: no such cap), waits at level 0 of its priority in
//     job order: first come first served inside the level puts it ahead of
//     the jobs submitted after it, so it takes GPUs as they free before the
//     newer jobs do, without stopping anyone (its preemption rank, and its
//     level as a victim once it runs again, count everything it attained).
//     `wayBackReserve` (default true): false: such a job does not hold
//     allocate's reservation (the GPUs that free are not kept for it while
//     it does not fit); it starts where it fits when it is tried, ahead of
//     the newer jobs, and the reservation goes to the next starving gang.
//   - `keepRestarted` (default false): a running job that was stopped
//     before is not a victim of level preemption (a waiting job of its
//     priority) while it is at the level it had when it last started (or
//     was resized): once stopped at a level it is stopped again only after
//     it has crossed its next threshold (a higher priority still preempts).
//     `keepRestartedLevel` (default 0): only a job that restarted at this
//     level or a higher one is kept so. `keepRestartedFrom` ("all", the
//     default, or "stopped"): "stopped" keeps it only from a waiting job that
//     was itself stopped (no chain stops it at its restart level; a
//     newcomer still may).
//   - `victimFill` (GPUs, default 0: off): while the waiting jobs that may
//     level-preempt now (past preemptAfter, not held by freeHorizon, not
//     kept by stoppedPreempts) need D GPUs together, a victim of level
//     preemption must hold at least min(D, victimFill) GPUs, where some
//     running job that may be stopped does (else any may be). The first
//     stop then frees GPUs for several of them: those it leaves over go to
//     the next in job order once it is gone, instead of each stopping a
//     1-GPU job of its own.
//   e.g. thresholds "3600, 36000": a 4-GPU job that has run 20 min (4800
//   GPU-s) is at level 1; a waiting 8-GPU job that has never run (level 0)
//   may preempt it. With starveLimit 2, the stopped 4-GPU job is promoted
//   back to level 0 once it has waited 40 min.
#ifndef RINGMASTER_PLUGINS_LAS_H_
#define RINGMASTER_PLUGINS_LAS_H_

#include <cstdint>
#include <map>
#include <vector>

#include "absl/container/flat_hash_set.h"
#include "scheduler/session.h"

namespace ringmaster::plugins {

// The arguments besides the thresholds (see above).
struct LasOptions {
  double starve_limit = 0;
  bool fifo_preempt = false;
  scheduler::Timestamp preempt_after_ms = 0;
  bool by_time = false;
  // gpuExponent e in [0, 1]: attained service is time run x GPUs^e (1,
  // the default: GPU-time; 0: time, as byTime). byTime sets 0.
  double gpu_exponent = 1;
  // levelCooldown (s): a running job may be stopped for a waiting job of its
  // own priority (a lower level's) only once it has run this long since it
  // last started or was resized. 0: no such limit.
  scheduler::Timestamp level_cooldown_ms = 0;
  // shrinkInCooldown: an elastic job in its level cooldown may still be
  // shrunk (down to its minimum) for a waiting job of its priority, never
  // stopped whole.
  bool shrink_in_cooldown = false;
  // victimGpuExponent: what a running job's victim level counts (-1: as
  // gpuExponent).
  double victim_gpu_exponent = -1;
  // stoppedPreempts: false keeps a stopped job from level preemption.
  bool stopped_preempts = true;
  // stoppedAhead: a stopped job waits at level 0 in job order.
  bool stopped_ahead = false;
  // freeHorizon (ms; 0: off) and the samples it needs.
  scheduler::Timestamp free_horizon_ms = 0;
  int64_t free_min_samples = 20;
  // freeByNode: how a job of g > 1 GPUs a task counts what is expected to
  // free (kFreeGpus: GPUs only).
  enum FreeByNode { kFreeGpus = 0, kFreeExpected = 1, kFreeFloor = 2 };
  int free_by_node = kFreeGpus;
  // freeGangHorizon (ms; -1: freeHorizon).
  scheduler::Timestamp free_gang_horizon_ms = -1;
  // victimFill (GPUs; 0: off).
  int64_t victim_fill = 0;
  // wayBack (a multiple of the last run; 0: off), wayBackMax (ms; 0: no
  // cap) and wayBackReserve.
  double way_back = 0;
  scheduler::Timestamp way_back_max_ms = 0;
  bool way_back_reserve = true;
  // keepRestarted: a restarted job is no level victim at its restart level.
  bool keep_restarted = false;
  int64_t keep_restarted_level = 0;
  bool keep_from_stopped_only = false;
  // freeGangCharge (ms of waiting behind a held gang per GPU of it; 0: off).
  scheduler::Timestamp free_gang_charge_ms = 0;
  // freeGangChargeBy: idle (else waits).
  bool free_gang_charge_idle = false;
  // freeGangChance: the budget x the learned chance that a gang hold ends
  // with the gang started (kChanceOff: x 1).
  enum FreeGangChance { kChanceOff = 0, kChanceShare = 1, kChanceSurvival = 2 };
  int free_gang_chance = kChanceOff;
};

// The time run (ms, across stops: GPU-time over the gang minimum's GPUs) of
// the jobs seen to end, binned on a log scale: bin 0 = [0, 1 s), bin k =
// [1.05^(k-1), 1.05^k) s, the last from 1e9 s on. freeHorizon reads it.
class RunLengths {
 public:
  RunLengths();
  void Add(int64_t run_ms);
  int64_t samples() const { return samples_; }
  // P(run <= age + horizon | run > age), counted in whole bins: of the
  // samples in bins above age's, those in bins up to that of age + horizon
  // (0 when none is above). O(1) after the first call since an Add.
  double EndWithin(int64_t age_ms, int64_t horizon_ms);
  static int BinOf(int64_t ms);

 private:
  std::vector<int64_t> count_;
  std::vector<int64_t> below_;  // samples in bins < k (kept lazily)
  bool dirty_ = true;
  int64_t samples_ = 0;
};

class LasPlugin : public scheduler::Plugin {
 public:
  static constexpr const char* kName = "las";
  // Tiresias' experiments found two levels enough; one GPU-hour is our
  // default cut.
  static constexpr const char* kDefaultThresholds = "3600";
  static constexpr int kMaxThresholds = 32;
  // `thresholds`: a comma-separated list of GPU-seconds, strictly increasing
  // and > 0 (a YAML string, e.g. "3600, 36000").
  // `starveLimit`: a number >= 0 (0: no promotion).
  static absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Create(const scheduler::PluginArgs& args);
  using Options = LasOptions;
  explicit LasPlugin(std::vector<int64_t> thresholds_milli_ms, Options o = {})
      : thresholds_(std::move(thresholds_milli_ms)), o_(o) {}
  std::string_view name() const override { return kName; }
  void OnSessionOpen(scheduler::Session& s) override;
  bool UsesTime() const override { return true; }
  // A job that holds nothing attains nothing: its level, and so its key,
  // stay as they are while it waits so, unless starveLimit promotes it as
  // time passes.
  bool PendingOrderReadsOnlySpec() const override { return o_.starve_limit <= 0 && o_.way_back <= 0; }
  // The first time a job's level changes on the same state: a job holding
  // GPUs reaches its next threshold, or (with starveLimit) a stopped job's
  // promotion falls due; now after a session that promoted a job.
  scheduler::Timestamp NextChange(const scheduler::State& state, scheduler::Timestamp now) const override;

  // What the levels count: Job::AttainedMilliMs, or with byTime that
  // divided by the job's GPUs (milli) x 1000, i.e. milliseconds run x 1000.
  int64_t Attained(const scheduler::Job& job, scheduler::Timestamp now) const;
  // 0 .. thresholds().size(): the job's level at `now` (promoting it first
  // when it has starved: see above).
  int Level(const scheduler::Job& job, scheduler::Timestamp now);
  // Higher goes first and may preempt lower: priority, then the level.
  int64_t Rank(const scheduler::Job& job, scheduler::Timestamp now);
  // Rank by OrderLevel: what the job order compares.
  int64_t OrderRank(const scheduler::Job& job, scheduler::Timestamp now);
  // Rank (a running job's level by victimGpuExponent), then (fifoPreempt)
  // the earlier creation: what preempt compares. A waiting job short of
  // preemptAfter, held by freeHorizon, or stopped without stoppedPreempts
  // ranks as its priority's lowest level.
  int64_t PreemptRank(const scheduler::Job& job, scheduler::Timestamp now);
  // levelCooldown keeps `job` from being a level-preemption victim at `now`.
  bool InLevelCooldown(const scheduler::Job& job, scheduler::Timestamp now) const;
  // keepRestarted keeps `job` from being a level-preemption victim at `now`.
  bool KeptAtRestartLevel(const scheduler::Job& job, scheduler::Timestamp now) const;
  // wayBack: how long the stopped `job` waits before it is ordered at level
  // 0 (-1: not a stopped job, or wayBack off), and whether it is at `now`.
  scheduler::Timestamp WayBackWait(const scheduler::Job& job) const;
  bool OnWayBack(const scheduler::Job& job, scheduler::Timestamp now) const;
  // The job's level in job order: Level, or 0 for a stopped job with
  // stoppedAhead, or on its way back (wayBack).
  int OrderLevel(const scheduler::Job& job, scheduler::Timestamp now);
  // freeHorizon: the GPUs expected to free within it at `now` (the free
  // GPUs not counted), from the running jobs' time run at the last whole
  // minute.
  double ExpectedFreeGpus(const scheduler::State& state, scheduler::Timestamp now);
  // freeHorizon holds `job` back from level preemption in the session open
  // now (set by OnSessionOpen).
  bool HeldForFreeGpus(const scheduler::Job& job) const { return held_.contains(job.id().value()); }
  RunLengths& run_lengths() { return run_lengths_; }
  // freeByNode: the tasks of `g` whole GPUs each expected to fit within
  // freeHorizon at `now` (the free GPUs counted), summed over the nodes.
  // (With freeGangHorizon, within that horizon.)
  double ExpectedFreeTasks(const scheduler::State& state, scheduler::Timestamp now, int g);
  // freeGangChance: the chance that the hold of a gang of `gpus` GPUs that
  // has lasted `held_ms` ends with it started (see above; 1 with too few
  // holds of its class seen to end).
  double GangHoldChance(int64_t gpus, scheduler::Timestamp held_ms) const;
  // One gang hold seen to end (the plugin records them as held gangs start;
  // a test may give them directly), and how many of `gpus`'s class are.
  void RecordGangHold(int64_t gpus, scheduler::Timestamp held_ms, bool started);
  int64_t GangHoldsSeen(int64_t gpus) const;
  // The size class of a gang of `gpus` GPUs: 1 for 2, 2 for 3-4, 3 for 5-8..
  static int GangClass(int64_t gpus);
  // victimFill: the GPUs (whole) that the waiting jobs which may
  // level-preempt need together in the session open now.
  int64_t PreemptDemand() const { return preempt_demand_; }
  // In GPU-milli x ms (the unit of Job::AttainedMilliMs).
  const std::vector<int64_t>& thresholds() const { return thresholds_; }
  double starve_limit() const { return o_.starve_limit; }
  const Options& options() const { return o_; }
  // Promotions so far (all jobs).
  int64_t promotions() const { return promotions_; }

 private:
  std::vector<int64_t> thresholds_;
  Options o_;
  // Promoted jobs: the attained service at their last promotion, which their
  // level no longer counts.
  std::map<scheduler::JobId, int64_t> promoted_at_;
  int64_t promotions_ = 0;
  int64_t promotions_at_open_ = 0;  // promotions_ when the last session opened
  // freeHorizon: what was learned, and the jobs it holds back now.
  void Learn(const scheduler::State& state);
  void HoldForFreeGpus(const scheduler::State& state, scheduler::Timestamp now);
  int64_t AttainedWith(const scheduler::Job& job, scheduler::Timestamp now, double exponent) const;
  RunLengths run_lengths_;
  uint64_t seen_ = 0;  // State::ended_job records read so far
  absl::flat_hash_set<uint32_t> held_;
  // freeHorizon's chance that a running job ends within it, from its time
  // run at the last whole minute (0 for a job not running or without GPUs).
  double EndChance(const scheduler::Job& job, scheduler::Timestamp now, scheduler::Timestamp horizon_ms);
  // The GPUs of `running` expected to free within `horizon_ms` (each job's
  // EndChance, written to `chance`, times its GPUs): what the hold, and
  // ExpectedFreeGpus, count.
  double ExpectedEnds(const std::vector<const scheduler::Job*>& running, scheduler::Timestamp now,
                      scheduler::Timestamp horizon_ms, std::vector<double>& chance);
  // The freeHorizon of `job`'s hold (freeGangHorizon for a job of g > 1
  // GPUs a task).
  scheduler::Timestamp Horizon(const scheduler::Job& job) const;
  // freeByNode's per-node view, built once a session when a job of g > 1
  // GPUs a task is in its window: for each node, its free GPUs and the
  // distribution (or the mean) of what it has free once the jobs expected
  // to end are gone; then the tasks of g that fit, by g.
  void BuildNodeView(const scheduler::State& state, const std::vector<const scheduler::Job*>& running,
                     const std::vector<double>& chance);
  double TasksFit(int g);
  struct NodeItem {
    uint32_t job;
    int gpus;
    double p;
  };
  std::vector<std::vector<NodeItem>> node_items_;  // by node (scratch, kept)
  std::vector<int64_t> node_free_;                 // whole GPUs free now, by node
  std::vector<uint32_t> dist_at_;                  // by node: offset in dist_ (or ~0u: none)
  std::vector<double> dist_;                       // P(F = free .. free + sum) ("expected"), or E[F] ("floor")
  std::vector<double> fit_by_g_;                   // TasksFit cache by g (-1: not yet)
  // freeGangChance: the gang holds open now, by job id (ordered, so that
  // what is recorded does not depend on a hash), and the outcomes of those
  // seen to end, by class, binned by how long they lasted (RunLengths'
  // bins).
  struct GangHold {
    scheduler::Timestamp since;  // WaitingSince of the wait it is in
    scheduler::Timestamp first;  // the first session that held it
    scheduler::Timestamp last;   // the last session that held it
    int64_t gpus;
    bool held_last;  // held in the latest session
    bool failed;     // seen preempting (nominated or pipelined) meanwhile
    bool charged;    // freeGangCharge ended it at some session
  };
  std::map<uint32_t, GangHold> gang_holds_;
  struct HoldOutcomes {
    std::vector<int64_t> started, not_started;  // by bin of how long it lasted
    int64_t seen = 0;
  };
  std::vector<HoldOutcomes> hold_outcomes_;  // by GangClass
  void ResolveGangHolds(const scheduler::State& state);
  // victimFill: PreemptDemand, counted at session open.
  void CountPreemptDemand(const scheduler::State& state, scheduler::Timestamp now);
  int64_t preempt_demand_ = 0;
};

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_LAS_H_
