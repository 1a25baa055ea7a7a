// Tests for server/http/metrics.h: the text exposition format (HELP, TYPE, one
// line per series, histogram buckets cumulative with +Inf, _sum, _count),
// label value escaping, and updates from several threads.
#include "server/http/metrics.h"

#include <gtest/gtest.h>

#include <thread>
#include <vector>

namespace ringmaster::server {
namespace {

TEST(Metrics, CounterAndGaugeExposition) {
  MetricsRegistry r;
  r.GetCounter("rm_binds_total", "Tasks placed").Increment(3);
  Gauge& g = r.GetGauge("rm_pending", "Jobs waiting", {{"queue", "research"}});
  g.Set(7);
  g.Add(-2.5);
  r.GetGauge("rm_pending", "Jobs waiting", {{"queue", "product"}}).Set(0);
  // Families by name; series by labels (product < research).
  EXPECT_EQ(r.Expose(),
            "# HELP rm_binds_total Tasks placed\n"
            "# TYPE rm_binds_total counter\n"
            "rm_binds_total 3\n"
            "# HELP rm_pending Jobs waiting\n"
            "# TYPE rm_pending gauge\n"
            "rm_pending{queue=\"product\"} 0\n"
            "rm_pending{queue=\"research\"} 4.5\n");
}

TEST(Metrics, SameNameAndLabelsIsTheSameSeries) {
  MetricsRegistry r;
  Counter& a = r.GetCounter("c_total", "h", {{"k", "v"}});
  Counter& b = r.GetCounter("c_total", "h", {{"k", "v"}});
  EXPECT_EQ(&a, &b);
  EXPECT_NE(&a, &r.GetCounter("c_total", "h", {{"k", "w"}}));
}

TEST(Metrics, HistogramBucketsAreCumulativeWithInfSumAndCount) {
  MetricsRegistry r;
  Histogram& h = r.GetHistogram("lat_seconds", "Latency", {0.01, 0.1, 1}, {{"path", "filter"}});
  for (double v : {0.005, 0.01, 0.05, 0.5, 3.0}) h.Observe(v);
  // 0.01 falls in le="0.01" (upper bounds are inclusive); 3 only in +Inf.
  // sum = 0.005 + 0.01 + 0.05 + 0.5 + 3 = 3.565.
  EXPECT_EQ(r.Expose(),
            "# HELP lat_seconds Latency\n"
            "# TYPE lat_seconds histogram\n"
            "lat_seconds_bucket{path=\"filter\",le=\"0.01\"} 2\n"
            "lat_seconds_bucket{path=\"filter\",le=\"0.1\"} 3\n"
            "lat_seconds_bucket{path=\"filter\",le=\"1\"} 4\n"
            "lat_seconds_bucket{path=\"filter\",le=\"+Inf\"} 5\n"
            "lat_seconds_sum{path=\"filter\"} 3.565\n"
            "lat_seconds_count{path=\"filter\"} 5\n");
}

TEST(Metrics, LabelValuesAndHelpAreEscaped) {
  MetricsRegistry r;
  r.GetGauge("g", "line one\nback\\slash \"quoted\"", {{"queue", "a\"b\\c\nd"}}).Set(1);
  // Label values escape \, " and newline; HELP escapes \ and newline only.
  EXPECT_EQ(r.Expose(),
            "# HELP g line one\\nback\\\\slash \"quoted\"\n"
            "# TYPE g gauge\n"
            "g{queue=\"a\\\"b\\\\c\\nd\"} 1\n");
}

TEST(Metrics, ValuesKeepTheirPrecisionAndSpecialValues) {
  MetricsRegistry r;
  r.GetGauge("big", "h").Set(123456789012.0);
  r.GetGauge("small", "h").Set(0.000125);
  r.GetGauge("inf", "h").Set(1.0 / 0.0);
  const std::string text = r.Expose();
  EXPECT_NE(text.find("\nbig 123456789012\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\nsmall 0.000125\n"), std::string::npos) << text;
  EXPECT_NE(text.find("\ninf +Inf\n"), std::string::npos) << text;
}

TEST(Metrics, ResetGaugesKeepsTheFamilyWithoutSeries) {
  MetricsRegistry r;
  r.GetGauge("q", "per queue", {{"queue", "old"}}).Set(2);
  r.ResetGauges("q", "per queue");
  EXPECT_EQ(r.Expose(), "# HELP q per queue\n# TYPE q gauge\n");
}

TEST(Metrics, UpdatesFromManyThreadsAreAllCounted) {
  MetricsRegistry r;
  Counter& c = r.GetCounter("n_total", "h");
  Histogram& h = r.GetHistogram("h_seconds", "h", {1});
  std::vector<std::thread> threads;
  for (int t = 0; t < 4; ++t) {
    threads.emplace_back([&] {
      for (int i = 0; i < 10'000; ++i) {
        c.Increment();
        h.Observe(0.5);
      }
    });
  }
  for (std::thread& t : threads) t.join();
  EXPECT_EQ(c.value(), 40'000);
  EXPECT_EQ(h.Read().count, 40'000u);
  EXPECT_EQ(h.Read().cumulative[0], 40'000u);
}

TEST(MetricsDeathTest, MisuseIsABug) {
  MetricsRegistry r;
  r.GetCounter("x_total", "h");
  EXPECT_DEATH(r.GetGauge("x_total", "h"), "registered twice");
  EXPECT_DEATH(r.GetCounter("bad-name", "h"), "bad metric name");
  EXPECT_DEATH(r.GetCounter("y_total", "h", {{"__reserved", "v"}}), "bad label name");
  EXPECT_DEATH(r.GetCounter("x_total", "h").Increment(-1), "only goes up");
  EXPECT_DEATH(Histogram({1, 1}), "increasing");
}

}  // namespace
}  // namespace ringmaster::server
