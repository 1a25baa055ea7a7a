// Victim selection for preempt and reclaim: which running tasks to stop so
// that one waiting gang can start, at the least cost, and only when it helps.
//
// Algorithm for one preemptor P (a gang below its minimum):
//   1. Units: every eligible running job V offers shrink units (one surplus
//      member each, while V stays at or above its minimum) and one whole-job
//      unit (all it holds: taking a member below the minimum takes the gang).
//      Eligible: the mode's rule (preempt: same queue, strictly lower
//      priority as Session::JobPriority ranks it; reclaim: another queue
//      above its deserved share, for a queue below its own, never under a
//      guarantee), the plugins'
//      Preemptable / Reclaimable answer, past its cooldown, and not a job P
//      itself yielded to (docs/PREEMPTION.md rule 4).
//   2. Cost, cheapest first: shrink units before whole jobs; then lower
//      priority, less work lost since the last checkpoint, younger (later
//      start, then later submission); ties by job id and task index, later
//      first.
//   3. Scope: the domains P may land in (its hard-topology tier, else the
//      whole cluster). In each, a heap over nodes takes the cheapest next
//      step that lets one more of P's tasks fit on a node (whole GPUs, cpu
//      and memory), until the minimum fits by count. A step takes only units
//      that free something the task still lacks there: a unit freeing no GPU
//      (a CPU-only job, say) is taken only where cpu or memory is short. The scope with the fewest whole-job evictions, then
//      the cheapest worst unit, then the fewest units wins; at most
//      kMaxDomainTries scopes per preemptor.
//   4. Simulate: inside one Statement the chosen units are vacated and P is
//      placed by the same GangPlacer allocate uses. Then the least sufficient
//      set: units with no task on a node P landed on are dropped, and so is,
//      dearest first, every unit whose GPUs, cpu and memory the landing
//      nodes can spare after the placement; the placement is retried without
//      them (again until nothing more drops), and the last set that placed P
//      is kept. Commit only when P is placed; otherwise nothing is evicted.
//   5. Graceful: with a grace period the victims go to Releasing with that
//      deadline and P is pipelined (held) onto their GPUs until they are
//      gone; without one they are released and P binds in this cycle.
#ifndef RINGMASTER_SCHEDULER_ACTIONS_VICTIMS_H_
#define RINGMASTER_SCHEDULER_ACTIONS_VICTIMS_H_

#include <algorithm>
#include <compare>
#include <cstdint>
#include <map>
#include <set>
#include <span>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/flat_hash_map.h"
#include "absl/status/statusor.h"
#include "scheduler/plugin.h"
#include "scheduler/session.h"

namespace ringmaster::scheduler {

// The policy arguments preempt and reclaim share (configurations[].arguments).
struct EvictionArgs {
  Timestamp grace_ms = 30'000;     // gracePeriod (s): victims must be gone by then
  Timestamp cooldown_ms = 300'000;  // cooldown (s): min time a job runs (since start or resize) before it may be a victim again
  int max_evictions = 64;           // maxEvictionsPerCycle: tasks stopped per cycle by this action (0: no limit)
};
absl::StatusOr<EvictionArgs> ReadEvictionArgs(const PluginArgs& args);

// kLoan (the elastic action): the members a running elastic job holds above
// its desired size (what it grew into while GPUs were idle) go back to a
// waiting gang of at least its priority, in any queue, whatever the job's
// cooldown; only those members (never below the desired size, never the
// whole job), up to the waiting gang's whole desired size when they cover
// it, else its minimum.
enum class EvictMode { kPreempt, kReclaim, kLoan };

class VictimPicker {
 public:
  VictimPicker(Session& session, EvictMode mode, const EvictionArgs& args);

