// Trace replay: a trace's jobs run through scheduler::Engine on a virtual
// clock, the same engine and plugins the daemon runs. The driver only moves
// time and carries out the engine's decisions; every placement is the
// engine's. It is the one virtual-clock driver: `ringmaster simulate` replays
// traces with it, and `ringmaster schedule` a jobs file (TraceOfJobFile, with
// fixed durations, delayed releases and observers that print its log).
//
// The event loop, in virtual milliseconds:
//   1. Events at the same instant are handled in this order: completions,
//      releases of evicted tasks (ReplayOptions::release_after_s), node
//      failures and recoveries, arrivals (trace order), then the scheduling
//      cycle. A completion calls Engine::FinishJob, an arrival
//      Engine::SubmitJob, a failure Engine::FailNode, a recovery
//      Engine::AddNode (the node comes back under its name).
//   2. Anything that changed the engine's state asks for a cycle at the next
//      multiple of the cycle period (at or after now); no change, no cycle,
//      except the wake-up cycles of ReplayOptions::wake_period_s while a job
//      waits or could grow.
//   3. After a cycle: a job that started (membership kStart) gets its speed
//      from its placement and a completion event; a job whose size changed
//      (shrink, grow, failure) has its remaining time recomputed after a
//      re-form pause; a job no longer running after evictions loses the
//      progress since its last checkpoint and pays a restart cost when it
//      next starts.
//   4. With `check`, Engine::CheckInvariants runs after every cycle; the first
//      violation stops the replay and is reported with its cycle, time and the
//      jobs of that cycle's decisions.
//
// How jobs progress (the speed model): a job's work is its traced duration at
// its traced task count on an ideal placement. Running with n tasks on a
// placement whose ring bottleneck is B, it does
//     speed = n / (1 + comm_fraction * slowdown),
//     slowdown = max(0, B_ref / B - 1)
// units of work per second, where B_ref is the bandwidth the gang needs at
// least: its node's own links for a one-node gang (slowdown 0), the first
// network tier's (a rack) for a gang over several nodes (topology/
// bandwidth.h). So a job at its traced size inside one rack runs exactly its
// traced duration, and a ring across spines runs slower.
//
// A job with an application model (TraceJob::app, simulator/app_model.h)
// progresses instead at its model's measured speed for the GPUs it holds on
// each node (in task order) and its batch size, epoch by epoch, and ends
// after the model's epochs. It pays its reform_pause_s (30 s) at every
// start and resize and the restart cost after a stop, and keeps its
// progress when stopped. Jobs without a model take the code path above.
//
// Deterministic: the same cluster, policy, trace and options give the same
// result; ties break on the trace order.
#ifndef RINGMASTER_SIMULATOR_REPLAY_H_
#define RINGMASTER_SIMULATOR_REPLAY_H_

#include <cstdint>
#include <functional>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "plugins/registry.h"
#include "scheduler/engine.h"
#include "scheduler/job_file.h"
#include "scheduler/policy.h"
#include "simulator/trace.h"
#include "topology/cluster.h"

