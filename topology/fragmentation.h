// GPU fragmentation, after the Fragmentation Gradient Descent idea (Weng et
// al., "Beware of Fragmentation: Scheduling GPU-Sharing Workloads with
// Fragmentation Gradient Descent", USENIX ATC'23), and the node scores of the
// GPU-sharing placement policies compared in that paper. Pure functions of a
// node's state, so the gpu-share plugin and the simulator use the same ones.
//
// Fragmentation of a node with respect to one task class m (milli-GPUs):
//   1. If m cannot run on the node at all (CPU short, GPU model not allowed,
//      no GPU with enough free milli for a sharing task, fewer than
//      num_gpu fully free GPUs for a whole-GPU task) or m asks for no GPU,
//      every free milli-GPU of the node is fragmented for m.
//   2. Otherwise the free milli of each GPU that cannot hold m's per-GPU
//      share (free < gpu_milli; free < 1000 for whole-GPU tasks) is
//      fragmented.
// The node's expected fragmentation is the popularity-weighted sum over the
// workload's task classes; the cluster's is the sum over nodes. FGD places a
// task where the expected fragmentation grows least (its "gradient").
#ifndef RINGMASTER_TOPOLOGY_FRAGMENTATION_H_
#define RINGMASTER_TOPOLOGY_FRAGMENTATION_H_

#include <cstdint>
#include <optional>
#include <random>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "topology/cluster.h"
#include "topology/resources.h"

namespace ringmaster::topology {

// A task (request) or a class of tasks of a workload.
struct TaskClass {
  Quantity cpu_milli = 0;
  Quantity memory = 0;       // bytes; checked for fit, not part of fragmentation
  int num_gpu = 0;           // GPUs, all on one node
  Quantity gpu_milli = 0;    // per GPU: < 1000 only when num_gpu == 1 (sharing)
  std::vector<std::string> gpu_models;  // allowed models; empty = any
  double popularity = 0;     // share of the workload (normalized by the model)
};

// What the measures look at on one node. Spans borrow for one call.
struct NodeGpuState {
  std::span<const Gpu> gpus;                // model and links per GPU
  std::span<const Quantity> gpu_free_milli; // per GPU, 0..1000
  Quantity cpu_free_milli = 0;
  Quantity cpu_capacity_milli = 0;
  Quantity memory_free = 0;
  // Distinct per-GPU milli of the GPU tasks running on the node, sorted
  // (for GpuClustering); may be empty for other policies.
  std::span<const Quantity> hosted_gpu_milli;
};

// True when `task` fits the node now: CPU, memory, allowed model, and GPUs
// (one GPU with >= gpu_milli free for a sharing task, num_gpu fully free
// GPUs otherwise).
bool TaskFits(const NodeGpuState& node, const TaskClass& task);

// Fragmented milli-GPUs of the node with respect to one task class.
Quantity TaskFragment(const NodeGpuState& node, const TaskClass& task);

// A workload's task-size distribution and the expected fragmentation it
// defines. Memoizes node results by (model, free CPU, sorted free GPUs), so
// it is not thread-safe; results do not depend on the cache.
class FragmentationModel {
 public:
  // Merges equal classes and normalizes popularity to sum to 1. Fails on an
  // empty workload, negative amounts or popularity, or a sharing share on a
  // multi-GPU class.
  static absl::StatusOr<FragmentationModel> Create(std::vector<TaskClass> classes);

  const std::vector<TaskClass>& classes() const { return classes_; }
  // Expected fragmented milli-GPUs of the node: sum_m popularity_m * F(m).
  double NodeFragmentation(const NodeGpuState& node) const;

 private:
  struct MemoKey {
    uint64_t hi = 0, lo = 0;
    bool operator==(const MemoKey&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const MemoKey& k) {
      return H::combine(std::move(h), k.hi, k.lo);
    }
  };
  // Packs the memo key; false when the node does not fit the packing (then
  // the result is computed without the memo).
  bool PackKey(const NodeGpuState& node, MemoKey* key) const;
  double Compute(const NodeGpuState& node) const;

