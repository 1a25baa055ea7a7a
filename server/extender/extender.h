// The Kubernetes scheduler extender: kube-scheduler's filter, prioritize,
// preempt and bind calls translated into calls on the one scheduler::Engine.
// Policy lives in the engine; the extender only translates.
//
// Assumptions: kube-scheduler calls filter for every pod it schedules (all
// pods go through the extender: no managedResources, or every gang pod asks
// for one), and the extender stanza sets bindVerb (kube-scheduler then binds
// through us, which is how a reservation becomes a binding).
//
// Algorithm, per pod:
//  0. Who may place: a pod whose spec.schedulerName is not the extender's
//     profile (`scheduler_name`) is refused, and so is a second pod with the
//     UID of one already admitted (one pod counts once). A Node object the
//     engine lacks is learned only while fewer than `max_learned_nodes` were
//     learned from requests, and, when the Binder can list the API server's
//     Nodes, only when the API server has a Node of that name (and UID).
//     Each refusal leaves an audit line in the log (who, what, why).
//  1. Filter learns the Node objects sent (nodeCacheCapable false) that the
//     engine lacks, reads the pod, and adds it to its gang: the pod group
//     named by its labels / annotations (kube_objects.h), or a gang of one.
//     The candidate nodes of the request are the offered nodes of the pod
//     and of its gang's other pods of the same request shape (the latest
//     filter knows best what other pods hold): until the next such filter,
//     their tasks may be placed only on them (a predicate the engine checks
//     with the policy's, Engine::SetDriverPredicate).
//  2. While fewer than min member pods of the gang were seen, every
//     candidate node fails with the count seen and the count awaited. A
//     grouped pod without the min-member annotation takes the PodGroup's
//     minMember, read through the Binder on a worker thread: the filter
//     never waits for the API server; until the answer is in, every node
//     fails with "looking up PodGroup NS/NAME's minMember" and the next
//     filter after it uses the value (podgroup_lookup.h).
//  3. The pod that completes the gang submits it to the engine as one job
//     (a role per distinct request shape) and runs a cycle at once.
//  4. A Bind decision of the engine reserves the member's node (when the
//     gang starts, its pods that carry an index, kube_objects.h, first take
//     the tasks of their rank in the ring order, RankByIndex): from then on
//     the member's filter passes exactly that node (the others need no
//     reason: the pod is placed), and its prioritize lists only that node,
//     with kMaxExtenderPriority (hosts left out score 0). A gang the engine
//     cannot place fails every node with the engine's pending reason. A
//     filter that no longer offers the member's reserved node (other pods
//     took it) re-plans the gang at once, inside the offered nodes, when no
//     member has bound yet; with a member bound the reservation stands
//     until it expires (step 5).
//  5. Reservations expire `reservation_timeout_ms` after the gang was placed
//     unless every member bound: the job is cancelled in the engine (its
//     GPUs are free again) and the gang is forgotten; its pods form it anew
//     on their next filter.
//  6. Bind is honoured only for a pod admitted through Filter, with the same
//     (non-empty) UID, to the node reserved for it; anything else is refused
//     with an audit line. It hands the binding to the Binder (none: only
//     recorded) and confirms it to the engine; a failed bind releases the
//     whole gang, which the engine places again.
//  7. An Eviction decision of the engine (preempt, reclaim, shrink, cancel)
//     for a bound member is carried out on its pod: the Binder evicts it
//     through the API server's Eviction subresource with the grace period
//     left until the eviction's deadline (none: only recorded). Evictions
//     are sent after the lock is released (Tick, Filter), so the HTTP calls
//     never hold up the engine; one the API server refuses (a disruption
//     budget: 429) is tried again on each Tick until its deadline. The
//     engine counts the GPUs free at the deadline (the pod is not watched)
//     (pod_evictions.h).
//  8. A gang cancelled (the admin API's CancelJob, JobCancelledLocked) stays
//     cancelled, across a restart too: its pods' filters fail, unresolvable;
//     its bound pods are evicted with the engine's cancel grace period and
//     their GPUs stay held (Cancelling) until the deadline (the pods are not
//     watched).
//  9. What others hold: with an API server, the pods bound to nodes are read
//     every `foreign_pods_refresh_ms` on a thread of their own; the cpu,
//     memory and whole GPUs of those ringmaster did not admit (another
//     scheduler's, or pods bound directly) count as used on their nodes in
//     the engine, so its free counts agree with kube-scheduler's and a gang
//     is not planned onto GPUs that others hold. When they hold GPUs that
//     ringmaster gave its own tasks, the two schedulers disagree: a warning
//     names the node (foreign_pods.h). Without an API server nothing of
//     theirs is counted; the offered nodes (step 1) still keep a gang off
//     nodes kube-scheduler finds full, at the cost of a re-plan.
//
// Beside this file: the gangs it keeps (gang.h), their records in the store
// and their restore (gang_store.h), the PodGroup lookup thread
// (podgroup_lookup.h), the poller of what others hold (foreign_pods.h), the
// evictions on their way to the API server (pod_evictions.h) and the calls
// on the API server (binder.h).
//
// Cycles: the extender runs none of its own. It is a sink of the daemon's
// CycleLoop (server/loop/cycle_loop.h): BeforeCycle releases expired
// reservations, OnCycle turns the cycle's binds into reservations and its
// evictions of bound members into pod evictions, AfterCycle sends them. A
// gang completed by a filter, or re-planned, asks the loop for a cycle at
// once (CycleLoop::RunLocked), which every other sink sees too.
//
// Thread-safe: every call takes the loop's mutex (the engine is not
// thread-safe), which the daemon shares between the extender, the loop and
// its admin service (server/daemon/daemon.h). An extender made without a
// loop has its own loop and mutex (tests, the fuzzer).
#ifndef RINGMASTER_SERVER_EXTENDER_EXTENDER_H_
#define RINGMASTER_SERVER_EXTENDER_EXTENDER_H_

