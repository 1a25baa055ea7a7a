// elastic: grows running elastic jobs toward their maximum when GPUs have
// been idle for a while and nobody more deserving could use them, and takes
// that growth back when a job waits for it. (Other shrinks happen in
// preempt, reclaim and on node failures.)
//
// 0. Loans back (returnLoans): what a job grew into above its desired size
//    was lent while GPUs were idle; a waiting gang of at least its priority
//    takes it back (VictimPicker, EvictMode::kLoan: only members above the
//    desired size, cheapest first, whatever the job's cooldown; up to the
//    waiting gang's desired size when the loans cover it, else its
//    minimum), the members leaving within loanGracePeriod.
// 1. Track since when the cluster has had a free whole GPU; do nothing until
//    that has lasted `growIdle`.
// 2. The highest priority among waiting gangs that could use a free GPU
//    blocks growth of every job at or below that priority.
// 3. Candidates: running elastic jobs below their maximum (a shrunk member
//    still leaving counts until it is gone), past `cooldown` since they
//    last started or resized, in job order. Each gets pending tasks up to
//    its maximum and the GangPlacer places what fits (reserved
//    nodes stay off limits, queue capabilities hold). At most
//    `maxGrowPerCycle` tasks per cycle. With the speedup plugin, candidates
//    that have a speed model are sized first by their speed-up per GPU
//    (GrowBySpeed below), and grown only where the resize pays.
#include <algorithm>
#include <limits>
#include <optional>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "scheduler/actions/action.h"
#include "scheduler/actions/placement.h"
#include "scheduler/actions/victims.h"
#include "scheduler/statement.h"

namespace ringmaster::scheduler {
namespace {

int64_t PerTaskGpus(const Job& j) {
  int64_t g = 0;
  for (const Task& t : j.tasks()) {
    if (t.state == TaskState::kPending && j.gpu(t.index).whole()) g = std::max<int64_t>(g, j.gpu(t.index).count);
  }
  return g;
}

// A hard-topology job's members all inside one domain of its tier.
bool InItsDomain(const State& st, const Job& j) {
  const JobSpec& spec = j.spec();
  const topology::Cluster& c = st.cluster();
  if (spec.topology_mode != TopologyMode::kHard || spec.highest_tier > c.num_tiers()) return true;
  std::optional<uint32_t> domain;
  for (const Task& t : j.tasks()) {
    if (!HoldsNode(t.state)) continue;
    const uint32_t d = spec.highest_tier == 0 ? t.node.value() : c.DomainOf(t.node, spec.highest_tier).value();
    if (domain && *domain != d) return false;
    domain = d;
  }
  return true;
}

// Members the job may still grow by: its maximum less every task that is
// not Pending. A member still leaving (a shrink's Releasing task) counts
// until it is gone: it then waits again as a Pending task (TaskReleased),
// which growth reuses, so a task added in its place would leave the job
// with more tasks than its maximum, and a restart would run them all.
int GrowRoom(const Job& j) {
  return j.max_member() - (static_cast<int>(j.tasks().size()) - j.Count(TaskState::kPending));
}

// A running elastic job below its maximum with room to grow (step 3's
// first tests).
bool AnyMayGrow(const State& st) {
  for (JobId id : st.elastic_below_max()) {
    const Job& j = st.job(id);
    if (j.elastic() && j.phase() == JobPhase::kRunning && GrowRoom(j) > 0) return true;
  }
  return false;
}

// A running elastic job holds members above its desired size: without one
// there is nothing to give back (and no waiting gang need be tried).
bool AnyLoan(const State& st) {
  for (JobId id : st.elastic_jobs()) {
    const Job& j = st.job(id);
    if (j.elastic() && j.phase() == JobPhase::kRunning && j.ReadyCount() > VictimPicker::LoanFloor(j)) return true;
  }
  return false;
}

class ElasticAction : public Action {
 public:
  explicit ElasticAction(ElasticArgs args) : args_(args) {}
  std::string_view name() const override { return "elastic"; }

  // After a cycle that changed nothing: growIdle's end, else the first
  // cooldown end of a job that only its cooldown kept from growing; with no
  // GPU free, only an event frees one.
  Timestamp NextChange(const State& /*state*/, Timestamp now) const override {
    return next_change_ == kNoChange ? kNoChange : std::max(next_change_, now);
  }

