#include "topology/cluster.h"

#include <gtest/gtest.h>

#include "topology/uniform_cluster.h"

namespace ringmaster::topology {
namespace {

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
  ASSERT_FALSE(c.ok());
  EXPECT_EQ(c.status().message(), "node 'b': rack 'r1' is under spine 's1', not 's2'");
  NodeSpec a2{.name = "a", .domains = {"r2", "s1"}};
  EXPECT_EQ(Cluster::Build(tiers, {a, a2}).status().message(), "node 'a': duplicate name");
  NodeSpec few{.name = "x", .domains = {"r1"}};
  EXPECT_FALSE(Cluster::Build(tiers, {few}).ok());
}

}  // namespace
}  // namespace ringmaster::topology
