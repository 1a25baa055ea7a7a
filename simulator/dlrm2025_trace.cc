// DLRM instances: requests per instance, open-ended lifetimes closed at the
// trace's window.
#include "simulator/dlrm2025_trace.h"

#include <algorithm>
#include <cmath>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "simulator/trace_table.h"

namespace ringmaster::simulator {
namespace {

enum Col { kSn, kCpu, kGpu, kMemory, kCreation, kScheduled, kDeletion, kNumCols };
constexpr const char* kColNames[kNumCols] = {"instance_sn",    "cpu_request",   "gpu_request",
                                             "memory_request", "creation_time", "scheduled_time",
                                             "deletion_time"};

struct Instance {
  TraceJob job;
  std::optional<double> deletion;
};

absl::StatusOr<Instance> ReadInstance(const TraceTable& t, const TableRow& r,
                                      const int (&c)[kNumCols], double& last_time) {
  Instance in;
  TraceJob& j = in.job;
  j.line = r.line;
  RM_ASSIGN_OR_RETURN(auto sn, t.Text(r, c[kSn], kColNames[kSn], true));
  j.spec.name = std::string(sn);
  double v[kNumCols] = {};
  for (int k : {kCpu, kGpu, kMemory}) {
    RM_ASSIGN_OR_RETURN(auto x, t.Double(r, c[k], kColNames[k], 0, true));
    if (x < 0) return t.Error(r.line, kColNames[k], "must be >= 0");
    // Cores and GiB: a billion of either is far above any node, and its
    // milli-cores and bytes fit the engine's quantities.
    if (k != kGpu && x > 1e9) return t.Error(r.line, kColNames[k], "must be <= 1e9");
    v[k] = x;
  }
  if (v[kGpu] != std::floor(v[kGpu]) || v[kGpu] > 64) {
    return t.Error(r.line, "gpu_request", "must be a whole number of GPUs in [0, 64]");
  }
  scheduler::RoleSpec& worker = j.worker();
  worker.request.set_cpu_milli(std::llround(v[kCpu] * 1000)).set_memory(std::llround(v[kMemory] * 1024) << 20);
  worker.gpu.count = static_cast<int>(v[kGpu]);
  std::optional<double> times[3];
  for (int k : {kCreation, kScheduled, kDeletion}) {
    RM_ASSIGN_OR_RETURN(auto x, t.Double(r, c[k], kColNames[k], -1, false));
    auto text = t.Text(r, c[k], kColNames[k], false);
    if (text->empty()) continue;
    if (x < 0) return t.Error(r.line, kColNames[k], "must be >= 0");
    times[k - kCreation] = x;
    last_time = std::max(last_time, x);
  }
  j.submit_s = times[0].value_or(0);
  in.deletion = times[2];
  if (in.deletion && *in.deletion < j.submit_s) return t.Error(r.line, "deletion_time", "before creation_time");
  return in;
}

}  // namespace

bool Dlrm2025TraceReader::Recognizes(std::string_view first_line) {
  const TraceTable t = TraceTable::Split(first_line, "", ',', true);
  return t.Column("instance_sn") >= 0 && t.Column("gpu_request") >= 0 && t.Column("creation_time") >= 0;
}

absl::StatusOr<std::vector<TraceJob>> Dlrm2025TraceReader::Parse(std::string_view text,
                                                                 std::string_view filename) {
  const TraceTable t = TraceTable::Split(text, filename, ',', true);
  int cols[kNumCols];
  for (int k = 0; k < kNumCols; ++k) {
    RM_ASSIGN_OR_RETURN(cols[k], t.RequireColumn(kColNames[k]));
  }
  std::vector<Instance> instances;
  instances.reserve(t.rows().size());
  double last_time = 0;
  for (const TableRow& r : t.rows()) {
    RM_ASSIGN_OR_RETURN(auto in, ReadInstance(t, r, cols, last_time));
    instances.push_back(std::move(in));
  }
  std::vector<TraceJob> jobs;
  jobs.reserve(instances.size());
  for (Instance& in : instances) {
    in.job.duration_s = in.deletion.value_or(last_time) - in.job.submit_s;
    jobs.push_back(std::move(in.job));
  }
  return FinishTrace(std::move(jobs), filename);
}

}  // namespace ringmaster::simulator
