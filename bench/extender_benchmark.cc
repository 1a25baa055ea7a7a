// The extender's cost per filter request in-process (no HTTP): parse the
// body, filter, write the answer, for a pod whose reservation stands (the
// steady state of a pod kube-scheduler retries, as bench/extender.sh), with
// N Node objects (nodeCacheCapable false, what deploy/ configures) or N node
// names. Node objects are those bench/extender.sh sends (about 224 bytes
// each); BM_FilterNodeObjectsLarge adds the status fields a real Node
// carries (conditions, addresses, images, nodeInfo: about 4 KB each).
//
//   build/ci/bench/extender_benchmark --benchmark_filter=Filter
#include <benchmark/benchmark.h>

#include <string>
#include <vector>

#include <nlohmann/json.hpp>

#include "plugins/registry.h"
#include "scheduler/policy.h"
#include "server/extender/extender.h"
#include "server/extender/extender_wire.h"

namespace ringmaster::server {
namespace {

using nlohmann::json;

json Pod() {
  return json{{"metadata", {{"name", "bench-0"}, {"namespace", "bench"}, {"uid", "u-bench-0"}}},
              {"spec",
               {{"schedulerName", "ringmaster"},
                {"containers",
                 {{{"name", "t"},
                   {"resources", {{"limits", {{"nvidia.com/gpu", "8"}}}, {"requests", {{"cpu", "8"}, {"memory", "64Gi"}}}}}}}}}}};
}

json NodeObject(int i, bool large) {
  char name[32];
  std::snprintf(name, sizeof(name), "node-%04d", i);
  char rack[32];
  std::snprintf(rack, sizeof(rack), "rack-%03d", i / 40);
  json n{{"metadata", {{"name", name}, {"labels", {{"nvidia.com/gpu.product", "H100"}, {"topology.ringmaster.io/rack", rack}}}}},
         {"status", {{"allocatable", {{"cpu", "128"}, {"memory", "1Ti"}, {"nvidia.com/gpu", "8"}, {"pods", "110"}}}}}};
  if (large) {
    n["metadata"]["uid"] = std::string("4f1c2d3e-0000-4000-8000-") + std::to_string(100000000000 + i);
    n["metadata"]["resourceVersion"] = std::to_string(123456 + i);
    n["metadata"]["annotations"] = {{"node.alpha.kubernetes.io/ttl", "0"},
                                    {"volumes.kubernetes.io/controller-managed-attach-detach", "true"}};
    n["status"]["capacity"] = n["status"]["allocatable"];
    json conditions = json::array();
    for (const char* t : {"MemoryPressure", "DiskPressure", "PIDPressure", "Ready"}) {
      conditions.push_back({{"type", t}, {"status", "False"}, {"lastHeartbeatTime", "2026-12-03T10:00:00Z"},
                            {"lastTransitionTime", "2026-11-01T10:00:00Z"}, {"reason", "KubeletHasSufficientMemory"},
                            {"message", "kubelet has sufficient memory available"}});
    }
    n["status"]["conditions"] = conditions;
    n["status"]["addresses"] = {{{"type", "InternalIP"}, {"address", "10.0.0.1"}}, {{"type", "Hostname"}, {"address", name}}};
    json images = json::array();
    for (int k = 0; k < 12; ++k) {
      images.push_back({{"names", {"nvcr.io/nvidia/pytorch@sha256:0123456789abcdef0123456789abcdef" + std::to_string(k),
                                   "nvcr.io/nvidia/pytorch:24." + std::to_string(k)}},
                        {"sizeBytes", 9876543210LL}});
    }
    n["status"]["images"] = images;
    n["status"]["nodeInfo"] = {{"kernelVersion", "6.1.0-27-amd64"}, {"osImage", "Debian GNU/Linux 12"},
                               {"containerRuntimeVersion", "containerd://1.7.0"}, {"kubeletVersion", "v1.31.0"},
                               {"architecture", "amd64"}, {"operatingSystem", "linux"}};
  }
  return n;
}

// `changing`: every request's node list differs from the one before (node
// 0's resourceVersion alternates), as when a Node object was updated between
// two filters: no request is answered from the remembered node list.
// `fresh`: node 0's resourceVersion is a new one in every request (as
// bench/extender.sh's "changing" rows), so node 0 is never one read before.
void RunFilter(benchmark::State& state, bool objects, bool large, bool changing = false, bool fresh = false) {
  const int nodes = static_cast<int>(state.range(0));
  json body{{"Pod", Pod()}};
  if (objects) {
    json items = json::array();
    for (int i = 0; i < nodes; ++i) items.push_back(NodeObject(i, large));
    body["Nodes"] = {{"metadata", json::object()}, {"items", items}};
    body["NodeNames"] = nullptr;
  } else {
    json names = json::array();
    for (int i = 0; i < nodes; ++i) names.push_back(NodeObject(i, false)["metadata"]["name"]);
    body["Nodes"] = nullptr;
    body["NodeNames"] = names;
  }
  std::string texts[2];
  for (int k = 0; k < 2; ++k) {
    if (objects) body["Nodes"]["items"][0]["metadata"]["resourceVersion"] = std::to_string(10000000 + k);
    texts[k] = body.dump();
    texts[k].reserve(texts[k].size() + 64);  // the HTTP server's padding (kHttpBodyPadding)
  }
  const size_t size = texts[0].size();
  auto registry = plugins::BuiltinRegistry();
  scheduler::ManualClock clock{1'000};
  scheduler::EngineOptions eo;
  eo.auto_confirm_binds = false;
  eo.check_invariants = false;
  const TopologyLabels labels = DefaultTopologyLabels();
  auto engine = *scheduler::Engine::Create(*topology::Cluster::Build(TierSpecs(labels), {}), scheduler::DefaultPolicy(),
                                           registry, clock, eo);
  if (!objects) {
    // The cluster from names: learn it once from objects.
    json items = json::array();
    for (int i = 0; i < nodes; ++i) items.push_back(NodeObject(i, false));
    ExtenderArgs learn;
    learn.pod = json{{"metadata", {{"name", "learn"}, {"namespace", "bench"}, {"uid", "u-learn"}}},
                     {"spec", {{"schedulerName", "ringmaster"}, {"containers", {{{"name", "t"}}}}}}};
    learn.nodes.emplace(items.begin(), items.end());
    ExtenderOptions o;
    Extender tmp(*engine, clock, o, nullptr);
    tmp.Filter(learn);
  }
  ExtenderOptions o;
  o.scheduler_name = "ringmaster";
  Extender ext(*engine, clock, o, nullptr);
  // Warm-up: the first filter places the pod; later ones find its reservation.
  auto first = ParseExtenderArgsPadded(std::string_view(texts[0].data(), size), 64);
  if (!first.ok()) {
    state.SkipWithError(std::string(first.status().message()).c_str());
    return;
  }
  const ExtenderFilterResult placed = ext.Filter(*first);
  if (placed.error.size() || (placed.nodes ? placed.nodes->size() : placed.node_names->size()) != 1) {
    state.SkipWithError(("not placed: " + ToJson(placed)).c_str());
    return;
  }
  // Node 0's version digits, to write a new one in place.
  const size_t version_at = texts[0].find("\"resourceVersion\":\"") + 19;
  int64_t version = 20000000;
  int k = 0;
  for (auto _ : state) {
    if (changing) k ^= 1;
    if (fresh) {
      const std::string digits = std::to_string(version++ % 90000000 + 10000000);
      texts[0].replace(version_at, digits.size(), digits);
    }
    auto args = ParseExtenderArgsPadded(std::string_view(texts[k].data(), size), 64);
    std::string answer = ToJson(ext.Filter(*args));
    benchmark::DoNotOptimize(answer);
  }
  state.SetBytesProcessed(static_cast<int64_t>(state.iterations()) * static_cast<int64_t>(size));
  state.counters["request_bytes"] = static_cast<double>(size);
}

void BM_FilterNodeNames(benchmark::State& state) { RunFilter(state, false, false); }
void BM_FilterNodeObjects(benchmark::State& state) { RunFilter(state, true, false); }
void BM_FilterNodeObjectsLarge(benchmark::State& state) { RunFilter(state, true, true); }
void BM_FilterNodeObjectsChanging(benchmark::State& state) { RunFilter(state, true, false, true); }
void BM_FilterNodeObjectsLargeChanging(benchmark::State& state) { RunFilter(state, true, true, true); }
void BM_FilterNodeObjectsNewVersion(benchmark::State& state) { RunFilter(state, true, false, false, true); }
BENCHMARK(BM_FilterNodeNames)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FilterNodeObjects)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FilterNodeObjectsLarge)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FilterNodeObjectsChanging)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FilterNodeObjectsLargeChanging)->Arg(1000)->Unit(benchmark::kMicrosecond);
BENCHMARK(BM_FilterNodeObjectsNewVersion)->Arg(1000)->Arg(5000)->Unit(benchmark::kMicrosecond);

}  // namespace
}  // namespace ringmaster::server

BENCHMARK_MAIN();
