// gpu-share: where GPU tasks (whole GPUs and GPU shares, milli < 1000) go,
// by one of the policies of the FGD paper (Weng et al., ATC'23), computed by
// topology/fragmentation.h so the simulator and the engine share them:
//   fgd (default), fgd-bestfit, bestfit, dotprod, gpuclustering, gpupacking,
//   random.
// The workload's task-size distribution that FGD measures fragmentation
// against is learned from the jobs the engine has seen (every task of every
// job submitted so far counts once).
//
// Algorithm per (task, node):
//   1. topology::ScoreNode(policy, node state, task) -> score and GPUs, or
//      does not fit (the GPU choice below then fails too).
//   2. The score, normalized to [0, 1] per policy, times 100 x weight, is
//      the node order; the GPUs are the GPU choice (only the first plugin
//      that registers a GPU choice decides it).
// Arguments: policy (string), weight (integer >= 0, default 100: FGD's score
// in milli-GPUs needs the resolution), seed (integer, Random's generator),
// relearnPct (integer 0..100, default 0): the model of the workload is
// rebuilt once the tasks seen since it was built reach this share of those
// it was built from; 0 rebuilds on every new task.
#ifndef RINGMASTER_PLUGINS_GPU_SHARE_H_
#define RINGMASTER_PLUGINS_GPU_SHARE_H_

#include <map>
#include <memory>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "scheduler/session.h"
#include "topology/fragmentation.h"

namespace ringmaster::plugins {

class GpuSharePlugin : public scheduler::Plugin {
 public:
  static constexpr const char* kName = "gpu-share";
  static absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Create(const scheduler::PluginArgs& args);
  GpuSharePlugin(topology::SharePolicy policy, int64_t weight, uint64_t seed)
      : policy_(policy), weight_(weight), rng_(seed) {}
  std::string_view name() const override { return kName; }
  void OnSessionOpen(scheduler::Session& s) override;

  topology::SharePolicy policy() const { return policy_; }
  // The policy's verdict for task on node (nullopt: does not fit).
  std::optional<topology::NodeChoice> Choose(const scheduler::State& state, const scheduler::TaskRef& task,
                                             scheduler::NodeId node);
  // The node order: the verdict's score normalized to [0, 100 * weight].
  int64_t Score(const scheduler::State& state, const scheduler::TaskRef& task, scheduler::NodeId node);
  // Task classes learned so far (for tests).
  const topology::FragmentationModel* model() const { return model_.get(); }

 private:
  void Learn(const scheduler::State& state, const std::vector<scheduler::JobId>& jobs);

  topology::SharePolicy policy_;
  int64_t weight_;
  std::mt19937_64 rng_;
  // A task class as the measure sees it (memory is not part of it).
  struct ClassKey {
    topology::Quantity cpu_milli;
    int num_gpu;
    topology::Quantity gpu_milli;
    std::vector<std::string> gpu_models;  // sorted
    auto operator<=>(const ClassKey&) const = default;
  };
  double relearn_pct_ = 0;
  double decay_ = 0.5;  // weight kept per new task
  std::set<scheduler::JobId> seen_;
  std::map<ClassKey, double> weights_;  // decayed task count per class
  int64_t modelled_ = 0;                // tasks the model was built from
  int64_t unmodelled_ = 0;              // tasks seen since
  std::unique_ptr<topology::FragmentationModel> model_;
};

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_GPU_SHARE_H_
