#include "plugins/las.h"

#include <algorithm>
#include <cmath>
#include <iterator>
#include <limits>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace ringmaster::plugins {
namespace {

// freeHorizon reads the running jobs' ages at the last whole minute.
constexpr scheduler::Timestamp kFreeStepMs = 60'000;

// A job that ran and waits again (stopped: preempted, reclaimed, its node lost).
bool Stopped(const scheduler::Job& job) {
  return (job.phase() == scheduler::JobPhase::kPending || job.phase() == scheduler::JobPhase::kInqueue) &&
         job.started() >= 0 && job.last_stopped() >= job.started();
}

// A waiting job waits since it was last stopped, else since it was submitted.
scheduler::Timestamp WaitingSince(const scheduler::Job& job) {
  const bool ran = job.started() >= 0 && job.last_stopped() >= job.started();
  return ran ? job.last_stopped() : job.created();
}

}  // namespace

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> LasPlugin::Create(const scheduler::PluginArgs& args) {
  RM_ASSIGN_OR_RETURN(auto text, args.String("thresholds", kDefaultThresholds));
  RM_ASSIGN_OR_RETURN(auto starve, args.Double("starveLimit", 0));
  if (!(starve >= 0 && starve <= 1e9)) {
    return args.Error("starveLimit", "must be a multiple in [0, 1e9] (0: no promotion)");
  }
  RM_ASSIGN_OR_RETURN(auto fifo, args.Bool("fifoPreempt", false));
  RM_ASSIGN_OR_RETURN(auto preempt_after, args.Double("preemptAfter", 0));
  if (!(preempt_after >= 0 && preempt_after <= 1e9)) {
    return args.Error("preemptAfter", "must be seconds in [0, 1e9] (0: preempt at once)");
  }
  RM_ASSIGN_OR_RETURN(auto by_time, args.Bool("byTime", false));
  RM_ASSIGN_OR_RETURN(auto level_cooldown, args.Double("levelCooldown", 0));
  if (!(level_cooldown >= 0 && level_cooldown <= 1e9)) {
    return args.Error("levelCooldown", "must be seconds in [0, 1e9] (0: no limit)");
  }
  RM_ASSIGN_OR_RETURN(auto shrink_in_cooldown, args.Bool("shrinkInCooldown", false));
  RM_ASSIGN_OR_RETURN(auto exponent, args.Double("gpuExponent", by_time ? 0 : 1));
  if (!(exponent >= 0 && exponent <= 1)) {
    return args.Error("gpuExponent", "must be in [0, 1] (1: GPU-time, 0: time run)");
  }
  if (by_time && exponent != 0) {
    return args.Error("gpuExponent", "byTime is gpuExponent 0: give one of them");
  }
  RM_ASSIGN_OR_RETURN(auto victim_exponent, args.Double("victimGpuExponent", exponent));
  if (!(victim_exponent >= 0 && victim_exponent <= 1)) {
    return args.Error("victimGpuExponent", "must be in [0, 1] (1: GPU-time, 0: time run)");
  }
  RM_ASSIGN_OR_RETURN(auto stopped_preempts, args.Bool("stoppedPreempts", true));
  RM_ASSIGN_OR_RETURN(auto stopped_ahead, args.Bool("stoppedAhead", false));
  RM_ASSIGN_OR_RETURN(auto free_horizon, args.Double("freeHorizon", 0));
  if (!(free_horizon >= 0 && free_horizon <= 1e9)) {
    return args.Error("freeHorizon", "must be seconds in [0, 1e9] (0: off)");
  }
  RM_ASSIGN_OR_RETURN(auto free_min_samples, args.Int("freeMinSamples", 20));
  if (free_min_samples < 1) return args.Error("freeMinSamples", "must be at least 1");
  RM_ASSIGN_OR_RETURN(auto by_node, args.String("freeByNode", "off"));
  if (by_node != "off" && by_node != "expected" && by_node != "floor") {
    return args.Error("freeByNode", "must be off, expected or floor");
  }
  RM_ASSIGN_OR_RETURN(auto gang_horizon, args.Double("freeGangHorizon", -1));
  if (!(gang_horizon == -1 || (gang_horizon >= 0 && gang_horizon <= 1e9))) {
    return args.Error("freeGangHorizon", "must be seconds in [0, 1e9] (default: freeHorizon)");
  }
  RM_ASSIGN_OR_RETURN(auto gang_charge, args.Double("freeGangCharge", 0));
  if (!(gang_charge >= 0 && gang_charge <= 1e9)) {
    return args.Error("freeGangCharge", "must be seconds per GPU in [0, 1e9] (0: off)");
  }
  RM_ASSIGN_OR_RETURN(auto charge_by, args.String("freeGangChargeBy", "waits"));
  if (charge_by != "waits" && charge_by != "idle") return args.Error("freeGangChargeBy", "must be waits or idle");
  RM_ASSIGN_OR_RETURN(auto chance, args.String("freeGangChance", "off"));
  if (chance != "off" && chance != "share" && chance != "survival") {
    return args.Error("freeGangChance", "must be off, share or survival");
  }
  if (chance != "off" && gang_charge <= 0) return args.Error("freeGangChance", "scales freeGangCharge: give it too");
  RM_ASSIGN_OR_RETURN(auto way_back, args.Double("wayBack", 0));
  if (!(way_back >= 0 && way_back <= 1e6)) {
    return args.Error("wayBack", "must be a multiple of the last run in [0, 1e6] (0: off)");
  }
  RM_ASSIGN_OR_RETURN(auto way_back_max, args.Double("wayBackMax", 0));
  if (!(way_back_max >= 0 && way_back_max <= 1e9)) {
    return args.Error("wayBackMax", "must be seconds in [0, 1e9] (0: no cap)");
  }
  RM_ASSIGN_OR_RETURN(auto way_back_reserve, args.Bool("wayBackReserve", true));
  if ((way_back_max > 0 || !way_back_reserve) && way_back <= 0) {
    return args.Error(way_back_max > 0 ? "wayBackMax" : "wayBackReserve", "qualifies wayBack: give it too");
  }
  RM_ASSIGN_OR_RETURN(auto keep_restarted, args.Bool("keepRestarted", false));
  RM_ASSIGN_OR_RETURN(auto keep_level, args.Int("keepRestartedLevel", 0));
  if (keep_level < 0 || keep_level > kMaxThresholds) {
    return args.Error("keepRestartedLevel", absl::StrCat("must be a level in [0, ", kMaxThresholds, "]"));
  }
  if (keep_level > 0 && !keep_restarted) return args.Error("keepRestartedLevel", "qualifies keepRestarted: give it too");
  RM_ASSIGN_OR_RETURN(auto keep_from, args.String("keepRestartedFrom", "all"));
  if (keep_from != "all" && keep_from != "stopped") return args.Error("keepRestartedFrom", "must be all or stopped");
  if (keep_from != "all" && !keep_restarted) return args.Error("keepRestartedFrom", "qualifies keepRestarted: give it too");
  RM_ASSIGN_OR_RETURN(auto victim_fill, args.Int("victimFill", 0));
  if (victim_fill < 0 || victim_fill > 1'000'000) return args.Error("victimFill", "must be GPUs in [0, 1e6] (0: off)");
  RM_RETURN_IF_ERROR(args.Finish());
  std::vector<int64_t> cuts;
  for (absl::string_view piece : absl::StrSplit(text, ',')) {  // absl's own string_view (ARCHITECTURE.md 3)
    const std::string part(absl::StripAsciiWhitespace(piece));
    double gpu_s = 0;
    if (!absl::SimpleAtod(part, &gpu_s) || !std::isfinite(gpu_s) || gpu_s <= 0 || gpu_s > 1e12) {
      return args.Error("thresholds", absl::StrCat("'", part,
                                                   "' is not a number of GPU-seconds > 0 (a list: \"3600, 36000\")"));
    }
    const int64_t milli_ms = std::llround(gpu_s * 1e6);
    if (!cuts.empty() && milli_ms <= cuts.back()) {
      return args.Error("thresholds", "must be strictly increasing");
    }
    cuts.push_back(milli_ms);
  }
  if (static_cast<int>(cuts.size()) > kMaxThresholds) {
    return args.Error("thresholds", absl::StrCat("at most ", kMaxThresholds, " thresholds"));
  }
  Options o;
  o.starve_limit = starve;
  o.fifo_preempt = fifo;
  o.preempt_after_ms = std::llround(preempt_after * 1e3);
  o.by_time = by_time || exponent == 0;
  o.gpu_exponent = exponent;
  o.level_cooldown_ms = std::llround(level_cooldown * 1e3);
  o.shrink_in_cooldown = shrink_in_cooldown;
  o.victim_gpu_exponent = victim_exponent == o.gpu_exponent ? -1 : victim_exponent;
  o.stopped_preempts = stopped_preempts;
  o.stopped_ahead = stopped_ahead;
  o.free_horizon_ms = std::llround(free_horizon * 1e3);
  o.free_min_samples = free_min_samples;
  o.victim_fill = victim_fill;
  o.way_back = way_back;
  o.way_back_max_ms = std::llround(way_back_max * 1e3);
  o.way_back_reserve = way_back_reserve;
  o.keep_restarted = keep_restarted;
  o.keep_restarted_level = keep_level;
  o.keep_from_stopped_only = keep_from == "stopped";
  o.free_gang_charge_ms = std::llround(gang_charge * 1e3);
  o.free_gang_charge_idle = charge_by == "idle";
  o.free_gang_chance = chance == "share"      ? Options::kChanceShare
                       : chance == "survival" ? Options::kChanceSurvival
                                              : Options::kChanceOff;
  o.free_gang_horizon_ms = gang_horizon < 0 ? -1 : std::llround(gang_horizon * 1e3);
  o.free_by_node = by_node == "expected" ? Options::kFreeExpected
                   : by_node == "floor"  ? Options::kFreeFloor
                                         : Options::kFreeGpus;
  return std::make_unique<LasPlugin>(std::move(cuts), o);
}

