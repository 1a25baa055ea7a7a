#include "plugins/gittins.h"

#include <algorithm>
#include <bit>
#include <cfloat>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::plugins {

using scheduler::Job;
using scheduler::JobPhase;
using scheduler::Timestamp;

// ---- GittinsTable -------------------------------------------------------------

GittinsTable::GittinsTable(std::vector<double> cuts, int64_t min_samples) : min_samples_(std::max<int64_t>(1, min_samples)) {
  lo_.push_back(0);
  lo_.insert(lo_.end(), cuts.begin(), cuts.end());
  count_.assign(lo_.size(), 0);
  sum_.assign(lo_.size(), 0);
  entries_.resize(lo_.size());
}

void GittinsTable::Add(double service) {
  const int k = BinOf(service);
  ++count_[k];
  sum_[k] += service;
  ++samples_;
  dirty_ = true;
}

void GittinsTable::SetRunning(std::vector<int64_t> at, std::vector<int64_t> inside) {
  if (at == running_at_ && inside == running_inside_) return;
  running_at_ = std::move(at);
  running_inside_ = std::move(inside);
  dirty_ = true;
}

int GittinsTable::BinOf(double service) const {
  return static_cast<int>(std::upper_bound(lo_.begin() + 1, lo_.end(), service) - (lo_.begin() + 1));
}

double GittinsTable::upper(int bin) const {
  return bin + 1 < bins() ? lo_[bin + 1] : 2 * lo_[bin];
}

const GittinsTable::Entry& GittinsTable::At(int bin) {
  if (dirty_) Recompute();
  return entries_[bin];
}

void GittinsTable::Recompute() {
  dirty_ = false;
  const int b = bins();
  // ended[i]: jobs that ended at or after a_i. at_risk[i]: those, the active
  // jobs past bin i, and half of those inside it.
  std::vector<int64_t> ended(b + 1, 0);
  std::vector<double> at_risk(b, 0);
  double past = 0;
  int ends = -1;  // the last bin in which a job ended
  for (int i = b - 1; i >= 0; --i) {
    ended[i] = ended[i + 1] + count_[i];
    const double inside = running_inside_.empty() ? 0 : static_cast<double>(running_inside_[i]);
    at_risk[i] = static_cast<double>(ended[i]) + past + inside / 2;
    if (!running_at_.empty()) past += static_cast<double>(running_at_[i]);
    if (ends < 0 && count_[i] > 0) ends = i;
  }
  int last = -1;  // the last learned bin (K)
  for (int k = 0; k < b && ended[k] >= min_samples_; ++k) {
    // Walking the bins from k: r = P(S >= a_i | S >= a_k), p = P(S < a_{i+1}
    // | ...), e = E[min(S, a_{i+1}) - a_k | ...].
    double r = 1, p = 0, e = 0, best = -1, best_e = 0;
    auto consider = [&](double prob, double spent) {
      spent = std::max(1e-9, spent);
      if (prob / spent > best) {
        best = prob / spent;
        best_e = spent;
      }
    };
    for (int i = k; i <= ends; ++i) {
      const double h = i == b - 1 ? 1 : std::min(1.0, at_risk[i] > 0 ? static_cast<double>(count_[i]) / at_risk[i] : 0);
      const double m = count_[i] > 0 ? sum_[i] / static_cast<double>(count_[i]) - lo_[i] : 0;
      const double width = i + 1 < b ? lo_[i + 1] - lo_[i] : 0;
      e += r * (h * m + (1 - h) * width);
      p += r * h;
      r *= 1 - h;
      if (i + 1 < b && p > 0) consider(p, e);
    }
    // Past the last end seen a survivor runs as long again as it has.
    const double remaining = e + r * (ends + 1 < b ? lo_[ends + 1] : 0);
    consider(1, remaining);
    entries_[k] = {best, best_e, std::max(1e-9, remaining), true};
    last = k;
  }
  for (int k = last + 1; k < b; ++k) {
    if (last < 0) {
      entries_[k] = {1 / upper(k), upper(k), upper(k), false};  // nothing learned: LAS over the quanta
      continue;
    }
    const Entry& e = entries_[last];
    const double f = upper(k) / upper(last);
    entries_[k] = {e.index / f, e.quantum * f, e.remaining * f, false};
  }
}

