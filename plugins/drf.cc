#include "plugins/drf.h"

#include <bit>
#include <cstdint>

#include "common/status_macros.h"
#include "queue/proportion.h"

namespace ringmaster::plugins {

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> DrfPlugin::Create(const scheduler::PluginArgs& args) {
  RM_RETURN_IF_ERROR(args.Finish());
  return std::make_unique<DrfPlugin>();
}

void DrfPlugin::OnSessionOpen(scheduler::Session& s) {
  const scheduler::State* state = &s.state();
  // Compare's order as a key: the dominant share is a non-negative double (0
  // for a job that holds nothing, never -0 or NaN), whose bits read as an
  // int64 keep its order.
  s.AddJobOrderKeyFn(kName, [state](const scheduler::Job& j) {
    if (j.allocated().IsZero()) return int64_t{0};
    return std::bit_cast<int64_t>(queue::DominantShare(j.allocated(), state->total()));
  });
}

int DrfPlugin::Compare(const topology::Resources& total, const scheduler::Job& l,
                       const scheduler::Job& r) {
  // Waiting gangs hold nothing: equal shares without the division (most
  // comparisons of a cycle's job order are between two of them).
  if (l.allocated().IsZero() && r.allocated().IsZero()) return 0;
  const double ls = queue::DominantShare(l.allocated(), total);
  const double rs = queue::DominantShare(r.allocated(), total);
  if (ls == rs) return 0;
  return ls < rs ? -1 : 1;
}

}  // namespace ringmaster::plugins
