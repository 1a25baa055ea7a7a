// Every extension point of the engine, in one place.
//
// A plugin is a policy: it registers typed callbacks with the Session when
// the session opens; the actions call the Session, and the Session combines
// the callbacks of all plugins, tier by tier, as session.cc documents once:
//   - orders (QueueOrder, JobOrder, TaskOrder): the first plugin, in tier
//     order, that tells the two apart decides;
//   - votes (JobEnqueueable, JobPipelined), each a Verdict: inside a tier any
//     verdict other than Fit or Abstain rejects (and is the answer), any Fit
//     permits; a tier of Abstains passes to the next; no vote permits;
//   - checks (JobValid, Predicate, Allocatable, JobReady): all must pass (the
//     first failing Verdict is the answer);
//   - JobStarving: all registered must agree;
//   - Overused: any says overused;
//   - NodeOrder: the weighted sum of all scores;
//   - victims (Preemptable, Reclaimable): the intersection within the first
//     tier that has an opinion; VictimTasks: the union;
//   - GpuSelect: the first plugin that registered one chooses; without one,
//     the built-in best fit (session.cc);
//   - JobPriority: the first plugin that registered one answers; without one,
//     the job's own priority.
#ifndef RINGMASTER_SCHEDULER_PLUGIN_H_
#define RINGMASTER_SCHEDULER_PLUGIN_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/statusor.h"
#include "scheduler/job.h"

namespace ringmaster::scheduler {

class Session;
class State;
struct QueueInfo;

// A scheduling verdict is a value, not an error: the one answer type of every
// "does it fit, may it go, and if not why" extension point. `reason` is a
// short static text ("insufficient GPU") so that verdicts cost nothing on the
// fast path; `Because` carries a composed text where a user needs numbers.
class Verdict {
 public:
  enum class Code { kFit, kUnschedulable, kUnresolvable, kWait, kAbstain };
  static Verdict Fit() { return Verdict(Code::kFit, {}); }
  // A vote with no opinion (JobEnqueueable, JobPipelined).
  static Verdict Abstain() { return Verdict(Code::kAbstain, {}); }
  // Does not fit now; might after others release resources.
  static Verdict Unschedulable(std::string_view reason) { return Verdict(Code::kUnschedulable, reason); }
  // Can never fit here whatever is released (wrong model, missing label).
  static Verdict Unresolvable(std::string_view reason) { return Verdict(Code::kUnresolvable, reason); }
  // Waits for something other than resources (e.g. a queue limit).
  static Verdict Wait(std::string_view reason) { return Verdict(Code::kWait, reason); }
  // The same with a composed reason (owned).
  static Verdict Because(Code c, std::string reason) {
    Verdict v(c, {});
    v.owned_ = std::move(reason);
    return v;
  }
  bool ok() const { return code_ == Code::kFit; }
  bool abstains() const { return code_ == Code::kAbstain; }
  Code code() const { return code_; }
  std::string_view reason() const { return owned_.empty() ? reason_ : std::string_view(owned_); }

