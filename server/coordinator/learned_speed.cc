#include "server/coordinator/learned_speed.h"

#include <algorithm>
#include <array>
#include <cmath>
#include <map>
#include <utility>

#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_split.h"

namespace ringmaster::server {
namespace {

struct Point {
  double x1, x2, y, w;  // x1 = g - 1, x2 = n - 1, y = g / rate
};

// Weighted least squares of y = a + b x1 + c x2 over the free parameters
// (fit_b, fit_c say which of b, c are fitted; the others are 0). False when
// the system is singular.
bool Solve(const std::vector<Point>& pts, bool fit_b, bool fit_c, double* a, double* b, double* c) {
  // Columns: 1, x1 (if fitted), x2 (if fitted).
  std::vector<int> cols = {0};
  if (fit_b) cols.push_back(1);
  if (fit_c) cols.push_back(2);
  const size_t k = cols.size();
  std::array<std::array<double, 4>, 3> m{};  // augmented normal equations
  for (const Point& p : pts) {
    const std::array<double, 3> x = {1.0, p.x1, p.x2};
    for (size_t i = 0; i < k; ++i) {
      for (size_t j = 0; j < k; ++j) m[i][j] += p.w * x[cols[i]] * x[cols[j]];
      m[i][k] += p.w * x[cols[i]] * p.y;
    }
  }
  for (size_t i = 0; i < k; ++i) {  // Gauss-Jordan with partial pivoting
    size_t piv = i;
    for (size_t r = i + 1; r < k; ++r) {
      if (std::fabs(m[r][i]) > std::fabs(m[piv][i])) piv = r;
    }
    if (std::fabs(m[piv][i]) < 1e-12) return false;
    std::swap(m[i], m[piv]);
    for (size_t r = 0; r < k; ++r) {
      if (r == i) continue;
      const double f = m[r][i] / m[i][i];
      for (size_t col = i; col <= k; ++col) m[r][col] -= f * m[i][col];
    }
  }
  std::array<double, 3> v = {0, 0, 0};
  for (size_t i = 0; i < k; ++i) v[cols[i]] = m[i][k] / m[i][i];
  *a = v[0];
  *b = v[1];
  *c = v[2];
  return true;
}

}  // namespace

absl::StatusOr<std::shared_ptr<const LearnedSpeedModel>> LearnedSpeedModel::Fit(
    const std::vector<SpeedObservation>& obs) {
  std::vector<Point> pts;
  std::vector<SpeedObservation> used;
  bool many_gpus = false, many_nodes = false;
  for (const SpeedObservation& o : obs) {
    if (o.gpus < 1 || o.nodes < 1 || o.nodes > o.gpus || !(o.step_seconds > 0) || !std::isfinite(o.step_seconds) ||
        o.reports < 1 || !(o.step_samples >= 0) || !std::isfinite(o.step_samples)) {
      continue;
    }
    const double rate = (o.step_samples > 0 ? o.step_samples : o.gpus) / o.step_seconds;
    pts.push_back({static_cast<double>(o.gpus - 1), static_cast<double>(o.nodes - 1), o.gpus / rate,
                   static_cast<double>(o.reports)});
    used.push_back(o);
  }
  if (pts.empty()) return absl::InvalidArgumentError("no usable speed observation (sizes and seconds must be positive)");
  for (const Point& p : pts) {
    many_gpus |= p.x1 != pts.front().x1;
    many_nodes |= p.x2 != pts.front().x2;
  }
  auto m = std::shared_ptr<LearnedSpeedModel>(new LearnedSpeedModel());
  m->seen_ = std::move(used);
  double a = 0, b = 0, c = 0;
  bool fit_b = many_gpus, fit_c = many_nodes;
  // Drop a parameter that comes out negative (more GPUs or nodes cannot be
  // faster per sample than free) and fit again.
  for (int round = 0; round < 3; ++round) {
    if (!Solve(pts, fit_b, fit_c, &a, &b, &c)) {
      if (fit_c) fit_c = false;
      else if (fit_b) fit_b = false;
      continue;
    }
    if (fit_c && c < 0) {
      fit_c = false;
      continue;
    }
    if (fit_b && b < 0) {
      fit_b = false;
      continue;
    }
    break;
  }
  if (!fit_b) b = 0;
  if (!fit_c) c = 0;
  if (!(a > 0)) {
    // The fit put everything in the slopes: keep the smallest per-GPU time
    // seen as the intercept, slopes as fitted.
    double smallest = pts.front().y;
    for (const Point& p : pts) smallest = std::min(smallest, p.y);
    a = std::max(smallest * 1e-3, 1e-12);
  }
  m->a_ = a;
  m->b_ = std::max(0.0, b);
  m->c_ = std::max(0.0, c);
  return std::shared_ptr<const LearnedSpeedModel>(std::move(m));
}

double LearnedSpeedModel::Rate(int gpus, int nodes) const {
  if (gpus < 1 || nodes < 1) return 0;
  nodes = std::min(nodes, gpus);
  return gpus / (a_ + b_ * (gpus - 1) + c_ * (nodes - 1));
}

std::string LearnedSpeedModel::Describe() const {
  std::string sizes;
  int64_t reports = 0;
  for (const SpeedObservation& o : seen_) {
    absl::StrAppend(&sizes, sizes.empty() ? "" : ", ", o.gpus, " GPUs on ", o.nodes, o.nodes == 1 ? " node" : " nodes");
    reports += o.reports;
  }
  return absl::StrFormat("learned from %d reports (%s): rate(g, n) = g / (%.4g + %.4g (g-1) + %.4g (n-1)) samples/s",
                         reports, sizes, a_, b_, c_);
}

std::string SpeedObservationsText(const std::vector<SpeedObservation>& obs) {
  std::string out;
  for (const SpeedObservation& o : obs) {
    absl::StrAppend(&out, o.gpus, " ", o.nodes, " ", o.reports, " ", absl::StrFormat("%.17g %.17g", o.step_seconds, o.step_samples),
                    "\n");
  }
  return out;
}

absl::StatusOr<std::vector<SpeedObservation>> ParseSpeedObservations(std::string_view text) {
  std::vector<SpeedObservation> out;
  int line_no = 0;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n', absl::SkipEmpty())) {
    ++line_no;
    const std::vector<absl::string_view> f = absl::StrSplit(line, ' ', absl::SkipEmpty());
    auto bad = [&](absl::string_view what) {
      return absl::InvalidArgumentError(absl::StrCat("speed observations line ", line_no, ": ", what));
    };
    if (f.size() != 5) return bad(absl::StrCat(f.size(), " fields, want 5 (GPUS NODES REPORTS STEP_SECONDS STEP_SAMPLES)"));
    SpeedObservation o;
    if (!absl::SimpleAtoi(f[0], &o.gpus) || o.gpus < 1 || o.gpus > 1'000'000) return bad("GPUS is not in 1..1000000");
    if (!absl::SimpleAtoi(f[1], &o.nodes) || o.nodes < 1 || o.nodes > o.gpus) return bad("NODES is not in 1..GPUS");
    if (!absl::SimpleAtoi(f[2], &o.reports) || o.reports < 1) return bad("REPORTS is not a positive integer");
    if (!absl::SimpleAtod(f[3], &o.step_seconds) || !(o.step_seconds > 0) || !std::isfinite(o.step_seconds)) {
      return bad("STEP_SECONDS is not a positive number");
    }
    if (!absl::SimpleAtod(f[4], &o.step_samples) || !(o.step_samples >= 0) || !std::isfinite(o.step_samples)) {
      return bad("STEP_SAMPLES is not a number >= 0");
    }
    out.push_back(o);
  }
  return out;
}

std::vector<SpeedObservation> MergeSpeedObservations(const std::vector<SpeedObservation>& a,
                                                     const std::vector<SpeedObservation>& b) {
  struct Sum {
    double seconds = 0, samples = 0;
    int64_t reports = 0, samples_reports = 0;
  };
  std::map<std::pair<int, int>, Sum> sums;
  for (const auto* set : {&a, &b}) {
    for (const SpeedObservation& o : *set) {
      if (o.reports < 1) continue;
      Sum& s = sums[{o.gpus, o.nodes}];
      s.seconds += o.step_seconds * static_cast<double>(o.reports);
      s.reports += o.reports;
      if (o.step_samples > 0) {
        s.samples += o.step_samples * static_cast<double>(o.reports);
        s.samples_reports += o.reports;
      }
    }
  }
  std::vector<SpeedObservation> out;
  for (const auto& [size, s] : sums) {
    out.push_back({.gpus = size.first,
                   .nodes = size.second,
                   .step_seconds = s.seconds / static_cast<double>(s.reports),
                   .step_samples = s.samples_reports > 0 ? s.samples / static_cast<double>(s.samples_reports) : 0,
                   .reports = s.reports});
  }
  return out;
}

}  // namespace ringmaster::server
