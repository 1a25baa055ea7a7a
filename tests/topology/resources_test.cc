#include "topology/resources.h"
#include "tests/support/status_matchers.h"

#include <gtest/gtest.h>

namespace ringmaster::topology {
namespace {

TEST(Resources, ArithmeticAndLessEqualWithScalars) {
  Resources a(1000, 1 << 20, 2000);
  a.set_scalar("rdma/hca", 2);
  Resources b(500, 0, 1000);
  Resources c = a + b;
  EXPECT_EQ(c.cpu_milli(), 1500);
  EXPECT_EQ(c.scalar("rdma/hca"), 2);
  EXPECT_TRUE(b.LessEqual(a));
  EXPECT_FALSE(a.LessEqual(b));
  EXPECT_TRUE((c - a) == b + Resources().set_scalar("rdma/hca", 0));
  EXPECT_EQ((a * 3).gpu_milli(), 6000);
}

TEST(Resources, ParsesKubernetesQuantities) {
  EXPECT_EQ(*ParseQuantity("500m", true), 500);
  EXPECT_EQ(*ParseQuantity("1.5", true), 1500);
  EXPECT_EQ(*ParseQuantity("16Gi", false), 16LL << 30);
  EXPECT_EQ(*ParseQuantity("2k", false), 2000);
  EXPECT_ERROR(ParseQuantity("-1", true), absl::StatusCode::kInvalidArgument, "negative quantity '-1'");
  EXPECT_ERROR(ParseQuantity("12 apples", true), absl::StatusCode::kInvalidArgument, "quantity '12 apples' has unknown suffix ' apples'");
  EXPECT_ERROR(ParseQuantity("", true), absl::StatusCode::kInvalidArgument, "empty quantity");
  EXPECT_EQ(ParseQuantity("3Qi", false).status().message(), "quantity '3Qi' has unknown suffix 'Qi'");
}

TEST(Resources, PrintsShort) {
  EXPECT_EQ(Resources(2000, 4LL << 30, 500).ToString(), "cpu=2000m mem=4Gi gpu=0.5");
  EXPECT_EQ(FormatGpus(8000), "8");
  EXPECT_EQ(Resources(0, 0, 16000).ToString(), "gpu=16");
  EXPECT_EQ(Resources().ToString(), "nothing");
}

}  // namespace
}  // namespace ringmaster::topology
