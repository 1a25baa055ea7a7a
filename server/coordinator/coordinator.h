// The coordinator: owns each running job's membership and hands it to the
// worker shims (see DESIGN.md, "Elastic membership protocol").
//
// A job's membership is a sequence of *generations*. Each generation is the
// ordered list of member workers; a member's rank is its position. The
// coordinator publishes generation g+1 when
//   - a resize request changes the job's target size (standalone mode; later
//     the engine's decisions),
//   - a member misses heartbeats for longer than the timeout, its membership
//     stream drops, or a peer reports a failure,
//   - a member leaves, or a waiting (standby) worker can fill a missing slot.
// It also serves a key-value store scoped by (job, generation) that the shims
// use for rendezvous (Gloo addresses, NCCL unique ids).
//
// This class is the transport-free core: thread-safe, clock injected, so the
// gRPC service (coordinator_service.h) and the tests drive the same code.
#ifndef RINGMASTER_SERVER_COORDINATOR_COORDINATOR_H_
#define RINGMASTER_SERVER_COORDINATOR_COORDINATOR_H_

#include <cstdint>
#include <functional>
#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/base/thread_annotations.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/synchronization/mutex.h"
#include "absl/time/time.h"
#include "api/coordinator.pb.h"
#include "server/coordinator/learned_speed.h"

namespace ringmaster::server {

struct CoordinatorOptions {
  // A member whose last heartbeat is older than this is declared failed.
  absl::Duration heartbeat_timeout = absl::Seconds(5);
  // Time members are given to re-form (sent as the update's deadline).
  absl::Duration reform_deadline = absl::Seconds(30);
  // After a coordinator restart, how long a re-adopted job waits for all of
  // its previous members before it re-forms with those that came back.
  absl::Duration adoption_grace = absl::Seconds(5);
  // A failure report that names nobody already known dead waits this long
  // for the dead peer to be detected (dropped stream, late heartbeats) before
  // forcing a re-formation with the same members; this saves a useless
  // generation that still contains the dead worker. Zero = force at once.
  absl::Duration failure_report_grace = absl::Milliseconds(300);
  // A standby worker that joins a running job with free slots, and does not
  // fill them all, is let in after this settle window (measured from the
  // first such newcomer; Tick() publishes), so that newcomers joining a
  // few ms apart enter one grow generation: one re-formation instead of
  // one per newcomer (and no newcomer left in a generation its peers skip,
  // see docs/SHIM.md). Newcomers that fill every free slot are let in at
  // once. Zero = at once.
  absl::Duration grow_settle = absl::Milliseconds(200);
  // Limits on the key-value store, per value and per (job, generation).
  size_t max_value_bytes = 1 << 20;
  size_t max_keys_per_generation = 4096;
  // Longest a single KvWait may block, whatever the client asks for.
  absl::Duration max_wait = absl::Seconds(60);
  // Clock; absl::Now when empty. Tests inject a fake one.
  std::function<absl::Time()> now;
};

// Identifies one membership stream of one worker; a newer Join of the same
// worker replaces the older stream.
struct Subscription {
  std::string job;
  std::string worker_id;
  uint64_t id = 0;
};

class Coordinator {
 public:
  explicit Coordinator(CoordinatorOptions options);
  Coordinator(const Coordinator&) = delete;
  Coordinator& operator=(const Coordinator&) = delete;

  // Registers a worker's membership stream. Creates the job when it is new
  // (target size = request.desired_workers, at least 1; or, when the worker
  // reports a previous generation, the job is re-adopted after a coordinator
  // restart). May publish a generation. Errors: INVALID_ARGUMENT for an empty
  // job or worker id; FAILED_PRECONDITION when the job has finished.
  absl::StatusOr<Subscription> Join(const api::JoinRequest& request);

  // Waits up to `wait` for a generation newer than the last one delivered on
  // this subscription. Returns nullopt on timeout; CANCELLED when the
  // subscription was replaced by a newer Join or the worker left.
  absl::StatusOr<std::optional<api::MembershipUpdate>> NextUpdate(
      const Subscription& sub, absl::Duration wait);

