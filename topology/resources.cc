#include "topology/resources.h"

#include <algorithm>
#include <cctype>
#include <cmath>
#include <limits>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace ringmaster::topology {
namespace {

using ScalarList = std::vector<std::pair<std::string, Quantity>>;

// Merges b into a with op applied to matching entries; entries only in b are
// op(0, b).
template <typename Op>
void MergeScalars(ScalarList& a, const ScalarList& b, Op op) {
  if (b.empty()) return;
  ScalarList out;
  out.reserve(a.size() + b.size());
  size_t i = 0, j = 0;
  while (i < a.size() || j < b.size()) {
    if (j == b.size() || (i < a.size() && a[i].first < b[j].first)) {
      out.push_back(a[i++]);
    } else if (i == a.size() || b[j].first < a[i].first) {
      out.emplace_back(b[j].first, op(0, b[j].second));
      ++j;
    } else {
      out.emplace_back(a[i].first, op(a[i].second, b[j].second));
      ++i;
      ++j;
    }
  }
  a = std::move(out);
}

}  // namespace

Quantity Resources::scalar(std::string_view name) const {
  auto it = std::lower_bound(scalars_.begin(), scalars_.end(), name,
                             [](const auto& e, std::string_view n) { return e.first < n; });
  return (it != scalars_.end() && it->first == name) ? it->second : 0;
}

Resources& Resources::set_scalar(std::string_view name, Quantity v) {
  auto it = std::lower_bound(scalars_.begin(), scalars_.end(), name,
                             [](const auto& e, std::string_view n) { return e.first < n; });
  if (it != scalars_.end() && it->first == name) {
    it->second = v;
  } else {
    scalars_.insert(it, {std::string(name), v});
  }
  return *this;
}

void Resources::AddScalars(const Resources& o, int sign) {
  if (sign > 0) {
    MergeScalars(scalars_, o.scalars_, [](Quantity x, Quantity y) { return x + y; });
  } else {
    MergeScalars(scalars_, o.scalars_, [](Quantity x, Quantity y) { return x - y; });
  }
}

Resources Resources::operator*(int64_t n) const {
  Resources r = *this;
  r.cpu_milli_ *= n;
  r.memory_ *= n;
  r.gpu_milli_ *= n;
  for (auto& [name, v] : r.scalars_) v *= n;
  return r;
}

bool Resources::ScalarsLessEqual(const Resources& o) const {
  for (const auto& [name, v] : scalars_) {
    if (v > o.scalar(name)) return false;
  }
  return true;
}

bool Resources::AnyNegative() const {
  if (cpu_milli_ < 0 || memory_ < 0 || gpu_milli_ < 0) return true;
  for (const auto& [name, v] : scalars_) {
    if (v < 0) return true;
  }
  return false;
}

Resources Resources::MinWithScalars(const Resources& a, const Resources& b) {
  Resources r(std::min(a.cpu_milli_, b.cpu_milli_), std::min(a.memory_, b.memory_),
              std::min(a.gpu_milli_, b.gpu_milli_));
  for (const auto& [name, v] : a.scalars_) r.set_scalar(name, std::min(v, b.scalar(name)));
  for (const auto& [name, v] : b.scalars_) r.set_scalar(name, std::min(v, a.scalar(name)));
  return r;
}

Resources Resources::MaxWithScalars(const Resources& a, const Resources& b) {
  Resources r(std::max(a.cpu_milli_, b.cpu_milli_), std::max(a.memory_, b.memory_),
              std::max(a.gpu_milli_, b.gpu_milli_));
  for (const auto& [name, v] : a.scalars_) r.set_scalar(name, std::max(v, b.scalar(name)));
  for (const auto& [name, v] : b.scalars_) r.set_scalar(name, std::max(v, a.scalar(name)));
  return r;
}

std::string FormatBytes(Quantity bytes) {
  static constexpr const char* kUnits[] = {"", "Ki", "Mi", "Gi", "Ti", "Pi"};
  int u = 0;
  Quantity v = bytes;
  while (u < 5 && v != 0 && v % 1024 == 0) {
    v /= 1024;
    ++u;
  }
  return absl::StrCat(v, kUnits[u]);
}

