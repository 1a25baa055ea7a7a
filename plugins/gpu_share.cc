#include "plugins/gpu_share.h"

#include <algorithm>
#include <cmath>
#include <initializer_list>
#include <iterator>
#include <string>
#include <string_view>

#include "common/status_macros.h"
#include "scheduler/gpu_view.h"

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

// score: exact, in steps of 2^-28 within +-2^14.
constexpr double kExactSteps = 0x1.0p28;
constexpr double kExactLimit = 0x1.0p14;
constexpr int64_t kMaxWeight = 1'000'000;

// FNV-style hash of the sorted hosted shares (GpuClustering's input).
uint64_t HashOf(std::span<const topology::Quantity> v) {
  uint64_t h = 0xcbf29ce484222325ULL;
  for (topology::Quantity q : v) h = (h ^ static_cast<uint64_t>(q)) * 0x100000001b3ULL;
  return h;
}

// The index of argument `key`'s value in `names` (the first is the
// default), or an error listing them.
absl::StatusOr<int> OneOf(const scheduler::PluginArgs& args, std::string_view key, std::string_view what,
                          std::initializer_list<std::string_view> names) {
  RM_ASSIGN_OR_RETURN(auto value, args.String(key, std::string(*names.begin())));
  int i = 0;
  for (std::string_view n : names) {
    if (value == n) return i;
    ++i;
  }
  std::string known;
  for (std::string_view n : names) known += (known.empty() ? "" : ", ") + std::string(n);
  return args.Error(key, "unknown " + std::string(what) + " '" + value + "' (" + known + ")");
}

}  // namespace

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> GpuSharePlugin::Create(const scheduler::PluginArgs& args) {
  RM_ASSIGN_OR_RETURN(auto name, args.String("policy", "fgd"));
  auto policy = topology::ParseSharePolicy(name);
  if (!policy.ok()) return args.Error("policy", std::string(policy.status().message()));
  RM_ASSIGN_OR_RETURN(auto score, OneOf(args, "score", "score", {"normalized", "exact", "authors"}));
  const auto kind = static_cast<ScoreKind>(score);
  if (kind == ScoreKind::kAuthors && *policy != topology::SharePolicy::kFgd) {
    return args.Error("score", "authors is FGD's integer score: only with policy fgd");
  }
  RM_ASSIGN_OR_RETURN(auto ties, OneOf(args, "ties", "tie rule", {"planner", "lowest", "random"}));
  const auto tie_rule = static_cast<Ties>(ties);
  if (kind != ScoreKind::kNormalized && args.Has("weight")) {
    return args.Error("weight", "scales the normalized score only (not with score exact or authors)");
  }
  RM_ASSIGN_OR_RETURN(auto weight, args.Int("weight", 100));
  if (weight < 0 || weight > kMaxWeight) return args.Error("weight", "must be in [0, 1000000]");
  RM_ASSIGN_OR_RETURN(auto seed, args.Int("seed", 42));
  RM_ASSIGN_OR_RETURN(auto workload, args.String("workload", ""));
  const bool fixed = args.Has("workload");
  for (const char* learning : {"halfLife", "relearnPct"}) {
    if (fixed && args.Has(learning)) {
      return args.Error(learning, "applies to a learned workload only (a workload is given)");
    }
  }
  RM_ASSIGN_OR_RETURN(auto half_life, args.Int("halfLife", 1));
  if (half_life < 0) return args.Error("halfLife", "must be >= 0 (0: never forget)");
  RM_ASSIGN_OR_RETURN(auto relearn, args.Int("relearnPct", 0));
  if (relearn < 0 || relearn > 100) return args.Error("relearnPct", "must be in [0, 100]");
  std::unique_ptr<topology::FragmentationModel> model;
  if (fixed) {
    auto classes = topology::ParseTaskClasses(workload);
    if (!classes.ok()) return args.Error("workload", std::string(classes.status().message()));
    auto m = topology::FragmentationModel::Create(*std::move(classes));
    if (!m.ok()) return args.Error("workload", std::string(m.status().message()));
    model = std::make_unique<topology::FragmentationModel>(*std::move(m));
  }
  RM_RETURN_IF_ERROR(args.Finish());
  auto p = std::make_unique<GpuSharePlugin>(*policy, weight, static_cast<uint64_t>(seed));
  p->score_kind_ = kind;
  p->ties_ = tie_rule;
  p->fixed_workload_ = fixed;
  p->model_ = std::move(model);
  p->relearn_pct_ = static_cast<double>(relearn);
  p->decay_ = half_life == 0 ? 1.0 : std::pow(0.5, 1.0 / static_cast<double>(half_life));
  return p;
}

