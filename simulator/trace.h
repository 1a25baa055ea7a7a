// A trace is the workload a replay submits: one TraceJob per job of a real
// GPU-cluster trace (or of the project's native CSV, docs/TRACE_FORMAT.md),
// in submission order. Each format has its own reader (one file pair each:
// native_trace, philly_trace, gavel_trace, tiresias_trace, alibaba2023_trace,
// dlrm2025_trace, pollux_trace), all with the same contract, which
// tests/simulator/trace_contract_test.cc checks over every reader:
//   1. every data row becomes exactly one TraceJob (no row is dropped) and
//      remembers its line;
//   2. a bad row fails the whole read with "file:line: field: what";
//   3. jobs come out sorted by submit time, ties in file order; ids are
//      unique and submit times start at or after 0;
//   4. the reader recognizes its own header (or first line), so `auto`
//      detection picks it, and no other reader claims it.
#ifndef RINGMASTER_SIMULATOR_TRACE_H_
#define RINGMASTER_SIMULATOR_TRACE_H_

#include <cmath>
#include <cstdint>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/job.h"

namespace ringmaster::simulator {

class AppModel;  // simulator/app_model.h

// One job of a trace: the engine's job as the replay submits it (`spec`)
// and what only the replay reads (times, the progress model, the
// application). Times in seconds from the trace's start.
struct TraceJob {
  // The engine's job; its name is the job's id. A trace reader's job has
  // one role, "worker" (worker()): its tasks and each task's GPUs, cpu and
  // memory; `size` a rigid gang of every task unless the trace gives a range
  // (the native trace's min_tasks and max_tasks: GangSize::FromBounds). A
  // jobs file's job is the file's spec, roles and all.
  scheduler::JobSpec spec{.roles = {scheduler::RoleSpec{.gpu = {.count = 1}}}};
  double submit_s = 0;
  // Run time at tasks() tasks on an ideal placement: the job's work.
  double duration_s = 0;
  // Progress is saved every this much work (0: no checkpoints, an eviction
  // loses all progress). The replay's model only: a trace reader leaves the
  // engine's spec.checkpoint_interval_ms at 0, as preemption has never been
  // told a trace job's interval (telling it changes which victims it picks:
  // a policy change, with its golden update). A jobs file's job has both.
  double checkpoint_interval_s = 0;
  double comm_fraction = -1;   // < 0: the replay's default
  double reform_pause_s = -1;  // no progress after a resize; < 0: the replay's default
  int line = 0;                // where the job's row is in its file (0: none)
  // Runs until the replay ends (a jobs file's job without a duration);
  // readers never set it.
  bool endless = false;
  // A measured application model (simulator/app_model.h) instead of a
  // duration: the trace names it (`application`, with the job's global
  // `batch_size`), AttachAppModels resolves it and sets spec.speed (the
  // engine's view of the model's speed). With a model the job runs one GPU
  // per task, progresses at the model's speed for its placement and
  // finishes after the model's epochs; duration_s is unused.
  std::string application;
  int batch_size = 0;
  std::shared_ptr<const AppModel> app;

  const std::string& id() const { return spec.name; }
  // Tasks asked for: every role's replicas.
  int tasks() const { return spec.total_replicas(); }
  // GPUs asked for: every task's.
  int gpus() const;
  // A trace reader's one role (the first of a jobs file's).
  scheduler::RoleSpec& worker() { return spec.roles.front(); }
  const scheduler::RoleSpec& worker() const { return spec.roles.front(); }
};

enum class TraceFormat { kAuto, kNative, kPhilly, kGavel, kTiresias, kAlibaba2023, kDlrm2025, kPollux };

// "native", "philly", ... ("auto" for kAuto).
std::string_view TraceFormatName(TraceFormat f);
// The inverse; the error lists every format.
absl::StatusOr<TraceFormat> ParseTraceFormat(std::string_view name);

// The format whose reader recognizes the text's first non-blank line; an
// error listing the formats when none does.
absl::StatusOr<TraceFormat> DetectTraceFormat(std::string_view text, std::string_view filename);

// Reads a trace in `format` (kAuto: detected).
absl::StatusOr<std::vector<TraceJob>> ParseTrace(std::string_view text, std::string_view filename,
                                                 TraceFormat format);
absl::StatusOr<std::vector<TraceJob>> ReadTrace(const std::string& path, TraceFormat format);

// What part of a trace a replay runs, and how (simulate's --from, --until,
// --max-jobs, --one-queue, --walltime-oracle, --checkpoint-interval).
struct TraceSlice {
  double from_s = 0;       // jobs submitted at or after this
  double until_s = -1;     // ... and before this (< 0: to the end)
  int64_t max_jobs = 0;    // at most this many, the first by submit time (0: all)
  std::string one_queue;   // non-empty: every job in this queue (ignore the trace's)
  // Walltime = duration for jobs whose trace gives none: what schedulers that
  // know run times (SJF, backfill) are compared with in the literature.
  bool walltime_oracle = false;
  // > 0: the checkpoint interval of jobs whose trace gives none (a preempted
  // job then loses only the work since its last checkpoint).
  double checkpoint_interval_s = 0;
};

// The jobs of `jobs` (sorted, as the readers return them) in the slice, with
// submit times moved back by `from_s` (the slice starts at 0).
std::vector<TraceJob> SliceTrace(std::vector<TraceJob> jobs, const TraceSlice& slice);
// The slice's choice, walking jobs in submit order: the job submitted at
// `submit_s`, with `kept` jobs kept before it, is skipped (before the
// window), kept, or ends the slice (past the window, or max_jobs reached).
enum class SliceStep { kSkip, kKeep, kEnd };
SliceStep SliceChoice(const TraceSlice& slice, double submit_s, size_t kept);
// SliceTrace(ParseTrace(text, filename, format), slice), the same jobs and
// errors, with the jobs the slice leaves out never built where the reader can
// tell them from its checked rows (Philly: the first 10,000 of its 82,247
// jobs build 10,000).
absl::StatusOr<std::vector<TraceJob>> ParseTraceSlice(std::string_view text, std::string_view filename,
                                                      TraceFormat format, const TraceSlice& slice);

// --- For the readers -----------------------------------------------------------

// Checks every job (its spec with JobSpec::Validate, the trace's own fields,
// unique ids; errors name the job's line and the field) and sorts by submit
// time, ties by line. Every reader ends with it.
absl::StatusOr<std::vector<TraceJob>> FinishTrace(std::vector<TraceJob> jobs,
                                                  std::string_view filename);

// The most cpu milli or memory MiB a trace's task may ask for: far above
// any node's, and low enough that the engine's bytes fit in 64 bits.
inline constexpr int64_t kMaxTaskQuantity = int64_t{1} << 40;

// A gang of `gpus` GPUs as tasks of at most `max_per_task` GPUs each: the
// fewest tasks that divide `gpus` evenly (16 -> 2 x 8, 12 -> 2 x 6,
// 20 -> 4 x 5, 7 -> 1 x 7). Sets the worker's replicas and GPU count, and
// size (a rigid gang). gpus 0 gives one task without GPUs.
void SplitGang(int gpus, int max_per_task, TraceJob& job);

// Seconds as the engine's milliseconds (a spec's walltime_ms; the replay's
// clock), rounded to the nearest.
inline int64_t SecondsToMs(double seconds) { return std::llround(seconds * 1000); }

// The first non-blank line of `text`, without its line ending.
std::string_view FirstLine(std::string_view text);

}  // namespace ringmaster::simulator

#endif  // RINGMASTER_SIMULATOR_TRACE_H_