  // The subscription's stream dropped. A member of the current generation
  // counts as failed (new generation); a standby is forgotten.
  void Disconnect(const Subscription& sub);

  // Records liveness; returns the job's current generation.
  absl::StatusOr<int64_t> Heartbeat(const api::HeartbeatRequest& request);

  // Key-value store scoped by (job, generation). Writes and reads must name
  // the current generation: an older one is FAILED_PRECONDITION ("stale
  // generation"), a newer one INVALID_ARGUMENT. Oversized values and too many
  // keys are INVALID_ARGUMENT. Unknown jobs are NOT_FOUND.
  absl::Status KvSet(const api::KvSetRequest& request);
  absl::StatusOr<std::optional<std::string>> KvGet(
      const api::KvGetRequest& request);
  // Blocks until every key exists (OK, with the values in key order when
  // request.return_values), the timeout passes (DEADLINE_EXCEEDED) or the
  // generation is superseded (ABORTED).
  absl::StatusOr<std::vector<std::string>> KvWait(
      const api::KvWaitRequest& request);

  absl::Status CommitProgress(const api::CommitProgressRequest& request);

  // A peer reports a failed collective. Publishes a failure generation
  // without the suspect (or, with no suspect, without members whose
  // heartbeats are late or whose stream is gone; if none, after
  // failure_report_grace with the same members so that everybody re-forms).
  // Reports for an older generation are ignored. Returns the current
  // generation.
  absl::StatusOr<int64_t> ReportFailure(
      const api::ReportFailureRequest& request);

  absl::Status Leave(const api::LeaveRequest& request);

  // Sets the job's target size (and optionally its rank order). Shrinks at
  // once; grows as soon as enough standby workers are connected. Returns the
  // current generation after the change.
  absl::StatusOr<int64_t> Resize(const api::ResizeRequest& request);

  // Engine-managed membership (`ringmaster serve`, server/coordinator/membership_bridge.h):
  // the job's members are exactly `workers`, ranks in this order (the
  // engine's ring order). Creates the job when it is new; the job then
  // ignores Join's desired_workers and Resize. A generation with exactly
  // the listed workers that are connected is published
  //   - at once when a current member is not listed (a planned shrink: the
  //     leavers get the generation with rank -1 and leave at their step
  //     boundary) or is gone (a failure);
  //   - otherwise once every listed worker has joined (a start or a grow:
  //     newcomers are waited for, so that one grow is one re-formation).
  // Workers not listed stay standby. `deadline` (the engine's: a shrink's
  // leavers must be gone by then) is the published update's deadline; an
  // infinite one means published time + reform_deadline. Returns the
  // current generation. INVALID_ARGUMENT for an empty list, an empty or
  // repeated worker id; FAILED_PRECONDITION when the job has finished.
  absl::StatusOr<int64_t> SetMembers(const std::string& job,
                                     std::vector<std::string> workers,
                                     api::Reason reason,
                                     absl::Time deadline = absl::InfiniteFuture());
  // Forgets a job the engine no longer runs (finished, cancelled): its
  // streams end (NextUpdate returns CANCELLED) and a later Join creates it
  // anew. No-op for an unknown job.
  void DropJob(const std::string& job);

  absl::StatusOr<api::JobStatus> GetJob(const std::string& job) const;
  // Each job's speed reports so far (rank 0's step times at its commits,
  // docs/SHIM.md "Speed reports"): the means per generation size, as
  // GetJob's `speed`; `reports` (all sizes together) grows with every
  // report counted, so a reader sees what is new. Jobs without any are left
  // out; a dropped job's are gone.
  struct SpeedReports {
    std::string job;
    int64_t reports = 0;
    std::vector<SpeedObservation> sizes;
  };
  std::vector<SpeedReports> AllSpeedReports() const;

  // Declares members with late heartbeats failed and ends adoption grace
  // periods; the service calls it periodically, tests call it directly.
  void Tick();

