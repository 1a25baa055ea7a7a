// The admin gRPC service (api/admin.proto) on the daemon's one engine, and
// the daemon's bookkeeping for the jobs it accepted: their journal rows, the
// binds it takes as done, the events it publishes.
//
// Locking: every engine call takes `engine_mu`, the lock the extender and
// the cycle loop take too (server/daemon/daemon.h). The journal is written in
// engine order because writes are queued while that lock is held; a durable
// write is waited for only after the lock is released, so a submission's
// fsync never stalls a cycle.
//
// Jobs submitted here that no executor runs (AdminOptions::executed; see
// server/executor/local_executor.h): a Bind the engine decides for one is taken as
// done at once (bound and started), and an evicted task as gone at once, as
// the simulator does. Executed jobs are bound, started and released by
// their executor, which reports through JobChanged.
#ifndef RINGMASTER_SERVER_ADMIN_ADMIN_SERVICE_H_
#define RINGMASTER_SERVER_ADMIN_ADMIN_SERVICE_H_

#include <grpcpp/grpcpp.h>

#include <functional>
#include <map>
#include <optional>
#include <set>
#include <string>

#include "absl/base/thread_annotations.h"
#include "absl/synchronization/mutex.h"
#include "api/admin.grpc.pb.h"
#include "scheduler/engine.h"
#include "server/admin/event_log.h"
#include "server/admin/queue_sources.h"
#include "server/journal/journal.h"

namespace ringmaster::server {

struct AdminOptions {
  // Mutations need `authorization: Bearer <token>` when set.
  std::string token;
  // Jobs whose tasks something outside the engine runs and must stop when
  // they are cancelled (serve --local-executor's processes, the extender's
  // pods): a cancel keeps them Cancelling, their GPUs held, until the tasks
  // are gone or the grace deadline passes. Empty: none (released at once).
  std::function<bool(const scheduler::Job&)> executed;
  // Called under the engine lock after CancelJob cancelled a job (the
  // extender marks its gang cancelled for good). May be empty.
  std::function<void(scheduler::JobId)> on_cancel;
};

class AdminService final : public admin::Admin::Service {
 public:
  // Everything given must outlive the service; `journal` may be null (no
  // --state: nothing is durable).
  AdminService(scheduler::Engine& engine, absl::Mutex& engine_mu, const scheduler::Clock& clock,
               const scheduler::PluginRegistry& registry, Journal* journal, EventLog& events, AdminOptions options);

  // --- The daemon's side ------------------------------------------------------
  // Re-adopts the journal's jobs (in acceptance order) into the engine.
  // Fails, naming the job, when an active job no longer fits the policy (its
  // queue is gone) or its spec cannot be read.
  absl::Status Recover(const Recovered& r) ABSL_EXCLUSIVE_LOCKS_REQUIRED(engine_mu_);
  // Carries out and journals a cycle's decisions for the jobs accepted here.
  void OnCycle(const scheduler::Decisions& d) ABSL_EXCLUSIVE_LOCKS_REQUIRED(engine_mu_);
  // Parses, validates and applies a policy (UpdatePolicy, SIGHUP). On an
  // invalid policy (InvalidArgument) the old policy stays and `errors` lists
  // each (line:column: field: message). Internal: the policy is in force but
  // the journal refused it (logged; a restart brings back the previous one).
  // Takes the engine lock.
  // The policy's queues are composed with the external ones in force
  // (queue_sources.h): a conflict rejects the policy like an error in it.
  absl::Status ApplyPolicy(const std::string& yaml, const std::string& file, std::vector<std::string>* errors)
      ABSL_LOCKS_EXCLUDED(engine_mu_);
  // What the engine's policy was made of at start: `base` (the file's, the
  // journal's or the built-in) and the external queues composed with it.
  void SetPolicySourcesLocked(scheduler::Policy base, ExternalQueues external) ABSL_EXCLUSIVE_LOCKS_REQUIRED(engine_mu_);
  // New external queues (serve --volcano-queues re-read them): composed with
  // the policy in force and applied. Unchanged ones change nothing (OK). On
  // an error (a conflict with the policy, a queue that still has jobs gone,
  // a tree that does not hold) the queues in force stay and the error names
  // the sources. Takes the engine lock.
  absl::Status SetExternalQueues(ExternalQueues external) ABSL_LOCKS_EXCLUDED(engine_mu_);
  size_t jobs_accepted() const;
  // An executor changed the job through the engine (a task released or
  // failed, the job finished): journals its placement (and its phase, durably
  // when it ended) and publishes `event` with `detail`.
  void JobChanged(scheduler::JobId id, const std::string& event, const std::string& detail)
      ABSL_EXCLUSIVE_LOCKS_REQUIRED(engine_mu_);

