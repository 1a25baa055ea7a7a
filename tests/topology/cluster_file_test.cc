#include "topology/cluster_file.h"
#include "tests/support/source_dir.h"
#include "tests/support/status_matchers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ringmaster::topology {
namespace {

using ::testing::HasSubstr;

constexpr char kTwoTier[] = R"(tiers:
  - name: leaf
    bandwidth_gbps: 400
  - name: spine
    bandwidth_gbps: 200
link_profiles:
  hgx:
    nvlink_islands: [[0, 1, 2, 3, 4, 5, 6, 7]]
    pcie_switches: [[0, 1], [2, 3], [4, 5], [6, 7]]
    numa: [[0, 1, 2, 3], [4, 5, 6, 7]]
    nvlink_gbps: 3600
node_groups:
  - name: dgx-{0..7}
    gpus: 8
    gpu_model: H100
    gpu_memory: 80Gi
    cpu: 112
    memory: 2Ti
    labels: {pool: train}
    taints: [{key: dedicated, value: ml, effect: NoSchedule}]
    links: hgx
    network:
      fill: {leaf: 2, spine: 2}
  - name: infer-%02d
    count: 3
    start: 1
    gpus: 4
    gpu_model: L4
    cpu: 32
    memory: 256Gi
    links:
      nvlink_islands: [[0, 1]]
    network:
      fill: {leaf: 4}
      in: {spine: infer-spine}
)";

TEST(ClusterFile, BuildsNodesGroupsAndDomains) {
  auto c = ParseClusterFile(kTwoTier, "two.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->num_nodes(), 11u);
  ASSERT_EQ(c->num_tiers(), 2);
  EXPECT_EQ(c->tier(1).name, "leaf");
  EXPECT_EQ(c->tier(2).bandwidth_gbps, 200);
  // 8 dgx nodes, 2 per leaf -> 4 leaves, 2 leaves per spine -> 2 spines;
  // 3 infer nodes -> one leaf under infer-spine.
  EXPECT_EQ(c->domains(1).size(), 5u);
  EXPECT_EQ(c->domains(2).size(), 3u);
  EXPECT_EQ(c->total_gpus(), 8 * 8 + 3 * 4);

  const NodeId d0 = c->FindNode("dgx-0"), d1 = c->FindNode("dgx-1"), d2 = c->FindNode("dgx-2"),
               d4 = c->FindNode("dgx-4");
  ASSERT_TRUE(d4.valid());
  EXPECT_EQ(c->CommonTier(d0, d1), 1);  // same leaf
  EXPECT_EQ(c->CommonTier(d0, d2), 2);  // leaf 1, same spine
  EXPECT_EQ(c->CommonTier(d0, d4), 3);  // spine 1: only the cluster
  EXPECT_EQ(c->domain(1, c->DomainOf(d2, 1)).name, "dgx-leaf-1");
  EXPECT_EQ(c->domain(2, c->DomainOf(d4, 2)).name, "dgx-spine-1");

  const NodeSpec& dgx = c->node(d0);
  EXPECT_EQ(dgx.labels.at("pool"), "train");
  ASSERT_EQ(dgx.taints.size(), 1u);
  EXPECT_EQ(dgx.taints[0].effect, TaintEffect::kNoSchedule);
  EXPECT_EQ(dgx.allocatable.cpu_milli(), 112000);
  EXPECT_EQ(dgx.allocatable.memory(), int64_t{2} << 40);
  EXPECT_EQ(dgx.allocatable.gpu_milli(), 8000);
  EXPECT_EQ(dgx.gpus[5].memory, int64_t{80} << 30);
  EXPECT_EQ(dgx.gpus[5].model, "H100");
  EXPECT_EQ(dgx.gpus[5].nvlink_island, 0);
  EXPECT_EQ(dgx.gpus[5].pcie_switch, 2);
  EXPECT_EQ(dgx.gpus[5].numa, 1);
  EXPECT_EQ(dgx.link_gbps.nvlink_gbps, 3600);
  EXPECT_EQ(dgx.link_gbps.pcie_switch_gbps, 0);  // default

  const NodeId i1 = c->FindNode("infer-01");
  ASSERT_TRUE(i1.valid());
  EXPECT_FALSE(c->FindNode("infer-00").valid());
  const NodeSpec& infer = c->node(i1);
  // Islands: listed {0,1}, then singletons 2 and 3 -> ids 0, 0, 1, 2.
  EXPECT_EQ(infer.gpus[1].nvlink_island, 0);
  EXPECT_EQ(infer.gpus[2].nvlink_island, 1);
  EXPECT_EQ(infer.gpus[3].nvlink_island, 2);
  EXPECT_EQ(c->domain(2, c->DomainOf(i1, 2)).name, "infer-spine");
}

TEST(ClusterFile, FlatClusterNeedsNoNetwork) {
  auto c = ParseClusterFile("node_groups:\n  - {name: \"n{0..2}\", gpus: 2, cpu: 8, memory: 64Gi}\n", "f.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_EQ(c->num_tiers(), 0);
  EXPECT_EQ(c->num_nodes(), 3u);
  // Without `links`, every GPU shares island, switch and socket 0.
  EXPECT_EQ(c->node(NodeId(2)).gpus[1].nvlink_island, 0);
}

TEST(ClusterFile, ExampleFileInTheRepositoryLoads) {
  auto c = LoadClusterFile(ringmaster::testing::SourceDir() + "/examples/clusters/hgx_fat_tree.yaml");
  ASSERT_TRUE(c.ok()) << c.status();
  EXPECT_GT(c->num_nodes(), 0u);
  EXPECT_EQ(c->num_tiers(), 3);
}

TEST(ClusterFile, NamePatterns) {
  auto a = ExpandNamePattern("dgx-{8..10}", -1, 0);
  ASSERT_TRUE(a.ok());
  EXPECT_THAT(*a, ::testing::ElementsAre("dgx-8", "dgx-9", "dgx-10"));
  auto b = ExpandNamePattern("r{00..02}-x", 3, 0);
  ASSERT_TRUE(b.ok());
  EXPECT_THAT(*b, ::testing::ElementsAre("r00-x", "r01-x", "r02-x"));
  auto c = ExpandNamePattern("node-%03d", 2, 7);
  ASSERT_TRUE(c.ok());
  EXPECT_THAT(*c, ::testing::ElementsAre("node-007", "node-008"));
  EXPECT_ERROR(ExpandNamePattern("dgx-{0..3}", 5, 0), absl::StatusCode::kInvalidArgument, "pattern 'dgx-{0..3}' names 4 nodes but count is 5");
  EXPECT_ERROR(ExpandNamePattern("node-%03d", -1, 0), absl::StatusCode::kInvalidArgument, "pattern 'node-%03d' needs `count` (how many nodes)");
  EXPECT_ERROR(ExpandNamePattern("node-%s", 2, 0), absl::StatusCode::kInvalidArgument, "pattern 'node-%s': use one %d or %0Nd (e.g. node-%03d)");
  EXPECT_ERROR(ExpandNamePattern("single", 2, 0), absl::StatusCode::kInvalidArgument, "name 'single' has no {FIRST..LAST} or %d but count is 2");
  EXPECT_ERROR(ExpandNamePattern("x{3..1}", -1, 0), absl::StatusCode::kInvalidArgument, "pattern 'x{3..1}': range bounds must be integers, FIRST <=");
}

struct BadCase {
  const char* name;
  const char* yaml;
  const char* where;  // "file:line:col" prefix expected
  const char* what;   // substring of the message
};

class ClusterFileErrors : public ::testing::TestWithParam<BadCase> {};

TEST_P(ClusterFileErrors, NameFileLineColumnAndField) {
  const BadCase& c = GetParam();
  auto r = ParseClusterFile(c.yaml, "bad.yaml");
  ASSERT_ERROR(r, absl::StatusCode::kInvalidArgument, "bad.yaml:") << c.name;
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.where)) << r.status();
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(c.what)) << r.status();
}

