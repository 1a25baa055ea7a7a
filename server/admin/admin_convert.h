// Conversions between the admin API's messages (api/admin.proto) and the
// engine's model: a submitted JobSpec in, views of jobs, queues and nodes
// out. The callers hold the engine lock while a view is taken.
#ifndef RINGMASTER_SERVER_ADMIN_ADMIN_CONVERT_H_
#define RINGMASTER_SERVER_ADMIN_ADMIN_CONVERT_H_

#include "absl/status/statusor.h"
#include "api/admin.pb.h"
#include "scheduler/engine.h"

namespace ringmaster::server {

// The engine's JobSpec for a submitted one. INVALID_ARGUMENT naming the
// field ("job 'x': roles[1].gpu_milli: ...") for what the wire allows and the
// model does not (negative amounts, an unknown enum value, GPU shapes).
absl::StatusOr<scheduler::JobSpec> JobSpecFromProto(const admin::JobSpec& p);
admin::JobSpec JobSpecToProto(const scheduler::JobSpec& s);

admin::Resources ResourcesToProto(const topology::Resources& r);
// How much of a job to show: kBrief leaves out the expected start (-1; it
// costs a walk over the running tasks), kList is what ListJobs shows, kFull
// adds the spec and the tasks (GetJob).
enum class JobView { kBrief, kList, kFull };
admin::Job JobToProto(const scheduler::Engine& engine, scheduler::JobId id, JobView view);
admin::ListQueuesResponse QueuesToProto(const scheduler::Engine& engine);
admin::ListNodesResponse NodesToProto(const scheduler::Engine& engine);

}  // namespace ringmaster::server

#endif  // RINGMASTER_SERVER_ADMIN_ADMIN_CONVERT_H_