#include <map>
#include <memory>
#include <optional>
#include <set>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/synchronization/mutex.h"
#include "scheduler/clock.h"
#include "scheduler/engine.h"
#include "server/extender/binder.h"
#include "server/extender/extender_wire.h"
#include "server/extender/foreign_pods.h"
#include "server/extender/gang.h"
#include "server/extender/gang_store.h"
#include "server/extender/kube_objects.h"
#include "server/extender/pod_evictions.h"
#include "server/extender/podgroup_lookup.h"
#include "server/loop/cycle_loop.h"

namespace ringmaster::server {

struct ExtenderOptions {
  // A gang's reservations are released this long after it was placed unless
  // every member has bound by then.
  int64_t reservation_timeout_ms = 60'000;
  // How Node objects' labels map to the engine's network tiers; must match
  // the tiers of the engine's cluster when `learn_nodes` is set.
  TopologyLabels topology = DefaultTopologyLabels();
  // Add Node objects sent by kube-scheduler that the engine does not know.
  // Off when the cluster comes from a cluster file.
  bool learn_nodes = true;
  // A PodGroup the binder could not find (or read) is asked for again only
  // after this long; meanwhile its gang waits as unresolvable.
  int64_t pod_group_retry_ms = 10'000;
  // Keeps the Node objects learned and the gangs (pods, reservations,
  // bindings) across a restart; must outlive the extender. Null: nothing
  // survives. A bind is answered only once it is durable.
  ExtenderStore* store = nullptr;
  // The kube-scheduler profile whose pods the extender places: a pod whose
  // spec.schedulerName differs is refused. Empty: any pod (tests).
  std::string scheduler_name;
  // At most this many nodes are learned from requests (a flood of invented
  // Node objects is refused beyond it). 0: no limit.
  int max_learned_nodes = 0;
  // The API server's Node list (Binder::ListNodes) is read again at most
  // this often when a request names a node it lacks.
  int64_t node_list_refresh_ms = 10'000;
  // The pods bound to nodes (Binder::ListBoundPods) are read this often on a
  // thread of their own, and what the pods ringmaster did not admit hold is
  // counted as used on their nodes (Engine::SetForeignUsage), so the
  // engine's free GPUs agree with kube-scheduler's. 0: not read (without an
  // API server; RefreshForeignPods still reads them once).
  int64_t foreign_pods_refresh_ms = 0;
};

class Extender : public CycleSink {
 public:
  // `engine` and `clock` must outlive the extender; the engine must be
  // created with auto_confirm_binds = false. `binder` may be null (--no-bind:
  // bindings are only recorded). `loop`, when given, runs the engine's
  // cycles and its mutex is the lock every call on the engine takes; it must
  // be the loop of `engine` and outlive the extender, which adds itself to
  // its sinks (and removes itself when destroyed). Null: the extender's own
  // loop, with itself as the only sink.
  Extender(scheduler::Engine& engine, const scheduler::Clock& clock, ExtenderOptions options, Binder* binder,
           CycleLoop* loop = nullptr);
  // Stops its threads (a PodGroup lookup in flight: the Binder's timeout at
  // most) and clears the engine's driver predicate: the engine must outlive the
  // extender, and one extender serves an engine at a time (destroy the old
  // one before making the next).
  ~Extender();