// ---- GittinsPlugin ------------------------------------------------------------

namespace {

std::vector<double> Cuts(double quantum, double growth) {
  std::vector<double> cuts;
  for (double c = quantum; c <= GittinsPlugin::kMaxService; c *= growth) cuts.push_back(c);
  return cuts;
}

// The index as the bits of a positive float: ordered as the index is, and
// below 2^31.
int64_t IndexBits(double index) {
  const float f = static_cast<float>(std::clamp(index, static_cast<double>(FLT_MIN), static_cast<double>(FLT_MAX)));
  return static_cast<int64_t>(std::bit_cast<uint32_t>(f));
}

constexpr int64_t kBand = int64_t{1} << 31;  // one step of priority

bool Waiting(const Job& j) { return j.phase() == JobPhase::kPending || j.phase() == JobPhase::kInqueue; }

}  // namespace

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> GittinsPlugin::Create(const scheduler::PluginArgs& args) {
  GittinsOptions o;
  RM_ASSIGN_OR_RETURN(o.quantum_s, args.Double("quantum", o.quantum_s));
  if (!(o.quantum_s >= 1 && o.quantum_s <= 1e8)) return args.Error("quantum", "must be seconds of service in [1, 1e8]");
  RM_ASSIGN_OR_RETURN(o.growth, args.Double("growth", o.growth));
  if (!(o.growth >= 1.05 && o.growth <= 100)) return args.Error("growth", "must be in [1.05, 100]");
  RM_ASSIGN_OR_RETURN(o.min_samples, args.Int("minSamples", o.min_samples));
  if (o.min_samples < 1 || o.min_samples > 1'000'000) return args.Error("minSamples", "must be in [1, 1000000]");
  RM_ASSIGN_OR_RETURN(auto by_time, args.Bool("byTime", false));
  RM_ASSIGN_OR_RETURN(o.gpu_exponent, args.Double("gpuExponent", by_time ? 0 : 1));
  if (!(o.gpu_exponent >= 0 && o.gpu_exponent <= 1)) {
    return args.Error("gpuExponent", "must be in [0, 1] (1: GPU-time, 0: time run)");
  }
  if (by_time && o.gpu_exponent != 0) return args.Error("gpuExponent", "byTime is gpuExponent 0: give one of them");
  RM_ASSIGN_OR_RETURN(auto preempt_after, args.Double("preemptAfter", 0));
  if (!(preempt_after >= 0 && preempt_after <= 1e9)) {
    return args.Error("preemptAfter", "must be seconds in [0, 1e9] (0: preempt at once)");
  }
  RM_ASSIGN_OR_RETURN(o.margin, args.Double("margin", o.margin));
  if (!(o.margin >= 1 && o.margin <= 1e6)) return args.Error("margin", "must be a multiple in [1, 1e6]");
  RM_ASSIGN_OR_RETURN(auto restart, args.Double("restartCost", 60));
  if (!(restart >= 0 && restart <= 1e7)) return args.Error("restartCost", "must be seconds in [0, 1e7]");
  RM_ASSIGN_OR_RETURN(o.count_running, args.Bool("countRunning", o.count_running));
  RM_ASSIGN_OR_RETURN(o.stop_worth, args.Double("stopWorth", o.stop_worth));
  if (!(o.stop_worth >= 0 && o.stop_worth <= 1e6)) return args.Error("stopWorth", "must be a multiple in [0, 1e6] (0: off)");
  RM_RETURN_IF_ERROR(args.Finish());
  o.preempt_after_ms = std::llround(preempt_after * 1e3);
  o.restart_cost_ms = std::llround(restart * 1e3);
  return std::make_unique<GittinsPlugin>(o);
}

