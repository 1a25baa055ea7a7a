// openb pod lists: one single-task job per pod, creation to deletion.
#include "simulator/alibaba2023_trace.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "simulator/trace_table.h"

namespace ringmaster::simulator {
namespace {

enum Col { kName, kCpu, kMemory, kNumGpu, kGpuMilli, kCreation, kDeletion, kNumCols };
constexpr const char* kColNames[kNumCols] = {"name",     "cpu_milli",     "memory_mib",   "num_gpu",
                                             "gpu_milli", "creation_time", "deletion_time"};

absl::Status ReadPod(const TraceTable& t, const TableRow& r, const int (&c)[kNumCols], int spec,
                     TraceJob& j) {
  RM_ASSIGN_OR_RETURN(auto name, t.Text(r, c[kName], kColNames[kName], true));
  j.spec.name = std::string(name);
  int64_t v[kNumCols] = {};
  for (int k : {kCpu, kMemory, kNumGpu, kGpuMilli}) {
    RM_ASSIGN_OR_RETURN(auto x, t.Int(r, c[k], kColNames[k], 0, true));
    if (x < 0) return t.Error(r.line, kColNames[k], "must be >= 0");
    v[k] = x;
  }
  if (v[kNumGpu] > 64) return t.Error(r.line, "num_gpu", "must be <= 64");
  for (int k : {kCpu, kMemory}) {
    if (v[k] > kMaxTaskQuantity) return t.Error(r.line, kColNames[k], "must be <= 2^40");
  }
  if (v[kGpuMilli] > topology::kMilliPerGpu) return t.Error(r.line, "gpu_milli", "must be <= 1000");
  scheduler::RoleSpec& worker = j.worker();
  worker.request.set_cpu_milli(v[kCpu]).set_memory(v[kMemory] << 20);
  worker.gpu.count = static_cast<int>(v[kNumGpu]);
  worker.gpu.milli = v[kNumGpu] == 0 ? topology::kMilliPerGpu : v[kGpuMilli];
  if (!worker.gpu.whole() && worker.gpu.count > 1) {
    return t.Error(r.line, "gpu_milli", "a share below 1000 needs num_gpu 1");
  }
  double times[2];
  for (int k : {kCreation, kDeletion}) {
    RM_ASSIGN_OR_RETURN(auto x, t.Double(r, c[k], kColNames[k], 0, true));
    if (x < 0) return t.Error(r.line, kColNames[k], "must be >= 0");
    times[k - kCreation] = x;
  }
  if (times[1] < times[0]) return t.Error(r.line, "deletion_time", "before creation_time");
  j.submit_s = times[0];
  j.duration_s = times[1] - times[0];
  if (spec >= 0) {
    RM_ASSIGN_OR_RETURN(auto models, t.Text(r, spec, "gpu_spec", false));
    if (!models.empty()) j.spec.gpu_models = absl::StrSplit(std::string(models), '|', absl::SkipEmpty());
  }
  return absl::OkStatus();
}

}  // namespace

bool Alibaba2023TraceReader::Recognizes(std::string_view first_line) {
  const TraceTable t = TraceTable::Split(first_line, "", ',', true);
  return t.Column("name") >= 0 && t.Column("num_gpu") >= 0 && t.Column("gpu_milli") >= 0;
}

absl::StatusOr<std::vector<TraceJob>> Alibaba2023TraceReader::Parse(std::string_view text,
                                                                    std::string_view filename) {
  const TraceTable t = TraceTable::Split(text, filename, ',', true);
  int cols[kNumCols];
  for (int k = 0; k < kNumCols; ++k) {
    RM_ASSIGN_OR_RETURN(cols[k], t.RequireColumn(kColNames[k]));
  }
  const int spec = t.Column("gpu_spec");
  std::vector<TraceJob> jobs;
  jobs.reserve(t.rows().size());
  for (const TableRow& r : t.rows()) {
    TraceJob j;
    j.line = r.line;
    RM_RETURN_IF_ERROR(ReadPod(t, r, cols, spec, j));
    jobs.push_back(std::move(j));
  }
  return FinishTrace(std::move(jobs), filename);
}

}  // namespace ringmaster::simulator