  // `who` names the caller in audit lines (the HTTP peer).
  ExtenderFilterResult Filter(const ExtenderArgs& args, std::string_view who = {});
  // The reserved node with kMaxExtenderPriority; nothing for a pod without one.
  HostPriorityList Prioritize(const ExtenderArgs& args);
  // Keeps only the victims on the pod's reserved node (the engine decides
  // preemption for ringmaster's gangs; kube-scheduler should not evict for
  // them elsewhere); a pod without a reservation gets no victims.
  ExtenderPreemptionResult Preempt(const ExtenderPreemptionArgs& args);
  ExtenderBindingResult Bind(const ExtenderBindingArgs& args, std::string_view who = {});

  // The admin API cancelled `job`: when it is one of the extender's gangs,
  // the gang is cancelled for good (step 8) and the record is queued for
  // the store (the caller syncs it). Call with the engine lock held.
  void JobCancelledLocked(scheduler::JobId job) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Whether `job` is one of the extender's gangs (its pods must be stopped
  // when it is cancelled). Call with the engine lock held.
  bool OwnsJobLocked(scheduler::JobId job) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) {
    return gang_of_job_.contains(job);
  }

  // The loop's periodic step (CycleLoop::Tick): releases expired
  // reservations, runs one engine cycle, records its binds as reservations
  // and carries out its evictions (and those refused before, until their
  // deadline).
  void Tick() ABSL_LOCKS_EXCLUDED(mu_) { loop_.Tick(); }
  CycleLoop& loop() { return loop_; }

  // CycleSink (called by the loop).
  // Releases the reservations past their timeout (step 5).
  void BeforeCycle() override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The cycle's binds of the extender's gangs become reservations (step 4),
  // its evictions of their bound members pod evictions queued for
  // AfterCycle (step 7); the changed gangs are queued for the store.
  void OnCycle(const scheduler::Decisions& d) override ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Sends the queued evictions (outside the lock).
  void AfterCycle() override ABSL_LOCKS_EXCLUDED(mu_) { evictions_.Send(); }

  // After a restart, before serving: re-learns the stored Node objects and
  // re-forms the stored gangs; a gang that was submitted is restored in the
  // engine (Engine::RestoreJob) with its members' reservations and
  // bindings, or waits again when they no longer fit. DataLoss naming the
  // record when one does not read.
  absl::Status Restore(const std::vector<StoredRecord>& records) ABSL_LOCKS_EXCLUDED(mu_);

