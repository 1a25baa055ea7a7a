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
//      step that lets one more of P's tasks fit on a node, until the minimum
//      fits by GPU count. The scope with the fewest whole-job evictions, then
//      the cheapest worst unit, then the fewest units wins; at most
//      kMaxDomainTries scopes per preemptor.
//   4. Simulate: inside one Statement the chosen units are vacated and P is
//      placed by the same GangPlacer allocate uses. Units with no task on a
//      node P landed on are dropped and the placement retried without them.
//      Commit only when P is placed; otherwise nothing is evicted.
//   5. Graceful: with a grace period the victims go to Releasing with that
//      deadline and P is pipelined (held) onto their GPUs until they are
//      gone; without one they are released and P binds in this cycle.
#ifndef RINGMASTER_SCHEDULER_ACTIONS_VICTIMS_H_
#define RINGMASTER_SCHEDULER_ACTIONS_VICTIMS_H_

#include <map>
#include <set>
#include <span>
#include <unordered_map>
#include <string>
#include <tuple>
#include <vector>

#include "absl/container/inlined_vector.h"
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

enum class EvictMode { kPreempt, kReclaim };

class VictimPicker {
 public:
  VictimPicker(Session& session, EvictMode mode, const EvictionArgs& args);

  // Tries to start `preemptor`'s gang minimum by evicting victims. True when
  // it committed (P bound now, or held for its releasing victims).
  bool TryFor(Job& preemptor);

 private:
  // Cost key: smaller is cheaper.
  using Cost = std::tuple<int, int64_t, Timestamp, Timestamp, Timestamp, int64_t, int64_t>;
  struct Unit {
    Job* job = nullptr;
    absl::InlinedVector<uint32_t, 2> tasks;  // a shrink unit holds one task
    bool shrink = false;
    bool dead = false;  // taken by an earlier preemptor this cycle
    Cost cost;
  };
  // Units offered to preemptors of one (queue, priority), kept for the whole
  // action and updated as victims are taken.
  struct Offer {
    std::vector<Unit> units;  // grouped by job, in no particular order of cost
    // Per node, the units with a task there, cheapest first: node n's are
    // node_units[node_start[n] .. node_start[n + 1]).
    std::vector<int> node_start;
    std::vector<int> node_units;
    std::vector<uint32_t> nodes;  // the nodes with at least one unit, ascending
    std::unordered_map<uint32_t, std::vector<int>> by_job;  // by JobId value
    std::span<const int> AtNode(uint32_t n) const {
      if (n + 1 >= node_start.size()) return {};
      return {node_units.data() + node_start[n], node_units.data() + node_start[n + 1]};
    }
    // Per whole-GPU task size: every node's cheapest step (the units that
    // let one more task fit there), ordered by cost.
    struct Steps {
      std::set<std::pair<Cost, uint32_t>> order;
      std::unordered_map<uint32_t, Cost> of;
    };
    std::map<int64_t, Steps> steps;
  };
  struct Choice {
    std::vector<int> units;  // indices into Offer::units
    Cost worst;
    int whole = 0;  // whole-job units
    bool ok = false;
  };
  // Local view of a choice in progress: units taken, GPUs they free.
  struct Draft;

  Offer& OfferFor(const Job& p);
  void BuildUnits(Offer& offer, const Job& v, const std::vector<uint32_t>& allowed) const;
  bool Eligible(const Job& p, const Job& v) const;
  // Whether taking `take` from v's queue keeps reclaim's rules.
  bool ReclaimKeepsShares(const Job& p, const Job& v, const Resources& take) const;
  // `p` null: only what does not depend on the preemptor.
  bool Usable(const Job* p, const Unit& u) const;
  // The cheapest prefix of `node`'s usable units that fits one more task of
  // `per_task` GPUs there, given `draft`; false when none.
  bool StepAt(const Offer& offer, const Job* p, int64_t per_task, uint32_t node, const Draft* draft,
              Cost* cost) const;
  Offer::Steps& StepsFor(Offer& offer, int64_t per_task);
  void RefreshSteps(Offer& offer, const std::vector<uint32_t>& nodes);
  Choice ChooseIn(Offer& offer, const Job& p, int64_t per_task, int need, int tier, topology::DomainId domain);
  // Vacates `chosen` and places P in one statement; true when committed.
  // With `minimize`, retries once without the units that turned out unneeded.
  bool Apply(Job& p, Offer& offer, std::vector<int> chosen, bool minimize);
  // After a commit: units of the victims are updated in every offer.
  void Taken(const std::vector<std::pair<JobId, uint32_t>>& tasks, const std::vector<uint32_t>& nodes);
  std::string Reason(const Job& p, const Unit& u) const;

  Session& s_;
  EvictMode mode_;
  EvictionArgs args_;
  int evicted_ = 0;
  // Offers per (queue, priority) of the preemptor: the plugins' victim
  // answers depend on nothing else of it (a documented assumption).
  std::map<std::pair<uint32_t, int64_t>, Offer> offers_;
};

}  // namespace ringmaster::scheduler

#endif  // RINGMASTER_SCHEDULER_ACTIONS_VICTIMS_H_
