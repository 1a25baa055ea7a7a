// network-topology: domain-level binpack. Among nodes that fit, prefer the
// ones whose leaf / spine / zone is already the most used, so that jobs
// without a topology constraint fill partly used domains and whole domains
// stay free for large gangs (the engine's placement planner enforces each
// job's own hard/soft tier limit and picks the domain; this plugin orders
// nodes inside it and across it).
//   score = weight * 100 * sum_t(w_t * used_t) / sum_t(w_t), where used_t is
//   the share of GPUs of the node's tier-t domain in use once the task's
//   whole GPUs are placed (t = 1..T; a flat cluster scores 0).
// Arguments: weight (integer >= 0, default 1), tier1, tier2, tier3 (numbers
// >= 0: per-tier weights w_t, default 1; tiers above 3 use tier3's).
#ifndef RINGMASTER_PLUGINS_NETWORK_TOPOLOGY_H_
#define RINGMASTER_PLUGINS_NETWORK_TOPOLOGY_H_

#include <array>
#include <memory>

#include "scheduler/session.h"

namespace ringmaster::plugins {

struct NetworkTopologyWeights {
  int64_t weight = 1;
  std::array<double, 3> tier = {1, 1, 1};
};

class NetworkTopologyPlugin : public scheduler::Plugin {
 public:
  static constexpr const char* kName = "network-topology";
  static absl::StatusOr<std::unique_ptr<scheduler::Plugin>> Create(const scheduler::PluginArgs& args);
  explicit NetworkTopologyPlugin(NetworkTopologyWeights w) : w_(w) {}
  std::string_view name() const override { return kName; }
  void OnSessionOpen(scheduler::Session& s) override;

  static int64_t Score(const NetworkTopologyWeights& w, const scheduler::State& state,
                       const scheduler::TaskRef& task, scheduler::NodeId node);

 private:
  NetworkTopologyWeights w_;
};

}  // namespace ringmaster::plugins

#endif  // RINGMASTER_PLUGINS_NETWORK_TOPOLOGY_H_