void LasPlugin::OnSessionOpen(scheduler::Session& s) {
  const scheduler::Timestamp now = s.now();
  promotions_at_open_ = promotions_;
  HoldForFreeGpus(s.state(), now);
  // The higher rank first: the key is its negation.
  s.AddJobOrderKeyFn(kName, [this, now](const scheduler::Job& j) { return -OrderRank(j, now); });
  s.AddJobPriorityFn(kName, [this, now](const scheduler::Job& j) { return PreemptRank(j, now); });
  if (o_.way_back > 0 && !o_.way_back_reserve) {
    // A job on its way back does not hold the reservation (all JobStarving
    // answers must agree).
    s.AddJobStarvingFn(kName, [this, now](const scheduler::Job& j) { return !OnWayBack(j, now); });
  }
  if (o_.victim_fill > 0) {
    CountPreemptDemand(s.state(), now);
    // Level preemption takes victims of min(demand, victimFill) GPUs or more
    // where one may be stopped (its level cooldown over); a lower priority's
    // jobs stay candidates as they are.
    s.AddPreemptableFn(kName, [this, now](const scheduler::TaskRef& p, const std::vector<scheduler::TaskRef>& cands) {
      const int64_t want = std::min(preempt_demand_, o_.victim_fill) * 1000;
      auto big = [&](const scheduler::TaskRef& t) {
        return t.job->priority() >= p.job->priority() && t.job->allocated().gpu_milli() >= want &&
               !InLevelCooldown(*t.job, now) &&
               !(KeptAtRestartLevel(*t.job, now) && (!o_.keep_from_stopped_only || Stopped(*p.job)));
      };
      if (want <= 1000 || std::none_of(cands.begin(), cands.end(), big)) return cands;
      std::vector<scheduler::TaskRef> out;
      std::copy_if(cands.begin(), cands.end(), std::back_inserter(out), [&](const scheduler::TaskRef& t) {
        return t.job->priority() < p.job->priority() || t.job->allocated().gpu_milli() >= want;
      });
      return out;
    });
  }
  if (o_.keep_restarted) {
    s.AddPreemptableFn(kName, [this, now](const scheduler::TaskRef& p, const std::vector<scheduler::TaskRef>& cands) {
      std::vector<scheduler::TaskRef> out;
      out.reserve(cands.size());
      if (o_.keep_from_stopped_only && !Stopped(*p.job)) return cands;  // a newcomer: nobody kept from it
      std::copy_if(cands.begin(), cands.end(), std::back_inserter(out), [&](const scheduler::TaskRef& t) {
        return t.job->priority() < p.job->priority() || !KeptAtRestartLevel(*t.job, now);
      });
      return out;
    });
  }
  if (o_.level_cooldown_ms > 0) {
    s.AddPreemptableFn(kName, [this, now](const scheduler::TaskRef& p, const std::vector<scheduler::TaskRef>& cands) {
      std::vector<scheduler::TaskRef> out;
      out.reserve(cands.size());
      const scheduler::Job* held_back = nullptr;  // the job whose first candidate was held back
      for (const scheduler::TaskRef& t : cands) {
        if (t.job->priority() < p.job->priority() || !InLevelCooldown(*t.job, now)) {
          out.push_back(t);
          continue;
        }
        // shrinkInCooldown: in its cooldown an elastic job may still be shrunk (a
        // re-formation, no work lost), never stopped whole: it offers every
        // member but its first, so no whole-job unit can be made of them
        // (the victim picker shrinks down to the gang minimum at most).
        if (!o_.shrink_in_cooldown || !t.job->elastic() || t.job->GangSpare() <= 0) continue;
        if (held_back != t.job) {
          held_back = t.job;
          continue;
        }
        out.push_back(t);
      }
      return out;
    });
  }
}

