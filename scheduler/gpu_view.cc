#include "scheduler/gpu_view.h"

#include <algorithm>

namespace ringmaster::scheduler {

NodeGpuView::NodeGpuView(const State& state, NodeId node, bool with_hosted) {
  const topology::NodeSpec& spec = state.cluster().node(node);
  const NodeState& ns = state.node(node);
  free_.reserve(ns.gpu_used.size());
  for (int16_t u : ns.gpu_used) free_.push_back(topology::kMilliPerGpu - u);
  if (with_hosted) {
    for (const auto& [job, i] : state.TasksOn(node)) {
      const GpuRequest& g = state.job(job).gpu(i);
      if (g.count > 0) hosted_.push_back(g.milli);
    }
    std::sort(hosted_.begin(), hosted_.end());
    hosted_.erase(std::unique(hosted_.begin(), hosted_.end()), hosted_.end());
  }
  view_.gpus = spec.gpus;
  view_.gpu_free_milli = free_;
  view_.cpu_capacity_milli = spec.allocatable.cpu_milli();
  view_.cpu_free_milli = spec.allocatable.cpu_milli() - ns.used.cpu_milli();
  view_.memory_free = spec.allocatable.memory() - ns.used.memory();
  view_.hosted_gpu_milli = hosted_;
}

}  // namespace ringmaster::scheduler
