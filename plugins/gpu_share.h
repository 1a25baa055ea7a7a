// gpu-share: where GPU tasks (whole GPUs and GPU shares, milli < 1000) go,
// by one of the policies of the FGD paper (Weng et al., ATC'23), computed by
// topology/fragmentation.h so the simulator and the engine share them:
//   fgd (default), fgd-bestfit, bestfit, dotprod, gpuclustering, gpupacking,
//   random.
// The workload's task-size distribution that FGD measures fragmentation
// against is learned from the jobs the engine has seen (every task of every
// job submitted so far counts once), or given (`workload`).
//
// Algorithm per (task, node):
//   1. topology::ScoreNode(policy, node state, task) -> score and GPUs, or
//      does not fit (the GPU choice below then fails too). The node state is
//      scheduler::NodeGpuView's. Verdicts are kept for the task at hand per
//      node state (shape, CPU and per-GPU use, whether the task's memory
//      fits; hosted shares for gpuclustering): nodes in equal states get
//      the same one, so a cycle that scores every node computes one per
//      state. Not for random, whose draws are per node.
//   2. The node order (`score`):
//        normalized (default): the score mapped to [0, 1] per policy, times
//                              100 x weight;
//        exact:                the score itself, in steps of 2^-28, clamped
//                              to +-2^14;
//        authors:              fgd only: the FGD authors' integer score
//                              topology::AuthorsFgdScore (0..100).
//      With `ties` lowest or random, that order is shifted left by 20 bits
//      and the low 20 bits break its ties: lowest, the lowest node index
//      wins (2^20 - 1 - index; indices from 2^20 on all tie); random, a
//      seeded uniform draw per node. ties planner (default) leaves ties to
//      the planner (the earlier candidate in best-fit order).
//   3. The GPUs are the GPU choice (only the first plugin that registers a
//      GPU choice decides it).
// The FGD authors' scheduler loop is this plugin with `score: authors,
// ties: lowest` and the policy's `nodesToScore: 0` (every node scored):
// see simulator/fgd_protocol.h.
//
// Arguments: policy (string); weight (integer 0..1e6, default 100: FGD's
// normalized score in milli-GPUs needs the resolution; only with score
// normalized); seed (integer: random's draws and random ties); score
// (normalized | exact | authors); ties (planner | lowest | random);
// workload (string, topology::ParseTaskClasses: the task classes FGD
// measures against, fixed; nothing is learned); for a learned workload
// only: halfLife (tasks, >= 0, default 1; 0 never forgets) and relearnPct
// (integer 0..100, default 0): the model is rebuilt once the tasks seen
// since it was built reach this share of those it was built from; 0
// rebuilds on every new task.
#ifndef RINGMASTER_PLUGINS_GPU_SHARE_H_
#define RINGMASTER_PLUGINS_GPU_SHARE_H_

#include <map>
#include <memory>
#include <optional>
#include <random>
#include <set>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/node_hash_map.h"
#include "scheduler/session.h"
#include "topology/fragmentation.h"

namespace ringmaster::plugins {

class GpuSharePlugin : public scheduler::Plugin {
 public:
  static constexpr const char* kName = "gpu-share";
  // In the order of their names in the arguments.
  enum class ScoreKind { kNormalized, kExact, kAuthors };
  enum class Ties { kPlanner, kLowest, kRandom };
  static constexpr int kTieBits = 20;

  static absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Create(const scheduler::PluginArgs& args);
  GpuSharePlugin(topology::SharePolicy policy, int64_t weight, uint64_t seed)
      : policy_(policy), weight_(weight), rng_(seed), tie_rng_(seed ^ 0x71e5ULL) {}
  std::string_view name() const override { return kName; }
  void OnSessionOpen(scheduler::Session& s) override;

  topology::SharePolicy policy() const { return policy_; }
  // The policy's verdict for task on node (choice nullopt: does not fit) and
  // its node order before ties. Valid until the next call.
  struct Verdict {
    std::optional<topology::NodeChoice> choice;
    int64_t order = 0;
  };
  const Verdict& Judge(const scheduler::State& state, const scheduler::TaskRef& task, scheduler::NodeId node);
  // The node order (see the header comment).
  int64_t Score(const scheduler::State& state, const scheduler::TaskRef& task, scheduler::NodeId node);
  // Task classes learned so far, or given (for tests).
  const topology::FragmentationModel* model() const { return model_.get(); }

 private:
  void Learn(const scheduler::State& state, const std::vector<scheduler::JobId>& jobs);
  // The order of a verdict's score, before ties (see the header comment).
  int64_t Order(double score) const;
  int64_t NoFitOrder() const;

  topology::SharePolicy policy_;
  int64_t weight_;
  std::mt19937_64 rng_;
  std::mt19937_64 tie_rng_;
  ScoreKind score_kind_ = ScoreKind::kNormalized;
  Ties ties_ = Ties::kPlanner;
  bool fixed_workload_ = false;
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

  // Verdicts for the task `verdicts_for_` under the current model, by what
  // ScoreNode looks at: the node's shape, its CPU and per-GPU use, whether
  // the task's memory fits, and (gpuclustering) the shares it hosts. Nodes
  // in equal states share a verdict, so a cycle scores each state once.
  // The task enters the key as its class (task_class_: CPU, GPU count and
  // share, allowed models; its memory only through the fit bit in `extra`),
  // so tasks of one class share verdicts across tasks and cycles until the
  // model changes: ScoreNode is a function of the node's view and the task's
  // class (random excepted, which draws per call).
  struct StateKey {
    uint64_t task, shape, usage, extra;
    bool operator==(const StateKey&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const StateKey& k) {
      return H::combine(std::move(h), k.task, k.shape, k.usage, k.extra);
    }
  };
  // Bound on the verdicts kept (then they are dropped and recomputed: the
  // cache never changes a verdict, only saves recomputing it).
  static constexpr size_t kMaxVerdicts = size_t{1} << 18;
  std::optional<std::pair<scheduler::JobId, uint32_t>> verdicts_for_;
  uint64_t task_class_ = 0;  // interned ClassKey of verdicts_for_
  std::map<ClassKey, uint64_t> class_ids_;
  // Node-based map: a Verdict stays where it is while others are added.
  absl::node_hash_map<StateKey, Verdict> verdicts_;
  // The last node judged, its engine usage hash and verdict: the GPU choice
  // and the node order ask for the same node one after the other.
  scheduler::NodeId last_node_;
  uint64_t last_usage_ = 0;
  const Verdict* last_ = nullptr;
  Verdict drawn_;  // random's verdict, drawn per call
};

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_GPU_SHARE_H_
