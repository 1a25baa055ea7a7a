#include "plugins/proportion.h"

#include <algorithm>
#include <cmath>
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
  RM_RETURN_IF_ERROR(args.Finish());
  return std::make_unique<ProportionPlugin>(half_life_ms);
}

namespace {

// True when adding `extra` keeps q and every ancestor within capability.
bool WithinCapability(const scheduler::Session& s, scheduler::QueueId q, const Resources& used,
                      const Resources& extra, std::string* which) {
  const auto& tree = s.state().queues();
  int cur = static_cast<int>(q.value());
  while (cur >= 0) {
    const QueueInfo& info = s.queues()[cur];
    if (info.spec->capability) {
      Resources base = cur == static_cast<int>(q.value()) ? used : info.allocated() + info.inqueue;
      if (!queue::WithinCapability(base + extra, *info.spec->capability)) {
        if (which) *which = info.name();
        return false;
      }
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

// Every queue's deserved share, water-filled from the session's demand.
void SetDeserved(scheduler::Session& s) {
  const auto& tree = s.state().queues();
  std::vector<Resources> request(tree.size());
  for (size_t q = 0; q < tree.size(); ++q) request[q] = s.queues()[q].request;
  std::vector<Resources> deserved = queue::ComputeDeserved(tree, s.state().total(), request);
  for (size_t q = 0; q < tree.size(); ++q) s.queues()[q].deserved = deserved[q];
}

// -1 when l is lower, +1 when higher, 0 when equal.
int CompareKeys(double l, double r) {
  if (l == r) return 0;
  return l < r ? -1 : 1;
}

// A refusal's text, remembered for the session: a queue at its capability
// refuses every job after the first with the same numbers (issue 22: the
// texts were most of a capacity-bound replay's cycle).
struct RefusalText {
  uint32_t limit;  // the limiting queue
  Resources minimum;
  Resources used;  // its in use or admitted
  std::string text;
};

// Fit while the job's minimum, on top of what its queue uses and has
// admitted, stays within capability up the tree; otherwise Wait with the
// numbers of the queue that limits it.
scheduler::Verdict Enqueueable(const scheduler::Session& s, const scheduler::Job& job,
                               std::vector<RefusalText>& texts) {
  const QueueInfo& q = s.queue(job.queue());
  std::string which;
  if (WithinCapability(s, q.id, q.allocated() + q.inqueue, job.min_request(), &which)) {
    return scheduler::Verdict::Fit();
  }
  const QueueInfo& limit = s.queues()[*s.state().queues().Find(which)];
  const Resources used = limit.allocated() + limit.inqueue;
  for (const RefusalText& t : texts) {
    if (t.limit == limit.id.value() && t.minimum == job.min_request() && t.used == used) {
      return scheduler::Verdict::Because(scheduler::Verdict::Code::kWait, t.text);
    }
  }
  std::string text = absl::StrCat("queue '", which, "': minimum ", job.min_request().ToString(), " on top of ",
                                  used.ToString(), " in use or admitted exceeds its capability ",
                                  limit.spec->capability->ToString());
  if (texts.size() >= 16) texts.erase(texts.begin());
  texts.push_back({limit.id.value(), job.min_request(), used, text});
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
  SetDeserved(s);
  if (half_life_ms_ > 0) {
    Decay(s);
    s.AddQueueOrderFn(kName, [this](const QueueInfo& l, const QueueInfo& r) {
      return CompareKeys(OrderKey(l), OrderKey(r));
    });
  } else {
    s.AddQueueOrderFn(kName, [](const QueueInfo& l, const QueueInfo& r) { return CompareKeys(Share(l), Share(r)); });
  }
  s.AddOverusedFn(kName, &Overused);
  const scheduler::Session* sp = &s;
  s.AddAllocatableFn(kName, [sp](const QueueInfo& q, const scheduler::TaskRef& t) {
    return WithinCapability(*sp, q.id, q.allocated(), t.job->request(t.index), nullptr);
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
  std::sort(lines.begin(), lines.end(), [&](const Line& l, const Line& r) {
    const double lv = at_x0(l), rv = at_x0(r);
    return lv != rv ? lv < rv : l.b < r.b;
  });
  // The first change of the order is two keys adjacent now becoming equal
  // (by continuity, anything between them would have crossed one first).
  scheduler::Timestamp next = scheduler::kNoChange;
  for (size_t i = 0; i + 1 < lines.size(); ++i) {
    const Line& lo = lines[i];
    const Line& hi = lines[i + 1];
    if (lo.b == hi.b) continue;  // parallel: the gap stays
    if (at_x0(lo) == at_x0(hi)) return now;  // tied now, apart from the next instant
    // lo.a + lo.b x = hi.a + hi.b x; x falls from x0 towards 0 as time goes on.
    const double x = (hi.a - lo.a) / (lo.b - hi.b);
    if (!(x > 0 && x < x0)) continue;
    const double t = static_cast<double>(at_) + h * -std::log2(x);
    if (!(t < 4e18)) continue;
    // A little early (rounding: the session computes the keys its own way).
    const double early = t - 1 - (t - static_cast<double>(now)) * 1e-6;
    next = std::min(next, std::max(now, static_cast<scheduler::Timestamp>(std::floor(early))));
  }
  return next;
}

}  // namespace ringmaster::plugins
