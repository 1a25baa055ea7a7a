// Fuzzes the jobs file (scheduler/job_file.h). Properties: parsing never
// crashes; the jobs of a file that parses are submitted (or rejected with a
// reason) and scheduled without breaking an engine invariant.
#include <vector>

#include "fuzz/fuzz_engine.h"
#include "fuzz/fuzz_input.h"
#include "scheduler/job_file.h"
#include "scheduler/policy.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringmaster;
  auto timed = scheduler::ParseTimedJobFile(fuzz::AsText(data, size), "fuzz.yaml");
  if (!timed.ok()) return 0;
  std::vector<scheduler::JobSpec> jobs;
  for (scheduler::TimedJob& t : *timed) jobs.push_back(std::move(t.spec));
  fuzz::RunEngine(fuzz::SmallCluster(), scheduler::DefaultPolicy(), jobs);
  return 0;
}