  // Tries to start `preemptor`'s gang minimum by evicting victims. True when
  // it committed (P bound now, or held for its releasing victims).
  bool TryFor(Job& preemptor);
  // The size below which a loan is not taken back: the desired size (the
  // roles' replicas), or the minimum when that is larger.
  static int LoanFloor(const Job& j) { return std::max(j.min_member(), j.spec().total_replicas()); }
  // Preempt: false when no running job of its queue ranks below it (TryFor
  // would find no victim). Reclaim: false when no running job sits in
  // another queue (the running jobs, indexed once per action: a lookup).
  bool MayHaveVictims(const Job& preemptor) {
    const uint32_t q = preemptor.queue().value();
    if (mode_ == EvictMode::kPreempt) return LowestRunningPriority(q) < PriorityOf(preemptor);
    if (mode_ == EvictMode::kReclaim) {
      if (!running_indexed_) IndexRunning();
      return running_.size() > RunningIn(q).size();
    }
    return true;
  }
  // Some queue is above its deserved share (GPUs), what it is releasing
  // not counted: reclaim's givers are such queues, so without one no
  // reclaim unit is usable (ReclaimKeepsShares).
  static bool AnyQueueBorrows(const Session& s);
  // Before any TryFor of the action, on the state as found: whether TryFor
  // would stop P at a test that reads only P, the state and memos (Screen),
  // asking for no offer; noting when it would defer one. When this holds
  // for every preemptor, TryFor in job order would decide nothing and
  // build no offer: the action needs no order and no TryFor (then
  // NextChange reads the deferral noted here).
  bool Unordered(Job& p);
  // The earliest end of a cooldown that alone kept a running job from
  // being a victim (kNoChange: none), as the offers built so far saw it.
  Timestamp cooldown_end() const { return cooldown_end_; }
  // For Action::NextChange after a cycle that changed nothing, when the
  // action is done: the first instant it could decide otherwise on the
  // same state (docs/ARCHITECTURE.md §7).
  //  - Some preemptor got as far as choosing victims (ChooseIn): now. The
  //    choice reads the victims' costs, which move with time (the work at
  //    risk since their last checkpoint).
  //  - Victims were offered, or an offer's build was deferred (whether it
  //    would have had victims is not asked: building it only to learn that
  //    cost 7 % of a contended replay), and none was chosen: every
  //    preemptor stopped at a test that reads only the state, the eligible
  //    victims and the plugins' rankings (its tasks fit without victims, a
  //    bound, the share rules). The rankings say when they change
  //    (Plugin::NextChange); the eligible set changes when an action
  //    cooldown of a running job ends: the first such end (of any running
  //    job: early is safe, and a superset of the next case's).
  //  - No offer at all, or only empty ones: the first end of a cooldown
  //    that alone kept a job from being a victim (cooldown_end).
  Timestamp NextChange(Timestamp now);
  // The first end, not before now, of a running job's action cooldown
  // (kNoChange: none is in one).
  static Timestamp FirstCooldownEnd(const State& state, Timestamp cooldown_ms, Timestamp now);

