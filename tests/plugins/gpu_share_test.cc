#include "plugins/gpu_share.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/support/builders.h"

namespace ringmaster::testing {
namespace {

using ::testing::HasSubstr;

scheduler::Policy SharePolicy(const std::string& policy) {
  return PolicyFromYaml(R"(actions: "enqueue, allocate, backfill"
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: gpu-share
    arguments: {policy: )" + policy + R"(}
)");
}

// Two 1-GPU nodes; node 0's GPU already holds 600m. A 400m share:
// BestFit fills node 0; FGD (workload: 400m and 1000m tasks) also fills node
// 0, because a 600m-used GPU is a fragment for whole-GPU tasks anyway while
// breaking node 1's whole GPU would add one.
TEST(GpuSharePlugin, FgdAndBestFitFillTheFragment) {
  for (const char* policy : {"fgd", "bestfit", "fgd-bestfit"}) {
    EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(1).Build(), SharePolicy(policy));
    h.Submit(JobBuilder("first").GpuShare(600).Build());
    h.Cycle();
    ASSERT_TRUE(h.Running("first"));
    const topology::NodeId used = h.job("first").task(0).node;
    h.Submit(JobBuilder("whole").GpusPerTask(1).Walltime(1).Build());
    h.Submit(JobBuilder("share").GpuShare(400).Build());
    h.Cycle();
    EXPECT_EQ(h.job("share").task(0).node, used) << policy;
    EXPECT_TRUE(h.Running("whole")) << policy;  // the other GPU stayed whole
  }
}

TEST(GpuSharePlugin, DefaultsToFgd) {
  auto p = plugins::GpuSharePlugin::Create(scheduler::PluginArgs());
  ASSERT_TRUE(p.ok());
  EXPECT_EQ(static_cast<plugins::GpuSharePlugin*>(p->get())->policy(), topology::SharePolicy::kFgd);
  auto r = plugins::GpuSharePlugin::Create(scheduler::PluginArgs("gpu-share", "p.yaml", {{"policy", {"Random", 1, 1}}}));
  ASSERT_TRUE(r.ok());
  EXPECT_EQ(static_cast<plugins::GpuSharePlugin*>(r->get())->policy(), topology::SharePolicy::kRandom);
}

TEST(GpuSharePlugin, SharesNeverOverfillAGpuUnderAnyPolicy) {
  for (const char* policy : {"fgd", "fgd-bestfit", "bestfit", "dotprod", "gpuclustering", "gpupacking", "random"}) {
    EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(2).Build(), SharePolicy(policy));
    const topology::Quantity sizes[] = {300, 700, 250, 500, 1000, 120, 880, 400};
    for (int i = 0; i < 16; ++i) {
      h.Submit(JobBuilder("s" + std::to_string(i)).GpuShare(sizes[i % 8]).Build());
      h.Cycle();
      for (uint32_t n = 0; n < 2; ++n) {
        for (int16_t used : h.state().node(topology::NodeId(n)).gpu_used) ASSERT_LE(used, 1000) << policy;
      }
    }
    EXPECT_TRUE(h.engine().CheckInvariants().ok()) << policy;
  }
}

TEST(GpuSharePlugin, RejectsBadArguments) {
  auto bad = plugins::GpuSharePlugin::Create(scheduler::PluginArgs("gpu-share", "p.yaml", {{"policy", {"worstfit", 4, 14}}}));
  ASSERT_FALSE(bad.ok());
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("p.yaml:4:14: plugins[gpu-share].arguments.policy"));
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("unknown placement policy 'worstfit'"));
  EXPECT_FALSE(plugins::GpuSharePlugin::Create(scheduler::PluginArgs("gpu-share", "p.yaml", {{"weight", {"-5", 4, 14}}})).ok());
  EXPECT_FALSE(plugins::GpuSharePlugin::Create(scheduler::PluginArgs("gpu-share", "p.yaml", {{"colour", {"red", 4, 14}}})).ok());
}

}  // namespace
}  // namespace ringmaster::testing
