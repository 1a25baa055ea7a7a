#include "topology/cluster.h"

#include <gtest/gtest.h>

#include "topology/uniform_cluster.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::topology {
namespace {

TEST(Cluster, ShapeHashIsEqualForInterchangeableNodes) {
  auto node = [](std::string name, std::string model, int island, std::string rack) {
    NodeSpec n;
    n.name = std::move(name);
    n.allocatable = Resources(32000, int64_t{1} << 36, 0);
    for (int g = 0; g < 4; ++g) {
      Gpu gpu;
      gpu.index = g;
      gpu.model = model;
      gpu.nvlink_island = g < 2 ? 0 : island;  // island 0: all four GPUs on one
      n.gpus.push_back(gpu);
    }
    n.domains = {std::move(rack)};
    return n;
  };
  auto c = Cluster::Build({{"leaf", 100}}, {node("a", "H100", 1, "r0"), node("b", "H100", 1, "r0"),
                                            node("c", "A100", 1, "r0"), node("d", "H100", 0, "r0"),
                                            node("e", "H100", 1, "r1")});
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->shape_hash(NodeId(0)), c->shape_hash(NodeId(1)));  // same hardware and rack
  EXPECT_NE(c->shape_hash(NodeId(0)), c->shape_hash(NodeId(2)));  // GPU model
  EXPECT_NE(c->shape_hash(NodeId(0)), c->shape_hash(NodeId(3)));  // NVLink islands
  EXPECT_NE(c->shape_hash(NodeId(0)), c->shape_hash(NodeId(4)));  // rack
}

// The extender keeps a node's id with its text, tagged with name_epoch():
// the epoch must change whenever a name may map to another id, and never
// repeat across clusters.
TEST(Cluster, NameEpochChangesWithEveryAddAndRemoveAndIsNeverShared) {
  auto c = MakeUniformCluster({.nodes = 2, .gpus_per_node = 8, .nodes_per_rack = 2});
  ASSERT_TRUE(c.ok());
  auto d = MakeUniformCluster({.nodes = 2, .gpus_per_node = 8, .nodes_per_rack = 2});
  ASSERT_TRUE(d.ok());
  const uint64_t e0 = c->name_epoch();
  EXPECT_NE(e0, 0u);
  EXPECT_NE(e0, d->name_epoch()) << "two clusters with the same names do not share an epoch";
  Cluster copy = *c;
  EXPECT_EQ(copy.name_epoch(), e0) << "a copy maps names as its original does";
  NodeSpec extra = c->node(NodeId(1));
  extra.name = "extra";
  ASSERT_TRUE(c->AddNode(extra).ok());
  const uint64_t e1 = c->name_epoch();
  EXPECT_NE(e1, e0);
  ASSERT_TRUE(c->RemoveNode(c->FindNode("extra")).ok());
  EXPECT_NE(c->name_epoch(), e1);
  EXPECT_NE(c->name_epoch(), e0) << "removed: 'extra' resolves to nothing now, not to what a hint kept";
  EXPECT_FALSE(c->FindNode("extra").valid());
  EXPECT_EQ(copy.name_epoch(), e0) << "the copy did not change";
}

TEST(Cluster, UniformShapeHasRacksAndSpines) {
  auto c = MakeUniformCluster({.nodes = 8, .gpus_per_node = 8, .nodes_per_rack = 2, .racks_per_spine = 2});
  ASSERT_TRUE(c.ok());
  EXPECT_EQ(c->num_tiers(), 2);
  EXPECT_EQ(c->domains(1).size(), 4u);
  EXPECT_EQ(c->domains(2).size(), 2u);
  EXPECT_EQ(c->total_gpus(), 64);
  EXPECT_EQ(c->CommonTier(NodeId(0), NodeId(1)), 1);
  EXPECT_EQ(c->CommonTier(NodeId(0), NodeId(2)), 2);
  EXPECT_EQ(c->CommonTier(NodeId(0), NodeId(4)), 3);
  EXPECT_EQ(c->domain(2, c->DomainOf(NodeId(5), 2)).total_gpus, 32);
}

TEST(Cluster, RejectsInconsistentDomainsAndDuplicates) {
  std::vector<TierSpec> tiers = {{"rack", 100}, {"spine", 50}};
  NodeSpec a{.name = "a", .domains = {"r1", "s1"}};
  NodeSpec b{.name = "b", .domains = {"r1", "s2"}};
  auto c = Cluster::Build(tiers, {a, b});
  ASSERT_ERROR(c, absl::StatusCode::kInvalidArgument, "node 'b': rack 'r1' is under spine 's1', not 's2'");
  EXPECT_EQ(c.status().message(), "node 'b': rack 'r1' is under spine 's1', not 's2'");
  NodeSpec a2{.name = "a", .domains = {"r2", "s1"}};
  EXPECT_EQ(Cluster::Build(tiers, {a, a2}).status().message(), "node 'a': duplicate name");
  NodeSpec few{.name = "x", .domains = {"r1"}};
  EXPECT_ERROR(Cluster::Build(tiers, {few}), absl::StatusCode::kInvalidArgument, "node 'x': has 1 domains, the cluster has 2 tiers");
}

}  // namespace
}  // namespace ringmaster::topology