  // Wakes every waiter; NextUpdate and KvWait return CANCELLED afterwards.
  void Shutdown();

 private:
  struct Worker {
    std::string id;
    std::string host;
    std::vector<int32_t> gpus;
    absl::Time last_seen;
    uint64_t subscription = 0;
    int64_t delivered_generation = 0;
    // Ordering among standby workers: first come, first served.
    uint64_t join_order = 0;
    // From the Join after a coordinator restart.
    int64_t last_generation = 0;
    int32_t last_rank = -1;
  };
  struct Job {
    std::string name;
    int64_t generation = 0;
    int64_t last_failure_generation = 0;
    api::Reason reason = api::REASON_UNSPECIFIED;
    int32_t target = 1;
    std::vector<std::string> members;        // current generation, rank order
    std::vector<bool> members_have_state;    // parallel to members
    std::vector<std::string> ring_order;     // optional placement order
    // SetMembers: ring_order is the exact member list, Join's
    // desired_workers and Resize do not apply.
    bool managed = false;
    absl::Time next_deadline = absl::InfiniteFuture();  // for the next Publish
    absl::Time deadline = absl::InfiniteFuture();       // of the current generation
    std::map<std::string, Worker> workers;   // connected workers
    int64_t committed_step = 0;
    int64_t committed_position = 0;
    bool finished = false;
    bool adopting = false;  // re-adopted after a restart, not yet re-formed
    absl::Time adopt_since;
    absl::Time published_at;
    // A failure report for this generation awaits its grace period.
    int64_t pending_failure_generation = 0;
    absl::Time pending_failure_since;
    // Standby newcomers wait out grow_settle since this time (see there);
    // any publication ends the wait.
    bool grow_pending = false;
    absl::Time grow_pending_since;
    std::map<std::string, std::string> kv;  // current generation only
    // Measured speed by (GPUs, nodes) of the generation (CommitProgress).
    struct Speed {
      double seconds = 0;  // sums over the reports
      double samples = 0;
      int64_t samples_reports = 0;
      int64_t reports = 0;
    };
    std::map<std::pair<int32_t, int32_t>, Speed> speed;
  };

  absl::Time Now() const;
  absl::StatusOr<Job*> FindJob(const std::string& name)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  absl::Status CheckGeneration(const Job& job, int64_t generation) const;
  // Recomputes the member list; publishes a new generation when it differs
  // (or when `force`). `dropped` are members to remove.
  void Reconcile(Job& job, api::Reason reason,
                 const std::vector<std::string>& dropped, bool force)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Reconcile of a SetMembers job (see SetMembers).
  void ReconcileManaged(Job& job, api::Reason reason,
                        const std::vector<std::string>& dropped, bool force)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  void Publish(Job& job, std::vector<std::string> members, api::Reason reason)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  api::MembershipUpdate UpdateFor(const Job& job,
                                  const std::string& worker) const
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  bool IsMember(const Job& job, const std::string& worker) const;
  // Join of `worker` into a running job: whether its grow waits for the
  // settle window (free slots that the standby workers do not all fill).
  bool DeferGrow(Job& job, const std::string& worker)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);

  const CoordinatorOptions options_;
  mutable absl::Mutex mu_;
  // Wakes every waiter of either kind (a generation change ends KvWaits).
  void WakeAll() ABSL_EXCLUSIVE_LOCKS_REQUIRED(mu_);
  // Generation or subscriptions changed (NextUpdate waits on it). Apart from
  // kv_changed_ so that each KvSet of a rendezvous does not wake every
  // member's stream thread.
  absl::CondVar members_changed_;
  absl::CondVar kv_changed_;  // a key was set, or the generation changed
  std::map<std::string, Job> jobs_ ABSL_GUARDED_BY(mu_);
  uint64_t next_subscription_ ABSL_GUARDED_BY(mu_) = 1;
  uint64_t next_join_order_ ABSL_GUARDED_BY(mu_) = 1;
  bool shutdown_ ABSL_GUARDED_BY(mu_) = false;
};

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_COORDINATOR_COORDINATOR_H_
