// binpack: prefer nodes that are already full, so whole nodes stay free for
// large gangs. Score = weight * 100 * sum_r(w_r * (used_r + req_r) / alloc_r)
// / sum_r(w_r) over the resources the task asks for.
//   e.g. gpu weight 3, cpu weight 1; node 6/8 GPUs, 32/64 cores; task 1 GPU,
//   4 cores: (3 * 7/8 + 1 * 36/64) / 4 = .797 -> 79.
#ifndef RINGMASTER_PLUGINS_BINPACK_H_
#define RINGMASTER_PLUGINS_BINPACK_H_

#include <map>
#include <string>

#include "scheduler/session.h"

namespace ringmaster::plugins {

struct BinpackWeights {
  int64_t weight = 1;
  int64_t cpu = 1;
  int64_t memory = 1;
  int64_t gpu = 3;
  std::map<std::string, int64_t> scalars;
};

class BinpackPlugin : public scheduler::Plugin {
 public:
  static constexpr const char* kName = "binpack";
  static absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Create(const scheduler::PluginArgs& args);
  explicit BinpackPlugin(BinpackWeights w) : w_(std::move(w)) {}
  std::string_view name() const override { return kName; }
  void OnSessionOpen(scheduler::Session& s) override;

  static int64_t Score(const BinpackWeights& w, const scheduler::State& state,
                       const scheduler::TaskRef& task, scheduler::NodeId node);

 private:
  BinpackWeights w_;
};

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_BINPACK_H_