  // Reads the bound pods through the Binder (outside the lock) and counts
  // on each node what the pods ringmaster did not admit hold (step 9,
  // ForeignPods::Refresh). Unimplemented when the binder cannot list pods.
  absl::Status RefreshForeignPods() ABSL_LOCKS_EXCLUDED(mu_) { return foreign_.Refresh(); }
  // What the last RefreshForeignPods counted on `node` as held by others:
  // (whole GPUs, pods). Tests, `nodes`.
  std::pair<int64_t, int> ForeignOn(const std::string& node) const ABSL_LOCKS_EXCLUDED(mu_) {
    return foreign_.On(node);
  }

  // The PodGroup's minMember, for groups whose pods carry no min-member
  // annotation (scheduler-plugins keeps it only on the PodGroup object).
  void SetPodGroupMinMember(const std::string& ns, const std::string& group, int min_member)
      ABSL_LOCKS_EXCLUDED(mu_);
  // Blocks until no PodGroup lookup is queued or in flight (tests).
  void WaitForPodGroupLookups() { lookup_.Wait(); }

  // The names a gang's pods know themselves by, for the coordinator: the
  // gang ("NAMESPACE/GROUP", or "NAMESPACE/POD" for a pod without a group)
  // in `gang`, and each engine task's pod name (without the namespace) in
  // `pods`. False when `job` is not one of the extender's gangs. Call with
  // the engine lock held (a sink of the loop, where the extender's lock
  // is the engine's).
  bool PodNamesLocked(scheduler::JobId job, std::string* gang, std::map<uint32_t, std::string>* pods) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  // --- Inspection (tests, admin) ---------------------------------------------
  // The node reserved for pod "namespace/name", if any.
  std::optional<std::string> ReservedNode(const std::string& pod_key) const;
  // Bindings done so far, as (pod "namespace/name", node).
  std::vector<std::pair<std::string, std::string>> bindings() const;
  // Evictions carried out so far (sent to the Binder and accepted, or only
  // recorded without one), in order.
  std::vector<PodEviction> evictions() const;
  size_t gang_count() const;

