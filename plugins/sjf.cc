#include "plugins/sjf.h"

#include "common/status_macros.h"

#include <cstdint>
#include <limits>

namespace ringmaster::plugins {

absl::StatusOr<std::unique_ptr<scheduler::Plugin>> SjfPlugin::Create(const scheduler::PluginArgs& args) {
  RM_RETURN_IF_ERROR(args.Finish());
  return std::make_unique<SjfPlugin>();
}

namespace {
// An unknown walltime (0) sorts as the longest.
int64_t Key(const scheduler::Job& j) {
  const int64_t w = j.spec().walltime_ms;
  return w > 0 ? w : std::numeric_limits<int64_t>::max();
}
}  // namespace

void SjfPlugin::OnSessionOpen(scheduler::Session& s) { s.AddJobOrderKeyFn(kName, &Key); }

int SjfPlugin::JobOrder(const scheduler::Job& l, const scheduler::Job& r) {
  const int64_t a = Key(l), b = Key(r);
  if (a == b) return 0;
  return a < b ? -1 : 1;
}

}  // namespace ringmaster::plugins
