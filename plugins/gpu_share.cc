#include "plugins/gpu_share.h"

#include <algorithm>
#include <cmath>
#include <iterator>

namespace ringmaster::plugins {
namespace {

// Scores of topology::ScoreNode mapped to [0, 1] (higher is better).
double Normalize(topology::SharePolicy p, double score) {
  using topology::SharePolicy;
  double v = 0;
  switch (p) {
    case SharePolicy::kFgd:
    case SharePolicy::kFgdBestFit:
      // Growth of expected fragmentation within +-8 GPUs (8000 milli).
      v = 0.5 + score / 16000.0;
      break;
    case SharePolicy::kBestFit:
    case SharePolicy::kDotProd:
      v = 1.0 + score / 2.0;  // score in [-2, 0]
      break;
    case SharePolicy::kGpuClustering:
      v = (score + 0.002) / 1.002;  // [-0.002, 1]
      break;
    case SharePolicy::kGpuPacking:
      v = (score + 0.002) / 2.002;  // [-0.002, 2]
      break;
    case SharePolicy::kRandom:
      v = score;  // [0, 1)
      break;
  }
  return std::clamp(v, 0.0, 1.0);
}

}  // namespace

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> GpuSharePlugin::Create(const scheduler::PluginArgs& args) {
  auto name = args.String("policy", "fgd");
  if (!name.ok()) return name.status();
  auto policy = topology::ParseSharePolicy(*name);
  if (!policy.ok()) return args.Error("policy", std::string(policy.status().message()));
  auto weight = args.Int("weight", 100);
  if (!weight.ok()) return weight.status();
  if (*weight < 0) return args.Error("weight", "must be >= 0");
  auto seed = args.Int("seed", 42);
  if (!seed.ok()) return seed.status();
  auto half_life = args.Int("halfLife", 1);
  if (!half_life.ok()) return half_life.status();
  if (*half_life < 0) return args.Error("halfLife", "must be >= 0 (0: never forget)");
  auto relearn = args.Int("relearnPct", 0);
  if (!relearn.ok()) return relearn.status();
  if (*relearn < 0 || *relearn > 100) return args.Error("relearnPct", "must be in [0, 100]");
  if (auto s = args.Finish(); !s.ok()) return s;
  auto p = std::make_unique<GpuSharePlugin>(*policy, *weight, static_cast<uint64_t>(*seed));
  p->relearn_pct_ = static_cast<double>(*relearn);
  p->decay_ = *half_life == 0 ? 1.0 : std::pow(0.5, 1.0 / static_cast<double>(*half_life));
  return p;
}

void GpuSharePlugin::OnSessionOpen(scheduler::Session& s) {
  Learn(s.state(), s.jobs());
  const scheduler::State* state = &s.state();
  s.AddGpuSelectFn(kName, [this, state](const scheduler::TaskRef& t, scheduler::NodeId n,
                                        std::vector<int16_t>* gpus) {
    gpus->clear();
    if (t.job->gpu(t.index).count == 0) return true;
    auto c = Choose(*state, t, n);
    if (!c) return false;
    gpus->assign(c->gpus.begin(), c->gpus.end());
    return true;
  });
  if (weight_ > 0) {
    s.AddNodeOrderFn(kName, [this, state](const scheduler::TaskRef& t, scheduler::NodeId n) {
      return Score(*state, t, n);
    });
  }
}

void GpuSharePlugin::Learn(const scheduler::State& state, const std::vector<scheduler::JobId>& jobs) {
  for (scheduler::JobId id : jobs) {
    if (!seen_.insert(id).second) continue;
    const scheduler::Job& job = state.job(id);
    for (const scheduler::Task& t : job.tasks()) {
      const scheduler::GpuRequest& g = job.gpu(t.index);
      const topology::Resources& r = job.request(t.index);
      ClassKey key{r.cpu_milli(), g.count, g.count > 0 ? g.milli : 0, job.spec().gpu_models};
      std::sort(key.gpu_models.begin(), key.gpu_models.end());
      if (decay_ < 1) {
        for (auto it = weights_.begin(); it != weights_.end();) {
          it->second *= decay_;
          it = it->second < 1e-9 ? weights_.erase(it) : std::next(it);  // forgotten
        }
      }
      weights_[key] += 1;
      ++unmodelled_;
    }
  }
  // Rebuild when the tasks seen since the last model are at least relearn_pct
  // % of those it was built from (every new task when 0): the distribution
  // then follows the workload without rebuilding, and forgetting the model's
  // memo, on every cycle.
  if (model_ && static_cast<double>(unmodelled_) * 100.0 < relearn_pct_ * static_cast<double>(modelled_)) return;
  if (model_ && unmodelled_ == 0) return;
  std::vector<topology::TaskClass> classes;
  classes.reserve(weights_.size());
  for (const auto& [k, w] : weights_) {
    topology::TaskClass c{k.cpu_milli, 0, k.num_gpu, k.gpu_milli, {}, w};
    c.gpu_models = k.gpu_models;
    classes.push_back(std::move(c));
  }
  auto m = topology::FragmentationModel::Create(std::move(classes));
  // No jobs yet: a model of one whole-GPU task keeps the scores defined.
  if (!m.ok()) m = topology::FragmentationModel::Create({topology::TaskClass{0, 0, 1, 1000, {}, 1.0}});
  model_ = std::make_unique<topology::FragmentationModel>(*std::move(m));
  modelled_ += unmodelled_;
  unmodelled_ = 0;
}

std::optional<topology::NodeChoice> GpuSharePlugin::Choose(const scheduler::State& state,
                                                           const scheduler::TaskRef& task,
                                                           scheduler::NodeId node) {
  const topology::NodeSpec& spec = state.cluster().node(node);
  const scheduler::NodeState& ns = state.node(node);
  std::vector<topology::Quantity> free;
  free.reserve(ns.gpu_used.size());
  for (int16_t u : ns.gpu_used) free.push_back(topology::kMilliPerGpu - u);
  std::vector<topology::Quantity> hosted;
  if (policy_ == topology::SharePolicy::kGpuClustering) {
    for (const auto& [job, i] : state.TasksOn(node)) {
      const scheduler::GpuRequest& g = state.job(job).gpu(i);
      if (g.count > 0) hosted.push_back(g.milli);
    }
    std::sort(hosted.begin(), hosted.end());
    hosted.erase(std::unique(hosted.begin(), hosted.end()), hosted.end());
  }
  topology::NodeGpuState s;
  s.gpus = spec.gpus;
  s.gpu_free_milli = free;
  s.cpu_capacity_milli = spec.allocatable.cpu_milli();
  s.cpu_free_milli = spec.allocatable.cpu_milli() - ns.used.cpu_milli();
  s.memory_free = spec.allocatable.memory() - ns.used.memory();
  s.hosted_gpu_milli = hosted;
  const scheduler::GpuRequest& g = task.job->gpu(task.index);
  const topology::Resources& r = task.job->request(task.index);
  topology::TaskClass t{r.cpu_milli(), r.memory(), g.count, g.count > 0 ? g.milli : 0, {}, 1.0};
  t.gpu_models = task.job->spec().gpu_models;
  return topology::ScoreNode(policy_, s, t, *model_, rng_);
}

int64_t GpuSharePlugin::Score(const scheduler::State& state, const scheduler::TaskRef& task,
                              scheduler::NodeId node) {
  auto c = Choose(state, task, node);
  if (!c) return 0;
  return static_cast<int64_t>(std::llround(Normalize(policy_, c->score) * 100.0 * static_cast<double>(weight_)));
}

}  // namespace ringmaster::plugins
