// A small Prometheus metrics registry: counters, gauges and histograms with
// fixed buckets, optionally labelled, written in the text exposition format
// (version 0.0.4) that GET /metrics answers with. The daemon's parts (the
// engine loop, the extender's HTTP handler, the journal) each get the metric
// they update from one MetricsRegistry and update it from any thread.
//
// Names follow Prometheus' rules ([a-zA-Z_:][a-zA-Z0-9_:]*, labels without
// ':'); a bad name, or one name registered as two types or with two help
// texts or bucket lists, is a bug in the caller: it aborts.
#ifndef RINGMASTER_SERVER_HTTP_METRICS_H_
#define RINGMASTER_SERVER_HTTP_METRICS_H_

#include <atomic>
#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"

namespace ringmaster::server {

// Label names and values, in the order written.
using Labels = std::vector<std::pair<std::string, std::string>>;

// Only goes up (events, seconds spent).
class Counter {
 public:
  void Increment(double by = 1);  // by >= 0
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Goes up and down (jobs pending, GPUs allocated).
class Gauge {
 public:
  void Set(double v) { value_.store(v, std::memory_order_relaxed); }
  void Add(double by);
  double value() const { return value_.load(std::memory_order_relaxed); }

 private:
  std::atomic<double> value_{0};
};

// Counts observations into fixed buckets (upper bounds, increasing; +Inf is
// implicit) with their sum, as a Prometheus histogram.
class Histogram {
 public:
  explicit Histogram(std::vector<double> bounds);
  void Observe(double v);

  struct Snapshot {
    std::vector<double> bounds;
    std::vector<uint64_t> cumulative;  // per bound, then +Inf (= count)
    double sum = 0;
    uint64_t count = 0;
  };
  Snapshot Read() const;

 private:
  const std::vector<double> bounds_;
  mutable absl::Mutex mu_;
  std::vector<uint64_t> counts_ ABSL_GUARDED_BY(mu_);  // per bucket, the last one +Inf
  double sum_ ABSL_GUARDED_BY(mu_) = 0;
};

// Buckets for latencies in seconds: 100 us to 10 s.
std::vector<double> LatencyBuckets();

class MetricsRegistry {
 public:
  // The metric with this name and labels, made on first use. The reference
  // stays valid as long as the registry.
  Counter& GetCounter(std::string_view name, std::string_view help, const Labels& labels = {});
  Gauge& GetGauge(std::string_view name, std::string_view help, const Labels& labels = {});
  Histogram& GetHistogram(std::string_view name, std::string_view help, const std::vector<double>& bounds,
                          const Labels& labels = {});

  // Declares a gauge family (exposed with its HELP and TYPE lines even while
  // it has no series) and drops every series it has (e.g. of a queue that
  // went away).
  void ResetGauges(std::string_view name, std::string_view help);

  // Every metric in the text exposition format: families by name, series by
  // labels, label values escaped (\\, \", \n).
  std::string Expose() const;

 private:
  enum class Type { kCounter, kGauge, kHistogram };
  struct Family {
    Type type;
    std::string help;
    std::vector<double> bounds;  // histograms only
    std::map<Labels, std::unique_ptr<Counter>> counters;
    std::map<Labels, std::unique_ptr<Gauge>> gauges;
    std::map<Labels, std::unique_ptr<Histogram>> histograms;
  };
  Family& FamilyFor(std::string_view name, Type type, std::string_view help, const std::vector<double>& bounds,
                    const Labels& labels) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  mutable absl::Mutex mu_;
  std::map<std::string, Family, std::less<>> families_ ABSL_GUARDED_BY(mu_);
};

// The text format's content type.
inline constexpr char kMetricsContentType[] = "text/plain; version=0.0.4; charset=utf-8";

// "a=\"x\",b=\"y\"" with values escaped; "" for no labels.
std::string FormatLabels(const Labels& labels);

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_HTTP_METRICS_H_