  // --- gRPC -------------------------------------------------------------------
  grpc::Status SubmitJob(grpc::ServerContext* ctx, const admin::SubmitJobRequest* req,
                         admin::SubmitJobResponse* resp) override;
  grpc::Status CancelJob(grpc::ServerContext* ctx, const admin::CancelJobRequest* req,
                         admin::CancelJobResponse* resp) override;
  grpc::Status GetJob(grpc::ServerContext* ctx, const admin::GetJobRequest* req, admin::Job* resp) override;
  grpc::Status ListJobs(grpc::ServerContext* ctx, const admin::ListJobsRequest* req,
                        admin::ListJobsResponse* resp) override;
  grpc::Status ListQueues(grpc::ServerContext* ctx, const admin::ListQueuesRequest* req,
                          admin::ListQueuesResponse* resp) override;
  grpc::Status ListNodes(grpc::ServerContext* ctx, const admin::ListNodesRequest* req,
                         admin::ListNodesResponse* resp) override;
  grpc::Status UpdatePolicy(grpc::ServerContext* ctx, const admin::UpdatePolicyRequest* req,
                            admin::UpdatePolicyResponse* resp) override;
  grpc::Status WatchEvents(grpc::ServerContext* ctx, const admin::WatchEventsRequest* req,
                           grpc::ServerWriter<admin::Event>* writer) override;

 private:
  // OK when the token matches (or none is needed); otherwise
  // UNAUTHENTICATED, and an audit line names the peer, `what` and why.
  grpc::Status Authorize(const grpc::ServerContext& ctx, std::string_view what) const;
  void JournalPlacement(scheduler::JobId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(engine_mu_);
  bool Executed(scheduler::JobId id) const ABSL_EXCLUSIVE_LOCKS_REQUIRED(engine_mu_);
  // Engine::CancelJob, then: a job no executor runs has its stopping tasks
  // released at once; one still Cancelling is remembered until it ends.
  absl::Status CancelInEngine(scheduler::JobId id) ABSL_EXCLUSIVE_LOCKS_REQUIRED(engine_mu_);
  // Cancelling jobs that ended since: journaled Aborted (tasks dropped) and
  // published ("cancelled").
  void SettleCancels() ABSL_EXCLUSIVE_LOCKS_REQUIRED(engine_mu_);

  scheduler::Engine& engine_;
  absl::Mutex& engine_mu_;
  const scheduler::Clock& clock_;
  const scheduler::PluginRegistry& registry_;
  Journal* const journal_;
  EventLog& events_;
  const AdminOptions options_;
  // Jobs accepted through this service (the extender's are its own).
  std::map<scheduler::JobId, int64_t> accepted_ ABSL_GUARDED_BY(engine_mu_);
  int64_t next_seq_ ABSL_GUARDED_BY(engine_mu_) = 1;
  std::set<scheduler::JobId> cancelling_ ABSL_GUARDED_BY(engine_mu_);
  // The policy as given (without the external queues), and those queues.
  std::optional<scheduler::Policy> base_policy_ ABSL_GUARDED_BY(engine_mu_);
  ExternalQueues external_ ABSL_GUARDED_BY(engine_mu_);
};

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_ADMIN_ADMIN_SERVICE_H_
