// Fuzzes the cluster file (topology/cluster_file.h). Properties: parsing
// never crashes; a cluster that parses takes a few gangs under the default
// policy without breaking an engine invariant.
#include "fuzz/fuzz_engine.h"
#include "fuzz/fuzz_input.h"
#include "scheduler/policy.h"
#include "topology/cluster_file.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringmaster;
  auto cluster = topology::ParseClusterFile(fuzz::AsText(data, size), "fuzz.yaml");
  if (!cluster.ok()) return 0;
  fuzz::RunEngine(*std::move(cluster), scheduler::DefaultPolicy(), fuzz::SampleJobs({}));
  return 0;
}
