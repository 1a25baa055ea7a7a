// Tests for server/http/serve_metrics.h: what a cycle's decisions and the engine's
// state put in the daemon's metrics, and the /metrics route with request
// timing around the extender's handler.
#include "server/http/serve_metrics.h"

#include <gtest/gtest.h>

#include "tests/support/builders.h"

namespace ringmaster::server {
namespace {

using testing::ClusterBuilder;
using testing::EngineHarness;
using testing::JobBuilder;
using testing::PolicyFromYaml;

bool Has(const std::string& text, const std::string& line) {
  return text.find("\n" + line + "\n") != std::string::npos;
}

TEST(ServeMetrics, EveryMetricIsExposedBeforeTheFirstCycle) {
  MetricsRegistry registry;
  ServeMetrics metrics(registry);
  const std::string text = registry.Expose();
  for (const char* line : {"# TYPE ringmaster_cycle_duration_seconds histogram", "ringmaster_preemptions_total 0",
                           "ringmaster_shrinks_total 0", "ringmaster_grows_total 0",
                           "# TYPE ringmaster_queue_pending_jobs gauge", "# TYPE ringmaster_queue_allocated_gpus gauge",
                           "ringmaster_journal_write_duration_seconds_count 0"}) {
    EXPECT_TRUE(Has(text, line)) << line << "\n" << text;
  }
}

TEST(ServeMetrics, PendingJobsAndAllocatedGpusPerQueue) {
  // 2 nodes x 8 GPUs = 16, two queues of weight 1: each deserves 8 while
  // the other asks for more. research's gang a (2 x 4 GPUs) runs; b (8 more
  // GPUs) would take research to 16 > 8 and waits; product's big (2 x 8)
  // does not fit in the 8 GPUs left and waits.
  EngineHarness h(ClusterBuilder().Racks(1).NodesPerRack(2).Gpus(8).Build(),
                  PolicyFromYaml("queues:\n- {name: research, weight: 1}\n- {name: product, weight: 1}\n"));
  h.Submit(JobBuilder("a").Queue("research").Gang(2).GpusPerTask(4).Build());
  h.Submit(JobBuilder("b").Queue("research").Gang(1).GpusPerTask(8).Build());
  h.Submit(JobBuilder("big").Queue("product").Gang(2).GpusPerTask(8).Build());
  const scheduler::Decisions d = h.Cycle();
  ASSERT_EQ(d.binds.size(), 2u);
  ASSERT_TRUE(h.Running("a"));
  MetricsRegistry registry;
  ServeMetrics metrics(registry);
  metrics.ObserveCycle(0.002, d, h.state());
  const std::string text = registry.Expose();
  EXPECT_TRUE(Has(text, "ringmaster_queue_allocated_gpus{queue=\"research\"} 8")) << text;
  EXPECT_TRUE(Has(text, "ringmaster_queue_allocated_gpus{queue=\"product\"} 0")) << text;
  EXPECT_TRUE(Has(text, "ringmaster_queue_pending_jobs{queue=\"research\"} 1")) << text;
  EXPECT_TRUE(Has(text, "ringmaster_queue_pending_jobs{queue=\"product\"} 1")) << text;
  EXPECT_TRUE(Has(text, "ringmaster_binds_total 2")) << text;
  // 0.002 s lands in the 0.0025 bucket, not in 0.001.
  EXPECT_TRUE(Has(text, "ringmaster_cycle_duration_seconds_bucket{le=\"0.001\"} 0")) << text;
  EXPECT_TRUE(Has(text, "ringmaster_cycle_duration_seconds_bucket{le=\"0.0025\"} 1")) << text;
}

TEST(ServeMetrics, PreemptionsShrinksAndGrowsFromTheDecisions) {
  EngineHarness h(ClusterBuilder().Racks(1).NodesPerRack(1).Gpus(8).Build());
  scheduler::Decisions d;
  // Two tasks of one job evicted for `urgent` count one preemption; a
  // cancelled task and an eviction without a preemptor count none.
  scheduler::Eviction e;
  e.job = scheduler::JobId(1);
  e.preemptor = "urgent";
  d.evictions = {e, e};
  d.evictions[1].task = 1;
  scheduler::Eviction cancel;
  cancel.kind = scheduler::Eviction::Kind::kCancel;
  scheduler::Eviction broken;
  broken.job = scheduler::JobId(2);
  d.evictions.push_back(cancel);
  d.evictions.push_back(broken);
  scheduler::MembershipChange shrink, grow, start;
  shrink.kind = scheduler::MembershipChange::Kind::kShrink;
  grow.kind = scheduler::MembershipChange::Kind::kGrow;
  start.kind = scheduler::MembershipChange::Kind::kStart;
  d.membership = {shrink, shrink, grow, start};
  MetricsRegistry registry;
  ServeMetrics metrics(registry);
  metrics.ObserveCycle(0.001, d, h.state());
  metrics.ObserveCycle(0.001, d, h.state());
  const std::string text = registry.Expose();
  EXPECT_TRUE(Has(text, "ringmaster_preemptions_total 2")) << text;
  EXPECT_TRUE(Has(text, "ringmaster_shrinks_total 4")) << text;
  EXPECT_TRUE(Has(text, "ringmaster_grows_total 2")) << text;
}

TEST(ServeMetrics, MetricsRouteAndRequestTiming) {
  MetricsRegistry registry;
  ServeMetrics metrics(registry);
  int calls = 0;
  HttpHandler handler = WithMetricsRoutes(metrics, [&calls](const HttpRequest& r) -> HttpResponse {
    ++calls;
    return {r.body.empty() ? 400 : 200, "application/json", "{}"};
  });
  const auto call = [&handler](HttpRequest r) { return handler(r); };  // a handler may take the body
  EXPECT_EQ(call({"POST", "/scheduler/filter", "{...}"}).status, 200);
  EXPECT_EQ(call({"POST", "/filter", ""}).status, 400);
  EXPECT_EQ(call({"GET", "/no/such/thing", ""}).status, 400);
  EXPECT_EQ(calls, 3);
  const HttpResponse m = call({"GET", "/metrics", ""});
  EXPECT_EQ(calls, 3);  // /metrics is answered here
  EXPECT_EQ(m.status, 200);
  EXPECT_EQ(m.content_type, kMetricsContentType);
  EXPECT_TRUE(Has(m.body, "ringmaster_http_requests_total{path=\"filter\",code=\"200\"} 1")) << m.body;
  EXPECT_TRUE(Has(m.body, "ringmaster_http_requests_total{path=\"filter\",code=\"400\"} 1")) << m.body;
  EXPECT_TRUE(Has(m.body, "ringmaster_http_requests_total{path=\"other\",code=\"400\"} 1")) << m.body;
  EXPECT_TRUE(Has(m.body, "ringmaster_http_request_duration_seconds_count{path=\"filter\"} 2")) << m.body;
  EXPECT_EQ(call({"POST", "/metrics", ""}).status, 405);
}

}  // namespace
}  // namespace ringmaster::server