std::string FormatGpus(Quantity gpu_milli) {
  if (gpu_milli % kMilliPerGpu == 0) return absl::StrCat(gpu_milli / kMilliPerGpu);
  return absl::StrFormat("%.3g", static_cast<double>(gpu_milli) / kMilliPerGpu);
}

std::string Resources::ToString() const {
  std::vector<std::string> parts;
  // Zero and unlimited dimensions are left out.
  if (cpu_milli_ != 0 && cpu_milli_ < kUnlimited) parts.push_back(absl::StrCat("cpu=", cpu_milli_, "m"));
  if (memory_ != 0 && memory_ < kUnlimited) parts.push_back(absl::StrCat("mem=", FormatBytes(memory_)));
  if (gpu_milli_ != 0 && gpu_milli_ < kUnlimited) parts.push_back(absl::StrCat("gpu=", FormatGpus(gpu_milli_)));
  std::string out;
  for (const auto& p : parts) absl::StrAppend(&out, out.empty() ? "" : " ", p);
  for (const auto& [name, v] : scalars_) {
    if (v != 0 && v < kUnlimited) absl::StrAppend(&out, out.empty() ? "" : " ", name, "=", v);
  }
  return out.empty() ? "nothing" : out;
}

absl::StatusOr<Quantity> ParseQuantity(std::string_view text, bool milli) {
  std::string_view s = text;
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  if (s.empty()) return absl::InvalidArgumentError("empty quantity");
  size_t pos = 0;
  if (s[pos] == '+') ++pos;
  if (pos < s.size() && s[pos] == '-') {
    return absl::InvalidArgumentError(absl::StrCat("negative quantity '", std::string(text), "'"));
  }
  // Integer and fraction parts, kept exact as integers.
  __int128 whole = 0;
  __int128 frac = 0;
  __int128 frac_scale = 1;
  bool digits = false;
  while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
    whole = whole * 10 + (s[pos++] - '0');
    digits = true;
    if (whole > std::numeric_limits<int64_t>::max()) {
      return absl::InvalidArgumentError(absl::StrCat("quantity '", std::string(text), "' is too large"));
    }
  }
  if (pos < s.size() && s[pos] == '.') {
    ++pos;
    while (pos < s.size() && std::isdigit(static_cast<unsigned char>(s[pos]))) {
      if (frac_scale < 1'000'000'000'000LL) {
        frac = frac * 10 + (s[pos] - '0');
        frac_scale *= 10;
      }
      ++pos;
      digits = true;
    }
  }
  if (!digits) return absl::InvalidArgumentError(absl::StrCat("'", std::string(text), "' is not a quantity"));
  std::string_view suffix = s.substr(pos);
  // multiplier as numerator / denominator
  __int128 num = 1, den = 1;
  if (suffix.empty()) {
  } else if (suffix == "m") {
    den = 1000;
  } else if (suffix == "k") {
    num = 1000;
  } else if (suffix == "M") {
    num = 1000'000;
  } else if (suffix == "G") {
    num = 1000'000'000;
  } else if (suffix == "T") {
    num = 1000'000'000'000LL;
  } else if (suffix == "Ki") {
    num = 1LL << 10;
  } else if (suffix == "Mi") {
    num = 1LL << 20;
  } else if (suffix == "Gi") {
    num = 1LL << 30;
  } else if (suffix == "Ti") {
    num = 1LL << 40;
  } else if (suffix == "Pi") {
    num = 1LL << 50;
  } else {
    return absl::InvalidArgumentError(
        absl::StrCat("quantity '", std::string(text), "' has unknown suffix '", std::string(suffix), "'"));
  }
  if (milli) num *= 1000;
  __int128 value = (whole * frac_scale + frac) * num;
  __int128 divisor = frac_scale * den;
  __int128 result = value / divisor;
  if (result > std::numeric_limits<int64_t>::max()) {
    return absl::InvalidArgumentError(absl::StrCat("quantity '", std::string(text), "' is too large"));
  }
  return static_cast<Quantity>(result);
}

}  // namespace ringmaster::topology
