#include "plugins/proportion.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <numbers>
#include <optional>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "queue/proportion.h"

namespace ringmaster::plugins {

using scheduler::QueueInfo;
using topology::Resources;

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> ProportionPlugin::Create(const scheduler::PluginArgs& args) {
  RM_ASSIGN_OR_RETURN(const double half_life, args.Double("usageHalfLife", 0));
  if (!(half_life >= 0 && half_life <= 1e9)) {
    return args.Error("usageHalfLife", "must be seconds in [0, 1e9] (0: no decayed usage)");
  }
  const scheduler::Timestamp half_life_ms = std::llround(half_life * 1e3);
  if (half_life > 0 && half_life_ms == 0) {
    return args.Error("usageHalfLife", "must be 0 (off) or at least 1 ms");
  }
  RM_ASSIGN_OR_RETURN(const double usage_weight, args.Double("usageWeight", 0));
  if (!(usage_weight >= 0 && usage_weight <= kMaxUsageWeight)) {
    return args.Error("usageWeight", "must be in [0, 100] (0: deserved shares ignore past use)");
  }
  if (usage_weight > 0 && half_life_ms == 0) {
    return args.Error("usageWeight", "needs usageHalfLife > 0 (the decayed usage it reads)");
  }
  RM_RETURN_IF_ERROR(args.Finish());
  return std::make_unique<ProportionPlugin>(half_life_ms, usage_weight);
}

int ProportionPlugin::LevelOf(double rho, double k) {
  if (!(rho > 1) || !(k > 0)) return 0;
  const double level = std::floor(kLevelsPerDoubling * std::log2(1 + k * (rho - 1)));
  return static_cast<int>(std::clamp(level, 0.0, static_cast<double>(kMaxLevel)));
}

double ProportionPlugin::LevelRho(int level, double k) {
  return 1 + (std::exp2(static_cast<double>(level) / kLevelsPerDoubling) - 1) / k;
}

double ProportionPlugin::LevelFactor(int level) { return std::exp2(-static_cast<double>(level) / kLevelsPerDoubling); }

namespace {

// True when adding `extra` keeps q and every ancestor within capability:
// q at `used`, each ancestor at what it holds, plus (`admitted`: the
// admission check) what it has admitted. Placement (allocatable) counts
// what is held only, at every level: an admitted job's own minimum is in
// its ancestors' admitted figure, so counting that too refused its own
// tasks (a job of 8 GPUs in a queue of capability 8 under one of 12 never
// started).
bool WithinCapability(const scheduler::Session& s, scheduler::QueueId q, const Resources& used,
                      const Resources& extra, bool admitted) {
  const auto& tree = s.state().queues();
  int cur = static_cast<int>(q.value());
  while (cur >= 0) {
    const QueueInfo& info = s.queues()[cur];
    if (info.spec->capability) {
      Resources base = cur == static_cast<int>(q.value()) ? used
                       : admitted                          ? info.allocated() + info.inqueue
                                                           : info.allocated();
      if (!queue::WithinCapability(base + extra, *info.spec->capability)) return false;
    }
    cur = tree.parent(static_cast<uint32_t>(cur));
  }
  return true;
}

}  // namespace

double ProportionPlugin::Share(const QueueInfo& q) {
  return queue::DominantShare(q.allocated(), q.deserved);
}

bool ProportionPlugin::Overused(const QueueInfo& q) {
  // Overused when deserved <= allocated in every dimension the queue asks for.
  const Resources& d = q.deserved;
  const Resources& a = q.allocated();
  if (q.request.IsZero()) return false;
  if (q.request.gpu_milli() > 0 && a.gpu_milli() < d.gpu_milli()) return false;
  if (q.request.cpu_milli() > 0 && a.cpu_milli() < d.cpu_milli()) return false;
  if (q.request.memory() > 0 && a.memory() < d.memory()) return false;
  for (const auto& [name, v] : q.request.scalars()) {
    if (v > 0 && a.scalar(name) < d.scalar(name)) return false;
  }
  return true;
}

namespace {

// Every queue's deserved share, water-filled from the session's demand
// (with `weights`: those in place of the queues' own).
void SetDeserved(scheduler::Session& s, const std::vector<int64_t>* weights = nullptr) {
  const auto& tree = s.state().queues();
  std::vector<Resources> request(tree.size());
  for (size_t q = 0; q < tree.size(); ++q) request[q] = s.queues()[q].request;
  std::vector<Resources> deserved = weights ? queue::ComputeDeserved(tree, s.state().total(), request, *weights)
                                            : queue::ComputeDeserved(tree, s.state().total(), request);
  for (size_t q = 0; q < tree.size(); ++q) s.queues()[q].deserved = deserved[q];
}

// Calls f(group) for every set of siblings (the roots, each queue's children).
template <typename F>
void ForEachSiblings(const queue::QueueTree& tree, F&& f) {
  f(tree.roots());
  for (uint32_t q = 0; q < tree.size(); ++q) {
    if (!tree.is_leaf(q)) f(tree.children(q));
  }
}

// -1 when l is lower, +1 when higher, 0 when equal.
int CompareKeys(double l, double r) {
  if (l == r) return 0;
  return l < r ? -1 : 1;
}

// A refusal's text, remembered for the session: a queue at its capability
// refuses every job after the first with the same minimum (issue 22: the
// texts were most of a capacity-bound replay's cycle).
struct RefusalText {
  uint32_t queue;  // the job's queue
  Resources minimum;
  std::string text;
};

// Fit while the job's minimum, on top of what its queue uses and has
// admitted, stays within capability up the tree; otherwise Wait. The text
// names the job's queue, its minimum and every capability on the queue's
// path, not the use it was refused at nor which of them refused: it is the
// same at every use (Plugin::AdmissionReadsOnlyMinimum), so a job refused
// again keeps its reason, and enqueue may ask one job for all alike.
scheduler::Verdict Enqueueable(const scheduler::Session& s, const scheduler::Job& job,
                               std::vector<RefusalText>& texts) {
  const QueueInfo& q = s.queue(job.queue());
  if (WithinCapability(s, q.id, q.allocated() + q.inqueue, job.min_request(), /*admitted=*/true)) {
    return scheduler::Verdict::Fit();
  }
  for (const RefusalText& t : texts) {
    if (t.queue == q.id.value() && t.minimum == job.min_request()) {
      return scheduler::Verdict::Because(scheduler::Verdict::Code::kWait, t.text);
    }
  }
  // The capabilities from the queue up: one is "its capability"; more are
  // listed by queue.
  const auto& tree = s.state().queues();
  std::vector<const QueueInfo*> capped;
  for (int cur = static_cast<int>(q.id.value()); cur >= 0; cur = tree.parent(static_cast<uint32_t>(cur))) {
    if (s.queues()[cur].spec->capability) capped.push_back(&s.queues()[cur]);
  }
  std::string text = absl::StrCat("queue '", q.name(), "': minimum ", job.min_request().ToString(),
                                  " on top of what is in use or admitted exceeds ");
  if (capped.size() == 1 && capped[0] == &q) {
    absl::StrAppend(&text, "its capability ", q.spec->capability->ToString());
  } else {
    absl::StrAppend(&text, "a capability on its path:");
    for (size_t i = 0; i < capped.size(); ++i) {
      absl::StrAppend(&text, i == 0 ? " '" : ", '", capped[i]->name(), "' ", capped[i]->spec->capability->ToString());
    }
  }
  if (texts.size() >= 16) texts.erase(texts.begin());
  texts.push_back({q.id.value(), job.min_request(), text});
  return scheduler::Verdict::Because(scheduler::Verdict::Code::kWait, std::move(text));
}

// The candidates of reclaimable queues above their deserved share.
std::vector<scheduler::TaskRef> Reclaimable(const scheduler::Session& s, const std::vector<scheduler::TaskRef>& c) {
  std::vector<scheduler::TaskRef> out;
  for (const auto& t : c) {
    const QueueInfo& q = s.queue(t.job->queue());
    if (q.spec->reclaimable && !q.allocated().LessEqual(q.deserved)) out.push_back(t);
  }
  return out;
}

}  // namespace

void ProportionPlugin::OnSessionOpen(scheduler::Session& s) {
  if (half_life_ms_ > 0) Decay(s);
  if (usage_weight_ > 0) {
    const std::vector<int64_t> weights = AdjustedWeights(s);
    SetDeserved(s, &weights);
  } else {
    SetDeserved(s);
  }
  if (half_life_ms_ > 0) {
    s.AddQueueOrderFn(kName, [this](const QueueInfo& l, const QueueInfo& r) {
      return CompareKeys(OrderKey(l), OrderKey(r));
    });
  } else {
    s.AddQueueOrderFn(kName, [](const QueueInfo& l, const QueueInfo& r) { return CompareKeys(Share(l), Share(r)); });
  }
  s.AddOverusedFn(kName, &Overused);
  const scheduler::Session* sp = &s;
  s.AddAllocatableFn(kName, [sp](const QueueInfo& q, const scheduler::TaskRef& t) {
    return WithinCapability(*sp, q.id, q.allocated(), t.job->request(t.index), /*admitted=*/false);
  });
  s.AddJobEnqueueableFn(kName, [sp, texts = std::vector<RefusalText>()](const scheduler::Job& job) mutable {
    return Enqueueable(*sp, job, texts);
  });
  s.AddReclaimableFn(kName, [sp](const scheduler::TaskRef&, const std::vector<scheduler::TaskRef>& c) {
    return Reclaimable(*sp, c);
  });
}

namespace {

double Gpus(const Resources& r) { return static_cast<double>(r.gpu_milli()) / topology::kMilliPerGpu; }

}  // namespace

void ProportionPlugin::Decay(const scheduler::Session& s) {
  const scheduler::Timestamp now = s.now();
  const auto& queues = s.queues();
  if (at_ < 0 || usage_.size() != queues.size()) {
    // No history yet: every queue starts from what was restored under its
    // name, decayed since it was valued with nothing held, else from zero.
    usage_.assign(queues.size(), Usage{});
    const auto& tree = s.state().queues();
    for (size_t q = 0; q < queues.size(); ++q) usage_[q].held = Gpus(queues[q].allocated());
    for (const Restored& r : restored_) {
      const std::optional<uint32_t> q = tree.Find(r.queue);
      if (!q || *q >= usage_.size()) continue;
      const double age = static_cast<double>(std::max<scheduler::Timestamp>(now - r.at, 0));
      usage_[*q].gpus = r.gpus * std::exp2(-age / static_cast<double>(half_life_ms_));
    }
    restored_.clear();
    at_ = now;
    return;
  }
  if (now <= at_) return;
  // R(t) = held + (R(t0) - held) x 2^(-(t - t0) / H): the moving average of a
  // constant allocation `held` over [t0, t].
  const double x = std::exp2(-static_cast<double>(now - at_) / static_cast<double>(half_life_ms_));
  for (Usage& u : usage_) u.gpus = u.held + (u.gpus - u.held) * x;
  at_ = now;
}

std::vector<int64_t> ProportionPlugin::AdjustedWeights(const scheduler::Session& s) {
  const auto& tree = s.state().queues();
  std::vector<int64_t> weights(tree.size(), 1);
  ForEachSiblings(tree, [&](const std::vector<uint32_t>& group) {
    // Competing: asks for GPUs now (allocated + pending, descendants included).
    double sum_r = 0, sum_w = 0;
    int64_t all_w = 0;
    for (uint32_t q : group) {
      Usage& u = usage_[q];
      u.competing = s.queues()[q].request.gpu_milli() > 0;
      u.level = 0;
      const int64_t w = tree.spec(q).weight;
      all_w = all_w > std::numeric_limits<int64_t>::max() - w ? std::numeric_limits<int64_t>::max() : all_w + w;
      if (!u.competing) continue;
      sum_r += u.gpus;
      sum_w += static_cast<double>(w);
    }
    if (sum_r > 0) {
      for (uint32_t q : group) {
        Usage& u = usage_[q];
        if (!u.competing) continue;
        const double rho = (u.gpus / sum_r) * (sum_w / static_cast<double>(tree.spec(q).weight));
        u.level = LevelOf(rho, usage_weight_);
      }
    }
    // Integer weights for the water-filling: w x scale x 2^(-level / 8),
    // scale = 2^16 unless the siblings' weights are too big for it (then
    // less, down to 1); never below 1.
    int64_t scale = int64_t{1} << 16;
    while (scale > 1 && all_w > (int64_t{1} << 61) / scale) scale /= 2;
    for (uint32_t q : group) {
      const int64_t w = tree.spec(q).weight;
      const int level = usage_[q].level;
      const int64_t scaled = w > std::numeric_limits<int64_t>::max() / scale ? w : w * scale;
      weights[q] = level == 0 ? scaled
                              : std::max<int64_t>(1, std::llround(static_cast<double>(scaled) * LevelFactor(level)));
    }
  });
  return weights;
}

void ProportionPlugin::OnSessionClose(scheduler::Session& s) {
  if (half_life_ms_ <= 0 || usage_.size() != s.queues().size()) return;
  for (size_t q = 0; q < usage_.size(); ++q) {
    const QueueInfo& info = s.queues()[q];
    usage_[q].held = Gpus(info.allocated());
    usage_[q].share = Share(info);
    usage_[q].deserved_gpus = Gpus(info.deserved);
  }
}

double ProportionPlugin::UsageGpus(scheduler::QueueId q) const {
  return q.value() < usage_.size() ? usage_[q.value()].gpus : 0;
}

double ProportionPlugin::GpuSecondsOf(double gpus) const {
  return gpus * (static_cast<double>(half_life_ms_) / 1e3) / std::numbers::ln2;
}

double ProportionPlugin::DecayedGpuSeconds(scheduler::QueueId q) const { return GpuSecondsOf(UsageGpus(q)); }

int ProportionPlugin::ShareLevel(scheduler::QueueId q) const {
  return usage_weight_ > 0 && q.value() < usage_.size() ? usage_[q.value()].level : 0;
}

std::optional<int> ProportionPlugin::UsageWeightLevel(scheduler::QueueId q) const {
  if (usage_weight_ <= 0) return std::nullopt;
  return ShareLevel(q);
}

std::vector<scheduler::DecayedUsage> ProportionPlugin::DecayedUsages(const scheduler::State& state,
                                                                     scheduler::Timestamp now) const {
  std::vector<scheduler::DecayedUsage> out;
  if (half_life_ms_ <= 0) return out;
  const double h = static_cast<double>(half_life_ms_);
  const auto& tree = state.queues();
  if (at_ < 0) {  // as the first session will start: from what was restored, decayed with nothing held
    std::map<std::string_view, const Restored*> restored;
    for (const Restored& r : restored_) restored[r.queue] = &r;  // the last of a name, as Decay
    for (uint32_t q = 0; q < tree.size(); ++q) {
      const std::string& name = tree.spec(q).name;
      double gpus = 0;
      if (auto it = restored.find(name); it != restored.end()) {
        const double age = static_cast<double>(std::max<scheduler::Timestamp>(now - it->second->at, 0));
        gpus = it->second->gpus * std::exp2(-age / h);
      }
      out.push_back({name, GpuSecondsOf(gpus), half_life_ms_, now});
    }
    return out;
  }
  if (usage_.size() != tree.size()) return out;
  const double x = std::exp2(-static_cast<double>(std::max<scheduler::Timestamp>(now - at_, 0)) / h);
  for (uint32_t q = 0; q < usage_.size(); ++q) {
    const Usage& u = usage_[q];
    out.push_back({tree.spec(q).name, GpuSecondsOf(u.held + (u.gpus - u.held) * x), half_life_ms_,
                   std::max(now, at_)});
  }
  return out;
}

void ProportionPlugin::RestoreDecayedUsages(std::span<const scheduler::DecayedUsage> usages) {
  if (half_life_ms_ <= 0) return;
  restored_.clear();
  for (const scheduler::DecayedUsage& u : usages) {
    if (u.half_life_ms <= 0 || !std::isfinite(u.gpu_seconds) || u.gpu_seconds < 0) continue;
    // R = U ln 2 / H, with the H it was decayed with: the rate is kept.
    const double gpus = u.gpu_seconds * std::numbers::ln2 / (static_cast<double>(u.half_life_ms) / 1e3);
    restored_.push_back({u.queue, gpus, u.at});
  }
  usage_.clear();
  at_ = -1;
}

double ProportionPlugin::OrderKey(const QueueInfo& q) const {
  const double share = Share(q);
  const double d = Gpus(q.deserved);
  return d > 0 ? share + UsageGpus(q.id) / d : share;
}

scheduler::Timestamp ProportionPlugin::NextChange(const scheduler::State& state, scheduler::Timestamp now) const {
  const auto& tree = state.queues();
  if (at_ < 0 || usage_.size() != tree.size()) return now;
  // Each leaf's key as A + B x, x = 2^(-(t - at_) / H) in (0, 1]: the
  // allocation and the deserved shares stand until an event (which wakes
  // the engine at once), so only R moves.
  struct Line {
    double a, b;
  };
  std::vector<Line> lines;
  lines.reserve(usage_.size());
  for (uint32_t q = 0; q < usage_.size(); ++q) {
    if (!tree.is_leaf(q)) continue;  // the queue order compares leaves (jobs sit in leaves)
    const Usage& u = usage_[q];
    if (u.deserved_gpus > 0) {
      lines.push_back({u.share + u.held / u.deserved_gpus, (u.gpus - u.held) / u.deserved_gpus});
    } else {
      lines.push_back({u.share, 0});
    }
  }
  const double h = static_cast<double>(half_life_ms_);
  const double x0 = std::exp2(-static_cast<double>(std::max<scheduler::Timestamp>(now - at_, 0)) / h);
  auto at_x0 = [x0](const Line& l) { return l.a + l.b * x0; };
  // The instant x (in (0, x0)) is reached, a little early (rounding: the
  // session computes its figures its own way).
  auto instant = [&](double x) -> scheduler::Timestamp {
    const double t = static_cast<double>(at_) + h * -std::log2(x);
    if (!(t < 4e18)) return scheduler::kNoChange;
    const double early = t - 1 - (t - static_cast<double>(now)) * 1e-6;
    return std::max(now, static_cast<scheduler::Timestamp>(std::floor(early)));
  };
  scheduler::Timestamp next = scheduler::kNoChange;
  if (usage_weight_ > 0) next = NextLevelChange(state, now, x0, instant);
  if (next <= now) return now;
  std::sort(lines.begin(), lines.end(), [&](const Line& l, const Line& r) {
    const double lv = at_x0(l), rv = at_x0(r);
    return lv != rv ? lv < rv : l.b < r.b;
  });
  // The first change of the order is two keys adjacent now becoming equal
  // (by continuity, anything between them would have crossed one first).
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    const Line& lo = lines[i];
    const Line& hi = lines[i + 1];
    if (lo.b == hi.b) continue;  // parallel: the gap stays
    if (at_x0(lo) == at_x0(hi)) return now;  // tied now, apart from the next instant
    // lo.a + lo.b x = hi.a + hi.b x; x falls from x0 towards 0 as time goes on.
    const double x = (hi.a - lo.a) / (lo.b - hi.b);
    if (!(x > 0 && x < x0)) continue;
    next = std::min(next, instant(x));
  }
  return next;
}

