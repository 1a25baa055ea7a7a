#include "queue/proportion.h"

#include <gtest/gtest.h>

namespace ringmaster::queue {
namespace {

Resources Gpu(int n) { return Resources(0, 0, n * 1000); }

TEST(Proportion, WaterFillsByWeightUpToRequest) {
  QueueSpec a{.name = "a", .weight = 3}, b{.name = "b", .weight = 1};
  auto t = *QueueTree::Build({a, b});
  // 64 GPUs; both ask for everything: a = 64 * 3/4 = 48, b = 16.
  auto d = ComputeDeserved(t, Gpu(64), {Gpu(64), Gpu(64)});
  EXPECT_EQ(d[0].gpu_milli(), 48000);
  EXPECT_EQ(d[1].gpu_milli(), 16000);
  // b asks for only 4: it gets 4, and a the remaining 60 (idle flows to who can use it).
  d = ComputeDeserved(t, Gpu(64), {Gpu(64), Gpu(4)});
  EXPECT_EQ(d[1].gpu_milli(), 4000);
  EXPECT_EQ(d[0].gpu_milli(), 60000);
}

TEST(Proportion, GuaranteeFirstThenCapabilityCaps) {
  QueueSpec a{.name = "a", .weight = 1}, b{.name = "b", .weight = 100, .guarantee = {}};
  a.guarantee = Gpu(24);
  b.capability = Resources(topology::kUnlimited, topology::kUnlimited, 30000);
  auto t = *QueueTree::Build({a, b});
  // a is guaranteed 24; the other 40 go by weight 1:100, but b is capped at 30
  // so a gets the rest: a = 64 - 30 = 34.
  auto d = ComputeDeserved(t, Gpu(64), {Gpu(64), Gpu(64)});
  EXPECT_EQ(d[1].gpu_milli(), 30000);
  EXPECT_EQ(d[0].gpu_milli(), 34000);
}

TEST(Proportion, HierarchySplitsTheParentsShare) {
  QueueSpec org{.name = "org", .weight = 1}, other{.name = "other", .weight = 1};
  QueueSpec x{.name = "x", .parent = "org", .weight = 1}, y{.name = "y", .parent = "org", .weight = 3};
  auto t = *QueueTree::Build({org, other, x, y});
  std::vector<Resources> req(4);
  req[*t.Find("x")] = Gpu(64);
  req[*t.Find("y")] = Gpu(64);
  req[*t.Find("org")] = Gpu(128);
  req[*t.Find("other")] = Gpu(64);
  // org and other split 64 -> 32 each; inside org x:y = 1:3 -> 8 and 24.
  auto d = ComputeDeserved(t, Gpu(64), req);
  EXPECT_EQ(d[*t.Find("org")].gpu_milli(), 32000);
  EXPECT_EQ(d[*t.Find("x")].gpu_milli(), 8000);
  EXPECT_EQ(d[*t.Find("y")].gpu_milli(), 24000);
}

TEST(Proportion, GivenWeightsReplaceTheSpecsOnly) {
  // proportion's usageWeight hands its own weights (scaled by 2^16).
  QueueSpec a{.name = "a", .weight = 3}, b{.name = "b", .weight = 1};
  auto t = *QueueTree::Build({a, b});
  const std::vector<Resources> req = {Gpu(64), Gpu(64)};
  // The specs' weights scaled: the same shares, 48 and 16.
  EXPECT_EQ(ComputeDeserved(t, Gpu(64), req, {3 << 16, 1 << 16}), ComputeDeserved(t, Gpu(64), req));
  // 1:1 instead of 3:1: 32 and 32.
  auto d = ComputeDeserved(t, Gpu(64), req, {1 << 16, 1 << 16});
  EXPECT_EQ(d[0].gpu_milli(), 32000);
  EXPECT_EQ(d[1].gpu_milli(), 32000);
  // Guarantees first and capabilities still cap: a guaranteed 24, b capped
  // at 30; the other 40 by the given 1:3 -> a 10, b 30: a 34, b 30. By 3:1
  // instead: a 30 more (54), b 10.
  QueueSpec g{.name = "g", .weight = 1}, c{.name = "c", .weight = 1};
  g.guarantee = Gpu(24);
  c.capability = Resources(topology::kUnlimited, topology::kUnlimited, 30000);
  auto t2 = *QueueTree::Build({g, c});
  d = ComputeDeserved(t2, Gpu(64), req, {1, 3});
  EXPECT_EQ(d[0].gpu_milli(), 34000);
  EXPECT_EQ(d[1].gpu_milli(), 30000);
  d = ComputeDeserved(t2, Gpu(64), req, {3, 1});
  EXPECT_EQ(d[0].gpu_milli(), 54000);
  EXPECT_EQ(d[1].gpu_milli(), 10000);
}

TEST(Proportion, DominantShare) {
  // 16/64 GPUs = .25, 512/1024 cores = .5 -> .5
  EXPECT_DOUBLE_EQ(DominantShare(Resources(512000, 0, 16000), Resources(1024000, 0, 64000)), 0.5);
}

}  // namespace
}  // namespace ringmaster::queue
