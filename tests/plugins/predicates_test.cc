#include "plugins/predicates.h"

#include <gtest/gtest.h>

#include "tests/support/builders.h"

namespace ringmaster::testing {
namespace {

using plugins::PredicatesPlugin;
using topology::NodeId;

TEST(PredicatesPlugin, SelectorTaintModelAndShares) {
  ClusterBuilder cb;
  cb.NodesPerRack(2).Gpus(2).Label(0, "pool", "train").Taint(1, "dedicated", "ml");
  EngineHarness h(cb.Build());
  h.Submit(JobBuilder("sel").Selector("pool", "train").GpusPerTask(1).Build());
  h.Submit(JobBuilder("tol").Tolerate("dedicated", "ml").GpusPerTask(1).Build());
  h.Submit(JobBuilder("model").Model("A100").GpusPerTask(1).Build());
  h.Submit(JobBuilder("share").GpuShare(600).Build());
  const auto& st = h.state();
  EXPECT_TRUE(PredicatesPlugin::Check(st, {&h.job("sel"), 0}, NodeId(0)).ok());
  EXPECT_EQ(PredicatesPlugin::Check(st, {&h.job("sel"), 0}, NodeId(1)).reason(), "node selector mismatch");
  EXPECT_EQ(PredicatesPlugin::Check(st, {&h.job("share"), 0}, NodeId(1)).reason(), "untolerated taint");
  EXPECT_TRUE(PredicatesPlugin::Check(st, {&h.job("tol"), 0}, NodeId(1)).ok());
  EXPECT_EQ(PredicatesPlugin::Check(st, {&h.job("model"), 0}, NodeId(0)).code(),
            scheduler::Verdict::Code::kUnresolvable);
  EXPECT_TRUE(PredicatesPlugin::Check(st, {&h.job("share"), 0}, NodeId(0)).ok());
}

TEST(PredicatesPlugin, AJobAcceptingSeveralModelsGoesToAnyOfThem) {
  // Three racks of one node each: models A, B, C.
  std::vector<topology::NodeSpec> nodes;
  for (const char* m : {"A", "B", "C"}) {
    topology::NodeSpec n;
    n.name = std::string("n") + m;
    n.allocatable = topology::Resources(8000, int64_t{1} << 34, 0);
    for (int g = 0; g < 2; ++g) n.gpus.push_back(topology::Gpu{g, m, 0, 0, 0, 0});
    nodes.push_back(std::move(n));
  }
  auto c = topology::Cluster::Build({}, nodes);
  ASSERT_TRUE(c.ok());
  EngineHarness h(*std::move(c));
  scheduler::JobSpec spec = JobBuilder("ab").Gang(4).GpusPerTask(1).Build();
  spec.gpu_models = {"B", "A"};
  h.Submit(spec);
  const auto& st = h.state();
  EXPECT_TRUE(PredicatesPlugin::Check(st, {&h.job("ab"), 0}, NodeId(0)).ok());
  EXPECT_TRUE(PredicatesPlugin::Check(st, {&h.job("ab"), 0}, NodeId(1)).ok());
  EXPECT_EQ(PredicatesPlugin::Check(st, {&h.job("ab"), 0}, NodeId(2)).reason(), "GPU model mismatch");
  h.Cycle();
  ASSERT_TRUE(h.Running("ab"));  // 4 GPUs: all of A and B, none of C
  for (const scheduler::Task& t : h.job("ab").tasks()) EXPECT_NE(t.node, NodeId(2));
}

TEST(PredicatesPlugin, SharesNeverExceedOneGpu) {
  // One node with one GPU: 600m + 600m cannot both fit; 600m + 400m can.
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(1).Build());
  h.Submit(JobBuilder("a").GpuShare(600).Build());
  h.Submit(JobBuilder("b").GpuShare(600).Build());
  h.Submit(JobBuilder("c").GpuShare(400).Build());
  h.Cycle();
  EXPECT_TRUE(h.Running("a"));
  EXPECT_FALSE(h.Running("b"));
  EXPECT_TRUE(h.Running("c"));
  EXPECT_EQ(h.state().GpuFree(NodeId(0), 0, false), 0);
  EXPECT_NE(h.job("b").pending_reason().find("insufficient GPU share"), std::string::npos)
      << h.job("b").pending_reason();
}

}  // namespace
}  // namespace ringmaster::testing