void LasPlugin::CountPreemptDemand(const scheduler::State& state, scheduler::Timestamp now) {
  // The waiting jobs that may level-preempt now: past preemptAfter, not held
  // by freeHorizon, not kept by stoppedPreempts, not already pipelined onto
  // their victims' GPUs.
  int64_t milli = 0;
  for (scheduler::JobId id : state.active_jobs()) {
    const scheduler::Job& job = state.job(id);
    if (job.phase() != scheduler::JobPhase::kPending && job.phase() != scheduler::JobPhase::kInqueue) continue;
    if (job.PipelinedCount() > 0 || now - WaitingSince(job) < o_.preempt_after_ms) continue;
    if (HeldForFreeGpus(job) || (!o_.stopped_preempts && Stopped(job))) continue;
    milli += job.min_request().gpu_milli();
  }
  preempt_demand_ = milli / 1000;
}

bool LasPlugin::InLevelCooldown(const scheduler::Job& job, scheduler::Timestamp now) const {
  return o_.level_cooldown_ms > 0 && job.last_resize() >= 0 && now - job.last_resize() < o_.level_cooldown_ms;
}

bool LasPlugin::KeptAtRestartLevel(const scheduler::Job& job, scheduler::Timestamp now) const {
  if (!o_.keep_restarted || job.phase() != scheduler::JobPhase::kRunning) return false;
  const scheduler::Timestamp since = job.last_resize();
  if (since < 0 || job.last_stopped() < 0 || job.last_stopped() > since) return false;  // never stopped
  // What it had attained at its last start (or resize): what it holds now
  // has been held since then.
  const int64_t held = job.allocated().gpu_milli();
  const int64_t now_raw = job.AttainedMilliMs(now);
  const int64_t then_raw = std::max<int64_t>(0, now_raw - held * (now - since));
  auto level = [&](int64_t raw) {
    int64_t a = raw;
    const int64_t g = job.min_request().gpu_milli();
    if (o_.gpu_exponent != 0 && o_.gpu_exponent != 1) {
      a = g > 0 ? std::llround(static_cast<double>(raw) / std::pow(static_cast<double>(g) / 1000, 1 - o_.gpu_exponent))
                : raw;
    } else if (o_.by_time && g > 0) {
      a = raw / g * 1000;
    }
    return std::upper_bound(thresholds_.begin(), thresholds_.end(), a) - thresholds_.begin();
  };
  const auto restarted_at = level(then_raw);
  return restarted_at >= o_.keep_restarted_level && restarted_at == level(now_raw);
}

int64_t LasPlugin::AttainedWith(const scheduler::Job& job, scheduler::Timestamp now, double exponent) const {
  const int64_t a = job.AttainedMilliMs(now);
  const int64_t g = job.min_request().gpu_milli();
  if (exponent == 1 || g <= 0) return a;
  if (exponent == 0) return a / g * 1000;
  return std::llround(static_cast<double>(a) / std::pow(static_cast<double>(g) / 1000, 1 - exponent));
}

int64_t LasPlugin::Attained(const scheduler::Job& job, scheduler::Timestamp now) const {
  const int64_t a = job.AttainedMilliMs(now);
  if (o_.gpu_exponent != 0 && o_.gpu_exponent != 1) {
    // Divided by GPUs^(1 - e) (whole GPUs of the gang's minimum request).
    const double gpus = static_cast<double>(job.min_request().gpu_milli()) / 1000;
    return gpus > 0 ? std::llround(static_cast<double>(a) / std::pow(gpus, 1 - o_.gpu_exponent)) : a;
  }
  if (!o_.by_time) return a;
  // GPU-milli x ms over the gang's GPU-milli: ms, x 1000 to keep the unit
  // of the thresholds (a CPU-only job counts its milli-CPU-free time as is).
  const int64_t g = job.min_request().gpu_milli();
  return g > 0 ? a / g * 1000 : a;
}