 private:
  // TryFor with the first `need` of P's pending tasks (in task order) to fit.
  bool TryForCount(Job& p, const std::vector<uint32_t>& pending, int need);
  // TryFor once `pending` (P's pending tasks) is known.
  bool TryForPending(Job& p, std::vector<uint32_t>& pending);
  // P's pending tasks into pending_, and whether it has a speed model
  // (modelled_): false when it misses none of its minimum.
  bool Pending(const Job& p);
  // `pending` in task order, the count it needs at least, and whether the
  // whole desired size is tried first: false when it needs none.
  bool Prepare(Job& p, std::vector<uint32_t>& pending, int& min_need, bool& whole_first);
  bool screened_defer_ = false;  // Unordered found a preemptor whose offer TryFor would defer
  // Everything TryFor reads of a one-role preemptor that yielded to nobody
  // and has no speed model, besides the state and the picker's own
  // memos: its queue and rank (an offer's key: the plugins' victim answers
  // depend on nothing else of it), its pending and missing task counts,
  // one task's request, its minimum's GPUs (the share rules), its
  // topology. Two preemptors with one key, asked on one state (no commit
  // between), get the same answer; one that failed short of Apply changed
  // nothing but memos the other would have filled alike (the deferred
  // offer of its key, an offer built, the steps, the bounds).
  struct FailKey {
    uint32_t queue;
    int64_t rank;
    int pending;
    int shortfall;
    int64_t gpus;
    Quantity cpu;
    Quantity mem;
    int64_t min_gpu_milli;
    int topology_mode;
    int highest_tier;
    bool operator==(const FailKey&) const = default;
    template <typename H>
    friend H AbslHashValue(H h, const FailKey& k) {
      return H::combine(std::move(h), k.queue, k.rank, k.pending, k.shortfall, k.gpus, k.cpu, k.mem,
                        k.min_gpu_milli, k.topology_mode, k.highest_tier);
    }
  };
  // The keys of preemptors that failed short of Apply, with commits_ then.
  absl::flat_hash_map<FailKey, int> failed_;
  bool applied_ = false;   // this TryFor reached Apply
  bool modelled_ = false;  // this TryFor's preemptor has a speed model (Session::JobSpeedup)
  // Cost key: smaller is cheaper.
  using Cost = std::tuple<int, int64_t, Timestamp, Timestamp, Timestamp, int64_t, int64_t>;
  // One task of a unit, with what stopping it frees (read once, when the
  // offer is built: the steps below read these, not the job and its tasks,
  // whose records are scattered over the heap).
  struct Member {
    uint32_t task = 0;
    uint32_t node = 0;
    int64_t gpus = 0;  // whole GPUs
    Quantity cpu = 0;
    Quantity mem = 0;
  };
  struct Unit {
    Job* job = nullptr;
    uint32_t job_id = 0;  // job->id().value()
    // Its members: Offer::members[first .. first + count) (a shrink unit
    // holds one task). One array for every unit of an offer: built and read
    // in order, freed at once.
    uint32_t first = 0;
    uint32_t count = 0;
    bool shrink = false;
    bool dead = false;  // taken by an earlier preemptor this cycle
  };
  // Units offered to preemptors of one (queue, priority), kept for the whole
  // action and updated as victims are taken.
  // What one task of P needs on a node, in the dimensions a step counts.
  struct Need {
    int64_t gpus = 0;  // whole GPUs (> 0)
    Quantity cpu = 0;
    Quantity mem = 0;
    auto operator<=>(const Need&) const = default;
  };
  // TryForCount's tests before an offer is asked for, which read only P,
  // the state and the picker's memos (kNo: no victim could help it;
  // kDefer: its offer's build is deferred; kOffer: the offer is needed).
  // `per_task`: the task shape the tests used.
  enum class Screened { kNo, kDefer, kOffer };
  Screened Screen(const Job& p, const std::vector<uint32_t>& pending, int need, Need& per_task);
  // What a node has free (or would have, once units are gone) in them.
  struct Room {
    int64_t gpus = 0;
    Quantity cpu = 0;
    Quantity mem = 0;
  };
  struct Offer {
    uint32_t queue = 0;  // the preemptors' queue
    std::vector<Unit> units;  // grouped by job, in no particular order of cost
    std::vector<Cost> costs;  // per unit (apart: the passes over units read no cost)
    std::vector<Member> members;  // the units' members, unit by unit
    std::span<const Member> MembersOf(const Unit& u) const { return {members.data() + u.first, u.count}; }
    // Per node, the units with a task there, cheapest first: node n's are
    // node_units[node_start[n] .. node_start[n + 1]).
    std::vector<int> node_start;
    std::vector<int> node_units;
    std::vector<uint32_t> nodes;  // the nodes with at least one unit, ascending
    // By JobId value: the job's units, units[first .. last) (grouped).
    absl::flat_hash_map<uint32_t, std::pair<int, int>> by_job;
    std::span<const int> AtNode(uint32_t n) const {
      if (n + 1 >= node_start.size()) return {};
      return {node_units.data() + node_start[n], node_units.data() + node_start[n + 1]};
    }
    // Per whole-GPU task size: every node's cheapest step (the units that
    // let one more task fit there), cheapest first. A binary heap over
    // (cost, node): built in linear time, and a choice reads only its first
    // few entries (taken off and put back). An entry whose stamp is no
    // longer its node's (the node changed: RefreshSteps) is dropped when met.
    struct Steps {
      struct Entry {
        Cost cost;
        uint32_t node;
        uint32_t stamp;
        // Heap order: the top is the cheapest (cost, node).
        bool operator<(const Entry& o) const { return std::tie(o.cost, o.node) < std::tie(cost, node); }
      };
      std::vector<Entry> heap;
      // Per node (NodeId value): the stamp of its live entry; kNone: no step
      // there. A plain array: every node is looked up, most of them once.
      static constexpr uint32_t kNone = UINT32_MAX;
      std::vector<uint32_t> live;
      uint32_t next_stamp = 0;
    };
    std::map<Need, Steps> steps;
    // Reclaim: per unit, whether taking it keeps reclaim's share rules for
    // this offer's queue (ReclaimKeepsShares: the same for every preemptor
    // of the queue), 1 / 0, -1 not asked yet. Valid while `keeps_gen` is the
    // picker's commit count (a commit moves the queues' allocations).
    mutable std::vector<int8_t> keeps;
    mutable int keeps_gen = -1;
    // Reclaim, per task shape: an upper bound on the tasks of that shape
    // the cluster could hold with every unit usable by a preemptor that
    // yielded to nobody taken (MaxTasks): the total, each node's room with
    // those units gone, and the commit count it was computed at.
    struct Bound {
      int gen = -1;
      int64_t tasks = 0;
      std::vector<Room> room;  // by node
    };
    std::map<Need, Bound> bound;
  };
  struct Choice {
    std::vector<int> units;  // indices into Offer::units
    Cost worst;
    int whole = 0;  // whole-job units
    bool ok = false;
  };
  // Local view of a choice in progress: units taken, GPUs they free.
  struct Draft;