namespace ringmaster::simulator {

struct ReplayOptions {
  uint64_t seed = 42;
  double cycle_period_s = 1;         // cycles at multiples of this, only after a change
  double comm_fraction = 0.1;        // for jobs whose trace gives none
  double restart_cost_s = 30;        // added to a job's remaining time after an eviction
  double reform_pause_s = 5;         // no progress for this long after a resize
  // While a job waits or an elastic job runs below its maximum, a cycle also
  // runs this long after the last one (so time-based decisions, such as
  // growth after growIdle or a victim's cooldown ending, are taken), as long
  // as anything is still to happen, and as long as the policy reads the clock
  // (Engine::NextWakeup; FIFO or SJF gang scheduling does not, and needs
  // none). 0: only after changes.
  double wake_period_s = 60;
  // Failure injection: each node fails after an exponential time of mean
  // node_mtbf_s (0: never) and comes back after one of mean node_mttr_s,
  // both drawn from `seed`. A job on a failed node shrinks if it is elastic
  // and stays at or above its minimum; otherwise it stops (an eviction) and
  // restarts from its last checkpoint.
  double node_mtbf_s = 0;
  double node_mttr_s = 3600;
  // Failures at given times (tests, scripted scenarios), besides the drawn ones.
  struct NodeFailure {
    double time_s = 0;
    std::string node;
    double down_s = 0;  // <= 0: never comes back
  };
  std::vector<NodeFailure> failures;
  bool check = false;                // Engine::CheckInvariants after every cycle
  // Evicted tasks (shrunk members, stopped gangs) report that they are gone
  // this long after the decision, or at their grace deadline if sooner
  // (0: at once). Until then they hold their GPUs and a shrunk job runs at
  // its old size.
  double release_after_s = 0;
  // false: a job runs at its traced speed whatever its size and placement
  // (the jobs file model of `ringmaster schedule`: a job ends `duration`
  // after it starts).
  bool speed_scales_with_size = true;
  // When the policy declares no queues, one queue per queue name in the
  // trace (false: the engine's default queue only; other names are refused).
  bool queues_from_trace = true;
  // Wake-up cycles go on this long after the last change even when no event
  // is left (growth after growIdle with nothing else to come).
  double settle_s = 0;
  int64_t max_cycles = 0;            // stop after this many cycles (0: no limit)
  // The engine's fast paths (EngineOptions::fast_paths) and wake-ups only
  // when the engine says a cycle could decide something (NextWakeup); false:
  // every gang tried and every wake-up cycle of the chain run. The decisions
  // are the same (tests compare them); only `cycles` and the time differ.
  bool fast_paths = true;
  // Observers (may be empty): each cycle's decisions, each completion, and
  // the engine when the replay ends. The engine is read-only to them.
  std::function<void(const scheduler::Engine&, const scheduler::Decisions&, int64_t now_ms)> on_cycle;
  std::function<void(const scheduler::Engine&, scheduler::JobId, int64_t now_ms)> on_finish;
  std::function<void(const scheduler::Engine&, int64_t now_ms)> on_end;
  // Called now and then with the virtual time and the jobs finished so far
  // (a progress bar); may be empty.
  std::function<void(int64_t now_ms, int64_t finished, int64_t total)> progress;
};

// What happened to one job of the trace.
struct JobOutcome {
  std::string id;
  std::string queue;
  int gpus = 0;          // GPUs asked for (TraceJob::gpus)
  int64_t submit_ms = 0;
  int64_t start_ms = -1;  // first start; -1 never started
  int64_t end_ms = -1;    // -1 never ended
  bool completed = false;
  int tier_spanned = 0;   // highest topology tier its gang spanned (0: one node)
  int preemptions = 0;    // whole-job stops for a preemptor
  int evictions = 0;      // whole-job stops (any reason, preemptions included)
  int shrinks = 0;
  int grows = 0;
  double gpu_seconds = 0;  // GPUs held x time held
};

// One whole-job stop of a running job (an eviction: preempt, reclaim, a lost
// node; shrinks are not stops), in the order the cycles made them.
struct StopRecord {
  int64_t time_ms = 0;
  size_t job = 0;                // trace index (JobOutcome)
  double gpu_seconds = 0;        // what it had held until the stop (GPUs x time)
  int64_t since_start_ms = 0;    // since it last started or was resized
  std::optional<size_t> preemptor;  // trace index of the job it made room for
  double preemptor_gpu_seconds = 0;
  int64_t preemptor_waited_ms = -1;  // since it was submitted or last stopped; -1 when it was running
  std::string reason;            // the eviction's reason, as the decisions give it
};

// The cluster after each instant at which it changed.
struct TimelinePoint {
  int64_t time_ms = 0;
  double allocated_gpus = 0;
  int64_t running = 0;
  int64_t pending = 0;
  double fragmentation = 0;  // free GPUs on partly used nodes / free GPUs
};

struct InvariantViolation {
  int64_t cycle = 0;
  int64_t time_ms = 0;
  std::string message;
  std::vector<std::string> jobs;  // the jobs of that cycle's decisions
};

struct ReplayResult {
  std::vector<JobOutcome> jobs;  // trace order
  std::vector<TimelinePoint> timeline;
  std::vector<StopRecord> stops;  // time order
  int64_t total_gpus = 0;
  int64_t events = 0;  // arrivals + completions + cycles + node failures and recoveries
  int64_t node_failures = 0;
  int64_t cycles = 0;
  int64_t makespan_ms = 0;  // last completion (or last event)
  double allocated_gpu_seconds = 0;  // integral of allocated GPUs over time
  std::optional<InvariantViolation> violation;
};

// The jobs of a jobs file (`ringmaster schedule`) as a trace: each spec as
// the engine's job, its submit time and duration, and its checkpoint
// interval for the replay's progress model too.
std::vector<TraceJob> TraceOfJobFile(const std::vector<scheduler::TimedJob>& jobs);

// Replays `trace` (sorted by submit time, as the readers return it) on
// `cluster` under `policy`. When the policy declares no queues, one queue of
// weight 1 per queue name in the trace is added. Errors: the policy does not
// build an engine, or a job is refused (message names `trace_name`, the job's
// line and the field).
absl::StatusOr<ReplayResult> Replay(topology::Cluster cluster, scheduler::Policy policy,
                                    const std::vector<TraceJob>& trace, std::string_view trace_name,
                                    const ReplayOptions& options);

}  // namespace ringmaster::simulator

#endif  // RINGMASTER_SIMULATOR_REPLAY_H_