INSTANTIATE_TEST_SUITE_P(
    Bad, ClusterFileErrors,
    ::testing::Values(
        BadCase{"syntax", "node_groups: [\n  - {name: a\n", "bad.yaml:", "yaml syntax"},
        BadCase{"empty", "", "bad.yaml", "empty cluster file"},
        BadCase{"unknown_root_key", "nodes: []\n", "bad.yaml:1:1: (root).nodes", "unknown key"},
        BadCase{"missing_groups", "tiers: []\n", "bad.yaml:1:1: node_groups", "missing"},
        BadCase{"bad_gpus", "node_groups:\n  - name: a\n    gpus: eight\n    cpu: 1\n    memory: 1Gi\n",
                "bad.yaml:3:11: node_groups[0].gpus", "integer >= 0"},
        BadCase{"bad_cpu", "node_groups:\n  - name: a\n    cpu: lots\n    memory: 1Gi\n",
                "bad.yaml:3:10: node_groups[0].cpu", ""},
        BadCase{"missing_memory", "node_groups:\n  - name: a\n    cpu: 1\n",
                "bad.yaml:2:5: node_groups[0].memory", "missing"},
        BadCase{"typo_key", "node_groups:\n  - name: a\n    cpu: 1\n    memory: 1Gi\n    gpu: 2\n",
                "bad.yaml:5:5: node_groups[0].gpu", "unknown key"},
        // Found by fuzz/cluster_file_fuzzer.cc (docs/FUZZING.md): a %d group
        // of 50 million nodes took minutes and gigabytes; 2^32 + 1 was read
        // as 1; a GPU index of 2^32 as GPU 0.
        BadCase{"count_too_large", "node_groups:\n  - name: n%d\n    count: 50000000\n    cpu: 1\n    memory: 1\n",
                "bad.yaml:3:12: node_groups[0].count", "must be at most 1000000"},
        BadCase{"count_wraps", "node_groups:\n  - name: n%d\n    count: 4294967297\n    cpu: 1\n    memory: 1\n",
                "bad.yaml:3:12: node_groups[0].count", "must be at most 1000000"},
        BadCase{"gpu_index_wraps",
                "node_groups:\n  - name: a\n    gpus: 2\n    cpu: 1\n    memory: 1\n    links:\n      nvlink_islands: [[4294967296, 1]]\n",
                "bad.yaml:7:25: node_groups[0].links.nvlink_islands[0][0]", "must be at most 2147483647"},
        BadCase{"too_many_gpus",
                "node_groups:\n  - name: n{0..299999}\n    gpus: 8\n    cpu: 1\n    memory: 1\n"
                "  - name: m{0..299999}\n    gpus: 8\n    cpu: 1\n    memory: 1\n",
                "bad.yaml:6:5: node_groups[1].gpus", "the cluster has more than 4194304 GPUs"},
        BadCase{"count_mismatch", "node_groups:\n  - name: a{0..3}\n    count: 5\n    cpu: 1\n    memory: 1\n",
                "bad.yaml:2:11: node_groups[0].name", "names 4 nodes but count is 5"},
        BadCase{"gpu_out_of_range",
                "node_groups:\n  - name: a\n    gpus: 2\n    cpu: 1\n    memory: 1\n    links:\n      nvlink_islands: [[0, 2]]\n",
                "bad.yaml:7:7: node_groups[0].links.nvlink_islands", "GPU 2 in group 0"},
        BadCase{"gpu_twice",
                "node_groups:\n  - name: a\n    gpus: 2\n    cpu: 1\n    memory: 1\n    links:\n      numa: [[0, 1], [1]]\n",
                "node_groups[0].links.numa", "GPU 1 is listed twice"},
        BadCase{"switch_gap",
                "node_groups:\n  - name: a\n    gpus: 2\n    cpu: 1\n    memory: 1\n    links:\n      pcie_switches: [[0]]\n",
                "node_groups[0].links.pcie_switches", "GPU 1 is in no group"},
        BadCase{"unknown_profile",
                "node_groups:\n  - name: a\n    cpu: 1\n    memory: 1\n    links: dgx\n",
                "bad.yaml:5:12: node_groups[0].links", "no link profile named 'dgx'"},
        BadCase{"no_network",
                "tiers: [{name: leaf, bandwidth_gbps: 100}]\nnode_groups:\n  - name: a\n    cpu: 1\n    memory: 1\n",
                "bad.yaml:3:5: node_groups[0].network", "missing"},
        BadCase{"tier_uncovered",
                "tiers: [{name: leaf, bandwidth_gbps: 100}, {name: spine, bandwidth_gbps: 50}]\n"
                "node_groups:\n  - name: a\n    cpu: 1\n    memory: 1\n    network: {fill: {leaf: 2}}\n",
                "node_groups[0].network", "no domain for tier 'spine'"},
        BadCase{"fill_gap",
                "tiers: [{name: leaf, bandwidth_gbps: 100}, {name: spine, bandwidth_gbps: 50}]\n"
                "node_groups:\n  - name: a\n    cpu: 1\n    memory: 1\n    network: {fill: {spine: 2}, in: {leaf: l}}\n",
                "node_groups[0].network.fill.spine", "without a gap"},
        BadCase{"unknown_tier",
                "tiers: [{name: leaf, bandwidth_gbps: 100}]\n"
                "node_groups:\n  - name: a\n    cpu: 1\n    memory: 1\n    network: {in: {rack: r}}\n",
                "node_groups[0].network.in.rack", "no tier has this name"},
        BadCase{"negative_bandwidth", "tiers: [{name: leaf, bandwidth_gbps: -1}]\nnode_groups: []\n",
                "bad.yaml:1:38: tiers[0].bandwidth_gbps", "number >= 0"},
        BadCase{"duplicate_tier",
                "tiers: [{name: leaf, bandwidth_gbps: 1}, {name: leaf, bandwidth_gbps: 2}]\nnode_groups: []\n",
                "tiers[1].name", "duplicate tier name"},
        BadCase{"bad_effect",
                "node_groups:\n  - name: a\n    cpu: 1\n    memory: 1\n    taints: [{key: k, effect: Never}]\n",
                "node_groups[0].taints[0].effect", "NoSchedule, PreferNoSchedule or NoExecute"},
        BadCase{"duplicate_node",
                "node_groups:\n  - {name: a, cpu: 1, memory: 1}\n  - {name: a, cpu: 1, memory: 1}\n",
                "node_groups", "duplicate name"},
        BadCase{"inconsistent_parent",
                "tiers: [{name: leaf, bandwidth_gbps: 100}, {name: spine, bandwidth_gbps: 50}]\n"
                "node_groups:\n"
                "  - {name: a, cpu: 1, memory: 1, network: {in: {leaf: l0, spine: s0}}}\n"
                "  - {name: b, cpu: 1, memory: 1, network: {in: {leaf: l0, spine: s1}}}\n",
                "node_groups", "is under spine 's0'"}),
    [](const ::testing::TestParamInfo<BadCase>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace ringmaster::topology
