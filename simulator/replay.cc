// The trace replay driver: an event loop on a virtual clock over the public
// scheduler::Engine API (see replay.h for the loop and the speed model).
#include "simulator/replay.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <map>
#include <queue>
#include <set>
#include <tuple>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "scheduler/engine.h"
#include "simulator/app_model.h"
#include "topology/bandwidth.h"
#include "topology/rank_order.h"

namespace ringmaster::simulator {
namespace {

using scheduler::Decisions;
using scheduler::JobId;
using scheduler::JobPhase;

int64_t Ms(double seconds) { return SecondsToMs(seconds); }

// The driver's view of one trace job while it runs.
struct JobRun {
  JobId id;
  int traced_tasks = 1;
  int grow_max = 0;             // an elastic job grows up to this many tasks; 0: it does not grow
  double comm_fraction = 0;
  double work_total = 0;        // task-ms at the traced size and an ideal placement
  double work_done = 0;
  double checkpoint_step = 0;   // work between checkpoints; 0: none
  int64_t reform_pause_ms = 0;  // no progress for this long after a resize
  bool running = false;
  int size = 0;                 // tasks running now
  double speed = 0;             // work per ms
  int64_t progress_ms = 0;      // work_done is up to here
  int64_t paused_until_ms = 0;  // no progress before this (re-form, restart)
  int64_t version = 0;          // invalidates stale completion events
  bool restart_pending = false;
  double gpus_held = 0;
  int64_t held_since_ms = 0;
  std::vector<topology::NodeId> nodes;  // where its tasks run
  // A job with an application model progresses by it (work_* unused).
  std::unique_ptr<AppRun> app;
};

struct Completion {
  int64_t time_ms;
  size_t job;  // trace index
  int64_t version;
  bool operator>(const Completion& o) const {
    return time_ms != o.time_ms ? time_ms > o.time_ms : job > o.job;
  }
};

// A placement's ring members (one per GPU; one per task without GPUs).
std::vector<topology::RankSlot> Members(const scheduler::Job& job) {
  std::vector<topology::RankSlot> slots;
  for (const scheduler::Task& t : job.tasks()) {
    if (!scheduler::HoldsNode(t.state) || t.state == scheduler::TaskState::kPipelined) continue;
    if (t.gpus.empty()) slots.push_back({t.node, -1});
    for (int16_t g : t.gpus) slots.push_back({t.node, g});
  }
  return slots;
}

// GPUs per node of a placement, nodes in the order its members (task order) meet them.
std::vector<int> GpusPerNode(const std::vector<topology::RankSlot>& members) {
  std::vector<topology::NodeId> nodes;
  std::vector<int> gpus;
  for (const topology::RankSlot& m : members) {
    const size_t k = std::find(nodes.begin(), nodes.end(), m.node) - nodes.begin();
    if (k == nodes.size()) {
      nodes.push_back(m.node);
      gpus.push_back(0);
    }
    ++gpus[k];
  }
  return gpus;
}

// An evicted task reporting that it is gone (ReplayOptions::release_after_s).
struct Release {
  int64_t time_ms;
  JobId job;
  uint32_t task;
  bool operator>(const Release& o) const {
    return std::tie(time_ms, job, task) > std::tie(o.time_ms, o.job, o.task);
  }
};

// A node going down or coming back.
struct NodeEvent {
  int64_t time_ms;
  int64_t seq;  // order of scheduling, for ties
  std::string node;
  bool fail;
  int64_t down_ms;  // failures: how long it stays down; < 0: for good
  bool operator>(const NodeEvent& o) const { return time_ms != o.time_ms ? time_ms > o.time_ms : seq > o.seq; }
};

// splitmix64: a fixed, portable stream of random numbers from the seed.
class Rng {
 public:
  explicit Rng(uint64_t seed) : s_(seed) {}
  uint64_t Next() {
    uint64_t z = (s_ += 0x9e3779b97f4a7c15ULL);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
    return z ^ (z >> 31);
  }
  // Exponential with the given mean, in whole milliseconds (at least 1).
  int64_t ExpMs(double mean_s) {
    const double u = static_cast<double>((Next() >> 11) + 1) * 0x1.0p-53;  // (0, 1]
    return std::max<int64_t>(1, std::llround(-std::log(u) * mean_s * 1000));
  }

 private:
  uint64_t s_;
};

class Driver {
 public:
  Driver(const std::vector<TraceJob>& trace, std::string_view trace_name, const ReplayOptions& o)
      : trace_(trace), trace_name_(trace_name), o_(o), runs_(trace.size()) {}