void GpuSharePlugin::OnSessionOpen(scheduler::Session& s) {
  Learn(s.state(), s.jobs());
  const scheduler::State* state = &s.state();
  s.AddGpuSelectFn(kName, [this, state](const scheduler::TaskRef& t, scheduler::NodeId n,
                                        std::vector<int16_t>* gpus) {
    gpus->clear();
    if (t.job->gpu(t.index).count == 0) return true;
    const auto& c = Judge(*state, t, n).choice;
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
  if (fixed_workload_) return;
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
  verdicts_for_.reset();  // verdicts of the old model
  verdicts_.clear();
  last_ = nullptr;
}

const GpuSharePlugin::Verdict& GpuSharePlugin::Judge(const scheduler::State& state,
                                                     const scheduler::TaskRef& task, scheduler::NodeId node) {
  const scheduler::GpuRequest& g = task.job->gpu(task.index);
  const topology::Resources& r = task.job->request(task.index);
  const bool clustering = policy_ == topology::SharePolicy::kGpuClustering;
  auto judge = [&](Verdict* v) {
    const scheduler::NodeGpuView view(state, node, clustering);
    topology::TaskClass t{r.cpu_milli(), r.memory(), g.count, g.count > 0 ? g.milli : 0, {}, 1.0};
    t.gpu_models = task.job->spec().gpu_models;
    v->choice = topology::ScoreNode(policy_, view.get(), t, *model_, rng_);
    v->order = v->choice ? Order(v->choice->score) : NoFitOrder();
  };
  if (policy_ == topology::SharePolicy::kRandom) {  // a draw per call
    judge(&drawn_);
    return drawn_;
  }
  // The same task (and model) as the verdicts kept? Else start over.
  const std::pair<scheduler::JobId, uint32_t> who{task.job->id(), task.index};
  const scheduler::NodeState& ns = state.node(node);
  if (verdicts_for_ != who) {
    verdicts_for_ = who;
    ClassKey key{r.cpu_milli(), g.count, g.count > 0 ? g.milli : 0, task.job->spec().gpu_models};
    std::sort(key.gpu_models.begin(), key.gpu_models.end());
    task_class_ = class_ids_.try_emplace(std::move(key), class_ids_.size()).first->second;
    last_ = nullptr;
  } else if (last_ != nullptr && node == last_node_ && ns.usage_hash == last_usage_) {
    return *last_;
  }
  const topology::Resources& alloc = state.cluster().node(node).allocatable;
  uint64_t usage = 0xcbf29ce484222325ULL;
  auto mix = [&usage](uint64_t v) { usage = (usage ^ v) * 0x100000001b3ULL; };
  mix(static_cast<uint64_t>(ns.used.cpu_milli()));
  for (int16_t u : ns.gpu_used) mix(static_cast<uint64_t>(u));
  uint64_t extra = r.memory() <= alloc.memory() - ns.used.memory() ? 1 : 0;
  if (clustering) {
    const scheduler::NodeGpuView view(state, node, true);
    extra |= HashOf(view.get().hosted_gpu_milli) << 1;
  }
  if (verdicts_.size() >= kMaxVerdicts) verdicts_.clear();
  auto [it, fresh] = verdicts_.try_emplace(StateKey{task_class_, state.cluster().shape_hash(node), usage, extra});
  if (fresh) judge(&it->second);
  last_node_ = node;
  last_usage_ = ns.usage_hash;
  last_ = &it->second;
  return it->second;
}

int64_t GpuSharePlugin::Order(double score) const {
  switch (score_kind_) {
    case ScoreKind::kNormalized:
      return std::llround(Normalize(policy_, score) * 100.0 * static_cast<double>(weight_));
    case ScoreKind::kExact:
      return std::llround(std::clamp(score, -kExactLimit, kExactLimit) * kExactSteps);
    case ScoreKind::kAuthors:
      return static_cast<int64_t>(topology::AuthorsFgdScore(score));
  }
  return 0;
}

int64_t GpuSharePlugin::NoFitOrder() const {
  // Below every verdict's order (the planner does not ask for those nodes).
  return score_kind_ == ScoreKind::kExact ? Order(-kExactLimit) - 1 : 0;
}

int64_t GpuSharePlugin::Score(const scheduler::State& state, const scheduler::TaskRef& task,
                              scheduler::NodeId node) {
  const int64_t order = Judge(state, task, node).order;
  constexpr int64_t kTieRange = int64_t{1} << kTieBits;
  switch (ties_) {
    case Ties::kPlanner:
      return order;
    case Ties::kLowest:
      return order * kTieRange + (kTieRange - 1 - std::min<int64_t>(node.value(), kTieRange - 1));
    case Ties::kRandom:
      return order * kTieRange + static_cast<int64_t>(tie_rng_() >> (64 - kTieBits));
  }
  return order;
}

}  // namespace ringmaster::plugins
