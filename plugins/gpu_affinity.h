// gpu-affinity: the intra-node GPU choice. A task gets GPUs on one NVLink
// island if any island has room, else behind one PCIe switch, else on one
// socket, never splitting an island larger than the task needlessly
// (topology::SelectWholeGpus); a GPU-sharing task gets the fullest GPU that
// still fits (topology::SelectSharedGpu). As a node order it prefers nodes
// where the task's GPUs sit on a faster link:
//   score = weight * {100 one island, 75 one switch, 50 one socket,
//                     25 across sockets}   (GPU-less tasks: 0)
// Only the first plugin that registers a GPU choice decides it; list
// gpu-share first when both are configured.
#ifndef RINGMASTER_PLUGINS_GPU_AFFINITY_H_
#define RINGMASTER_PLUGINS_GPU_AFFINITY_H_

#include <memory>
#include <vector>

#include "scheduler/session.h"

namespace ringmaster::plugins {

class GpuAffinityPlugin : public scheduler::Plugin {
 public:
  static constexpr const char* kName = "gpu-affinity";
  // Arguments: weight (integer >= 0, default 1).
  static absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Create(const scheduler::PluginArgs& args);
  explicit GpuAffinityPlugin(int64_t weight) : weight_(weight) {}
  std::string_view name() const override { return kName; }
  void OnSessionOpen(scheduler::Session& s) override;

  // The GPUs task gets on node now; false when they do not fit.
  static bool Select(const scheduler::State& state, const scheduler::TaskRef& task, scheduler::NodeId node,
                     std::vector<int16_t>* gpus);
  // The node-order score above (0 when the task does not fit).
  static int64_t Score(int64_t weight, const scheduler::State& state, const scheduler::TaskRef& task,
                       scheduler::NodeId node);

 private:
  int64_t weight_;
};

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_GPU_AFFINITY_H_