  absl::Status Init(topology::Cluster cluster, scheduler::Policy policy);
  absl::StatusOr<ReplayResult> Run();

 private:
  int64_t NextTime() const;
  void Account(int64_t now);
  void Complete(size_t j, int64_t now);
  void ScheduleNodeEvents();
  void NodeDown(const NodeEvent& e, int64_t now);
  void NodeUp(const NodeEvent& e, int64_t now);
  absl::Status Arrive(size_t j);
  void Cycle(int64_t now);
  void ReleaseTask(const Release& r, int64_t now);
  void AfterCycle(const Decisions& d, int64_t now);
  void Start(size_t j, const scheduler::Job& job, int64_t now);
  void Resize(size_t j, const scheduler::Job& job, int64_t now);
  void Stop(size_t j, bool preempted, int64_t now);
  void Progress(JobRun& r, int64_t now);
  void SetPlacement(size_t j, const scheduler::Job& job, int64_t now);
  // Keeps growable_ in step when job j's running size becomes `size`.
  void SetGrowable(size_t j, int size);
  void ScheduleCompletion(size_t j, int64_t now);
  void AskCycle(int64_t now);
  // The wake-up cycle after a cycle at `now` (Cycle): the first of the
  // chain's at or after `wake` (Engine::NextWakeup).
  void AskWakeup(int64_t now, int64_t wake, bool events_left);
  void RecordTimeline(int64_t now);
  double AllocatedGpus() const;
  // GPU-seconds job j (trace index) has held up to now.
  double HeldGpuSeconds(size_t j, int64_t now) const;
  // A row of stops.csv for running job j, stopped whole now (for the job
  // named `preemptor`, if any), before the stop changes its run.
  void RecordStop(size_t j, int64_t now, std::string reason, std::string_view preemptor);
  // Free GPUs on partly used nodes / free GPUs, from per-node counts kept up
  // to date for the nodes whose jobs changed (MarkDirty).
  double Fragmentation();
  void MarkDirty(const std::vector<topology::NodeId>& nodes);