  // The offer for p's (queue, priority), built now unless it exists; built
  // with the preemptor that first asked for it (a deferred one's).
  using OfferKey = std::pair<uint32_t, int64_t>;
  Offer& OfferFor(const Job& p);
  void BuildOffer(Offer& offer, const Job& p, int64_t p_priority);
  // BuildOffer's working lists (the thread keeps one, so that their
  // capacity outlives the picker: a picker is made per action run).
  struct BuildScratch {
    std::vector<const Job*> eligible;
    std::vector<TaskRef> candidates;
    std::vector<Member> members;
    std::vector<std::pair<int, int>> range;
    std::vector<int> slot;
    std::vector<int> picked;
    std::vector<int> last;
    std::vector<std::pair<uint32_t, int>> at;
    std::vector<int> in_job;
    std::vector<int> fill;
    void Clear() {
      eligible.clear();
      candidates.clear();
      members.clear();
      range.clear();
      slot.clear();
      picked.clear();
      last.clear();
      at.clear();
      in_job.clear();
      fill.clear();
    }
  };
  // An offer's content depends on when it is built (the victims' state
  // and rankings then, before later commits). When TryForCount can tell
  // without it that the preemptor gets nothing (FitsWithoutVictims,
  // ReclaimBound), the build is deferred with the preemptor that asked:
  // it is made before the next commit (BuildDeferred), or when another
  // preemptor of the key needs it, on the same state as then; one still
  // deferred when the action ends is never built (NextChange).
  std::map<OfferKey, const Job*> deferred_;
  void BuildDeferred();
  // ChooseIn's first test for the whole cluster: `count` tasks of `need`
  // fit in the free room of the schedulable nodes (GPUs are not what the
  // preemptor waits for; no victim is chosen).
  bool FitsWithoutVictims(const Need& need, int count) const;
  // v's units: `held` are all its stoppable members (by task index),
  // `allowed` the plugins' subset of them (indices into `held`, ascending).
  void BuildUnits(Offer& offer, const Job& v, int64_t priority, std::span<const Member> held,
                  const std::vector<int>& allowed) const;
  // Session::JobPriority, asked once per job for the whole action.
  int64_t PriorityOf(const Job& j);
  Room RoomAt(uint32_t node) const;
  bool Eligible(const Job& p, int64_t p_priority, const Job& v, int64_t v_priority) const;
  // Whether taking `take` from v's queue for a preemptor in `p_queue` keeps
  // reclaim's rules.
  bool ReclaimKeepsShares(uint32_t p_queue, const Job& v, const Resources& take) const;
  // `p` null: only what does not depend on the preemptor.
  bool Usable(const Offer& offer, const Job* p, const Unit& u) const;
  // Reclaim: ReclaimKeepsShares for unit `u` of `offer`, remembered until
  // the next commit.
  bool KeepsShares(const Offer& offer, const Unit& u) const;
  // Reclaim: Offer::bound for `need`, less, for a preemptor that yielded
  // to jobs (rule 4), what their units add on their nodes (they are never
  // usable for it). ChooseIn can never count more tasks in any scope (Fits
  // grows with room; it takes only usable units), so a preemptor that
  // needs more cannot be helped, and TryForCount returns at once with what
  // ChooseIn would have concluded.
  int64_t MaxTasks(Offer& offer, const Job& p, const Need& need) const;
  // Reclaim, before any offer of queue q is built: an upper bound on the
  // tasks of `need` MaxTasks could count for a preemptor of q (each
  // schedulable node's room with every stoppable task of a running job
  // whose giver toward q is above its deserved share gone, a task of a job
  // with surplus members counted twice as a shrink unit and its whole
  // job's unit would be). Computed once per queue, shape and commit.
  int64_t ReclaimBound(uint32_t q, const Need& need);
  // Node n's room with every unit usable by a preemptor that yielded to
  // nobody taken (nothing on an unschedulable node).
  Room BoundRoom(const Offer& offer, uint32_t n) const;
  // The cheapest units of `node`, in cost order and skipping those that free
  // nothing the task still lacks there, that fit one more task of `need`,
  // given `draft`; false when none. `cost`: the step's last (dearest) unit;
  // `units` (may be null): the step's units.
  bool StepAt(const Offer& offer, const Job* p, const Need& need, uint32_t node, const Draft* draft, Cost* cost,
              std::vector<int>* units) const;
  Offer::Steps& StepsFor(Offer& offer, const Need& need);
  void RefreshSteps(Offer& offer, std::span<const uint32_t> nodes);
  Choice ChooseIn(Offer& offer, const Job& p, const Need& need, int count, int tier, topology::DomainId domain);
  // After P was placed (in the open statement) on the vacated units
  // `chosen`: the units it needs, dropping dearest first every unit the
  // landing nodes can spare.
  // (Where each vacated task was is its member's node in the offer, which
  // no commit has changed yet.)
  std::vector<int> Needed(const Job& p, const Offer& offer, const std::vector<int>& chosen) const;
  // Vacates `chosen` and places P in one statement; true when committed.
  // With `minimize`, retries without the units that turned out unneeded
  // (until none does), falling back to the last set that placed P.
  bool Apply(Job& p, Offer& offer, std::vector<int> chosen, bool minimize);
  // After a commit: units of the victims are updated in every offer.
  void Taken(std::span<const std::pair<JobId, uint32_t>> tasks, std::span<const uint32_t> nodes);
  std::string Reason(const Job& p, const Unit& u, const Cost& cost);