int LasPlugin::Level(const scheduler::Job& job, scheduler::Timestamp now) {
  int64_t attained = Attained(job, now);
  auto it = promoted_at_.find(job.id());
  if (it != promoted_at_.end()) attained -= it->second;
  // The number of thresholds at or below what it attained.
  auto level = [&] {
    return static_cast<int>(std::upper_bound(thresholds_.begin(), thresholds_.end(), attained) - thresholds_.begin());
  };
  if (o_.starve_limit <= 0 || level() == 0 || job.phase() == scheduler::JobPhase::kRunning) return level();
  // Starved? It ran (started .. last_stopped) and has waited since. The
  // answer is the same for every call at `now` (a waiting job attains
  // nothing), so orders built from it stay consistent.
  const scheduler::Timestamp started = job.started(), stopped = job.last_stopped();
  if (started < 0 || stopped < started || now <= stopped) return level();
  const double ran = static_cast<double>(stopped - started);
  if (static_cast<double>(now - stopped) < o_.starve_limit * ran) return level();
  promoted_at_[job.id()] = Attained(job, now);
  ++promotions_;
  return 0;
}

scheduler::Timestamp LasPlugin::NextChange(const scheduler::State& state, scheduler::Timestamp now) const {
  if (promotions_ != promotions_at_open_) return now;  // a level changed in the last cycle
  scheduler::Timestamp next = scheduler::kNoChange;
  for (scheduler::JobId id : state.active_jobs()) {
    const scheduler::Job& job = state.job(id);
    int64_t attained = Attained(job, now);
    if (auto it = promoted_at_.find(id); it != promoted_at_.end()) attained -= it->second;
    // Attained per ms: milli-GPU x ms per ms, or with byTime 1000 x ms per
    // ms for each min-request GPU held (rounded up: early is safe).
    // A level cooldown ending makes the job a victim it was not.
    if (job.phase() == scheduler::JobPhase::kRunning && InLevelCooldown(job, now)) next = std::min(next, job.last_resize() + o_.level_cooldown_ms);
    int64_t rate = job.allocated().gpu_milli();
    if (o_.gpu_exponent != 0 && o_.gpu_exponent != 1 && rate > 0) {
      const double gpus = static_cast<double>(job.min_request().gpu_milli()) / 1000;
      if (gpus > 0) rate = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(static_cast<double>(rate) / std::pow(gpus, 1 - o_.gpu_exponent))));
    } else if (o_.by_time && rate > 0) {
      const int64_t g = job.min_request().gpu_milli();
      if (g > 0) rate = (rate * 1000 + g - 1) / g;
    }
    if (rate > 0) {
      // Level() counts the thresholds at or below what it attained: the next
      // one above is crossed at now + ceil((threshold - attained) / rate).
      auto it = std::upper_bound(thresholds_.begin(), thresholds_.end(), attained);
      if (it != thresholds_.end()) next = std::min(next, now + (*it - attained + rate - 1) / rate);
      // victimGpuExponent: the victim level's own crossing (at its own rate,
      // rounded up as above).
      if (o_.victim_gpu_exponent >= 0) {
        const double e = o_.victim_gpu_exponent;
        const int64_t va = AttainedWith(job, now, e);
        int64_t vrate = job.allocated().gpu_milli();
        const int64_t g = job.min_request().gpu_milli();
        if (g > 0 && e == 0) {
          vrate = (vrate * 1000 + g - 1) / g;
        } else if (g > 0 && e != 1) {
          vrate = std::max<int64_t>(1, static_cast<int64_t>(std::ceil(static_cast<double>(vrate) /
                                                                      std::pow(static_cast<double>(g) / 1000, 1 - e))));
        }
        auto vit = std::upper_bound(thresholds_.begin(), thresholds_.end(), va);
        if (vit != thresholds_.end()) next = std::min(next, now + (*vit - va + vrate - 1) / vrate);
      }
      continue;
    }
    // freeHorizon: a waiting job inside its hold window is held or not by
    // the running jobs' ages read at the last whole minute; the window's
    // end lets it preempt.
    if (o_.free_horizon_ms > 0 &&
        (job.phase() == scheduler::JobPhase::kPending || job.phase() == scheduler::JobPhase::kInqueue)) {
      const scheduler::Timestamp since = WaitingSince(job);
      const scheduler::Timestamp from = since + o_.preempt_after_ms, until = from + Horizon(job);
      if (from <= now && now < until) next = std::min({next, until, now - now % kFreeStepMs + kFreeStepMs});
    }
    // Waiting with preemptAfter: its preemption rank rises once it has
    // waited that long (PreemptRank).
    if (o_.preempt_after_ms > 0 &&
        (job.phase() == scheduler::JobPhase::kPending || job.phase() == scheduler::JobPhase::kInqueue)) {
      const scheduler::Timestamp stopped = job.last_stopped();
      const bool ran = job.started() >= 0 && stopped >= job.started();
      const scheduler::Timestamp at = (ran ? stopped : job.created()) + o_.preempt_after_ms;
      if (at > now) next = std::min(next, at);
    }
    // wayBack: a stopped job goes to level 0 in job order once it has
    // waited its way-back wait.
    if (const scheduler::Timestamp wait = WayBackWait(job); wait >= 0 && job.last_stopped() + wait > now) {
      next = std::min(next, job.last_stopped() + wait);
    }
    // Waiting: its level stays, unless it starves into a promotion (the
    // condition Level() tests, solved for the time).
    if (o_.starve_limit <= 0 || job.phase() == scheduler::JobPhase::kRunning) continue;
    if (std::upper_bound(thresholds_.begin(), thresholds_.end(), attained) == thresholds_.begin()) continue;
    const scheduler::Timestamp started = job.started(), stopped = job.last_stopped();
    if (started < 0 || stopped < started) continue;
    const double wait = o_.starve_limit * static_cast<double>(stopped - started);
    if (wait > 1e15) continue;
    scheduler::Timestamp at = stopped + static_cast<scheduler::Timestamp>(std::ceil(wait));
    while (static_cast<double>(at - stopped) < wait) ++at;
    at = std::max(at, stopped + 1);
    next = std::min(next, std::max(at, now));
  }
  return next;
}

