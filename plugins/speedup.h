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
//   ResizePays(job, from, to) for a grow (to > from): the new size must win
//     back the pause of the re-formation within `payoffHorizon`:
//     S(to) (H - P) > S(from) H, and every member added must raise the speed
//     by at least `minGainPerGpu` of one member's speed per GPU on average.
//     A shrink is always allowed: it is made for a job that waits, by the
//     rules of priority, fair share and loans, not for the job's own speed.
//
//   NodeOrder, for the tasks of a job with a model (the speed models say
//     that a job spread over more nodes is slower, often much slower): a
//     node where the job already holds GPUs scores 100; else a node where
//     the job's pending GPUs all fit scores 50 + 49 (G - (free - rest)) / G
//     (the tightest such node first); else 49 free / G (the emptiest first);
//     times `placementWeight`. Registered only while some job has a model,
//     so other jobs are placed exactly as without the plugin.
//
// Arguments: reformPause (s, default 30: no progress while a resized job
// re-forms), payoffHorizon (s, default 1800: how long a new size is expected
// to hold), minGainPerGpu (default 0.1), placementWeight (integer >= 0,
// default 10: above binpack's and network-topology's scores).
#ifndef RINGMASTER_PLUGINS_SPEEDUP_H_
#define RINGMASTER_PLUGINS_SPEEDUP_H_

#include <optional>

#include "scheduler/session.h"

namespace ringmaster::plugins {

class SpeedupPlugin : public scheduler::Plugin {
 public:
  static constexpr const char* kName = "speedup";
  static absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Create(const scheduler::PluginArgs& args);
  SpeedupPlugin(double reform_pause_s, double horizon_s, double min_gain_per_gpu, int64_t placement_weight = 10)
      : reform_pause_s_(reform_pause_s),
        horizon_s_(horizon_s),
        min_gain_per_gpu_(min_gain_per_gpu),
        placement_weight_(placement_weight) {}
  std::string_view name() const override { return kName; }
  void OnSessionOpen(scheduler::Session& s) override;

  // The answers above for a cluster whose largest node has `gpus_per_node`
  // GPUs (public for tests).
  static std::optional<double> Speedup(const scheduler::Job& job, int members, int gpus_per_node);
  bool Pays(const scheduler::Job& job, int from, int to, int gpus_per_node) const;
  // The NodeOrder score above, before the weight (0 for a job without a model).
  static int64_t PlacementScore(const scheduler::State& state, const scheduler::TaskRef& task,
                                scheduler::NodeId node);

 private:
  int GpusPerNode(const scheduler::Session& s);

  double reform_pause_s_;
  double horizon_s_;
  double min_gain_per_gpu_;
  int64_t placement_weight_;
  int gpus_per_node_ = 0;  // this session's G (0: not read yet)
};

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_SPEEDUP_H_
