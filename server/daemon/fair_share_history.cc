#include "server/daemon/fair_share_history.h"

#include <vector>

#include "common/logging.h"

namespace ringmaster::server {

size_t RestoreQueueUsage(const Recovered& recovered, scheduler::Engine& engine) {
  for (const std::string& why : recovered.skipped) {
    common::Log(common::LogLevel::warn, "journal: queue usage row skipped (that queue starts from no history)",
                {{"why", why}});
  }
  std::vector<scheduler::DecayedUsage> usages;
  usages.reserve(recovered.queue_usage.size());
  for (const JournaledQueueUsage& r : recovered.queue_usage) {
    usages.push_back({r.queue, r.gpu_seconds, r.half_life_ms, r.valued_at_ms});
  }
  if (!usages.empty()) {
    engine.RestoreDecayedUsages(usages);
    common::Log(common::LogLevel::info, "queue usage restored", {{"queues", usages.size()}});
  }
  return usages.size();
}

size_t SaveQueueUsage(const scheduler::Engine& engine, Journal& journal) {
  std::vector<JournaledQueueUsage> rows;
  for (const scheduler::DecayedUsage& u : engine.DecayedUsages()) {
    rows.push_back({u.queue, u.gpu_seconds, u.half_life_ms, u.at});
  }
  const size_t n = rows.size();
  journal.SetQueueUsage(std::move(rows));
  return n;
}

}  // namespace ringmaster::server
