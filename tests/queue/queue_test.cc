#include "queue/queue.h"
#include "tests/support/status_matchers.h"

#include <gtest/gtest.h>

namespace ringmaster::queue {
namespace {

TEST(QueueTree, ParentsBeforeChildrenAndLeaves) {
  QueueSpec root{.name = "org"}, a{.name = "a", .parent = "org"}, b{.name = "b", .parent = "org"};
  auto t = QueueTree::Build({a, root, b});
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_EQ(t->spec(0).name, "org");
  EXPECT_FALSE(t->is_leaf(0));
  EXPECT_TRUE(t->is_leaf(*t->Find("a")));
  EXPECT_EQ(t->parent(*t->Find("b")), 0);
}

TEST(QueueTree, RejectsCyclesUnknownParentsAndBadWeights) {
  QueueSpec a{.name = "a", .parent = "b"}, b{.name = "b", .parent = "a"};
  auto t = QueueTree::Build({a, b});
  ASSERT_ERROR(t, absl::StatusCode::kInvalidArgument, "<policy>: queues[a].parent: cycle in queue parents: a -> b");
  EXPECT_NE(t.status().message().find("cycle in queue parents"), std::string::npos);
  QueueSpec c{.name = "c", .parent = "nope"};
  EXPECT_NE(QueueTree::Build({c}).status().message().find("unknown parent queue 'nope'"), std::string::npos);
  QueueSpec w{.name = "w", .weight = -2};
  EXPECT_NE(QueueTree::Build({w}).status().message().find("weight: must be > 0"), std::string::npos);
}

TEST(QueueTree, CapabilityLeavesUnsetDimensionsUnlimited) {
  Resources cap(topology::kUnlimited, topology::kUnlimited, 8000);
  EXPECT_TRUE(WithinCapability(Resources(1'000'000, 1LL << 40, 8000), cap));
  EXPECT_FALSE(WithinCapability(Resources(0, 0, 8001), cap));
}

}  // namespace
}  // namespace ringmaster::queue
