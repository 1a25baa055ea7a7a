// The metrics registry and its text exposition (see metrics.h).
#include "server/http/metrics.h"

#include <charconv>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "absl/strings/str_cat.h"

namespace ringmaster::server {
namespace {

[[noreturn]] void Misuse(std::string_view what, std::string_view name) {
  std::fprintf(stderr, "metrics: %.*s: %.*s\n", int(what.size()), what.data(), int(name.size()), name.data());
  std::abort();
}

bool ValidName(std::string_view name, bool allow_colon) {
  if (name.empty()) return false;
  for (size_t i = 0; i < name.size(); ++i) {
    const char c = name[i];
    const bool alpha = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || c == '_' || (allow_colon && c == ':');
    if (!alpha && !(i > 0 && c >= '0' && c <= '9')) return false;
  }
  return true;
}

// Shortest text that reads back as `v`; Prometheus' spellings of the
// infinities and NaN.
std::string FormatValue(double v) {
  if (std::isnan(v)) return "NaN";
  if (std::isinf(v)) return v > 0 ? "+Inf" : "-Inf";
  char buf[32];
  const auto r = std::to_chars(buf, buf + sizeof buf, v);
  return std::string(buf, r.ptr);
}

// HELP text escapes backslash and newline; label values also the quote.
std::string Escape(std::string_view text, bool quote) {
  std::string out;
  out.reserve(text.size());
  for (char c : text) {
    if (c == '\\') {
      out += "\\\\";
    } else if (c == '\n') {
      out += "\\n";
    } else if (quote && c == '"') {
      out += "\\\"";
    } else {
      out += c;
    }
  }
  return out;
}

void AddAtomic(std::atomic<double>& a, double by) {
  double old = a.load(std::memory_order_relaxed);
  while (!a.compare_exchange_weak(old, old + by, std::memory_order_relaxed)) {
  }
}

std::string Series(std::string_view name, const Labels& labels) {
  const std::string l = FormatLabels(labels);
  return l.empty() ? std::string(name) : absl::StrCat(std::string(name), "{", l, "}");
}

}  // namespace

void Counter::Increment(double by) {
  if (!(by >= 0)) Misuse("a counter only goes up", FormatValue(by));
  AddAtomic(value_, by);
}

void Gauge::Add(double by) { AddAtomic(value_, by); }

Histogram::Histogram(std::vector<double> bounds) : bounds_(std::move(bounds)), counts_(bounds_.size() + 1, 0) {
  for (size_t i = 0; i < bounds_.size(); ++i) {
    if (!std::isfinite(bounds_[i]) || (i > 0 && bounds_[i] <= bounds_[i - 1])) {
      Misuse("histogram bounds must be finite and increasing", FormatValue(bounds_[i]));
    }
  }
}

void Histogram::Observe(double v) {
  size_t b = 0;
  while (b < bounds_.size() && v > bounds_[b]) ++b;  // le: v <= bound
  absl::MutexLock lock(&mu_);
  ++counts_[b];
  sum_ += v;
}

Histogram::Snapshot Histogram::Read() const {
  Snapshot s;
  s.bounds = bounds_;
  absl::MutexLock lock(&mu_);
  uint64_t running = 0;
  for (uint64_t c : counts_) {
    running += c;
    s.cumulative.push_back(running);
  }
  s.count = running;
  s.sum = sum_;
  return s;
}

std::vector<double> LatencyBuckets() {
  return {0.0001, 0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10};
}

std::string FormatLabels(const Labels& labels) {
  std::string out;
  for (const auto& [key, value] : labels) {
    if (!out.empty()) out += ",";
    absl::StrAppend(&out, key, "=\"", Escape(value, /*quote=*/true), "\"");
  }
  return out;
}

MetricsRegistry::Family& MetricsRegistry::FamilyFor(std::string_view name, Type type, std::string_view help,
                                                    const std::vector<double>& bounds, const Labels& labels) {
  if (!ValidName(name, /*allow_colon=*/true)) Misuse("bad metric name", name);
  for (const auto& [key, value] : labels) {
    if (!ValidName(key, /*allow_colon=*/false) || key.starts_with("__")) Misuse("bad label name", key);
    if (type == Type::kHistogram && key == "le") Misuse("a histogram may not have the label le", name);
  }
  auto it = families_.find(name);
  if (it == families_.end()) {
    it = families_.emplace(std::string(name), Family{type, std::string(help), bounds, {}, {}, {}}).first;
  }
  Family& f = it->second;
  if (f.type != type || f.help != help || f.bounds != bounds) Misuse("registered twice, differently", name);
  return f;
}

Counter& MetricsRegistry::GetCounter(std::string_view name, std::string_view help, const Labels& labels) {
  absl::MutexLock lock(&mu_);
  auto& slot = FamilyFor(name, Type::kCounter, help, {}, labels).counters[labels];
  if (!slot) slot = std::make_unique<Counter>();
  return *slot;
}

Gauge& MetricsRegistry::GetGauge(std::string_view name, std::string_view help, const Labels& labels) {
  absl::MutexLock lock(&mu_);
  auto& slot = FamilyFor(name, Type::kGauge, help, {}, labels).gauges[labels];
  if (!slot) slot = std::make_unique<Gauge>();
  return *slot;
}

Histogram& MetricsRegistry::GetHistogram(std::string_view name, std::string_view help,
                                         const std::vector<double>& bounds, const Labels& labels) {
  absl::MutexLock lock(&mu_);
  auto& slot = FamilyFor(name, Type::kHistogram, help, bounds, labels).histograms[labels];
  if (!slot) slot = std::make_unique<Histogram>(bounds);
  return *slot;
}

void MetricsRegistry::ResetGauges(std::string_view name, std::string_view help) {
  absl::MutexLock lock(&mu_);
  FamilyFor(name, Type::kGauge, help, {}, {}).gauges.clear();
}

std::string MetricsRegistry::Expose() const {
  absl::MutexLock lock(&mu_);
  std::string out;
  for (const auto& [name, f] : families_) {
    static constexpr const char* kTypeNames[] = {"counter", "gauge", "histogram"};
    absl::StrAppend(&out, "# HELP ", name, " ", Escape(f.help, /*quote=*/false), "\n");
    absl::StrAppend(&out, "# TYPE ", name, " ", kTypeNames[int(f.type)], "\n");
    for (const auto& [labels, c] : f.counters) {
      absl::StrAppend(&out, Series(name, labels), " ", FormatValue(c->value()), "\n");
    }
    for (const auto& [labels, g] : f.gauges) {
      absl::StrAppend(&out, Series(name, labels), " ", FormatValue(g->value()), "\n");
    }
    for (const auto& [labels, h] : f.histograms) {
      const Histogram::Snapshot s = h->Read();
      for (size_t b = 0; b <= s.bounds.size(); ++b) {
        Labels with_le = labels;
        with_le.emplace_back("le", b < s.bounds.size() ? FormatValue(s.bounds[b]) : "+Inf");
        absl::StrAppend(&out, Series(absl::StrCat(name, "_bucket"), with_le), " ", s.cumulative[b], "\n");
      }
      absl::StrAppend(&out, Series(absl::StrCat(name, "_sum"), labels), " ", FormatValue(s.sum), "\n");
      absl::StrAppend(&out, Series(absl::StrCat(name, "_count"), labels), " ", s.count, "\n");
    }
  }
  return out;
}

}  // namespace ringmaster::server
