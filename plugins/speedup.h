// speedup: throughput-aware sizing of elastic jobs, from each job's speed
// model (JobSpec::speed, scheduler/speed_model.h). Jobs without a model are
// left as they are without the plugin (it abstains).
//
// What it answers (plugin.h):
//   JobSpeedup(job, n) = Rate(n g, N(n g)) / Rate(g, N(g)), the job's speed
//     at n members relative to one member, where g is the job's GPUs per
//     member and N(x) = ceil(x / G) the nodes of a compact placement (G: the
//     most GPUs any node of the cluster has). The elastic action hands free
//     GPUs out one member at a time to the running job whose speed-up grows
//     most per GPU; preempt and reclaim shrink first the member whose job
//     loses the least (docs/PREEMPTION.md, "Throughput-aware sizing").
//   PlacedSpeedup(job) = Rate(gpus held, nodes used) / Rate(g, N(g)).
//   ResizePays(job, from, S_from, to, S_to) for a grow (to > from): the new
//     size must win back the pause of the re-formation within
//     `payoffHorizon`: S_to (H - P) > S_from H, and every member added must
//     raise the speed by at least `minGainPerGpu` of one member's speed per
//     GPU on average. The elastic action asks it twice: with the compact
//     speed-ups to choose the size, then with the placed ones once the new
//     members are placed (a grow that lands on other nodes may be slower).
//     A shrink is always allowed: it is made for a job that waits, by the
//     rules of priority, fair share and loans, not for the job's own speed.
//
//   StartPays(job): a waiting elastic job with a model, tentatively placed,
//     starts only where its speed there, Rate(gpus held, nodes used), is at
//     least `startRatio` of its speed at its desired size on the fewest
//     nodes; else it waits, and preempt and the loans (which seek a model
//     job's whole desired size first, on one node where it fits) make room.
//     (Started small, an elastic job would stay small until GPUs stay idle.)
//   NodeOrder, for the tasks of a job with a model (the speed models say
//     that a job spread over more nodes is slower, often much slower): a
//     node where the job already holds GPUs scores 100; else a node where
//     the job's pending GPUs all fit scores 60 + 30 (G - (free - rest)) / G
//     (the tightest such node first); else 50 free / G (the emptiest first);
//     times `placementWeight` (default 30: each step of 10 points outweighs
//     binpack's and network-topology's 100 each at their default weights). Registered only while some job has a model,
//     so other jobs are placed exactly as without the plugin.
//
// Arguments: reformPause (s, default 30: no progress while a resized job
// re-forms), payoffHorizon (s, default 1800: how long a new size is expected
// to hold), minGainPerGpu (default 0.1), placementWeight (integer >= 0,
// default 30), startRatio
// (in [0, 1], default 0.75; 0: every start pays).
#ifndef RINGMASTER_PLUGINS_SPEEDUP_H_
#define RINGMASTER_PLUGINS_SPEEDUP_H_

#include <optional>
#include <vector>

#include "scheduler/session.h"

namespace ringmaster::plugins {

class SpeedupPlugin : public scheduler::Plugin {
 public:
  static constexpr const char* kName = "speedup";
  static absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Create(const scheduler::PluginArgs& args);
  SpeedupPlugin(double reform_pause_s, double horizon_s, double min_gain_per_gpu, int64_t placement_weight = 30,
                double start_ratio = 0.75)
      : reform_pause_s_(reform_pause_s),
        horizon_s_(horizon_s),
        min_gain_per_gpu_(min_gain_per_gpu),
        placement_weight_(placement_weight),
        start_ratio_(start_ratio) {}
  std::string_view name() const override { return kName; }
  void OnSessionOpen(scheduler::Session& s) override;

  // The answers above for a cluster whose largest node has `gpus_per_node`
  // GPUs (public for tests).
  static std::optional<double> Speedup(const scheduler::Job& job, int members, int gpus_per_node);
  // The payoff rule at given speed-ups, and at the compact ones.
  bool Pays(const scheduler::Job& job, int from, double from_speedup, int to, double to_speedup) const;
  bool Pays(const scheduler::Job& job, int from, int to, int gpus_per_node) const;
  // Speed-up at the job's current placement (gpus held, nodes used).
  static std::optional<double> Placed(const scheduler::Job& job, int gpus_per_node);
  bool StartPays(const scheduler::Job& job, int gpus_per_node) const;
  // The NodeOrder score above, before the weight (0 for a job without a model).
  static int64_t PlacementScore(const scheduler::State& state, const scheduler::TaskRef& task,
                                scheduler::NodeId node);

 private:
  int GpusPerNode(const scheduler::Session& s);

  double reform_pause_s_;
  double horizon_s_;
  double min_gain_per_gpu_;
  int64_t placement_weight_;
  double start_ratio_;
  int gpus_per_node_ = 0;  // this session's G (0: not read yet)
  // Jobs with a speed model among those seen (ids below scanned_) that were
  // still active at the last session (OnSessionOpen).
  std::vector<scheduler::JobId> modelled_;
  size_t scanned_ = 0;
  uint64_t speed_changes_ = 0;  // State::speed_changes() when last looked
};

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_SPEEDUP_H_
