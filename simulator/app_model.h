// Application models: a training job's speed from measured tables, in the
// form the Pollux authors (OSDI'21) published for six real jobs
// (data/traces/pollux/apps/, docs/TRACE_FORMAT.md "Application models").
// One folder per application:
//   placements.csv   placement,local_bsz,step_time,sync_time
//                    placement: GPUs per node, digits concatenated (22 = two
//                    nodes with two GPUs each); the seconds of one optimizer
//                    step and of its gradient all-reduce at that per-GPU batch
//   scalability.csv  num_nodes,num_replicas,local_bsz,step_time,sync_time
//                    (optional) larger configurations, by counts only
//   validation-<B>.csv  progress,iteration,metric,grad_sqr,grad_var, one row
//                    per epoch of a run at global batch B (at least one file)
//   limits.csv       (optional) one row of any of max_epochs, min_local_bsz,
//                    max_local_bsz; defaults: the epochs of the shortest
//                    validation file, the smallest and largest local_bsz of
//                    placements.csv
//
// The speed of a job of global batch B on a placement (the rules of the
// authors' simulator):
//   1. Batch plan on R GPUs: local = ceil(B / R); accumulation steps
//      a = ceil(local / max_local) - 1, at least 1 on one GPU when B > B0
//      (B0 the smallest validated batch); micro-batch m = ceil(local / (a+1)),
//      at most floor(Bmax / (R (a+1))) (Bmax the largest validated batch); the
//      batch actually run is b = R m (a+1).
//   2. Step time at m: a measured placement (its digits rotated to the
//      smallest form: 31 and 13 are one placement) interpolates step and sync
//      time linearly in the local batch. Any other placement interpolates
//      over configurations (nodes capped at 16, GPUs): the per-configuration
//      means of placements.csv and the rows of scalability.csv, first
//      linearly in GPUs between the two nearest configurations of the same
//      node count, then linearly in nodes between the two nearest node counts
//      that have one (the authors interpolate over a Delaunay triangulation
//      of the same points instead; see docs/BENCHMARKS.md for how much this
//      moves the figures). Local batches outside a curve's range are clamped.
//      With accumulation, a step takes step + a (step - sync).
//   3. Statistical efficiency in epoch e (0-based): with scale = b / B0 and
//      the epoch's grad_sqr and grad_var (linear in b between the two
//      validated batches around it, clamped at the ends), a step advances
//      progress by gain = (var + sqr) / (var / scale + sqr).
//   4. Progress per second = gain / step time. Epoch e ends when progress
//      reaches the smallest `progress` of row e over the validation files;
//      the job is done after its max_epochs epochs.
#ifndef RINGMASTER_SIMULATOR_APP_MODEL_H_
#define RINGMASTER_SIMULATOR_APP_MODEL_H_

#include <map>
#include <memory>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "simulator/trace.h"

namespace ringmaster::simulator {

struct StepTime {
  double step_s = 0;
  double sync_s = 0;
};

struct BatchPlan {
  int micro_batch = 0;  // per GPU and micro-step
  int accum_steps = 0;  // extra micro-steps per optimizer step
  int batch = 0;        // global batch actually run: R x micro_batch x (accum_steps + 1)
};

class AppModel {
 public:
  // Reads the folder (see above); errors name the file, line and field.
  static absl::StatusOr<std::shared_ptr<const AppModel>> Load(const std::string& dir);

  const std::string& name() const { return name_; }
  int max_epochs() const { return static_cast<int>(epoch_end_.size()); }
  int min_local_bsz() const { return min_local_; }
  int max_local_bsz() const { return max_local_; }
  int init_batch() const { return batch_sizes_.front(); }
  int max_batch() const { return batch_sizes_.back(); }

