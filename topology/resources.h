// Resource amounts: the integer currency every layer of ringmaster counts in.
//
// CPU is in milli-cores, memory in bytes, GPUs in milli-GPUs (1000 = one whole
// device), and any named scalar resource (e.g. "rdma/hca") in its own integer
// unit. Arithmetic is integer only: GPU fractions are never summed as doubles.
#ifndef RINGMASTER_TOPOLOGY_RESOURCES_H_
#define RINGMASTER_TOPOLOGY_RESOURCES_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/status/statusor.h"

namespace ringmaster::topology {

using Quantity = int64_t;

inline constexpr Quantity kMilliPerGpu = 1000;
// A limit that is not set (e.g. a capability with no cpu entry).
inline constexpr Quantity kUnlimited = Quantity{1} << 60;

// A vector of resource amounts. Scalars are kept sorted by name so that two
// Resources compare and combine in O(n) and print the same way every time.
class Resources {
 public:
  Resources() = default;
  Resources(Quantity cpu_milli, Quantity memory_bytes, Quantity gpu_milli)
      : cpu_milli_(cpu_milli), memory_(memory_bytes), gpu_milli_(gpu_milli) {}

  Quantity cpu_milli() const { return cpu_milli_; }
  Quantity memory() const { return memory_; }
  Quantity gpu_milli() const { return gpu_milli_; }
  Quantity scalar(std::string_view name) const;
  const std::vector<std::pair<std::string, Quantity>>& scalars() const { return scalars_; }

  Resources& set_cpu_milli(Quantity v) { cpu_milli_ = v; return *this; }
  Resources& set_memory(Quantity v) { memory_ = v; return *this; }
  Resources& set_gpu_milli(Quantity v) { gpu_milli_ = v; return *this; }
  Resources& set_scalar(std::string_view name, Quantity v);

  // The three fixed dimensions inline; the named scalars out of line, only
  // when there are any (most requests have none).
  Resources& operator+=(const Resources& o) {
    cpu_milli_ += o.cpu_milli_;
    memory_ += o.memory_;
    gpu_milli_ += o.gpu_milli_;
    if (!o.scalars_.empty()) AddScalars(o, 1);
    return *this;
  }
  Resources& operator-=(const Resources& o) {
    cpu_milli_ -= o.cpu_milli_;
    memory_ -= o.memory_;
    gpu_milli_ -= o.gpu_milli_;
    if (!o.scalars_.empty()) AddScalars(o, -1);
    return *this;
  }
  friend Resources operator+(Resources a, const Resources& b) { return a += b; }
  friend Resources operator-(Resources a, const Resources& b) { return a -= b; }
  Resources operator*(int64_t n) const;
  bool operator==(const Resources& o) const = default;

  // True when every dimension of *this is <= the same dimension of `o`
  // (a scalar missing from `o` counts as 0).
  bool LessEqual(const Resources& o) const {
    if (cpu_milli_ > o.cpu_milli_ || memory_ > o.memory_ || gpu_milli_ > o.gpu_milli_) return false;
    return scalars_.empty() || ScalarsLessEqual(o);
  }
  // True when every dimension is zero.
  bool IsZero() const {
    if (cpu_milli_ != 0 || memory_ != 0 || gpu_milli_ != 0) return false;
    for (const auto& [name, v] : scalars_) {
      if (v != 0) return false;
    }
    return true;
  }
  // True when some dimension is negative.
  bool AnyNegative() const;
  // Element-wise min / max.
  static Resources Min(const Resources& a, const Resources& b) {
    if (a.scalars_.empty() && b.scalars_.empty()) {
      return Resources(a.cpu_milli_ < b.cpu_milli_ ? a.cpu_milli_ : b.cpu_milli_,
                       a.memory_ < b.memory_ ? a.memory_ : b.memory_,
                       a.gpu_milli_ < b.gpu_milli_ ? a.gpu_milli_ : b.gpu_milli_);
    }
    return MinWithScalars(a, b);
  }
  static Resources Max(const Resources& a, const Resources& b) {
    if (a.scalars_.empty() && b.scalars_.empty()) {
      return Resources(a.cpu_milli_ < b.cpu_milli_ ? b.cpu_milli_ : a.cpu_milli_,
                       a.memory_ < b.memory_ ? b.memory_ : a.memory_,
                       a.gpu_milli_ < b.gpu_milli_ ? b.gpu_milli_ : a.gpu_milli_);
    }
    return MaxWithScalars(a, b);
  }

  // "cpu=4000m mem=16Gi gpu=8" style, for reasons and logs; zero and
  // unlimited dimensions are left out ("nothing" when all are).
  std::string ToString() const;

 private:
  void AddScalars(const Resources& o, int sign);  // sign 1: +=, -1: -=
  bool ScalarsLessEqual(const Resources& o) const;
  static Resources MinWithScalars(const Resources& a, const Resources& b);
  static Resources MaxWithScalars(const Resources& a, const Resources& b);

  Quantity cpu_milli_ = 0;
  Quantity memory_ = 0;
  Quantity gpu_milli_ = 0;
  std::vector<std::pair<std::string, Quantity>> scalars_;  // sorted by name
};

// Parses Kubernetes-style quantities: "4", "500m", "16Gi", "1.5", "2k".
// `milli` selects the unit of the result: true gives milli-units ("1.5" ->
// 1500), false gives whole units ("16Gi" -> 17179869184).
absl::StatusOr<Quantity> ParseQuantity(std::string_view text, bool milli);

// Formats a byte count the short way: 17179869184 -> "16Gi".
std::string FormatBytes(Quantity bytes);
// Formats milli-GPUs: 8000 -> "8", 500 -> "0.5".
std::string FormatGpus(Quantity gpu_milli);

}  // namespace ringmaster::topology

#endif  // RINGMASTER_TOPOLOGY_RESOURCES_H_