 private:
  void LearnNodes(const ExtenderArgs& args, std::string_view who, ExtenderFilterResult& result)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Before LearnNodes, outside the lock: reads the API server's Node list
  // when the request names a node the engine and the list lack and the
  // list is older than node_list_refresh_ms.
  void RefreshNodeList(const ExtenderArgs& args) ABSL_LOCKS_EXCLUDED(mu_);
  // The per-pod predicate (step 1).
  scheduler::Verdict Offered(const scheduler::TaskRef& task, scheduler::NodeId node) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Records the candidate nodes of `me`'s filter as the offered nodes of
  // every member of its gang with its request shape.
  void SetOffered(Gang& gang, const GangMember& me, const ExtenderArgs& args) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // A gang that starts (its kStart membership): the pods that carry an index
  // (PodInfo::rank) take, within each request shape, the engine tasks they
  // hold in ring order by index, so a launcher that ranks by index ranks as
  // the placement was chosen for. Before any member is bound.
  void RankByIndex(Gang& gang, const scheduler::MembershipChange& start) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Step 4: the member's reservation is outside its offered nodes.
  void Replan(Gang& gang, const GangMember& me) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // An audit line for a refused write.
  static void Refused(std::string_view who, std::string_view what, std::string_view why);
  // What a filter answers: pass `node`, or fail every candidate with `reason`.
  struct FilterVerdict {
    std::string node;
    std::string reason;
    bool unresolvable = false;
  };
  FilterVerdict FilterPod(const PodInfo& pod, const nlohmann::json& raw, const ExtenderArgs& args,
                          std::string_view who) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // For a grouped pod without the min-member annotation whose gang's min
  // member is not known yet: asks the PodGroup lookup to read the PodGroup.
  void LookUpPodGroup(const PodInfo& pod) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The lookup's answer for PodGroup `name` (on its thread, under the lock):
  // its gang, when not submitted yet, takes the minMember or the reason.
  void PodGroupAnswered(const std::string& name, const absl::StatusOr<int>& min_member)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The PodGroup's minMember is known: its gang, when not submitted yet, takes it.
  void MinMemberKnownLocked(const std::string& name, int min_member) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  static std::string MinMemberUnknown(const std::string& gang_name);
  Gang& Admit(const PodInfo& pod, const nlohmann::json& raw) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status Submit(Gang& gang) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // The gang as one job named `job_name`; `tasks` gets its members in task
  // order with their roles.
  scheduler::JobSpec GangSpec(Gang& gang, const std::string& job_name,
                              std::vector<std::pair<int, GangMember*>>* tasks) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Writes the gangs changed since the last call to the store.
  void Persist() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { store_.Flush(gangs_, attempts_, engine_.state()); }
  // Restore's steps: a stored Node object learned again; a stored gang
  // formed again, and restored in the engine when it was submitted.
  absl::Status RestoreNode(const std::string& name, const nlohmann::json& node) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status RestoreGang(StoredGang stored) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Why the pod's gang has no node for it yet.
  std::string WaitReason(const Gang& gang) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // One engine cycle now, through the loop (every sink sees it).
  void RunCycle() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_) { (void)loop_.RunLocked(); }
  ExtenderBindingResult BindLocked(const ExtenderBindingArgs& args, std::string_view who)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void ExpireReservations() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Forget(const std::string& gang_name) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  GangMember* FindMember(const std::string& pod_key) ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  const GangMember* FindMember(const std::string& pod_key) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  scheduler::Engine& engine_;
  const scheduler::Clock& clock_;
  const ExtenderOptions options_;
  Binder* const binder_;

  absl::Mutex own_mu_;
  std::unique_ptr<CycleLoop> own_loop_;  // without a loop given
  CycleLoop& loop_;
  absl::Mutex& mu_;  // loop_.mutex()
  std::map<std::string, Gang> gangs_ ABSL_GUARDED_BY(mu_);
  std::map<std::string, std::string> gang_of_pod_ ABSL_GUARDED_BY(mu_);
  std::map<scheduler::JobId, std::string> gang_of_job_ ABSL_GUARDED_BY(mu_);
  std::set<std::pair<scheduler::Timestamp, std::string>> expiries_ ABSL_GUARDED_BY(mu_);
  // The pod ("namespace/name") admitted with each non-empty UID.
  std::map<std::string, std::string> pod_of_uid_ ABSL_GUARDED_BY(mu_);
  // Nodes learned from requests (and restored), against max_learned_nodes.
  int learned_nodes_ ABSL_GUARDED_BY(mu_) = 0;
  // The API server's Nodes (name -> UID) and when they were read; checking
  // is off once the binder answers Unimplemented.
  std::map<std::string, std::string> api_nodes_ ABSL_GUARDED_BY(mu_);
  scheduler::Timestamp api_nodes_at_ ABSL_GUARDED_BY(mu_) = -1;
  bool api_nodes_fetching_ ABSL_GUARDED_BY(mu_) = false;
  bool check_nodes_ ABSL_GUARDED_BY(mu_) = true;
  std::string api_nodes_error_ ABSL_GUARDED_BY(mu_);  // why the last read failed
  std::vector<std::pair<std::string, std::string>> bindings_ ABSL_GUARDED_BY(mu_);
  // The evictions decided (step 7), until the API server accepts them.
  PodEvictions evictions_;
  // Times each gang was submitted: a gang formed again after its
  // reservations expired is submitted as "name#N".
  std::map<std::string, int> attempts_ ABSL_GUARDED_BY(mu_);
  // The records of the nodes learned and the gangs (options_.store).
  GangStore store_ ABSL_GUARDED_BY(mu_);
  // The PodGroup lookup (step 2) and the poller of what others hold (step
  // 9): their threads call back into the members above (with the lock held),
  // so they come last and ~Extender stops them first.
  PodGroupLookup lookup_;
  ForeignPods foreign_;
};

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_EXTENDER_EXTENDER_H_
