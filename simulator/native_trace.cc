// The native trace CSV: every column of docs/TRACE_FORMAT.md, read by name.
#include "simulator/native_trace.h"

#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "common/status_macros.h"
#include "simulator/trace_table.h"

namespace ringmaster::simulator {
namespace {

// Column indices (-1: absent) of the header.
struct NativeColumns {
  int job_id, submit, duration, queue, priority, tasks, gpus_per_task, min_tasks, max_tasks;
  int cpu_milli, memory_mib, gpu_milli, topology_mode, highest_tier, walltime, checkpoint;
  int gpu_model, comm_fraction, reform_pause, application, batch_size;
};

absl::StatusOr<NativeColumns> FindColumns(const TraceTable& t) {
  NativeColumns c{};
  for (auto [slot, name] : {std::pair{&c.job_id, "job_id"}, {&c.submit, "submit_time_s"},
                            {&c.duration, "duration_s"}}) {
    RM_ASSIGN_OR_RETURN(*slot, t.RequireColumn(name));
  }
  c.queue = t.Column("queue");
  c.priority = t.Column("priority");
  c.tasks = t.Column("tasks");
  c.gpus_per_task = t.Column("gpus_per_task");
  c.min_tasks = t.Column("min_tasks");
  c.max_tasks = t.Column("max_tasks");
  c.cpu_milli = t.Column("cpu_milli_per_task");
  c.memory_mib = t.Column("memory_mib_per_task");
  c.gpu_milli = t.Column("gpu_milli");
  c.topology_mode = t.Column("topology_mode");
  c.highest_tier = t.Column("highest_tier");
  c.walltime = t.Column("walltime_s");
  c.checkpoint = t.Column("checkpoint_interval_s");
  c.gpu_model = t.Column("gpu_model");
  c.comm_fraction = t.Column("comm_fraction");
  c.reform_pause = t.Column("reform_pause_s");
  c.application = t.Column("application");
  c.batch_size = t.Column("batch_size");
  return c;
}

// The longest walltime_s: far above any job's, and low enough that its
// milliseconds fit the engine's clock.
constexpr double kMaxWalltimeS = 1e12;

// Sets `out` from an integer field in [lo, hi] (`def` when empty or absent).
absl::Status IntField(const TraceTable& t, const TableRow& r, int col, std::string_view name,
                      int64_t def, int64_t lo, int64_t hi, int64_t& out) {
  RM_ASSIGN_OR_RETURN(auto v, t.Int(r, col, name, def, false));
  if (v < lo || v > hi) return t.Error(r.line, name, absl::StrCat("must be in [", lo, ", ", hi, "]"));
  out = v;
  return absl::OkStatus();
}

absl::Status ReadShape(const TraceTable& t, const TableRow& r, const NativeColumns& c, TraceJob& j) {
  constexpr int64_t kMaxTasks = 100000;
  int64_t tasks = 0, gpus = 0, min = 0, max = 0, prio = 0, tier = 0;
  RM_RETURN_IF_ERROR(IntField(t, r, c.tasks, "tasks", 1, 1, kMaxTasks, tasks));
  for (auto [col, name, def, lo, hi, out] :
       {std::tuple{c.gpus_per_task, "gpus_per_task", int64_t{1}, int64_t{0}, int64_t{64}, &gpus},
        {c.min_tasks, "min_tasks", tasks, 1, kMaxTasks, &min},
        {c.max_tasks, "max_tasks", tasks, 1, kMaxTasks, &max},
        {c.priority, "priority", 0, INT32_MIN, INT32_MAX, &prio},
        {c.highest_tier, "highest_tier", 0, 0, 16, &tier}}) {
    RM_RETURN_IF_ERROR(IntField(t, r, col, name, def, lo, hi, *out));
  }
  j.worker().replicas = static_cast<int>(tasks);
  j.worker().gpu.count = static_cast<int>(gpus);
  j.spec.size = scheduler::GangSize::FromBounds(static_cast<int>(min), static_cast<int>(max), j.tasks());
  j.spec.priority = static_cast<int32_t>(prio);
  j.spec.highest_tier = static_cast<int>(tier);
  return absl::OkStatus();
}

absl::Status ReadResources(const TraceTable& t, const TableRow& r, const NativeColumns& c,
                           TraceJob& j) {
  int64_t cpu_milli = 0, memory_mib = 0, milli = 0;
  for (auto [col, name, def, hi, out] :
       {std::tuple{c.cpu_milli, "cpu_milli_per_task", int64_t{0}, kMaxTaskQuantity, &cpu_milli},
        {c.memory_mib, "memory_mib_per_task", 0, kMaxTaskQuantity, &memory_mib},
        {c.gpu_milli, "gpu_milli", topology::kMilliPerGpu, topology::kMilliPerGpu, &milli}}) {
    RM_RETURN_IF_ERROR(IntField(t, r, col, name, def, 0, hi, *out));
  }
  scheduler::RoleSpec& worker = j.worker();
  worker.request.set_cpu_milli(cpu_milli).set_memory(memory_mib << 20);
  // A task without GPUs has no share of one.
  worker.gpu.milli = worker.gpu.count == 0 ? topology::kMilliPerGpu : milli;
  if (!worker.gpu.whole() && worker.gpu.count > 1) {
    return t.Error(r.line, "gpu_milli", "a share below 1000 needs gpus_per_task 1");
  }
  RM_ASSIGN_OR_RETURN(auto mode, t.Text(r, c.topology_mode, "topology_mode", false));
  if (mode == "hard") {
    j.spec.topology_mode = scheduler::TopologyMode::kHard;
  } else if (mode == "soft") {
    j.spec.topology_mode = scheduler::TopologyMode::kSoft;
  } else if (!mode.empty() && mode != "none") {
    return t.Error(r.line, "topology_mode", absl::StrCat("'", std::string(mode), "': expected none, soft or hard"));
  }
  RM_ASSIGN_OR_RETURN(auto model, t.Text(r, c.gpu_model, "gpu_model", false));
  if (!model.empty()) j.spec.gpu_models = absl::StrSplit(std::string(model), '|', absl::SkipEmpty());
  RM_ASSIGN_OR_RETURN(auto app, t.Text(r, c.application, "application", false));
  j.application = std::string(app);
  int64_t batch = 0;
  RM_RETURN_IF_ERROR(IntField(t, r, c.batch_size, "batch_size", 0, 0, int64_t{1} << 30, batch));
  j.batch_size = static_cast<int>(batch);
  if (!j.application.empty() && batch < 1) {
    return t.Error(r.line, "batch_size", "a job with an application needs its global batch size (>= 1)");
  }
  return absl::OkStatus();
}

absl::Status ReadTimes(const TraceTable& t, const TableRow& r, const NativeColumns& c, TraceJob& j) {
  double walltime_s = 0;
  for (auto [col, name, def, required, out] :
       {std::tuple{c.submit, "submit_time_s", 0.0, true, &j.submit_s},
        {c.duration, "duration_s", 0.0, true, &j.duration_s},
        {c.walltime, "walltime_s", 0.0, false, &walltime_s},
        {c.checkpoint, "checkpoint_interval_s", 0.0, false, &j.checkpoint_interval_s},
        {c.comm_fraction, "comm_fraction", -1.0, false, &j.comm_fraction},
        {c.reform_pause, "reform_pause_s", -1.0, false, &j.reform_pause_s}}) {
    RM_ASSIGN_OR_RETURN(*out, t.Double(r, col, name, def, required));
  }
  if (!(walltime_s >= 0 && walltime_s <= kMaxWalltimeS)) {
    return t.Error(r.line, "walltime_s", "must be in [0, 1e12] seconds");
  }
  j.spec.walltime_ms = SecondsToMs(walltime_s);
  if (c.comm_fraction >= 0 && j.comm_fraction != -1.0 && (j.comm_fraction < 0 || j.comm_fraction > 1)) {
    return t.Error(r.line, "comm_fraction", "must be in [0, 1]");
  }
  if (c.reform_pause >= 0 && j.reform_pause_s != -1.0 && !(j.reform_pause_s >= 0 && j.reform_pause_s <= 1e9)) {
    return t.Error(r.line, "reform_pause_s", "must be in [0, 1e9] seconds");
  }
  return absl::OkStatus();
}

}  // namespace

bool NativeTraceReader::Recognizes(std::string_view first_line) {
  const TraceTable t = TraceTable::Split(first_line, "", ',', true);
  return t.Column("job_id") >= 0 && t.Column("submit_time_s") >= 0 && t.Column("duration_s") >= 0;
}

absl::StatusOr<std::vector<TraceJob>> NativeTraceReader::Parse(std::string_view text,
                                                               std::string_view filename) {
  const TraceTable t = TraceTable::Split(text, filename, ',', true);
  RM_ASSIGN_OR_RETURN(auto cols, FindColumns(t));
  std::vector<TraceJob> jobs;
  jobs.reserve(t.rows().size());
  for (const TableRow& r : t.rows()) {
    TraceJob j;
    j.line = r.line;
    RM_ASSIGN_OR_RETURN(auto id, t.Text(r, cols.job_id, "job_id", true));
    j.spec.name = std::string(id);
    RM_ASSIGN_OR_RETURN(auto queue, t.Text(r, cols.queue, "queue", false));
    if (!queue.empty()) j.spec.queue = std::string(queue);
    for (auto step : {ReadShape, ReadResources, ReadTimes}) {
      RM_RETURN_IF_ERROR(step(t, r, cols, j));
    }
    jobs.push_back(std::move(j));
  }
  return FinishTrace(std::move(jobs), filename);
}

}  // namespace ringmaster::simulator