 private:
  Verdict(Code c, std::string_view r) : code_(c), reason_(r) {}
  Code code_;
  std::string_view reason_;
  std::string owned_;
};

// A reference to one task of a job.
struct TaskRef {
  const Job* job;
  uint32_t index;
  const Task& task() const { return job->task(index); }
};

// Orders return < 0 when l goes first, > 0 when r goes first, 0 when the
// plugin cannot tell them apart.
using QueueOrderFn = std::function<int(const QueueInfo& l, const QueueInfo& r)>;
using JobOrderFn = std::function<int(const Job& l, const Job& r)>;
// A job order that is a function of one job: lower keys go first, equal keys
// tie (the next plugin decides). Session::AddJobOrderKeyFn registers it as
// the comparator it implies; a sort then computes each job's keys once
// instead of calling the comparators O(n log n) times (SortInJobOrder).
using JobOrderKeyFn = std::function<int64_t(const Job& job)>;
using TaskOrderFn = std::function<int(const TaskRef& l, const TaskRef& r)>;
using JobValidFn = std::function<Verdict(const Job& job)>;
using JobEnqueueableFn = std::function<Verdict(const Job& job)>;
using JobReadyFn = std::function<bool(const Job& job)>;
using JobPipelinedFn = std::function<Verdict(const Job& job)>;
using JobStarvingFn = std::function<bool(const Job& job)>;
using PredicateFn = std::function<Verdict(const TaskRef& task, NodeId node)>;
// Higher is better; scores are integers in [0, 100 * weight].
using NodeOrderFn = std::function<int64_t(const TaskRef& task, NodeId node)>;
// The engine offers candidates job by job, jobs in id order, each job's
// tasks by index. An answer that keeps the candidates' order (a
// subsequence) is intersected with the other plugins' in one walk; any
// other order is accepted too, at the cost of a hash table.
using PreemptableFn = std::function<std::vector<TaskRef>(const TaskRef& preemptor,
                                                         const std::vector<TaskRef>& candidates)>;
using ReclaimableFn = PreemptableFn;
using OverusedFn = std::function<bool(const QueueInfo& queue)>;
using AllocatableFn = std::function<bool(const QueueInfo& queue, const TaskRef& task)>;
using VictimTasksFn = std::function<std::vector<TaskRef>()>;
// A job's priority as preemption and growth see it: `preempt` takes only
// from jobs of strictly lower priority in the same queue, and elastic growth
// yields to waiting jobs of higher priority. A plugin whose order changes as
// jobs run (las: least attained service first) answers with its own ranking;
// it must depend only on the job and the session's clock.
using JobPriorityFn = std::function<int64_t(const Job& job)>;
// A job's speed at `members` ready members relative to its speed at one
// member (1.0 at one member); nullopt when the plugin knows no speed model
// for the job. The elastic action grows the jobs that gain most per GPU;
// victim choice shrinks first the members whose job loses least.
using JobSpeedupFn = std::function<std::optional<double>(const Job& job, int members)>;
// A job's speed at its current placement (the tasks that hold nodes, the
// nodes they use) relative to one member; nullopt when unknown. Read inside
// an open Statement, it judges a tentative placement.
using PlacedSpeedupFn = std::function<std::optional<double>(const Job& job)>;
// Whether resizing a running job from `from` members at speed-up
// `from_speedup` to `to` members at `to_speedup` pays for the pause while its
// communicator re-forms; true when the plugin cannot tell.
using ResizePaysFn =
    std::function<bool(const Job& job, int from, double from_speedup, int to, double to_speedup)>;
// Whether a waiting elastic job, tentatively placed (its tasks hold nodes in
// an open Statement), should start there now rather than wait for more of
// its desired size; true when the plugin cannot tell.
using StartPaysFn = std::function<bool(const Job& job)>;
// Chooses the GPU devices of `node` for `task`; returns false when it cannot.
using GpuSelectFn = std::function<bool(const TaskRef& task, NodeId node, std::vector<int16_t>* gpus)>;

// Arguments of one plugin from the policy file, with where each came from.
// Factories read what they know with the typed getters and then call
// Finish(), which rejects any argument nobody read.
class PluginArgs {
 public:
  struct Value {
    std::string text;
    int line = 0;
    int column = 0;
  };
  PluginArgs() = default;
  // `section` names where the arguments sit in the policy file: "plugins"
  // (tiers[].plugins[]) or "configurations" (an action's arguments).
  PluginArgs(std::string plugin, std::string file, std::map<std::string, Value> values,
             std::string section = "plugins")
      : plugin_(std::move(plugin)), file_(std::move(file)), values_(std::move(values)),
        section_(std::move(section)) {}

  bool Has(std::string_view key) const { return values_.count(std::string(key)) > 0; }
  absl::StatusOr<double> Double(std::string_view key, double def) const;
  absl::StatusOr<int64_t> Int(std::string_view key, int64_t def) const;
  absl::StatusOr<bool> Bool(std::string_view key, bool def) const;
  absl::StatusOr<std::string> String(std::string_view key, std::string def) const;
  // Keys present but never read, as an error naming the first one.
  absl::Status Finish() const;
  // "file:line:col: plugins[name].arguments.key: msg"
  absl::Status Error(std::string_view key, std::string_view msg) const;
  const std::map<std::string, Value>& values() const { return values_; }