  // Rule 1 on `replicas` GPUs (>= 1).
  BatchPlan Plan(int batch, int replicas) const;
  // Rule 2 at one micro-step of `local_bsz` per GPU; `placement` lists the
  // GPUs of each node in ring order (zeros ignored).
  StepTime Throughput(const std::vector<int>& placement, double local_bsz) const;
  // Rule 3.
  double Gain(int batch, int epoch) const;
  // Progress per second of a job of global `batch` in `epoch` (rules 1-4).
  double Goodput(const std::vector<int>& placement, int batch, int epoch) const;
  // Progress at the end of epoch e (0-based).
  double EpochEnd(int epoch) const { return epoch_end_[epoch]; }
  // The largest GPU count at most 64 whose local batch ceil(batch / R) is at
  // least min_local_bsz (at least 1).
  int MaxReplicas(int batch) const;

 private:
  struct Curve {
    std::vector<double> bsz, step, sync;  // sorted by bsz
    StepTime At(double local_bsz) const;
  };
  StepTime Interpolated(int nodes, int replicas, double local_bsz) const;
  // Config curves of `nodes` nodes, interpolated in GPUs; false when no two
  // configurations bracket `replicas` (or none matches it).
  bool AtNodes(int nodes, int replicas, double local_bsz, StepTime* out) const;

  std::string name_;
  std::map<std::string, Curve> placements_;             // normalized placement -> curve
  std::map<std::pair<int, int>, Curve> configs_;        // (nodes, GPUs) -> curve
  std::vector<int> batch_sizes_;                        // validated, increasing
  std::vector<std::vector<double>> grad_sqr_, grad_var_;  // [batch index][epoch]
  std::vector<double> epoch_end_;
  int min_local_ = 0;
  int max_local_ = 0;
};

// Every subfolder of `dir` that holds a placements.csv, by folder name.
using AppModels = std::map<std::string, std::shared_ptr<const AppModel>>;
absl::StatusOr<AppModels> LoadAppModels(const std::string& dir);

// Resolves the `application` of every job that names one (an error naming
// the trace's line when `models` lacks it, or when a job names one without
// a batch_size). Such a job runs one GPU per task and pays `reform_pause_s`
// (30 s unless its trace says) at every start and resize, as the authors'
// simulator does. With `elastic` (the policy has the elastic action) it may
// run from 1 GPU up to MaxReplicas(batch_size), desiring its traced size;
// without, it stays rigid at its traced size.
absl::Status AttachAppModels(std::vector<TraceJob>& trace, const AppModels& models, bool elastic,
                             std::string_view trace_name);
inline constexpr double kAppReformPauseS = 30;

// The engine's speed model of a job of global `batch` under `model`
// (JobSpec::speed, read by the speedup plugin): the goodput of rules 1-4 in
// the first epoch, with `gpus` spread as evenly as they go over `nodes`
// (the first nodes one GPU more). It does not follow the job's epoch: the
// engine's decisions must not depend on the clock (scheduler/speed_model.h).
// Rates are kept once computed (the sizes asked are few).
std::shared_ptr<const scheduler::SpeedModel> AppSpeedModel(std::shared_ptr<const AppModel> model, int batch);

// One job's progress under its application model.
class AppRun {
 public:
  AppRun(std::shared_ptr<const AppModel> model, int batch) : model_(std::move(model)), batch_(batch) {}
  // GPUs per node in ring order; empty: not running.
  void SetPlacement(std::vector<int> placement);
  // Progress over `seconds` of running at the current placement.
  void Advance(double seconds);
  // Seconds at the current placement until the last epoch ends (infinity
  // when not running).
  double SecondsToFinish() const;
  bool finished() const { return epoch_ >= model_->max_epochs(); }
  int epoch() const { return epoch_; }
  double progress() const { return progress_; }

 private:
  double Rate(int epoch) const;  // progress per second at the placement

  std::shared_ptr<const AppModel> model_;
  int batch_;
  std::vector<int> placement_;
  mutable std::vector<double> rate_;  // per epoch, for placement_; < 0: not computed
  int epoch_ = 0;
  double progress_ = 0;
};

}  // namespace ringmaster::simulator

#endif  // RINGMASTER_SIMULATOR_APP_MODEL_H_
