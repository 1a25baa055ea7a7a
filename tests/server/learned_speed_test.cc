// LearnedSpeedModel: the fit of rate(g, n) = g / (a + b (g-1) + c (n-1)) to
// hand-computed observations.
#include "server/coordinator/learned_speed.h"

#include <gtest/gtest.h>

#include "tests/support/status_matchers.h"

namespace ringmaster::server {
namespace {

// The step time of a job whose global batch is `samples` at each size, made
// from known a, b, c.
SpeedObservation At(int g, int n, double a, double b, double c, double samples = 0, int64_t reports = 1) {
  const double per_sample_per_gpu = a + b * (g - 1) + c * (n - 1);  // = g / rate
  const double batch = samples > 0 ? samples : g;                   // unknown: one per GPU
  const double rate = g / per_sample_per_gpu;
  return {g, n, batch / rate, samples, reports};
}

TEST(LearnedSpeed, RecoversTheParametersFromThreeSizes) {
  auto m = LearnedSpeedModel::Fit({At(1, 1, 2, 0.1, 0.5, 64), At(4, 1, 2, 0.1, 0.5, 64), At(8, 2, 2, 0.1, 0.5, 64)});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_NEAR((*m)->a(), 2, 1e-9);
  EXPECT_NEAR((*m)->b(), 0.1, 1e-9);
  EXPECT_NEAR((*m)->c(), 0.5, 1e-9);
  // rate(16, 4) = 16 / (2 + 1.5 + 1.5) = 3.2 samples/s.
  EXPECT_NEAR((*m)->Rate(16, 4), 3.2, 1e-9);
  EXPECT_NE((*m)->Describe().find("learned from 3 reports (1 GPUs on 1 node, 4 GPUs on 1 node, 8 GPUs on 2 nodes)"),
            std::string::npos)
      << (*m)->Describe();
}

TEST(LearnedSpeed, WhatTheSamplesCannotTellStaysOptimistic) {
  // One size: linear scaling (b = c = 0) from its per-GPU time.
  auto one = LearnedSpeedModel::Fit({At(4, 1, 2, 0.3, 0, 0, 5)});
  ASSERT_TRUE(one.ok());
  EXPECT_NEAR((*one)->a(), 2 + 0.9, 1e-9);
  EXPECT_DOUBLE_EQ((*one)->b(), 0);
  EXPECT_DOUBLE_EQ((*one)->c(), 0);
  EXPECT_NEAR((*one)->Rate(8, 2) / (*one)->Rate(4, 1), 2.0, 1e-9);
  // Sizes on one node only: no cost per node.
  auto node = LearnedSpeedModel::Fit({At(2, 1, 1, 0.25, 0), At(4, 1, 1, 0.25, 0)});
  ASSERT_TRUE(node.ok());
  EXPECT_NEAR((*node)->b(), 0.25, 1e-9);
  EXPECT_DOUBLE_EQ((*node)->c(), 0);
}

TEST(LearnedSpeed, ASlopeThatComesOutNegativeIsDropped) {
  // Faster per sample on more GPUs (superlinear: caches): b would be
  // negative; it is held at 0 and a is the weighted mean.
  auto m = LearnedSpeedModel::Fit({{1, 1, 1.0, 0, 1}, {2, 1, 0.9, 0, 1}});
  ASSERT_TRUE(m.ok());
  EXPECT_DOUBLE_EQ((*m)->b(), 0);
  EXPECT_NEAR((*m)->a(), (1.0 + 0.9) / 2, 1e-9);
}

TEST(LearnedSpeed, NothingUsableIsAnError) {
  ASSERT_ERROR(LearnedSpeedModel::Fit({}), absl::StatusCode::kInvalidArgument, "no usable speed observation");
  ASSERT_ERROR(LearnedSpeedModel::Fit({{0, 1, 1, 0, 1}, {2, 3, 1, 0, 1}, {2, 1, -1, 0, 1}, {2, 1, 1, 0, 0}}),
               absl::StatusCode::kInvalidArgument, "no usable speed observation");
}

}  // namespace
}  // namespace ringmaster::server