  std::vector<TaskClass> classes_;
  mutable std::vector<std::string> models_;  // interned GPU models of the memo keys
  mutable absl::flat_hash_map<MemoKey, double> memo_;
};

// A workload's task classes as one line of text (a policy argument):
// classes separated by ';', each a space-separated list of key=value with
// the keys cpu (milli, default 0), gpus (default 0), milli (per GPU, default
// 1000; < 1000 only with gpus=1), models (allowed GPU models separated by
// '|'; default any) and weight (popularity, default 1), e.g.
//   "cpu=8000 gpus=1 milli=500 models=T4|P100 weight=12; cpu=4000 weight=3"
// Format writes what Parse reads back into the same classes (weights
// exactly), in the same order; memory is not part of it.
std::string FormatTaskClasses(const std::vector<TaskClass>& classes);
// InvalidArgument names the class (1-based) and the item.
absl::StatusOr<std::vector<TaskClass>> ParseTaskClasses(std::string_view text);

// Placement policies for GPU tasks, as named in the FGD paper.
enum class SharePolicy { kFgd, kBestFit, kDotProd, kGpuClustering, kGpuPacking, kRandom, kFgdBestFit };
inline constexpr int kNumSharePolicies = 7;

// Weight of BestFit's score (in [-2, 0]) added to FGD's: a tie-break only
// for kFgd; for kFgdBestFit a term worth up to 40 milli-GPUs of
// fragmentation (20 was chosen on seeds 42 and 44 of four openb lists, see
// docs/BENCHMARKS.md).
inline constexpr double kFgdTieBreakWeight = 1e-6;
inline constexpr double kFgdBestFitWeight = 20;

// "fgd", "fgd-bestfit", "bestfit", "dotprod", "gpuclustering", "gpupacking", "random"
// (case-insensitive; '-' and '_' ignored). InvalidArgument lists the names.
absl::StatusOr<SharePolicy> ParseSharePolicy(std::string_view name);
std::string_view SharePolicyName(SharePolicy policy);

// The verdict for one node: a score (higher is better) and the GPUs the task
// would get there (indices; for a sharing task exactly one).
struct NodeChoice {
  double score = 0;
  std::vector<int> gpus;
};

// Scores placing `task` on `node`; nullopt when it does not fit.
//   FGD:           minus the growth of the node's expected fragmentation; for
//                  a sharing task, on the GPU where it grows least; equal
//                  growth goes to the better BestFit node.
//   FGD-BestFit:   FGD plus kFgdBestFitWeight x BestFit (ours: FGD that also
//                  packs CPU, which binds near saturation on openb).
//   BestFit:       minus (free CPU share + free GPU share) left after placing.
//   DotProd:       minus the dot product of the task's demand and the node's
//                  free resources, both as shares of the node's capacity.
//   GpuClustering: prefers nodes already running tasks of the same per-GPU
//                  share (+1), then BestFit (scaled to break ties).
//   GpuPacking:    prefers a partly used GPU (+2), then a node with some GPU
//                  in use (+1), then an idle node; BestFit breaks ties.
//   Random:        a uniform draw from `rng` (injected, so runs repeat).
// Non-FGD policies give a sharing task the fullest GPU that still fits and
// whole-GPU tasks SelectWholeGpus's choice. `model` is used by FGD only;
// `rng` by Random only.
std::optional<NodeChoice> ScoreNode(SharePolicy policy, const NodeGpuState& node,
                                    const TaskClass& task, const FragmentationModel& model,
                                    std::mt19937_64& rng);

// The FGD authors' integer node score for FGD's verdict (the drop of the
// node's expected fragmentation, in milli-GPUs: ScoreNode's FGD score):
// int64(sigmoid(drop / 1000) x 100), in [0, 100], so close drops tie.
double AuthorsFgdScore(double fragment_drop_milli);

}  // namespace ringmaster::topology

#endif  // RINGMASTER_TOPOLOGY_FRAGMENTATION_H_
