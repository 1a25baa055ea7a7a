// Fuzzes the `nvidia-smi topo -m` parser (topology/nvidia_smi.h). Properties:
// parsing never crashes; a matrix that parses has one GPU per row with
// indices 0..n-1, per-GPU lists of that length, and prints a links block.
#include <string>

#include "fuzz/fuzz_input.h"
#include "topology/nvidia_smi.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ringmaster;
  auto topo = topology::ParseNvidiaSmiTopo(fuzz::AsText(data, size), "fuzz.txt");
  if (!topo.ok()) return 0;
  const size_t n = topo->gpus.size();
  if (topo->numa_affinity.size() != n) fuzz::Fail("numa_affinity length", std::to_string(n));
  for (size_t i = 0; i < n; ++i) {
    if (size_t(topo->gpus[i].index) != i) fuzz::Fail("gpu index", std::to_string(i));
  }
  (void)topology::LinkGroupsYaml(*topo);
  return 0;
}
