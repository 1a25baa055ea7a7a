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