  Session& s_;
  EvictMode mode_;
  EvictionArgs args_;
  int evicted_ = 0;
  int commits_ = 0;  // statements committed (Apply): the state moved
  bool had_victims_ = false;
  bool chose_ = false;  // some preemptor reached ChooseIn
  mutable Timestamp cooldown_end_ = kNoChange;  // Eligible notes it
  // PriorityOf's answers for this picker: by JobId value, valid where the
  // stamp is this picker's (one array per thread, reused by every picker:
  // a fresh array per picker cleared an entry for every job ever submitted,
  // each cycle, three times).
  struct PriorityMemo {
    std::vector<int64_t> value;
    std::vector<uint32_t> stamp;
    uint32_t last = 0;
  };
  static PriorityMemo& Priorities();
  uint32_t priority_stamp_ = 0;
  static constexpr int64_t kNoPriority = INT64_MIN;
  // Offers per (queue, priority) of the preemptor: the plugins' victim
  // answers depend on nothing else of it (a documented assumption).
  std::map<OfferKey, Offer> offers_;
  // The running jobs, in active-job order, all of them and per queue: what
  // an offer scans (a preempt offer its preemptor's queue only), instead of
  // every active job for every offer. Built at the first use, again after
  // a commit (which may stop or start jobs).
  void IndexRunning();
  bool running_indexed_ = false;
  std::vector<uint32_t> pending_;  // TryFor's scratch (no allocation per preemptor)
  std::vector<const Job*> running_;  // in active-job order
  // The same jobs grouped by queue (each group in active-job order): queue
  // q's are by_queue_[queue_start_[q] .. queue_start_[q + 1]). Three arrays,
  // not a vector per queue: an index costs three allocations whatever the
  // number of queues or running jobs.
  std::vector<const Job*> by_queue_;
  std::vector<uint32_t> queue_start_;
  std::vector<uint32_t> queue_at_;  // IndexRunning's cursor per queue
  std::span<const Job* const> RunningIn(uint32_t q) const {
    return {by_queue_.data() + queue_start_[q], by_queue_.data() + queue_start_[q + 1]};
  }
  // Per queue: the lowest priority among its running jobs (kNoPriority: not
  // computed yet; INT64_MAX: none runs). A preemptor at or below it has no
  // victim (Eligible) and needs no offer.
  int64_t LowestRunningPriority(uint32_t queue);
  std::vector<int64_t> lowest_;
  // ReclaimBound's rooms per preemptor queue (by node) and its counts per
  // task shape, valid while `gen` is the commit count.
  struct LooseRoom {
    int gen = -1;
    std::vector<Room> room;
    std::map<Need, int64_t> tasks;
  };
  std::map<uint32_t, LooseRoom> loose_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_ACTIONS_VICTIMS_H_