int64_t LasPlugin::Rank(const scheduler::Job& job, scheduler::Timestamp now) {
  // kMaxThresholds + 1 levels fit below one step of priority.
  return static_cast<int64_t>(job.priority()) * (kMaxThresholds + 1) + (kMaxThresholds - Level(job, now));
}

scheduler::Timestamp LasPlugin::WayBackWait(const scheduler::Job& job) const {
  if (o_.way_back <= 0 || !Stopped(job)) return -1;
  // Its last run: from its last start to its stop.
  const double ran = static_cast<double>(job.last_stopped() - job.started());
  scheduler::Timestamp wait = static_cast<scheduler::Timestamp>(std::min(std::ceil(o_.way_back * ran), 1e15));
  if (o_.way_back_max_ms > 0) wait = std::min(wait, o_.way_back_max_ms);
  return wait;
}

bool LasPlugin::OnWayBack(const scheduler::Job& job, scheduler::Timestamp now) const {
  const scheduler::Timestamp wait = WayBackWait(job);
  return wait >= 0 && now - job.last_stopped() >= wait;
}

int LasPlugin::OrderLevel(const scheduler::Job& job, scheduler::Timestamp now) {
  if (o_.stopped_ahead && Stopped(job)) return 0;
  if (OnWayBack(job, now)) return 0;
  return Level(job, now);
}

int64_t LasPlugin::OrderRank(const scheduler::Job& job, scheduler::Timestamp now) {
  return static_cast<int64_t>(job.priority()) * (kMaxThresholds + 1) + (kMaxThresholds - OrderLevel(job, now));
}

RunLengths::RunLengths() : count_(BinOf(std::numeric_limits<int64_t>::max()) + 1, 0) {}

int RunLengths::BinOf(int64_t ms) {
  if (ms < 1000) return 0;
  // 1e9 s and on: the last bin (log(1e9) / log(1.05) = 424.7).
  constexpr int kLast = 426;
  const double k = std::floor(std::log(static_cast<double>(ms) / 1000) / std::log(1.05));
  return k >= kLast - 1 ? kLast : 1 + static_cast<int>(k);
}

void RunLengths::Add(int64_t run_ms) {
  ++count_[BinOf(std::max<int64_t>(run_ms, 0))];
  ++samples_;
  dirty_ = true;
}

double RunLengths::EndWithin(int64_t age_ms, int64_t horizon_ms) {
  if (dirty_) {
    below_.assign(count_.size() + 1, 0);
    for (size_t k = 0; k < count_.size(); ++k) below_[k + 1] = below_[k] + count_[k];
    dirty_ = false;
  }
  const int b0 = BinOf(std::max<int64_t>(age_ms, 0)), b1 = BinOf(std::max<int64_t>(age_ms, 0) + horizon_ms);
  const int64_t above = samples_ - below_[b0 + 1];
  if (above <= 0) return 0;
  return static_cast<double>(below_[b1 + 1] - below_[b0 + 1]) / static_cast<double>(above);
}

void LasPlugin::Learn(const scheduler::State& state) {
  for (seen_ = std::max<uint64_t>(seen_, state.ended_begin()); seen_ < state.ended_end(); ++seen_) {
    const scheduler::EndedJob& e = state.ended_job(seen_);
    if (!e.Teaches() || e.min_gpu_milli <= 0) continue;
    run_lengths_.Add(e.attained_milli_ms / e.min_gpu_milli);  // ms run
  }
}

double LasPlugin::EndChance(const scheduler::Job& job, scheduler::Timestamp now, scheduler::Timestamp horizon_ms) {
  // The job's GPU-time at the last whole minute (constant while the state
  // is), over its minimum's GPUs: its time run then.
  const int64_t held = job.allocated().gpu_milli(), g = job.min_request().gpu_milli();
  if (job.phase() != scheduler::JobPhase::kRunning || held <= 0 || g <= 0) return 0;
  const int64_t age = std::max<int64_t>(0, (job.AttainedMilliMs(now) - held * (now % kFreeStepMs)) / g);
  return run_lengths_.EndWithin(age, horizon_ms);
}

namespace {

// The most whole GPUs one task of the job needs (over its roles; 0: none).
int GangShape(const scheduler::Job& job) {
  int most = 0;
  for (const scheduler::RoleSpec& r : job.spec().roles) {
    if (r.gpu.whole() && r.gpu.count > most) most = r.gpu.count;
  }
  return most;
}

}  // namespace

scheduler::Timestamp LasPlugin::Horizon(const scheduler::Job& job) const {
  if (o_.free_gang_horizon_ms < 0 || GangShape(job) <= 1) return o_.free_horizon_ms;
  return o_.free_gang_horizon_ms;
}

double LasPlugin::ExpectedEnds(const std::vector<const scheduler::Job*>& running, scheduler::Timestamp now,
                               scheduler::Timestamp horizon_ms, std::vector<double>& chance) {
  chance.resize(running.size());
  double gpus = 0;
  for (size_t j = 0; j < running.size(); ++j) {
    chance[j] = EndChance(*running[j], now, horizon_ms);
    gpus += chance[j] * static_cast<double>(running[j]->allocated().gpu_milli()) / 1000;
  }
  return gpus;
}

