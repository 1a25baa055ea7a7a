// What `ringmaster serve` exposes at GET /metrics (docs/OPERATIONS.md): the
// engine's cycles and decisions, per-queue pending jobs and allocated GPUs,
// the extender's request latency, and the journal's write latency. The
// daemon's loop feeds ObserveCycle from each cycle's Decisions; the HTTP
// handler is wrapped by WithMetricsRoutes, which also times every request.
#ifndef RINGMASTER_SERVER_HTTP_SERVE_METRICS_H_
#define RINGMASTER_SERVER_HTTP_SERVE_METRICS_H_

#include <string>
#include <string_view>
#include <vector>

#include "scheduler/decisions.h"
#include "scheduler/state.h"
#include "server/http/http_server.h"
#include "server/http/metrics.h"

namespace ringmaster::server {

class ServeMetrics {
 public:
  // Registers every metric in `registry` (which must outlive this), so that
  // all of them are exposed, at zero, before the first cycle.
  explicit ServeMetrics(MetricsRegistry& registry);

  // One engine cycle that took `seconds` of wall time; `state` is the
  // engine's state after it (read under the caller's lock). One thread at a
  // time (the daemon's loop).
  void ObserveCycle(double seconds, const scheduler::Decisions& decisions, const scheduler::State& state);

  // One HTTP request to `target` answered with `status` after `seconds`.
  void ObserveRequest(std::string_view target, int status, double seconds);

  // For the journal: observe each durable write's latency in seconds.
  Histogram& journal_write_seconds() { return journal_write_; }

  MetricsRegistry& registry() { return registry_; }

 private:
  MetricsRegistry& registry_;
  Histogram& cycle_seconds_;
  Counter& binds_;
  Counter& preemptions_;
  Counter& shrinks_;
  Counter& grows_;
  Histogram& journal_write_;
  std::vector<std::string> queue_names_;  // of the last cycle, to notice a reload
};

// A handler that answers GET /metrics from `metrics`' registry and passes
// every other request to `next`, timing it into `metrics`.
HttpHandler WithMetricsRoutes(ServeMetrics& metrics, HttpHandler next);

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_HTTP_SERVE_METRICS_H_