  const std::vector<TraceJob>& trace_;
  std::string trace_name_;
  const ReplayOptions& o_;
  scheduler::ManualClock clock_;
  scheduler::PluginRegistry registry_ = plugins::BuiltinRegistry();
  std::unique_ptr<scheduler::Engine> engine_;
  std::vector<JobRun> runs_;
  std::vector<size_t> by_engine_id_;  // engine JobId value -> trace index
  std::priority_queue<Completion, std::vector<Completion>, std::greater<>> completions_;
  std::priority_queue<Release, std::vector<Release>, std::greater<>> releases_;
  int64_t last_change_ms_ = 0;
  // Failures happen only while work is left (arrivals or completions to come);
  // recoveries always.
  std::priority_queue<NodeEvent, std::vector<NodeEvent>, std::greater<>> failures_;
  std::priority_queue<NodeEvent, std::vector<NodeEvent>, std::greater<>> recoveries_;
  std::map<std::string, topology::NodeSpec> down_;  // failed nodes' specs, to come back
  Rng rng_{0};
  int64_t node_seq_ = 0;
  size_t next_arrival_ = 0;
  std::optional<int64_t> next_cycle_ms_;
  int64_t period_ms_ = 1000;
  int64_t last_account_ms_ = 0;
  double allocated_now_ = 0;
  int64_t running_ = 0;
  int64_t pending_ = 0;
  int64_t finished_ = 0;
  int64_t growable_ = 0;  // running elastic jobs below their maximum
  std::vector<int64_t> node_free_;  // whole free GPUs per node, as last counted
  std::vector<bool> dirty_;
  std::vector<topology::NodeId> dirty_list_;
  int64_t free_total_ = 0;
  int64_t free_partial_ = 0;
  ReplayResult result_;
};

absl::Status Driver::Init(topology::Cluster cluster, scheduler::Policy policy) {
  if (policy.queues.empty() && o_.queues_from_trace) {
    std::set<std::string> names;
    for (const TraceJob& j : trace_) names.insert(j.spec.queue);
    for (const std::string& n : names) {
      queue::QueueSpec q;
      q.name = n;
      policy.queues.push_back(q);
    }
  }
  period_ms_ = std::max<int64_t>(1, Ms(o_.cycle_period_s));
  scheduler::EngineOptions eo;
  eo.check_invariants = false;  // the driver checks, and reports instead of aborting
  eo.fast_paths = o_.fast_paths;
  RM_ASSIGN_OR_RETURN(engine_, scheduler::Engine::Create(std::move(cluster), policy, registry_, clock_, eo));
  result_.total_gpus = engine_->state().cluster().total_gpus();
  const scheduler::State& st = engine_->state();
  node_free_.assign(st.num_nodes(), 0);
  dirty_.assign(st.num_nodes(), true);
  for (uint32_t n = 0; n < st.num_nodes(); ++n) dirty_list_.push_back(topology::NodeId(n));
  rng_ = Rng(o_.seed);
  ScheduleNodeEvents();
  result_.jobs.resize(trace_.size());
  for (size_t i = 0; i < trace_.size(); ++i) {
    const TraceJob& t = trace_[i];
    JobOutcome& out = result_.jobs[i];
    out.id = t.id();
    out.queue = t.spec.queue;
    out.gpus = t.gpus();
    out.submit_ms = Ms(t.submit_s);
    JobRun& r = runs_[i];
    r.traced_tasks = t.tasks();
    // What the wake-up cycles count as growable: an elastic range, except
    // one of a single count ({n, n}: a jobs file's; the readers make it
    // rigid), which the engine may still regrow after a shrink but which
    // has never kept the wake-up chain going.
    const scheduler::GangSize& size = t.spec.size;
    if (size.elastic() && !(size.min == r.traced_tasks && size.max == r.traced_tasks)) r.grow_max = size.max;
    r.comm_fraction = t.comm_fraction >= 0 ? t.comm_fraction : o_.comm_fraction;
    r.reform_pause_ms = Ms(t.reform_pause_s >= 0 ? t.reform_pause_s : o_.reform_pause_s);
    r.work_total = static_cast<double>(Ms(t.duration_s)) * r.traced_tasks;
    r.checkpoint_step = static_cast<double>(Ms(t.checkpoint_interval_s)) * r.traced_tasks;
    if (t.app) r.app = std::make_unique<AppRun>(t.app, t.batch_size);
  }
  return absl::OkStatus();
}

int64_t Driver::NextTime() const {
  int64_t t = INT64_MAX;
  if (!completions_.empty()) t = std::min(t, completions_.top().time_ms);
  if (!releases_.empty()) t = std::min(t, releases_.top().time_ms);
  if (next_arrival_ < trace_.size()) t = std::min(t, result_.jobs[next_arrival_].submit_ms);
  if (next_cycle_ms_) t = std::min(t, *next_cycle_ms_);
  if (!recoveries_.empty()) t = std::min(t, recoveries_.top().time_ms);
  const bool work_left = !completions_.empty() || next_arrival_ < trace_.size();
  if (!failures_.empty() && work_left) t = std::min(t, failures_.top().time_ms);
  return t;
}

absl::StatusOr<ReplayResult> Driver::Run() {
  for (int64_t now = NextTime(); now != INT64_MAX; now = NextTime()) {
    clock_.Set(now);
    Account(now);
    while (!completions_.empty() && completions_.top().time_ms == now) {
      const Completion c = completions_.top();
      completions_.pop();
      if (c.version == runs_[c.job].version && runs_[c.job].running) Complete(c.job, now);
    }
    while (!releases_.empty() && releases_.top().time_ms == now) {
      const Release r = releases_.top();
      releases_.pop();
      ReleaseTask(r, now);
    }
    while (!recoveries_.empty() && recoveries_.top().time_ms == now) {
      const NodeEvent e = recoveries_.top();
      recoveries_.pop();
      NodeUp(e, now);
    }
    while (!failures_.empty() && failures_.top().time_ms == now) {
      const NodeEvent e = failures_.top();
      failures_.pop();
      NodeDown(e, now);
    }
    while (next_arrival_ < trace_.size() && result_.jobs[next_arrival_].submit_ms == now) {
      RM_RETURN_IF_ERROR(Arrive(next_arrival_++));
    }
    if (next_cycle_ms_ == now) {
      next_cycle_ms_.reset();
      Cycle(now);
      if (result_.violation) break;
      if (o_.max_cycles > 0 && engine_->cycles() >= o_.max_cycles) break;
    }
    RecordTimeline(now);
    if (o_.progress && (result_.events & 0xfff) == 0) o_.progress(now, finished_, trace_.size());
  }
  for (size_t j = 0; j < runs_.size(); ++j) {
    if (runs_[j].running) Progress(runs_[j], last_account_ms_);
    result_.jobs[j].gpu_seconds += runs_[j].gpus_held * (last_account_ms_ - runs_[j].held_since_ms) / 1000.0;
    runs_[j].held_since_ms = last_account_ms_;
  }
  result_.makespan_ms = last_account_ms_;
  result_.cycles = engine_->cycles();
  if (o_.on_end) o_.on_end(*engine_, clock_.Now());
  return std::move(result_);
}

void Driver::Account(int64_t now) {
  result_.allocated_gpu_seconds += allocated_now_ * (now - last_account_ms_) / 1000.0;
  last_account_ms_ = now;
}

void Driver::ReleaseTask(const Release& rel, int64_t now) {
  if (!engine_->TaskReleased(rel.job, rel.task).ok()) return;  // already gone (deadline, node lost)
  last_change_ms_ = now;
  if (rel.job.value() < by_engine_id_.size() && by_engine_id_[rel.job.value()] != SIZE_MAX) {
    const size_t j = by_engine_id_[rel.job.value()];
    const scheduler::Job& job = engine_->state().job(rel.job);
    if (runs_[j].running && job.phase() == JobPhase::kRunning) Resize(j, job, now);  // a shrink takes effect
  }
  allocated_now_ = AllocatedGpus();
  AskCycle(now);
}

void Driver::AskWakeup(int64_t now, int64_t wake, bool events_left) {
  // The wake-up chain runs a cycle one wake period after the last, on the
  // cycle grid, while something is to come (an event left, or the settle
  // time not over). The engine says (NextWakeup) that those before `wake`
  // would decide nothing and change nothing: ask only the first at or after
  // it, if the chain still runs by then. The decisions are those of running
  // every one of them; only the cycle count differs.
  const int64_t step = std::max<int64_t>(1, Ms(o_.wake_period_s));
  const int64_t settle = Ms(o_.settle_s);
  auto grid = [&](int64_t t) { return (t + period_ms_ - 1) / period_ms_ * period_ms_; };
  int64_t at = grid(now + step);
  if (events_left && at % period_ms_ == 0 && step % period_ms_ == 0) {
    // Whole periods a step: the chain is at + k * step, and never stops.
    if (wake > at) at += (wake - at + step - 1) / step * step;
  } else {
    // Walk it (a bounded walk: stopping early is safe, a cycle that decides
    // nothing).
    for (int walked = 0; at < wake && walked < 1'000'000; ++walked) {
      if (!events_left && at - last_change_ms_ >= settle) return;  // the chain ends with that cycle
      at = grid(at + step);
    }
  }
  AskCycle(at);
}

void Driver::AskCycle(int64_t now) {
  const int64_t at = (now + period_ms_ - 1) / period_ms_ * period_ms_;
  if (!next_cycle_ms_ || at < *next_cycle_ms_) next_cycle_ms_ = at;
}

absl::Status Driver::Arrive(size_t j) {
  ++result_.events;
  auto id = engine_->SubmitJob(trace_[j].spec);
  if (!id.ok()) {
    const std::string where = trace_[j].line > 0 ? absl::StrCat(trace_name_, ":", trace_[j].line) : trace_name_;
    return absl::InvalidArgumentError(absl::StrCat(where, ": ", std::string(id.status().message())));
  }
  last_change_ms_ = clock_.Now();
  runs_[j].id = *id;
  if (by_engine_id_.size() <= id->value()) by_engine_id_.resize(id->value() + 1, SIZE_MAX);
  by_engine_id_[id->value()] = j;
  ++pending_;
  AskCycle(clock_.Now());
  return absl::OkStatus();
}

void Driver::ScheduleNodeEvents() {
  for (const ReplayOptions::NodeFailure& f : o_.failures) {
    failures_.push({Ms(f.time_s), node_seq_++, f.node, true, f.down_s > 0 ? Ms(f.down_s) : -1});
  }
  if (o_.node_mtbf_s <= 0) return;
  const topology::Cluster& c = engine_->state().cluster();
  for (uint32_t n = 0; n < c.num_nodes(); ++n) {
    if (!c.present(topology::NodeId(n))) continue;
    const int64_t at = rng_.ExpMs(o_.node_mtbf_s);
    failures_.push({at, node_seq_++, c.node(topology::NodeId(n)).name, true, rng_.ExpMs(o_.node_mttr_s)});
  }
}

void Driver::NodeDown(const NodeEvent& e, int64_t now) {
  const scheduler::State& st = engine_->state();
  const topology::NodeId n = st.cluster().FindNode(e.node);
  if (!n.valid()) return;  // not there (already down, or a scripted name that is not in the cluster)
  ++result_.events;
  ++result_.node_failures;
  std::vector<size_t> hit;
  for (const auto& [id, task] : st.TasksOn(n)) {
    if (id.value() < by_engine_id_.size() && by_engine_id_[id.value()] != SIZE_MAX) {
      hit.push_back(by_engine_id_[id.value()]);
    }
  }
  std::sort(hit.begin(), hit.end());
  hit.erase(std::unique(hit.begin(), hit.end()), hit.end());
  down_[e.node] = st.cluster().node(n);
  MarkDirty({n});
  if (const absl::Status s = engine_->FailNode(e.node); !s.ok()) return;
  for (size_t j : hit) {
    if (!runs_[j].running) continue;
    const scheduler::Job& job = engine_->state().job(runs_[j].id);
    if (job.phase() == JobPhase::kRunning && job.GangReady()) {
      Resize(j, job, now);
    } else {
      RecordStop(j, now, absl::StrCat("node ", e.node, " failed"), "");
      Stop(j, false, now);
    }
  }
  if (e.down_ms >= 0) recoveries_.push({now + e.down_ms, node_seq_++, e.node, false, 0});
  allocated_now_ = AllocatedGpus();
  AskCycle(now);
}

void Driver::NodeUp(const NodeEvent& e, int64_t now) {
  auto it = down_.find(e.node);
  if (it == down_.end()) return;
  ++result_.events;
  auto id = engine_->AddNode(it->second);
  down_.erase(it);
  if (!id.ok()) return;
  node_free_.resize(engine_->state().num_nodes(), 0);
  dirty_.resize(engine_->state().num_nodes(), false);
  MarkDirty({*id});
  if (o_.node_mtbf_s > 0) {
    const int64_t at = now + rng_.ExpMs(o_.node_mtbf_s);
    failures_.push({at, node_seq_++, e.node, true, rng_.ExpMs(o_.node_mttr_s)});
  }
  AskCycle(now);
}

void Driver::Complete(size_t j, int64_t now) {
  ++result_.events;
  JobRun& r = runs_[j];
  Progress(r, now);
  if (const absl::Status s = engine_->FinishJob(r.id, true); !s.ok()) {
    // The driver finishes only jobs the engine runs: anything else is a bug.
    std::fprintf(stderr, "replay: FinishJob(%s): %s\n", trace_[j].id().c_str(), std::string(s.message()).c_str());
    std::abort();
  }
  r.running = false;
  SetGrowable(j, 0);
  r.size = 0;
  MarkDirty(r.nodes);
  r.nodes.clear();
  result_.jobs[j].gpu_seconds += r.gpus_held * (now - r.held_since_ms) / 1000.0;
  r.gpus_held = 0;
  result_.jobs[j].end_ms = now;
  result_.jobs[j].completed = true;
  last_change_ms_ = now;
  if (o_.on_finish) o_.on_finish(*engine_, r.id, now);
  --running_;
  ++finished_;
  allocated_now_ = AllocatedGpus();
  AskCycle(now);
}

void Driver::Cycle(int64_t now) {
  ++result_.events;
  const Decisions d = engine_->RunCycle();
  if (o_.on_cycle) o_.on_cycle(*engine_, d, now);
  if (!d.empty()) last_change_ms_ = now;
  AfterCycle(d, now);
  allocated_now_ = AllocatedGpus();
  const bool events_left = !completions_.empty() || !releases_.empty() || next_arrival_ < trace_.size();
  const bool more_to_come = !d.empty() || events_left || now - last_change_ms_ < Ms(o_.settle_s);
  // The wake-up chain runs for a policy that reads the clock, or while a
  // release deadline is pending; a policy that reads no clock otherwise
  // cycles on events only (the replay's model: the cycle right after one
  // that changed the state is not run by itself, as the engine would allow).
  // With the fast paths, the chain skips the cycles before the engine's
  // NextWakeup, which decide nothing.
  if (o_.wake_period_s > 0 && (pending_ > 0 || growable_ > 0) && more_to_come &&
      (engine_->ReadsClock() || engine_->NextDeadline() >= 0)) {
    if (!o_.fast_paths) {
      AskCycle(now + std::max<int64_t>(1, Ms(o_.wake_period_s)));
    } else if (const int64_t wake = engine_->NextWakeup(); wake != scheduler::Engine::kNever) {
      AskWakeup(now, wake, events_left);
    }
  }
  if (!o_.check) return;
  const absl::Status s = engine_->CheckInvariants();
  if (s.ok()) return;
  InvariantViolation v{d.cycle, now, std::string(s.message()), {}};
  std::set<std::string> names;
  for (const auto& b : d.binds) names.insert(engine_->state().job(b.job).name());
  for (const auto& e : d.evictions) names.insert(engine_->state().job(e.job).name());
  for (const auto& m : d.membership) names.insert(m.job_name);
  v.jobs.assign(names.begin(), names.end());
  result_.violation = std::move(v);
}

void Driver::AfterCycle(const Decisions& d, int64_t now) {
  // Per job touched (id order): stopped whole, and for a preemptor; the
  // first eviction that names it (for stops.csv).
  struct Touch {
    bool evicted = false;
    bool preempted = false;
    const scheduler::Eviction* first = nullptr;
  };
  std::map<JobId, Touch> touched;
  for (const auto& m : d.membership) touched.emplace(m.job, Touch{});
  for (const auto& e : d.evictions) {
    Touch& t = touched[e.job];
    if (e.kind != scheduler::Eviction::Kind::kShrink) t.evicted = true;
    if (!e.preemptor.empty()) t.preempted = true;
    if (t.first == nullptr || (t.first->kind == scheduler::Eviction::Kind::kShrink &&
                               e.kind != scheduler::Eviction::Kind::kShrink)) {
      t.first = &e;
    }
  }
  // A row of stops.csv per running job this cycle stops (below), read
  // before any of this cycle's starts changes the runs.
  for (const auto& [id, touch] : touched) {
    if (id.value() >= by_engine_id_.size() || by_engine_id_[id.value()] == SIZE_MAX) continue;
    const size_t j = by_engine_id_[id.value()];
    const scheduler::Job& job = engine_->state().job(id);
    if (!runs_[j].running || (!touch.evicted && job.phase() == JobPhase::kRunning && job.GangReady())) continue;
    RecordStop(j, now, touch.first != nullptr ? touch.first->reason : "its gang broke",
               touch.first != nullptr ? std::string_view(touch.first->preemptor) : std::string_view());
  }
  // A simulated process leaves at once, or release_after_s later (never
  // after its grace deadline: the engine's grace period is the upper bound).
  bool released = false;
  const int64_t after = Ms(o_.release_after_s);
  for (const auto& e : d.evictions) {
    const scheduler::Job& job = engine_->state().job(e.job);
    if (e.task >= job.tasks().size() || job.task(e.task).state != scheduler::TaskState::kReleasing) continue;
    if (after > 0) {
      releases_.push({std::min(now + after, std::max(now, e.deadline)), e.job, e.task});
    } else {
      released |= engine_->TaskReleased(e.job, e.task).ok();
    }
  }
  if (released) AskCycle(now);
  for (const auto& [id, touch] : touched) {
    if (id.value() >= by_engine_id_.size() || by_engine_id_[id.value()] == SIZE_MAX) continue;
    const size_t j = by_engine_id_[id.value()];
    const scheduler::Job& job = engine_->state().job(id);
    if (runs_[j].running && touch.evicted) Stop(j, touch.preempted, now);
    const bool running_now = job.phase() == JobPhase::kRunning && job.GangReady();
    if (!runs_[j].running && running_now) {
      Start(j, job, now);
    } else if (runs_[j].running && !running_now) {
      Stop(j, touch.preempted, now);
    } else if (running_now) {
      Resize(j, job, now);
    }
  }
}

void Driver::Progress(JobRun& r, int64_t now) {
  const int64_t from = std::max(r.progress_ms, r.paused_until_ms);
  if (r.app) {
    if (now > from) r.app->Advance(static_cast<double>(now - from) / 1000.0);
  } else if (now > from) r.work_done = std::min(r.work_total, r.work_done + r.speed * (now - from));
  r.progress_ms = std::max(r.progress_ms, now);
}

void Driver::SetPlacement(size_t j, const scheduler::Job& job, int64_t now) {
  JobRun& r = runs_[j];
  JobOutcome& out = result_.jobs[j];
  const topology::Cluster& c = engine_->state().cluster();
  const std::vector<topology::RankSlot> members = Members(job);
  MarkDirty(r.nodes);
  r.nodes.clear();
  for (const topology::RankSlot& m : members) {
    if (r.nodes.empty() || r.nodes.back() != m.node) r.nodes.push_back(m.node);
  }
  MarkDirty(r.nodes);
  int size = 0;
  double gpus = 0;
  for (const scheduler::Task& t : job.tasks()) {
    if (!scheduler::HoldsNode(t.state) || t.state == scheduler::TaskState::kPipelined) continue;
    ++size;
    gpus += static_cast<double>(job.gpu(t.index).total_milli()) / topology::kMilliPerGpu;
  }
  int tier = 0;
  for (const topology::RankSlot& m : members) tier = std::max(tier, c.CommonTier(members[0].node, m.node));
  out.tier_spanned = std::max(out.tier_spanned, tier);
  double slowdown = 0;
  if (tier > 0) {
    const double actual = topology::PlacementBottleneckGbps(c, members);
    const double ref = topology::LevelBandwidthGbps(c, members[0].node, topology::NetworkLevel(1));
    slowdown = std::max(0.0, ref / actual - 1);
  }
  out.gpu_seconds += r.gpus_held * (now - r.held_since_ms) / 1000.0;
  r.gpus_held = gpus;
  r.held_since_ms = now;
  SetGrowable(j, size);
  r.size = size;
  r.speed = o_.speed_scales_with_size ? size / (1 + r.comm_fraction * slowdown) : r.traced_tasks;
  if (r.app) r.app->SetPlacement(GpusPerNode(members));
}

void Driver::SetGrowable(size_t j, int size) {
  const int max = runs_[j].grow_max;
  if (max == 0) return;
  growable_ += (size > 0 && size < max) - (runs_[j].size > 0 && runs_[j].size < max);
}

void Driver::ScheduleCompletion(size_t j, int64_t now) {
  JobRun& r = runs_[j];
  ++r.version;
  if (trace_[j].endless) return;
  if (r.app) {
    const double s = r.app->SecondsToFinish();
    const int64_t run_ms = std::isfinite(s) ? std::llround(s * 1000) : INT64_MAX / 4;
    completions_.push({std::max(now, r.paused_until_ms) + run_ms, j, r.version});
    return;
  }
  const double left = std::max(0.0, r.work_total - r.work_done);
  const int64_t run_ms = r.speed > 0 ? std::llround(left / r.speed) : INT64_MAX / 4;
  completions_.push({std::max(now, r.paused_until_ms) + run_ms, j, r.version});
}

void Driver::Start(size_t j, const scheduler::Job& job, int64_t now) {
  JobRun& r = runs_[j];
  JobOutcome& out = result_.jobs[j];
  if (out.start_ms < 0) out.start_ms = now;
  r.running = true;
  r.progress_ms = now;
  r.paused_until_ms = r.restart_pending ? now + Ms(o_.restart_cost_s) : now;
  // A job with a model pays its re-form cost at its first start too.
  if (r.app && !r.restart_pending) r.paused_until_ms = now + r.reform_pause_ms;
  r.restart_pending = false;
  SetPlacement(j, job, now);
  ScheduleCompletion(j, now);
  ++running_;
  --pending_;
}

void Driver::Resize(size_t j, const scheduler::Job& job, int64_t now) {
  JobRun& r = runs_[j];
  Progress(r, now);
  const int before = r.size;
  const std::vector<topology::NodeId> nodes_before = r.nodes;
  SetPlacement(j, job, now);
  if (r.size == before && r.nodes == nodes_before) return;  // already accounted (a failure seen twice)
  if (r.size < before) ++result_.jobs[j].shrinks;
  if (r.size > before) ++result_.jobs[j].grows;
  r.paused_until_ms = std::max(r.paused_until_ms, now + r.reform_pause_ms);
  ScheduleCompletion(j, now);
}

void Driver::Stop(size_t j, bool preempted, int64_t now) {
  JobRun& r = runs_[j];
  JobOutcome& out = result_.jobs[j];
  Progress(r, now);
  // A job with a model keeps its progress (the authors' jobs checkpoint
  // when stopped); others lose what follows their last checkpoint.
  if (!r.app) {
    r.work_done = r.checkpoint_step > 0 ? std::floor(r.work_done / r.checkpoint_step) * r.checkpoint_step : 0;
  }
  out.gpu_seconds += r.gpus_held * (now - r.held_since_ms) / 1000.0;
  r.gpus_held = 0;
  r.held_since_ms = now;
  r.running = false;
  SetGrowable(j, 0);
  r.size = 0;
  MarkDirty(r.nodes);
  r.nodes.clear();
  r.restart_pending = true;
  ++r.version;
  ++out.evictions;
  if (preempted) ++out.preemptions;
  --running_;
  ++pending_;
}

void Driver::RecordStop(size_t j, int64_t now, std::string reason, std::string_view preemptor) {
  StopRecord rec;
  rec.time_ms = now;
  rec.job = j;
  rec.gpu_seconds = HeldGpuSeconds(j, now);
  rec.since_start_ms = now - runs_[j].held_since_ms;
  rec.reason = std::move(reason);
  if (!preemptor.empty()) {
    const JobId pid = engine_->FindJob(preemptor);
    if (pid.valid() && pid.value() < by_engine_id_.size() && by_engine_id_[pid.value()] != SIZE_MAX) {
      const size_t p = by_engine_id_[pid.value()];
      rec.preemptor = p;
      rec.preemptor_gpu_seconds = HeldGpuSeconds(p, now);
      if (!runs_[p].running) {
        rec.preemptor_waited_ms = now - (runs_[p].restart_pending ? runs_[p].held_since_ms : result_.jobs[p].submit_ms);
      }
    }
  }
  result_.stops.push_back(std::move(rec));
}

double Driver::HeldGpuSeconds(size_t j, int64_t now) const {
  const JobRun& r = runs_[j];
  const double since = r.running ? r.gpus_held * static_cast<double>(now - r.held_since_ms) / 1000.0 : 0;
  return result_.jobs[j].gpu_seconds + since;
}

double Driver::AllocatedGpus() const {
  const scheduler::State& st = engine_->state();
  topology::Quantity milli = 0;
  for (uint32_t q = 0; q < st.queues().size(); ++q) {
    if (st.queues().is_leaf(q)) milli += st.queue_usage(scheduler::QueueId(q)).allocated.gpu_milli();
  }
  return static_cast<double>(milli) / topology::kMilliPerGpu;
}

void Driver::MarkDirty(const std::vector<topology::NodeId>& nodes) {
  for (topology::NodeId n : nodes) {
    if (dirty_[n.value()]) continue;
    dirty_[n.value()] = true;
    dirty_list_.push_back(n);
  }
}

double Driver::Fragmentation() {
  const scheduler::State& st = engine_->state();
  for (topology::NodeId n : dirty_list_) {
    dirty_[n.value()] = false;
    const int64_t gpus = static_cast<int64_t>(st.cluster().node(n).gpus.size());
    const int64_t old_free = node_free_[n.value()];
    free_total_ -= old_free;
    if (old_free < gpus) free_partial_ -= old_free;
    const int64_t free = st.cluster().present(n) ? st.FreeWholeGpus(n) : 0;
    node_free_[n.value()] = free;
    free_total_ += free;
    if (free < gpus) free_partial_ += free;
  }
  dirty_list_.clear();
  return free_total_ == 0 ? 0 : static_cast<double>(free_partial_) / free_total_;
}

void Driver::RecordTimeline(int64_t now) {
  const double alloc = allocated_now_;
  if (!result_.timeline.empty()) {
    const TimelinePoint& last = result_.timeline.back();
    if (last.allocated_gpus == alloc && last.running == running_ && last.pending == pending_) return;
  }
  result_.timeline.push_back({now, alloc, running_, pending_, Fragmentation()});
}

}  // namespace

std::vector<TraceJob> TraceOfJobFile(const std::vector<scheduler::TimedJob>& jobs) {
  std::vector<TraceJob> out;
  out.reserve(jobs.size());
  for (const scheduler::TimedJob& tj : jobs) {
    TraceJob t;
    t.spec = tj.spec;
    t.submit_s = static_cast<double>(tj.submit_ms) / 1000.0;
    t.endless = tj.duration_ms < 0;
    t.duration_s = t.endless ? 0 : static_cast<double>(tj.duration_ms) / 1000.0;
    t.checkpoint_interval_s = static_cast<double>(tj.spec.checkpoint_interval_ms) / 1000.0;
    out.push_back(std::move(t));
  }
  return out;
}

absl::StatusOr<ReplayResult> Replay(topology::Cluster cluster, scheduler::Policy policy,
                                    const std::vector<TraceJob>& trace, std::string_view trace_name,
                                    const ReplayOptions& options) {
  Driver d(trace, trace_name, options);
  RM_RETURN_IF_ERROR(d.Init(std::move(cluster), std::move(policy)));
  return d.Run();
}

}  // namespace ringmaster::simulator