template <typename Instant>
scheduler::Timestamp ProportionPlugin::NextLevelChange(const scheduler::State& state, scheduler::Timestamp now,
                                                       double x0, const Instant& instant) const {
  // While nothing changes, R_q = held_q + (R_q(at_) - held_q) x, so within a
  // group of competing siblings
  //   rho_q(x) = W_q (a_q + b_q x) / (C + D x),  W_q = sum w / w_q,
  // a ratio of two linear functions of x, monotone on (0, x0]: its level
  // changes first where rho_q reaches the level boundary just above or just
  // below it (LevelRho), and crosses each at most once.
  const auto& tree = state.queues();
  scheduler::Timestamp next = scheduler::kNoChange;
  ForEachSiblings(tree, [&](const std::vector<uint32_t>& group) {
    if (next <= now) return;
    double c = 0, d = 0, sum_w = 0;
    int competing = 0;
    for (uint32_t q : group) {
      const Usage& u = usage_[q];
      if (!u.competing) continue;
      ++competing;
      c += u.held;
      d += u.gpus - u.held;
      sum_w += static_cast<double>(tree.spec(q).weight);
    }
    if (competing < 2) return;  // one alone has rho = 1: level 0 for ever
    if (!(c + d * x0 > 0)) {
      // No past use yet (every level 0): the first GPU held makes some.
      if (c > 0) next = now;
      return;
    }
    for (uint32_t q : group) {
      const Usage& u = usage_[q];
      if (!u.competing) continue;
      const double w = sum_w / static_cast<double>(tree.spec(q).weight);
      const double a = u.held, b = u.gpus - u.held;
      if (LevelOf(w * (a + b * x0) / (c + d * x0), usage_weight_) != u.level) {
        next = now;  // already moved (time since the last session)
        return;
      }
      for (const int m : {u.level + 1, u.level}) {
        if (m < 1 || m > kMaxLevel) continue;
        // w (a + b x) = L (c + d x)  <=>  x = (L c - w a) / (w b - L d)
        const double l = LevelRho(m, usage_weight_);
        const double den = w * b - l * d;
        if (den == 0) continue;
        const double x = (l * c - w * a) / den;
        if (!(x > 0 && x < x0)) continue;
        next = std::min(next, instant(x));
      }
    }
  });
  return next;
}

}  // namespace ringmaster::plugins