namespace {

// The running jobs that hold GPUs.
std::vector<const scheduler::Job*> RunningWithGpus(const scheduler::State& state) {
  std::vector<const scheduler::Job*> out;
  for (scheduler::JobId id : state.running_jobs()) {
    const scheduler::Job& job = state.job(id);
    if (job.allocated().gpu_milli() > 0) out.push_back(&job);
  }
  return out;
}

}  // namespace

double LasPlugin::ExpectedFreeGpus(const scheduler::State& state, scheduler::Timestamp now) {
  std::vector<double> chance;
  return ExpectedEnds(RunningWithGpus(state), now, o_.free_horizon_ms, chance);
}

namespace {

// Calls add(count) for each task of the job's gang minimum that needs whole
// GPUs.
template <typename F>
void TaskShapes(const scheduler::Job& job, F&& add) {
  const uint32_t n = std::min<uint32_t>(static_cast<uint32_t>(job.min_member()), job.tasks().size());
  for (uint32_t i = 0; i < n; ++i) {
    const scheduler::GpuRequest& r = job.gpu(i);
    if (r.whole() && r.count > 0) add(r.count);
  }
}

}  // namespace

void LasPlugin::BuildNodeView(const scheduler::State& state, const std::vector<const scheduler::Job*>& running,
                              const std::vector<double>& chance) {
  const size_t nodes = state.num_nodes();
  node_items_.resize(nodes);
  for (auto& items : node_items_) items.clear();
  node_free_.assign(nodes, 0);
  dist_at_.assign(nodes, ~0u);
  dist_.clear();
  fit_by_g_.clear();
  for (size_t n = 0; n < nodes; ++n) {
    const scheduler::NodeId id(static_cast<uint32_t>(n));
    if (state.free_index().Contains(id)) node_free_[n] = state.FreeWholeGpus(id);
  }
  // Each running job that may end: its whole GPUs on each node (its tasks
  // there together: they end with it).
  for (size_t j = 0; j < running.size(); ++j) {
    if (chance[j] <= 0) continue;
    const scheduler::Job& job = *running[j];
    for (uint32_t i = 0; i < job.tasks().size(); ++i) {
      const scheduler::Task& t = job.task(i);
      if (!scheduler::HoldsNode(t.state) || !t.node.valid() || !job.gpu(i).whole()) continue;
      auto& items = node_items_[t.node.value()];
      const int gpus = static_cast<int>(t.gpus.size());
      if (!items.empty() && items.back().job == job.id().value()) {
        items.back().gpus += gpus;
      } else {
        items.push_back({job.id().value(), gpus, chance[j]});
      }
    }
  }
  for (size_t n = 0; n < nodes; ++n) {
    const auto& items = node_items_[n];
    if (items.empty()) continue;
    dist_at_[n] = static_cast<uint32_t>(dist_.size());
    if (o_.free_by_node == Options::kFreeFloor) {
      double mean = static_cast<double>(node_free_[n]);
      for (const NodeItem& it : items) mean += it.p * it.gpus;
      dist_.push_back(mean);
      continue;
    }
    // P(F = free + k), k = 0 .. the GPUs of the items: each job ends or not
    // by itself (in place, from the top down).
    int total = 0;
    for (const NodeItem& it : items) total += it.gpus;
    const size_t at = dist_.size();
    dist_.resize(at + total + 1, 0.0);
    double* d = dist_.data() + at;
    d[0] = 1;
    int top = 0;
    for (const NodeItem& it : items) {
      for (int k = top; k >= 0; --k) {
        d[k + it.gpus] += it.p * d[k];
        d[k] *= 1 - it.p;
      }
      top += it.gpus;
    }
  }
}

double LasPlugin::TasksFit(int g) {
  if (static_cast<size_t>(g) < fit_by_g_.size() && fit_by_g_[g] >= 0) return fit_by_g_[g];
  double tasks = 0;
  for (size_t n = 0; n < node_free_.size(); ++n) {
    const int64_t free = node_free_[n];
    if (dist_at_[n] == ~0u) {
      tasks += static_cast<double>(free / g);
    } else if (o_.free_by_node == Options::kFreeFloor) {
      tasks += std::floor(dist_[dist_at_[n]] / g + 1e-9);
    } else {
      int total = 0;
      for (const NodeItem& it : node_items_[n]) total += it.gpus;
      const double* d = dist_.data() + dist_at_[n];
      for (int k = 0; k <= total; ++k) tasks += d[k] * static_cast<double>((free + k) / g);
    }
  }
  if (fit_by_g_.size() <= static_cast<size_t>(g)) fit_by_g_.resize(g + 1, -1);
  fit_by_g_[g] = tasks;
  return tasks;
}

double LasPlugin::ExpectedFreeTasks(const scheduler::State& state, scheduler::Timestamp now, int g) {
  const std::vector<const scheduler::Job*> running = RunningWithGpus(state);
  std::vector<double> chance;
  ExpectedEnds(running, now, o_.free_gang_horizon_ms >= 0 ? o_.free_gang_horizon_ms : o_.free_horizon_ms, chance);
  BuildNodeView(state, running, chance);
  return TasksFit(std::max(g, 1));
}