 private:
  std::string plugin_;
  std::string file_;
  std::map<std::string, Value> values_;
  std::string section_ = "plugins";
  mutable std::map<std::string, bool> read_;
};

// A queue's decayed past use, as a plugin that orders queues by it keeps it
// (proportion's usageHalfLife; docs/POLICY.md, "Time-decayed fair share").
// The queue is named (queue indices change with the policy): what a policy
// reload hands from the old plugin to the new one (Engine::SetPolicy) and
// what the daemon's journal keeps across a restart.
struct DecayedUsage {
  std::string queue;
  double gpu_seconds = 0;      // U = integral of GPUs held x 2^(-age / half_life), valued at `at`
  Timestamp half_life_ms = 0;  // the half-life U was decayed with (> 0)
  Timestamp at = 0;            // when it was valued, on the engine's clock
  bool operator==(const DecayedUsage&) const = default;
};

class Plugin {
 public:
  virtual ~Plugin() = default;
  virtual std::string_view name() const = 0;
  // Registers this plugin's callbacks for one cycle. Must be cheap.
  virtual void OnSessionOpen(Session& session) = 0;
  virtual void OnSessionClose(Session& /*session*/) {}
  // Whether its callbacks read the session's clock, so that a cycle with
  // nothing new may decide differently later (las: attained service grows
  // while jobs run). A plugin that reads Session::now must say so.
  virtual bool UsesTime() const { return false; }
  // For a plugin that UsesTime, asked after a cycle that changed nothing
  // (Engine::NextWakeup): the earliest time >= now at which its callbacks
  // could answer differently on the same state (a LAS threshold crossed);
  // kNoChange when only an event can change them. Being early is safe (a
  // cycle that decides nothing); being late is a bug. Default: now.
  virtual Timestamp NextChange(const State& /*state*/, Timestamp now) const { return now; }
  // For a plugin that UsesTime: whether a hook that a placement verdict
  // reads (task order, job ready or pipelined, predicate, node order,
  // allocatable, GPU select) reads the clock; such a registration turns the
  // engine's verdict memo off for the cycle (Session::verdict_reads_clock).
  // Default: UsesTime(). A plugin whose only time-based answers are orders
  // of queues or jobs (proportion with usageHalfLife) answers false.
  virtual bool VerdictHooksReadTime() const { return UsesTime(); }
  // Whether its admission hooks (JobValid, JobEnqueueable) answer from the
  // job (its spec and tasks), its queue and that queue's ancestors' use
  // (allocated + admitted, QueueInfo) and the policy alone: no clock, no
  // nodes, no other job. When every registered admission hook's plugin says
  // so, enqueue remembers a refusal until one of those changes (the
  // admission memo, scheduler/actions/enqueue.cc). Default: false.
  virtual bool AdmissionReadsOnlyJobAndQueues() const { return false; }
  // Stronger: its admission hooks read of a job only its queue, its
  // minimum (min_request, min_member) and its number of tasks, so that
  // jobs alike in these get the same verdict at the same queue use; and a
  // refusal's text reads no queue's use (it is the same whatever the use
  // it refused at). Enqueue then asks one job of each such group and keeps
  // the group's jobs in job order across cycles (scheduler/actions/
  // enqueue.cc). Implies AdmissionReadsOnlyJobAndQueues. Default: false.
  virtual bool AdmissionReadsOnlyMinimum() const { return false; }
  // Whether its job order keys (AddJobOrderKeyFn), for a job that holds
  // nothing (pending, or admitted and waiting), are fixed for as long as it
  // waits so and its tasks do not change: they read the job's spec, its
  // creation and what it attained before (not the clock, the state or
  // another job). Enqueue's groups and the sorts' kept rows
  // (Session::job_order_static) rely on it. Default: false.
  virtual bool PendingOrderReadsOnlySpec() const { return false; }
  // For a plugin that keeps queues' past use: each queue's, valued at `now`
  // (>= the last session's time), queues named as in `state` (the plugin's
  // own policy's). Default: none.
  virtual std::vector<DecayedUsage> DecayedUsages(const State& /*state*/, Timestamp /*now*/) const { return {}; }
  // Past use valued earlier (by the previous policy's plugin, or read back
  // from a journal): it replaces what the plugin kept, and the next session
  // starts each queue of that name from it (brought to the session's time
  // as the plugin documents). A plugin that keeps none ignores it.
  virtual void RestoreDecayedUsages(std::span<const DecayedUsage> /*usages*/) {}
  // For a plugin whose deserved shares read the queues' past use
  // (proportion's usageWeight): the level of queue q's weight at the last
  // session's open, the weight counted w x 2^(-level / 8) (0 before the
  // first). nullopt from a plugin that reads none. Default: nullopt.
  virtual std::optional<int> UsageWeightLevel(QueueId /*q*/) const { return std::nullopt; }
};

using PluginFactory = std::function<absl::StatusOr<std::unique_ptr<Plugin>>(const PluginArgs&)>;

// The plugins an engine may build, by name. plugins/registry.cc fills one
// with the built-in list; tests may add their own.
class PluginRegistry {
 public:
  void Add(std::string name, PluginFactory factory) { factories_[std::move(name)] = std::move(factory); }
  const PluginFactory* Find(std::string_view name) const {
    auto it = factories_.find(std::string(name));
    return it == factories_.end() ? nullptr : &it->second;
  }
  std::vector<std::string> Names() const {
    std::vector<std::string> out;
    for (const auto& [n, f] : factories_) out.push_back(n);
    return out;
  }

 private:
  std::map<std::string, PluginFactory> factories_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_PLUGIN_H_
