// The daemon's metrics (see serve_metrics.h).
#include "server/http/serve_metrics.h"

#include <chrono>
#include <set>
#include <string>
#include <utility>
#include <vector>

namespace ringmaster::server {
namespace {

constexpr char kRequestSeconds[] = "ringmaster_http_request_duration_seconds";
constexpr char kRequestSecondsHelp[] = "Time to answer an HTTP request (extender verbs, healthz), by path";
constexpr char kRequests[] = "ringmaster_http_requests_total";
constexpr char kRequestsHelp[] = "HTTP requests answered, by path and status code";
constexpr char kPending[] = "ringmaster_queue_pending_jobs";
constexpr char kPendingHelp[] = "Jobs waiting to start (Pending or Inqueue), by queue";
constexpr char kAllocated[] = "ringmaster_queue_allocated_gpus";
constexpr char kAllocatedHelp[] = "GPUs held by the queue's jobs and its children's, by queue";

// The path label: an extender verb or healthz by the request's last path
// segment (as the extender routes them), "other" for anything else, so that
// a client cannot grow the label set.
std::string PathLabel(std::string_view target) {
  target = target.substr(0, target.find('?'));
  while (!target.empty() && target.back() == '/') target.remove_suffix(1);
  const size_t slash = target.rfind('/');
  const std::string_view verb = slash == std::string_view::npos ? target : target.substr(slash + 1);
  for (std::string_view known : {"filter", "prioritize", "preempt", "bind", "healthz", "metrics"}) {
    if (verb == known) return std::string(known);
  }
  return "other";
}

}  // namespace

ServeMetrics::ServeMetrics(MetricsRegistry& registry)
    : registry_(registry),
      cycle_seconds_(registry.GetHistogram("ringmaster_cycle_duration_seconds",
                                           "Wall time of one engine cycle (snapshot to decisions)", LatencyBuckets())),
      binds_(registry.GetCounter("ringmaster_binds_total", "Tasks the engine placed (bind decisions)")),
      preemptions_(registry.GetCounter("ringmaster_preemptions_total",
                                       "Jobs evicted whole to make room for another job (preempt, reclaim)")),
      shrinks_(registry.GetCounter("ringmaster_shrinks_total", "Elastic jobs shrunk (membership generations)")),
      grows_(registry.GetCounter("ringmaster_grows_total", "Elastic jobs grown (membership generations)")),
      journal_write_(registry.GetHistogram("ringmaster_journal_write_duration_seconds",
                                           "Time for one durable journal write (commit)", LatencyBuckets())) {
  registry.ResetGauges(kPending, kPendingHelp);
  registry.ResetGauges(kAllocated, kAllocatedHelp);
}

void ServeMetrics::ObserveCycle(double seconds, const scheduler::Decisions& d, const scheduler::State& state) {
  cycle_seconds_.Observe(seconds);
  binds_.Increment(double(d.binds.size()));
  std::set<scheduler::JobId> preempted;
  for (const scheduler::Eviction& e : d.evictions) {
    if (e.kind == scheduler::Eviction::Kind::kEvict && !e.preemptor.empty()) preempted.insert(e.job);
  }
  preemptions_.Increment(double(preempted.size()));
  for (const scheduler::MembershipChange& m : d.membership) {
    if (m.kind == scheduler::MembershipChange::Kind::kShrink) shrinks_.Increment();
    if (m.kind == scheduler::MembershipChange::Kind::kGrow) grows_.Increment();
  }
  // Waiting jobs are what a cycle looks at anyway: counting them costs the
  // backlog, not every running job.
  const queue::QueueTree& queues = state.queues();
  std::vector<std::string> names;
  for (uint32_t q = 0; q < queues.size(); ++q) names.push_back(queues.spec(q).name);
  if (names != queue_names_) {  // a policy reload changed the queues: drop the old ones' series
    registry_.ResetGauges(kPending, kPendingHelp);
    registry_.ResetGauges(kAllocated, kAllocatedHelp);
    queue_names_ = std::move(names);
  }
  std::vector<int64_t> pending(queues.size(), 0);
  for (scheduler::JobId id : state.waiting_jobs()) {
    const scheduler::Job& job = state.job(id);
    if (job.phase() == scheduler::JobPhase::kPending || job.phase() == scheduler::JobPhase::kInqueue) {
      ++pending[job.queue().value()];
    }
  }
  for (uint32_t q = 0; q < queues.size(); ++q) {
    const Labels labels{{"queue", queues.spec(q).name}};
    registry_.GetGauge(kPending, kPendingHelp, labels).Set(double(pending[q]));
    const topology::Quantity milli = state.queue_usage(scheduler::QueueId(q)).allocated.gpu_milli();
    registry_.GetGauge(kAllocated, kAllocatedHelp, labels).Set(double(milli) / topology::kMilliPerGpu);
  }
}

void ServeMetrics::ObserveRequest(std::string_view target, int status, double seconds) {
  const std::string path = PathLabel(target);
  registry_.GetHistogram(kRequestSeconds, kRequestSecondsHelp, LatencyBuckets(), {{"path", path}}).Observe(seconds);
  registry_.GetCounter(kRequests, kRequestsHelp, {{"path", path}, {"code", std::to_string(status)}}).Increment();
}

HttpHandler WithMetricsRoutes(ServeMetrics& metrics, HttpHandler next) {
  return [&metrics, next = std::move(next)](HttpRequest& request) -> HttpResponse {
    if (PathLabel(request.target) == "metrics") {
      if (request.method != "GET" && request.method != "HEAD") {
        return {405, "application/json", R"({"Error":"metrics: use GET"})"};
      }
      return {200, kMetricsContentType, metrics.registry().Expose()};
    }
    const auto start = std::chrono::steady_clock::now();
    HttpResponse response = next(request);
    const std::chrono::duration<double> took = std::chrono::steady_clock::now() - start;
    metrics.ObserveRequest(request.target, response.status, took.count());
    return response;
  };
}

}  // namespace ringmaster::server
