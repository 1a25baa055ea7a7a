// Tests for PlanReform (worker_shim/collective.h): the plan every rank must
// compute identically from the coordinator's member lists.
#include <gtest/gtest.h>

#include "worker_shim/collective.h"

namespace ringmaster::shim {
namespace {

TEST(PlanReform, ShrinkExcludesOldRanksOfLeavers) {
  // a b c d -> a c: b (old rank 1) and d (old rank 3) leave.
  ReformPlan p = PlanReform({"a", "b", "c", "d"}, {"a", "c"}, "c", 5, false);
  EXPECT_EQ(p.generation, 5);
  EXPECT_EQ(p.rank, 1);
  EXPECT_EQ(p.old_rank, 2);
  EXPECT_EQ(p.world_size, 2);
  EXPECT_TRUE(p.only_removals);
  EXPECT_EQ(p.excluded, (std::vector<int>{1, 3}));
}

TEST(PlanReform, GrowthOrReorderIsNotOnlyRemovals) {
  EXPECT_FALSE(PlanReform({"a", "b"}, {"a", "b", "c"}, "a", 2, false)
                   .only_removals);
  EXPECT_FALSE(PlanReform({"a", "b", "c"}, {"b", "a"}, "a", 2, false)
                   .only_removals);  // survivors renumbered out of order
  ReformPlan newcomer = PlanReform({}, {"a", "b"}, "b", 2, false);
  EXPECT_EQ(newcomer.old_rank, -1);
  EXPECT_FALSE(newcomer.only_removals);
  EXPECT_TRUE(newcomer.excluded.empty());
}

TEST(PlanReform, SameMembersAreOnlyRemovalsWithNothingExcluded) {
  ReformPlan p = PlanReform({"a", "b"}, {"a", "b"}, "b", 3, true);
  EXPECT_TRUE(p.only_removals);
  EXPECT_TRUE(p.excluded.empty());
  EXPECT_TRUE(p.failure);
}

}  // namespace
}  // namespace ringmaster::shim