void LasPlugin::HoldForFreeGpus(const scheduler::State& state, scheduler::Timestamp now) {
  held_.clear();
  if (o_.free_horizon_ms <= 0) return;
  Learn(state);
  const bool track = o_.free_gang_chance != Options::kChanceOff;
  if (track) ResolveGangHolds(state);
  if (run_lengths_.samples() < o_.free_min_samples) return;
  // The waiting jobs, each with its rank in this plugin's job order, its
  // tasks' shape (the most GPUs one needs) and whether it is inside its hold
  // window; the running jobs.
  struct Waiting {
    int64_t rank;
    scheduler::Timestamp created;
    scheduler::Timestamp since;  // waiting since (WaitingSince)
    uint32_t id;
    int64_t gpu_milli;
    int shape;
    bool in_window;
    const scheduler::Job* job;
  };
  std::vector<Waiting> waiting;
  std::vector<const scheduler::Job*> running;
  bool any = false, any_gang = false;  // any_gang: a job of g > 1 GPUs a task is in its window
  const bool gang_rule =
      o_.free_by_node != Options::kFreeGpus || o_.free_gang_horizon_ms >= 0 || o_.free_gang_charge_ms > 0;
  for (scheduler::JobId id : state.active_jobs()) {
    const scheduler::Job& job = state.job(id);
    if (job.phase() == scheduler::JobPhase::kRunning) {
      if (job.allocated().gpu_milli() > 0) running.push_back(&job);
      continue;
    }
    if (job.phase() != scheduler::JobPhase::kPending && job.phase() != scheduler::JobPhase::kInqueue) continue;
    const int shape = gang_rule ? GangShape(job) : 0;
    const scheduler::Timestamp since = WaitingSince(job), from = since + o_.preempt_after_ms;
    const bool in_window = from <= now && now < from + Horizon(job);
    any = any || in_window;
    any_gang = any_gang || (in_window && shape > 1);
    waiting.push_back(
        {OrderRank(job, now), job.created(), since, id.value(), job.min_request().gpu_milli(), shape, in_window, &job});
  }
  if (!any) return;
  // The GPUs free now plus those expected to free within the horizon (and,
  // for the gangs, within freeGangHorizon).
  std::vector<double> chance, gang_chance;
  const double free_now = static_cast<double>(state.free_index().TotalFree());
  const double expected = free_now + ExpectedEnds(running, now, o_.free_horizon_ms, chance);
  double gang_expected = expected;
  const bool own_gang_horizon = o_.free_gang_horizon_ms >= 0 && o_.free_gang_horizon_ms != o_.free_horizon_ms;
  if (any_gang && own_gang_horizon) {
    gang_expected = free_now + ExpectedEnds(running, now, o_.free_gang_horizon_ms, gang_chance);
  }
  const double most = std::max(expected, gang_expected);
  // In job order (rank, then first come first served), as a heap: the jobs
  // ahead only grow, so once they need more than is expected no later job is
  // held, and the rest need not be ordered.
  auto after = [](const Waiting& a, const Waiting& b) {
    if (a.rank != b.rank) return a.rank < b.rank;
    if (a.created != b.created) return a.created > b.created;
    return a.id > b.id;
  };
  std::make_heap(waiting.begin(), waiting.end(), after);
  double ahead = 0;                    // GPUs of the waiting jobs up to this one, itself included
  std::vector<int64_t> tasks_by_gpus;  // freeByNode: their tasks by whole GPUs
  bool view = false;
  for (auto end = waiting.end(); end != waiting.begin(); --end) {
    std::pop_heap(waiting.begin(), end, after);
    const Waiting& w = *(end - 1);
    ahead += static_cast<double>(w.gpu_milli) / 1000;
    if (most < ahead) break;
    if (o_.free_by_node != Options::kFreeGpus && any_gang) {
      TaskShapes(*w.job, [&](int c) {
        if (tasks_by_gpus.size() <= static_cast<size_t>(c)) tasks_by_gpus.resize(c + 1, 0);
        ++tasks_by_gpus[c];
      });
    }
    if (!w.in_window) continue;
    if (w.shape <= 1 || !gang_rule) {
      if (expected >= ahead) held_.insert(w.id);
      continue;
    }
    if (gang_expected < ahead) continue;
    if (o_.free_by_node != Options::kFreeGpus) {
      // freeByNode: the tasks of w.shape GPUs ahead (a task of c >= shape
      // counts ceil(c / shape)) against those expected to fit.
      if (!view) {
        BuildNodeView(state, running, own_gang_horizon ? gang_chance : chance);
        view = true;
      }
      int64_t units = 0;
      const size_t g = static_cast<size_t>(w.shape);
      for (size_t c = g; c < tasks_by_gpus.size(); ++c) units += tasks_by_gpus[c] * static_cast<int64_t>((c + g - 1) / g);
      if (TasksFit(w.shape) < static_cast<double>(units)) continue;
    }
    if (o_.free_gang_charge_ms > 0) {
      // freeGangCharge: what its hold costs the jobs after it in job order
      // (the heap's rest, [begin, end - 1)), read at the last whole minute,
      // against its budget: their waits since its window opened, or
      // (freeGangChargeBy: idle) the free GPUs it keeps from them times its
      // time in the window.
      const scheduler::Timestamp minute = now - now % kFreeStepMs, open = w.since + o_.preempt_after_ms;
      double budget = static_cast<double>(o_.free_gang_charge_ms) * static_cast<double>(w.gpu_milli) / 1000;
      auto hold = track ? gang_holds_.find(w.id) : gang_holds_.end();
      if (track) {
        // freeGangChance: x the chance that a hold of its class, as old as
        // this one at the last whole minute, ends with it started.
        const scheduler::Timestamp age =
            hold == gang_holds_.end() ? 0 : std::max<scheduler::Timestamp>(0, minute - hold->second.first);
        budget *= GangHoldChance(w.gpu_milli / 1000, age);
      }
      double charge = 0;
      if (o_.free_gang_charge_idle) {
        int64_t behind = 0;  // GPU-milli
        const int64_t free_milli = state.free_index().TotalFree() * 1000;
        for (auto it = waiting.begin(); it != end - 1 && behind < free_milli; ++it) behind += it->gpu_milli;
        charge = static_cast<double>(std::min(behind, free_milli)) / 1000 *
                 static_cast<double>(std::max<scheduler::Timestamp>(0, minute - open));
      }
      for (auto it = waiting.begin(); !o_.free_gang_charge_idle && it != end - 1 && charge <= budget; ++it) {
        charge += static_cast<double>(std::max<scheduler::Timestamp>(0, minute - std::max(it->since, open)));
      }
      if (charge > budget) {
        if (hold != gang_holds_.end()) hold->second.charged = true;
        continue;
      }
    }
    held_.insert(w.id);
    if (track && w.shape > 1) {
      auto [it, fresh] = gang_holds_.try_emplace(w.id, GangHold{w.since, now, now, w.gpu_milli / 1000, true, false, false});
      if (!fresh) {
        it->second.last = now;
        it->second.held_last = true;
      }
      // Held after it preempted (its victims still releasing): no stop saved.
      if (w.job->nominated() || w.job->PipelinedCount() > 0) it->second.failed = true;
    }
  }
}