  void Execute(Session& s) override {
    State& st = s.mutable_state();
    next_change_ = kNoChange;
    // 0. Loans back.
    if (args_.return_loans && AnyLoan(st)) {
      EvictionArgs loan;
      loan.grace_ms = args_.loan_grace_ms;
      loan.cooldown_ms = 0;
      loan.max_evictions = 0;
      VictimPicker picker(s, EvictMode::kLoan, loan);
      for (Job* p : WaitingGangs(s)) picker.TryFor(*p);
    }
    if (st.free_index().TotalFree() == 0) {
      idle_since_ = -1;
      return;
    }
    if (idle_since_ < 0) idle_since_ = s.now();
    if (s.now() - idle_since_ < args_.grow_idle_ms) {
      next_change_ = idle_since_ + args_.grow_idle_ms;
      return;
    }
    // No running elastic job that may grow: no candidate below, so who
    // blocks growth (a walk of every admitted waiting job, each asked its
    // priority) need not be asked, and no cooldown names a wake-up.
    if (!AnyMayGrow(st)) return;
    // 2. Who blocks growth.
    int64_t largest_free = st.free_index().LargestFree(0);
    bool blocked = false;
    int64_t block_priority = 0;
    for (JobId id : s.admitted_jobs()) {
      const Job& w = st.job(id);
      if (w.phase() != JobPhase::kInqueue || w.GangReady() || w.nominated()) continue;
      if (PerTaskGpus(w) > largest_free) continue;  // could not use what is idle
      if (!blocked || s.JobPriority(w) > block_priority) block_priority = s.JobPriority(w);
      blocked = true;
    }
    // 3. Candidates in job order (the state keeps the elastic jobs below
    // their maximum: no walk over every job).
    std::vector<Job*> grow;
    for (JobId id : st.elastic_below_max()) {
      Job& j = st.job(id);
      if (!j.elastic() || j.phase() != JobPhase::kRunning) continue;
      if (GrowRoom(j) <= 0) continue;  // at its maximum, or its leavers hold the rest
      if (blocked && s.JobPriority(j) <= block_priority) continue;
      if (j.last_resize() >= 0 && s.now() - j.last_resize() < args_.cooldown_ms) {
        next_change_ = std::min(next_change_, j.last_resize() + args_.cooldown_ms);
        continue;
      }
      grow.push_back(&j);
    }
    SortInJobOrder(s, grow.begin(), grow.end());
    int budget = args_.max_grow > 0 ? args_.max_grow : std::numeric_limits<int>::max();
    if (s.has_job_speedup()) grow = GrowBySpeed(s, grow, budget);
    for (Job* j : grow) {
      if (budget <= 0 || st.free_index().TotalFree() == 0) break;
      const int want = std::min(GrowRoom(*j), budget);
      const int before = j->ReadyCount();
      Statement stmt(s);
      // Pending tasks up to what it may grow by now (undone unless placed).
      while (j->Count(TaskState::kPending) < want) stmt.AddTask(*j, j->task(j->tasks().size() - 1).role);
      GangPlacer placer(s, ReservationUse::kNone, &stmt);
      if (placer.Place(*j, want).kind != PlaceOutcome::Kind::kPlaced || !InItsDomain(st, *j)) continue;
      if (stmt.Commit().ok()) budget -= j->ReadyCount() - before;
    }
  }

