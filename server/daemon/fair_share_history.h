// The queues' decayed past use across daemon restarts (proportion's
// usageHalfLife; docs/POLICY.md, "Time-decayed fair share"): the engine's
// plugin keeps it (scheduler::DecayedUsage) and carries it across a policy
// reload; `serve --state` keeps it in the journal's queue_usage table,
// written every DaemonOptions::queue_usage_every_ms and at shutdown, and
// gives it back to the engine at start. A kill -9 loses at most what was
// used since the last write, and the time from then to the restart counts
// as no use (the plugin decays a restored queue with nothing held).
// Functions, not thread-safe: call under the engine's lock.
#ifndef RINGMASTER_SERVER_DAEMON_FAIR_SHARE_HISTORY_H_
#define RINGMASTER_SERVER_DAEMON_FAIR_SHARE_HISTORY_H_

#include "scheduler/engine.h"
#include "server/journal/journal.h"

namespace ringmaster::server {

// The journal's rows (Recovered::queue_usage) to the engine
// (Engine::RestoreDecayedUsages; before its first cycle). Each row the
// journal skipped (Recovered::skipped) is logged with its table, row and
// column. Returns the rows given.
size_t RestoreQueueUsage(const Recovered& recovered, scheduler::Engine& engine);

// The engine's decayed usage, valued now (Engine::DecayedUsages), to the
// journal (queued, not waited for); none when the policy keeps none, which
// empties the table. Returns the rows written.
size_t SaveQueueUsage(const scheduler::Engine& engine, Journal& journal);

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_DAEMON_FAIR_SHARE_HISTORY_H_