int LasPlugin::GangClass(int64_t gpus) {
  int c = 0;
  for (int64_t top = 1; top < gpus; top *= 2) ++c;
  return c;
}

void LasPlugin::RecordGangHold(int64_t gpus, scheduler::Timestamp held_ms, bool started) {
  const size_t c = static_cast<size_t>(GangClass(gpus));
  if (hold_outcomes_.size() <= c) hold_outcomes_.resize(c + 1);
  HoldOutcomes& o = hold_outcomes_[c];
  if (o.started.empty()) {
    const size_t bins = static_cast<size_t>(RunLengths::BinOf(std::numeric_limits<int64_t>::max())) + 1;
    o.started.assign(bins, 0);
    o.not_started.assign(bins, 0);
  }
  ++(started ? o.started : o.not_started)[RunLengths::BinOf(std::max<scheduler::Timestamp>(held_ms, 0))];
  ++o.seen;
}

int64_t LasPlugin::GangHoldsSeen(int64_t gpus) const {
  const size_t c = static_cast<size_t>(GangClass(gpus));
  return c < hold_outcomes_.size() ? hold_outcomes_[c].seen : 0;
}

double LasPlugin::GangHoldChance(int64_t gpus, scheduler::Timestamp held_ms) const {
  const size_t c = static_cast<size_t>(GangClass(gpus));
  if (c >= hold_outcomes_.size() || hold_outcomes_[c].seen < o_.free_min_samples) return 1;
  const HoldOutcomes& o = hold_outcomes_[c];
  // "survival": the holds that lasted at least held_ms (in whole bins).
  const size_t from = o_.free_gang_chance == Options::kChanceSurvival
                          ? static_cast<size_t>(RunLengths::BinOf(std::max<scheduler::Timestamp>(held_ms, 0)))
                          : 0;
  int64_t yes = 0, all = 0;
  for (size_t b = from; b < o.started.size(); ++b) {
    yes += o.started[b];
    all += o.started[b] + o.not_started[b];
  }
  return all == 0 ? 0 : static_cast<double>(yes) / static_cast<double>(all);
}

void LasPlugin::ResolveGangHolds(const scheduler::State& state) {
  for (auto it = gang_holds_.begin(); it != gang_holds_.end();) {
    GangHold& g = it->second;
    const scheduler::JobId id(it->first);
    const scheduler::Job* job = state.has_job(id) ? &state.job(id) : nullptr;
    const bool waiting = job != nullptr && (job->phase() == scheduler::JobPhase::kPending ||
                                            job->phase() == scheduler::JobPhase::kInqueue);
    if (waiting && WaitingSince(*job) == g.since && !(job->started() >= g.first)) {
      // Still in the wait its hold began in: a preemption it made (it is
      // nominated, or placed on GPUs its victims release) fails the hold.
      if (job->nominated() || job->PipelinedCount() > 0) g.failed = true;
      g.held_last = false;  // set again if this session holds it
      ++it;
      continue;
    }
    // It started (or ended, or was removed): the hold is over. Held in the
    // session before it started, and never preempting: it started without
    // a stop.
    if (job != nullptr && job->started() >= g.first && !g.charged) {
      const bool ok = g.held_last && !g.failed;
      RecordGangHold(g.gpus, (ok ? job->started() : g.last) - g.first, ok);
    }
    it = gang_holds_.erase(it);
  }
}

}  // namespace ringmaster::plugins

namespace ringmaster::plugins {

int64_t LasPlugin::PreemptRank(const scheduler::Job& job, scheduler::Timestamp now) {
  int64_t rank = Rank(job, now);
  if (job.phase() == scheduler::JobPhase::kPending || job.phase() == scheduler::JobPhase::kInqueue) {
    // Waiting since it was last stopped, else since it was submitted.
    const scheduler::Timestamp since = WaitingSince(job);
    const bool held = now - since < o_.preempt_after_ms || (!o_.stopped_preempts && Stopped(job)) ||
                      (now - since < o_.preempt_after_ms + Horizon(job) && HeldForFreeGpus(job));
    // The lowest level of its priority: above no running job of it.
    if (held) {
      const int64_t lowest = static_cast<int64_t>(job.priority()) * (kMaxThresholds + 1);
      return o_.fifo_preempt ? lowest * (int64_t{1} << 40) : lowest;
    }
  } else if (o_.victim_gpu_exponent >= 0 && job.phase() == scheduler::JobPhase::kRunning) {
    // victimGpuExponent: a running job's level as a victim.
    const int64_t a = AttainedWith(job, now, o_.victim_gpu_exponent);
    const int level =
        static_cast<int>(std::upper_bound(thresholds_.begin(), thresholds_.end(), a) - thresholds_.begin());
    rank = static_cast<int64_t>(job.priority()) * (kMaxThresholds + 1) + (kMaxThresholds - level);
  }
  if (!o_.fifo_preempt) return rank;
  // Creation times (ms) below 2^40 (35 years) fit under one step of Rank.
  constexpr int64_t kSpan = int64_t{1} << 40;
  const int64_t created = std::clamp<int64_t>(job.created(), 0, kSpan - 1);
  return rank * kSpan + (kSpan - 1 - created);
}

}  // namespace ringmaster::plugins
