// A small engine run for the fuzz targets whose input, once accepted, must
// also be safe to schedule with: a policy, a jobs file, a cluster file.
// Accepted input that then breaks an engine invariant or crashes a cycle is
// a bug the parsers' validation missed.
#ifndef RINGMASTER_FUZZ_FUZZ_ENGINE_H_
#define RINGMASTER_FUZZ_FUZZ_ENGINE_H_

#include <vector>

#include "scheduler/job.h"
#include "scheduler/policy.h"
#include "topology/cluster.h"

namespace ringmaster::fuzz {

// 4 nodes of 8 H100s, two racks.
topology::Cluster SmallCluster();

// A few gangs of different shapes (two elastic, two on GPU shares), in
// `queues` round-robin ("default" when empty).
std::vector<scheduler::JobSpec> SampleJobs(const std::vector<std::string>& queues);

// Creates an engine (a rejected policy or cluster is not a failure: returns),
// submits `jobs` (rejected ones skipped), runs a few cycles on a manual clock,
// cancels one job, finishes another, runs again. Aborts when a cycle breaks
// an invariant of the engine's state, or of the decision oracle
// (tests/support/decision_oracle.h), which recounts GPUs, shares, nodes,
// queues, gangs and hard topology from the decisions alone.
void RunEngine(topology::Cluster cluster, const scheduler::Policy& policy,
               const std::vector<scheduler::JobSpec>& jobs);

}  // namespace ringmaster::fuzz

#endif  // RINGMASTER_FUZZ_FUZZ_ENGINE_H_
