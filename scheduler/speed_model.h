// A job's speed model: how fast a training job progresses on a number of
// GPUs spread over a number of nodes. The simulator builds one from an
// application's measured tables (simulator/app_model.h); the `speedup`
// plugin (plugins/speedup.h) reads it to decide which running elastic job a
// free GPU helps most and which one a shrink hurts least. A job without one
// is sized as before (the plugin abstains).
#ifndef RINGMASTER_SCHEDULER_SPEED_MODEL_H_
#define RINGMASTER_SCHEDULER_SPEED_MODEL_H_

#include <string>

namespace ringmaster::scheduler {

class SpeedModel {
 public:
  virtual ~SpeedModel() = default;
  // Progress per second on `gpus` GPUs over `nodes` nodes (1 <= nodes <=
  // gpus), as even as they go. Any unit, the same for every size of one job
  // (only ratios of one job's rates are read). 0: it cannot run so. Must be
  // deterministic and must not depend on the clock.
  virtual double Rate(int gpus, int nodes) const = 0;
  // One line for people ("measured: cifar10 at global batch 128").
  virtual std::string Describe() const = 0;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_SPEED_MODEL_H_