GittinsPlugin::GittinsPlugin(GittinsOptions o) : o_(o), table_(Cuts(o.quantum_s, o.growth), o.min_samples) {
  for (int k = 1; k < table_.bins(); ++k) cuts_.push_back(std::llround(table_.lower(k) * 1e6));
}

void GittinsPlugin::OnSessionOpen(scheduler::Session& s) {
  const Timestamp now = s.now();
  Learn(s.state());
  if (o_.count_running) CountActive(s.state(), now);
  // The higher rank first: the key is its negation.
  s.AddJobOrderKeyFn(kName, [this, now](const Job& j) { return -Rank(j, now); });
  s.AddJobPriorityFn(kName, [this, now](const Job& j) { return PreemptRank(j, now); });
  if (o_.stop_worth > 0) {
    s.AddPreemptableFn(kName, [this, now](const scheduler::TaskRef& p, const std::vector<scheduler::TaskRef>& cands) {
      std::vector<scheduler::TaskRef> out;
      out.reserve(cands.size());
      const Job* held_back = nullptr;  // the job whose first candidate was held back
      for (const scheduler::TaskRef& t : cands) {
        if (t.job->priority() < p.job->priority() || WorthStopping(*t.job, now)) {
          out.push_back(t);
          continue;
        }
        // Not worth a stop: an elastic job may still be shrunk (a
        // re-formation, no work lost), never stopped whole (every member but
        // its first: no whole-job unit).
        if (!t.job->elastic() || t.job->GangSpare() <= 0) continue;
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

void GittinsPlugin::Learn(const scheduler::State& state) {
  for (seen_ = std::max<uint64_t>(seen_, state.ended_begin()); seen_ < state.ended_end(); ++seen_) {
    const scheduler::EndedJob& e = state.ended_job(seen_);
    if (!e.Teaches()) continue;
    table_.Add(static_cast<double>(Service(e.attained_milli_ms, e.min_gpu_milli)) / 1e6);
  }
}

void GittinsPlugin::CountActive(const scheduler::State& state, Timestamp now) {
  std::vector<int64_t> at(table_.bins(), 0), inside(table_.bins(), 0);
  for (scheduler::JobId id : state.active_jobs()) {
    const int64_t a = Attained(state.job(id), now);
    if (a <= 0) continue;
    const int bin = static_cast<int>(std::upper_bound(cuts_.begin(), cuts_.end(), a) - cuts_.begin());
    ++at[bin];
    if (bin == 0 || a > cuts_[bin - 1]) ++inside[bin];
  }
  table_.SetRunning(std::move(at), std::move(inside));
}

int64_t GittinsPlugin::Attained(const Job& job, Timestamp now) const {
  return Service(job.AttainedMilliMs(now), job.min_request().gpu_milli());
}

int64_t GittinsPlugin::Service(int64_t a, int64_t g) const {
  if (o_.gpu_exponent == 1) return a;
  if (g <= 0) return a;
  if (o_.gpu_exponent == 0) return a / g * 1000;  // ms run x 1000
  const double gpus = static_cast<double>(g) / 1000;
  return std::llround(static_cast<double>(a) / std::pow(gpus, 1 - o_.gpu_exponent));
}

int64_t GittinsPlugin::Rate(const Job& job) const {
  int64_t rate = job.allocated().gpu_milli();
  if (rate <= 0 || o_.gpu_exponent == 1) return rate;
  const int64_t g = job.min_request().gpu_milli();
  if (g <= 0) return rate;
  if (o_.gpu_exponent == 0) return (rate * 1000 + g - 1) / g;
  const double gpus = static_cast<double>(g) / 1000;
  return std::max<int64_t>(1, static_cast<int64_t>(std::ceil(static_cast<double>(rate) / std::pow(gpus, 1 - o_.gpu_exponent))));
}

int GittinsPlugin::Bin(const Job& job, Timestamp now) const {
  const int64_t a = Attained(job, now);
  return static_cast<int>(std::upper_bound(cuts_.begin(), cuts_.end(), a) - cuts_.begin());
}

double GittinsPlugin::Index(const Job& job, Timestamp now) { return table_.At(Bin(job, now)).index; }

int64_t GittinsPlugin::Rank(const Job& job, Timestamp now) {
  return static_cast<int64_t>(job.priority()) * kBand + IndexBits(Index(job, now));
}

int64_t GittinsPlugin::PreemptRank(const Job& job, Timestamp now) {
  const int64_t lowest = static_cast<int64_t>(job.priority()) * kBand;
  if (Waiting(job)) {
    if (o_.preempt_after_ms > 0) {
      // Waiting since it was last stopped, else since it was submitted.
      const Timestamp stopped = job.last_stopped();
      const bool ran = job.started() >= 0 && stopped >= job.started();
      if (now - (ran ? stopped : job.created()) < o_.preempt_after_ms) return lowest;
    }
    return Rank(job, now);
  }
  return lowest + IndexBits(o_.margin * Index(job, now));
}

int64_t GittinsPlugin::LossMs(const Job& job, Timestamp now) const {
  const int64_t every = job.spec().checkpoint_interval_ms;
  return every > 0 ? every / 2 : job.WorkAtRisk(now);
}

int64_t GittinsPlugin::LossLimitMs(const Job& job, int bin) const {
  const int64_t rate = Rate(job);
  if (rate <= 0) return scheduler::kNoChange;  // holds no GPU: stops cost no service
  // remaining >= stopWorth x (restart + loss) x rate, in micro-units.
  const double remaining = table_.At(bin).remaining * 1e6;
  const double limit = std::floor(remaining / (o_.stop_worth * static_cast<double>(rate))) -
                       static_cast<double>(o_.restart_cost_ms);
  if (limit < 0) return -1;
  return limit >= 1e15 ? scheduler::kNoChange : static_cast<int64_t>(limit);
}

bool GittinsPlugin::WorthStopping(const Job& job, Timestamp now) {
  if (o_.stop_worth <= 0) return true;
  // Before minSamples jobs have ended nothing says what a stop gains.
  if (!table_.At(0).learned) return false;
  return LossMs(job, now) <= LossLimitMs(job, Bin(job, now));
}

Timestamp GittinsPlugin::NextChange(const scheduler::State& state, Timestamp now) const {
  Timestamp next = scheduler::kNoChange;
  for (scheduler::JobId id : state.active_jobs()) {
    const Job& job = state.job(id);
    const int64_t rate = Rate(job);
    if (rate > 0) {
      const int64_t attained = Attained(job, now);
      // The next bin edge: its index, rank and worth change there.
      auto it = std::upper_bound(cuts_.begin(), cuts_.end(), attained);
      if (it != cuts_.end()) next = std::min(next, now + (*it - attained + rate - 1) / rate);
      // Without checkpoints the loss grows with the run: it passes the limit
      // at started + limit + 1.
      if (o_.stop_worth > 0 && table_.At(0).learned && job.phase() == JobPhase::kRunning &&
          job.spec().checkpoint_interval_ms <= 0 && job.started() >= 0) {
        const int64_t limit = LossLimitMs(job, static_cast<int>(it - cuts_.begin()));
        if (limit >= 0 && limit != scheduler::kNoChange) {
          const Timestamp at = job.started() + limit + 1;
          if (at > now) next = std::min(next, at);
        }
      }
      continue;
    }
    if (o_.preempt_after_ms > 0 && Waiting(job)) {
      const Timestamp stopped = job.last_stopped();
      const bool ran = job.started() >= 0 && stopped >= job.started();
      const Timestamp at = (ran ? stopped : job.created()) + o_.preempt_after_ms;
      if (at > now) next = std::min(next, at);
    }
  }
  return next;
}

}  // namespace ringmaster::plugins
