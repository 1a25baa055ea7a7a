#include "plugins/speedup.h"

#include <algorithm>
#include <vector>

#include "common/status_macros.h"
#include "scheduler/state.h"

namespace ringmaster::plugins {
namespace {

double RateAt(const scheduler::SpeedModel& m, int gpus, int gpus_per_node) {
  const int nodes = std::max(1, (gpus + gpus_per_node - 1) / gpus_per_node);
  return m.Rate(gpus, std::min(nodes, gpus));
}

}  // namespace

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> SpeedupPlugin::Create(const scheduler::PluginArgs& args) {
  RM_ASSIGN_OR_RETURN(double pause, args.Double("reformPause", 30));
  RM_ASSIGN_OR_RETURN(double horizon, args.Double("payoffHorizon", 1800));
  RM_ASSIGN_OR_RETURN(double min_gain, args.Double("minGainPerGpu", 0.1));
  if (!(pause >= 0) || pause > 1e6) return args.Error("reformPause", "must be a number of seconds in [0, 1e6]");
  if (!(horizon > pause) || horizon > 1e9) {
    return args.Error("payoffHorizon", "must be a number of seconds above reformPause (and at most 1e9)");
  }
  if (!(min_gain >= 0) || min_gain > 1) return args.Error("minGainPerGpu", "must be a number in [0, 1]");
  RM_ASSIGN_OR_RETURN(int64_t weight, args.Int("placementWeight", 30));
  if (weight < 0 || weight > 1000) return args.Error("placementWeight", "must be an integer in [0, 1000]");
  RM_ASSIGN_OR_RETURN(double start_ratio, args.Double("startRatio", 0.75));
  if (!(start_ratio >= 0) || start_ratio > 1) return args.Error("startRatio", "must be a number in [0, 1]");
  RM_RETURN_IF_ERROR(args.Finish());
  return std::make_unique<SpeedupPlugin>(pause, horizon, min_gain, weight, start_ratio);
}

int SpeedupPlugin::GpusPerNode(const scheduler::Session& s) {
  if (gpus_per_node_ == 0) {
    const topology::Cluster& c = s.state().cluster();
    int g = 1;
    for (uint32_t n = 0; n < c.num_nodes(); ++n) {
      if (c.present(topology::NodeId(n))) g = std::max(g, static_cast<int>(c.node(topology::NodeId(n)).gpus.size()));
    }
    gpus_per_node_ = g;
  }
  return gpus_per_node_;
}

std::optional<double> SpeedupPlugin::Speedup(const scheduler::Job& job, int members, int gpus_per_node) {
  const scheduler::SpeedModel* m = job.spec().speed.get();
  const int g = job.GpusPerMember();
  if (m == nullptr || g <= 0 || members < 0) return std::nullopt;
  if (members == 0) return 0.0;
  const double one = RateAt(*m, g, gpus_per_node);
  if (!(one > 0)) return std::nullopt;
  return RateAt(*m, members * g, gpus_per_node) / one;
}

bool SpeedupPlugin::Pays(const scheduler::Job& job, int from, double a, int to, double b) const {
  if (to <= from || from <= 0) return true;
  if (!(b * (horizon_s_ - reform_pause_s_) > a * horizon_s_)) return false;
  const int gpus = (to - from) * std::max(1, job.GpusPerMember());
  return (b - a) / gpus >= min_gain_per_gpu_;
}

bool SpeedupPlugin::Pays(const scheduler::Job& job, int from, int to, int gpus_per_node) const {
  const std::optional<double> a = Speedup(job, from, gpus_per_node);
  const std::optional<double> b = Speedup(job, to, gpus_per_node);
  if (!a || !b) return true;
  return Pays(job, from, *a, to, *b);
}

std::optional<double> SpeedupPlugin::Placed(const scheduler::Job& job, int gpus_per_node) {
  const scheduler::SpeedModel* m = job.spec().speed.get();
  const int g = job.GpusPerMember();
  if (m == nullptr || g <= 0) return std::nullopt;
  int gpus = 0;
  std::vector<uint32_t> nodes;
  for (const scheduler::Task& t : job.tasks()) {
    if (!scheduler::HoldsNode(t.state) || t.state == scheduler::TaskState::kPipelined) continue;
    gpus += static_cast<int>(t.gpus.size());
    nodes.push_back(t.node.value());
  }
  if (gpus <= 0) return 0.0;
  std::sort(nodes.begin(), nodes.end());
  nodes.erase(std::unique(nodes.begin(), nodes.end()), nodes.end());
  const double one = RateAt(*m, g, gpus_per_node);
  if (!(one > 0)) return std::nullopt;
  return m->Rate(gpus, std::min<int>(static_cast<int>(nodes.size()), gpus)) / one;
}

bool SpeedupPlugin::StartPays(const scheduler::Job& job, int gpus_per_node) const {
  if (start_ratio_ <= 0) return true;
  const std::optional<double> placed = Placed(job, gpus_per_node);
  if (!placed || *placed <= 0) return true;
  const int desired = std::max(job.min_member(), job.spec().total_replicas());
  const std::optional<double> want = Speedup(job, desired, gpus_per_node);
  if (!want) return true;
  return *placed >= start_ratio_ * *want;
}

int64_t SpeedupPlugin::PlacementScore(const scheduler::State& state, const scheduler::TaskRef& task,
                                      scheduler::NodeId node) {
  const scheduler::Job& job = *task.job;
  if (job.spec().speed == nullptr) return 0;
  const int64_t cap = static_cast<int64_t>(state.cluster().node(node).gpus.size());
  if (cap == 0) return 0;
  int64_t held = 0;
  int64_t rest = 0;  // whole GPUs of the job's tasks still to place (this one among them)
  for (const scheduler::Task& t : job.tasks()) {
    if (t.state == scheduler::TaskState::kPending) {
      rest += job.gpu(t.index).whole() ? job.gpu(t.index).count : 0;
    } else if (t.node == node && scheduler::HoldsNode(t.state) && t.state != scheduler::TaskState::kPipelined) {
      held += static_cast<int64_t>(t.gpus.size());
    }
  }
  if (held > 0) return 100;
  const int64_t free = state.FreeWholeGpus(node);
  if (rest > 0 && free >= rest) return 60 + 30 * (cap - (free - rest)) / cap;
  return 50 * std::min(free, cap) / cap;
}

void SpeedupPlugin::OnSessionOpen(scheduler::Session& s) {
  gpus_per_node_ = 0;
  if (placement_weight_ > 0) {
    // The active jobs with a model, kept across sessions: only the jobs
    // added since the last session are looked at (ids are never reused), so
    // a cluster whose jobs have none pays nothing per cycle for the check.
    const scheduler::State& st = s.state();
    if (scanned_ > st.num_jobs()) {  // another state
      scanned_ = 0;
      modelled_.clear();
    }
    if (speed_changes_ != st.speed_changes()) {
      // A job's model was replaced (a learned one): the active jobs again.
      speed_changes_ = st.speed_changes();
      modelled_.clear();
      for (scheduler::JobId id : st.active_jobs()) {
        if (st.job(id).spec().speed != nullptr) modelled_.push_back(id);
      }
      scanned_ = st.num_jobs();
    }
    for (; scanned_ < st.num_jobs(); ++scanned_) {
      const scheduler::JobId id(static_cast<uint32_t>(scanned_));
      if (st.job(id).spec().speed != nullptr) modelled_.push_back(id);
    }
    std::erase_if(modelled_, [&](scheduler::JobId id) { return !st.active_jobs().contains(id); });
    const bool any = !modelled_.empty();
    if (any) {
      const scheduler::State* state = &s.state();
      const int64_t w = placement_weight_;
      s.AddNodeOrderFn(kName, [state, w](const scheduler::TaskRef& t, scheduler::NodeId n) {
        return w * PlacementScore(*state, t, n);
      });
      s.MarkNodeOrderReadsJob();
    }
  }
  s.AddJobSpeedupFn(kName, [this, &s](const scheduler::Job& job, int members) -> std::optional<double> {
    if (job.spec().speed == nullptr) return std::nullopt;
    return Speedup(job, members, GpusPerNode(s));
  });
  s.AddResizePaysFn(kName, [this](const scheduler::Job& job, int from, double a, int to, double b) {
    if (job.spec().speed == nullptr) return true;
    return Pays(job, from, a, to, b);
  });
  s.AddPlacedSpeedupFn(kName, [this, &s](const scheduler::Job& job) -> std::optional<double> {
    if (job.spec().speed == nullptr) return std::nullopt;
    return Placed(job, GpusPerNode(s));
  });
  s.AddStartPaysFn(kName, [this, &s](const scheduler::Job& job) {
    if (job.spec().speed == nullptr) return true;
    return StartPays(job, GpusPerNode(s));
  });
}

}  // namespace ringmaster::plugins
