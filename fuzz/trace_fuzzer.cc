// Fuzzes the trace readers (simulator/trace.h: the native CSV and every
// format `--format auto` detects) and the node lists the simulator reads
// (topology/node_lists.h). Properties: reading never crashes; a trace that
// reads has jobs with at least one task, sorted by submit time.
#include "fuzz/fuzz_input.h"
#include "simulator/trace.h"
#include "topology/node_lists.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringmaster;
  const std::string_view text = fuzz::AsText(data, size);
  auto jobs = simulator::ParseTrace(text, "fuzz.csv", simulator::TraceFormat::kAuto);
  if (jobs.ok()) {
    for (size_t i = 0; i < jobs->size(); ++i) {
      const simulator::TraceJob& j = (*jobs)[i];
      if (j.tasks() < 1) fuzz::Fail("a job without tasks", j.id());
      if (i > 0 && j.submit_s < (*jobs)[i - 1].submit_s) fuzz::Fail("not sorted by submit time", j.id());
    }
  }
  (void)topology::ParseOpenbNodeList(text, "fuzz.csv");
  (void)topology::ParsePhillyMachineList(text, "fuzz.txt");
  return 0;
}