  // 3'. With a speed model (the speedup plugin): the free whole GPUs go one
  // member at a time to the candidate whose speed-up grows most per GPU
  // (ties: job order), while a member adds anything; each job then grows to
  // the largest of its counted sizes whose resize pays (Session::ResizePays),
  // in job order. Returns the candidates without a model, which step 3's
  // loop then grows in job order, as without the plugin.
  std::vector<Job*> GrowBySpeed(Session& s, const std::vector<Job*>& grow, int& budget) {
    State& st = s.mutable_state();
    struct Plan {
      Job* job;
      int ready;
      int target;
      int most;        // the largest target: ready + GrowRoom
      int gpus;        // per member
      double next = 0;  // speed-up gained by one more member, per GPU (< 0: none)
    };
    std::vector<Plan> plans;
    std::vector<Job*> rest;
    for (Job* j : grow) {
      const int g = j->GpusPerMember();
      if (g <= 0 || !s.JobSpeedup(*j, 1)) {
        rest.push_back(j);
        continue;
      }
      plans.push_back({j, j->ReadyCount(), j->ReadyCount(), j->ReadyCount() + GrowRoom(*j), g});
    }
    auto gain = [&](Plan& p) {
      p.next = -1;
      if (p.target >= p.most) return;
      const std::optional<double> a = s.JobSpeedup(*p.job, p.target);
      const std::optional<double> b = s.JobSpeedup(*p.job, p.target + 1);
      if (a && b) p.next = (*b - *a) / p.gpus;
    };
    for (Plan& p : plans) gain(p);
    int64_t free = st.free_index().TotalFree();
    int counted = 0;
    while (free > 0 && counted < budget) {
      Plan* best = nullptr;
      for (Plan& p : plans) {
        if (p.next > 0 && p.gpus <= free && (best == nullptr || p.next > best->next)) best = &p;
      }
      if (best == nullptr) break;
      ++best->target;
      free -= best->gpus;
      ++counted;
      gain(*best);
    }
    for (Plan& p : plans) {
      Job& j = *p.job;
      const double now_compact = s.JobSpeedup(j, p.ready).value_or(0);
      int to = p.target;
      while (to > p.ready && !s.ResizePays(j, p.ready, now_compact, to, s.JobSpeedup(j, to).value_or(0))) --to;
      if (to <= p.ready || budget <= 0) continue;
      const double before = s.PlacedSpeedup(j).value_or(now_compact);
      const int want = std::min(to - p.ready, budget);
      Statement stmt(s);
      while (j.Count(TaskState::kPending) < want) stmt.AddTask(j, j.task(j.tasks().size() - 1).role);
      GangPlacer placer(s, ReservationUse::kNone, &stmt);
      if (placer.Place(j, want).kind != PlaceOutcome::Kind::kPlaced || !InItsDomain(st, j)) continue;
      // Where the new members landed (other nodes may make it slower).
      const std::optional<double> after = s.PlacedSpeedup(j);
      if (after && !s.ResizePays(j, p.ready, before, j.ReadyCount(), *after)) continue;
      if (stmt.Commit().ok()) budget -= j.ReadyCount() - p.ready;
    }
    return rest;
  }

 private:
  ElasticArgs args_;
  Timestamp idle_since_ = -1;
  Timestamp next_change_ = kNoChange;  // what the last Execute saw (NextChange)
};

}  // namespace

absl::StatusOr<ElasticArgs> ReadElasticArgs(const PluginArgs& args) {
  ElasticArgs out;
  auto secs = [&](std::string_view key, Timestamp def) -> absl::StatusOr<Timestamp> {
    RM_ASSIGN_OR_RETURN(auto v, args.Double(key, static_cast<double>(def) / 1000.0));
    if (!(v >= 0) || v > 1e9) return args.Error(key, "must be a number of seconds >= 0");
    return static_cast<Timestamp>(v * 1000.0);
  };
  RM_ASSIGN_OR_RETURN(auto idle, secs("growIdle", out.grow_idle_ms));
  RM_ASSIGN_OR_RETURN(auto cooldown, secs("cooldown", out.cooldown_ms));
  RM_ASSIGN_OR_RETURN(auto cap, args.Int("maxGrowPerCycle", out.max_grow));
  RM_ASSIGN_OR_RETURN(auto loans, args.Bool("returnLoans", out.return_loans));
  RM_ASSIGN_OR_RETURN(auto loan_grace, secs("loanGracePeriod", out.loan_grace_ms));
  if (cap < 0 || cap > 1'000'000) return args.Error("maxGrowPerCycle", "must be an integer in [0, 1000000] (0: no limit)");
  RM_RETURN_IF_ERROR(args.Finish());
  out.grow_idle_ms = idle;
  out.cooldown_ms = cooldown;
  out.max_grow = static_cast<int>(cap);
  out.return_loans = loans;
  out.loan_grace_ms = loan_grace;
  return out;
}

std::unique_ptr<Action> NewElasticAction(ElasticArgs args) { return std::make_unique<ElasticAction>(args); }

}  // namespace ringmaster::scheduler
