// A node of the engine's state as topology's GPU measures see it
// (topology/fragmentation.h: fragmentation, the share policies' scores).
// The one conversion from NodeState to NodeGpuState: the gpu-share plugin
// and the simulator's FGD protocol both build it here.
//   free milli per GPU  = 1000 - gpu_used (held, in GPU index order)
//   free CPU / memory   = allocatable - used
//   CPU capacity        = allocatable CPU
//   hosted (on request) = the distinct per-GPU milli of the GPU tasks the
//                         node holds, sorted (GpuClustering's input)
#ifndef RINGMASTER_SCHEDULER_GPU_VIEW_H_
#define RINGMASTER_SCHEDULER_GPU_VIEW_H_

#include <vector>

#include "scheduler/state.h"
#include "topology/fragmentation.h"

namespace ringmaster::scheduler {

class NodeGpuView {
 public:
  NodeGpuView(const State& state, NodeId node, bool with_hosted = false);
  // The spans point into this object: neither copied nor moved.
  NodeGpuView(const NodeGpuView&) = delete;
  NodeGpuView& operator=(const NodeGpuView&) = delete;

  const topology::NodeGpuState& get() const { return view_; }

 private:
  std::vector<topology::Quantity> free_;
  std::vector<topology::Quantity> hosted_;
  topology::NodeGpuState view_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_GPU_VIEW_H_
