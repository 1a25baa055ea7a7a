#include "simulator/fgd_protocol.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "topology/node_lists.h"
#include "tests/support/source_dir.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::simulator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

std::string Data(const std::string& rel) {
  return ringmaster::testing::SourceDir() + "/data/traces/alibaba-gpu-v2023/" + rel;
}

constexpr char kHeader[] =
    "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,"
    "scheduled_time\n";

TEST(OpenbPodList, ReadsBothHeaderShapes) {
  auto full = ParseOpenbPodList(std::string(kHeader) +
                                    "p0,12000,16384,1,460,V100M16|V100M32|V100M32,LS,Running,0,9,0\n"
                                    "p1,4000,1024,0,0,,BE,Pending,1,2,\n",
                                "pods.csv");
  ASSERT_TRUE(full.ok()) << full.status();
  ASSERT_EQ(full->size(), 2u);
  EXPECT_EQ((*full)[0].gpu_milli, 460);
  EXPECT_EQ((*full)[0].memory, int64_t{16384} << 20);
  EXPECT_THAT((*full)[0].gpu_models, ElementsAre("V100M16", "V100M32"));  // a set
  EXPECT_EQ((*full)[1].num_gpu, 0);
  auto short_form = ParseOpenbPodList("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,8,1000\n", "m.csv");
  ASSERT_TRUE(short_form.ok()) << short_form.status();
  EXPECT_EQ((*short_form)[0].num_gpu, 8);
}

TEST(OpenbPodList, BadRowsNameLineAndColumn) {
  auto bad_gpu = ParseOpenbPodList(std::string(kHeader) + "p0,1,1,1,500,,LS,R,0,0,0\np1,1,1,2,500,,LS,R,0,0,0\n", "f.csv");
  ASSERT_ERROR(bad_gpu, absl::StatusCode::kInvalidArgument, "f.csv:3: column 5 (gpu_milli): a pod with 2 GPUs must use");
  EXPECT_THAT(std::string(bad_gpu.status().message()), HasSubstr("f.csv:3: column 5 (gpu_milli)"));
  auto bad_num = ParseOpenbPodList(std::string(kHeader) + "p0,lots,1,1,500,,LS,R,0,0,0\n", "f.csv");
  ASSERT_ERROR(bad_num, absl::StatusCode::kInvalidArgument, "f.csv:2: column 2 (cpu_milli): 'lots' is not an integer in");
  EXPECT_THAT(std::string(bad_num.status().message()), HasSubstr("f.csv:2: column 2 (cpu_milli): 'lots'"));
  auto short_row = ParseOpenbPodList(std::string(kHeader) + "p0,1,1\n", "f.csv");
  ASSERT_ERROR(short_row, absl::StatusCode::kInvalidArgument, "f.csv:2: row has 3 columns, the header has 11");
  EXPECT_THAT(std::string(short_row.status().message()), HasSubstr("f.csv:2: row has 3 columns"));
  auto no_col = ParseOpenbPodList("name,cpu_milli\n", "f.csv");
  ASSERT_ERROR(no_col, absl::StatusCode::kInvalidArgument, "f.csv:1: header has no column 'memory_mib'");
  EXPECT_THAT(std::string(no_col.status().message()), HasSubstr("f.csv:1: header has no column 'memory_mib'"));
  EXPECT_ERROR(ParseOpenbPodList("", "f.csv"), absl::StatusCode::kInvalidArgument, "f.csv: empty file (no header)");
  EXPECT_EQ(ReadOpenbPodList("/nonexistent.csv").status().code(), absl::StatusCode::kNotFound);
}

TEST(FgdProtocol, EmptyOpenbClusterFragmentationMatchesThePublishedMeasure) {
  // The FGD authors' fragmentation of the empty openb cluster for the
  // default pod list is 13.88 % of its GPUs (column 0 of
  // data/peer-results/fgd-atc23/analysis_frag_discrete.csv, every seed).
  auto nodes = topology::ReadOpenbNodeList(Data("openb_node_list_gpu_node.csv"));
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  auto pods = ReadOpenbPodList(Data("openb_pod_list_default.csv"));
  ASSERT_TRUE(pods.ok()) << pods.status();
  auto model = topology::FragmentationModel::Create(TaskClassesOf(*pods));
  ASSERT_TRUE(model.ok());
  double frag = 0;
  int64_t capacity = 0;
  for (const topology::NodeSpec& n : *nodes) {
    const std::vector<topology::Quantity> free(n.gpus.size(), 1000);
    topology::NodeGpuState s;
    s.gpus = n.gpus;
    s.gpu_free_milli = free;
    s.cpu_free_milli = s.cpu_capacity_milli = n.allocatable.cpu_milli();
    s.memory_free = n.allocatable.memory();
    frag += model->NodeFragmentation(s);
    capacity += static_cast<int64_t>(n.gpus.size()) * 1000;
  }
  EXPECT_EQ(capacity, 6212 * 1000);
  EXPECT_NEAR(100 * frag / static_cast<double>(capacity), 13.88, 0.05);
}

// A small cluster: two 4-GPU nodes and one 2-GPU node.
std::vector<topology::NodeSpec> SmallCluster() {
  auto nodes = topology::ParseOpenbNodeList(
      "sn,cpu_milli,memory_mib,gpu,model\na,32000,65536,4,T4\nb,32000,65536,4,T4\nc,16000,32768,2,P100\n",
      "small.csv");
  if (!nodes.ok()) abort();
  return *std::move(nodes);
}

std::vector<OpenbPod> SmallWorkload() {
  auto pods = ParseOpenbPodList(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
      "s3,2000,1024,1,300\ns5,2000,1024,1,500\nw1,4000,4096,1,1000\nw2,8000,8192,2,1000\nc,1000,512,0,0\n",
      "small-pods.csv");
  if (!pods.ok()) abort();
  return *std::move(pods);
}

TEST(FgdProtocol, AccountsForEveryPodAndStaysWithinCapacity) {
  for (int p = 0; p < topology::kNumSharePolicies; ++p) {
    const auto policy = static_cast<topology::SharePolicy>(p);
    for (uint64_t seed : {1u, 2u, 3u}) {
      auto r = RunFgdProtocol(SmallCluster(), SmallWorkload(), {policy, 1.3, seed});
      ASSERT_TRUE(r.ok()) << r.status();
      SCOPED_TRACE(topology::SharePolicyName(policy));
      EXPECT_EQ(r->capacity_milli, 10'000);
      EXPECT_LE(r->arrived_milli, 13'000);  // stops before passing 130 %
      EXPECT_GT(r->arrived_milli, 13'000 - 2'000);
      EXPECT_LE(r->allocated_milli, r->capacity_milli);
      EXPECT_LE(r->allocated_milli, r->arrived_milli);
      EXPECT_GT(r->failed_pods, 0);  // 130 % cannot all fit
      EXPECT_NEAR(r->gpu_alloc_ratio, 100.0 * r->allocated_milli / r->capacity_milli, 1e-9);
      ASSERT_FALSE(r->curve.empty());
      for (size_t i = 1; i < r->curve.size(); ++i) {
        EXPECT_GE(r->curve[i].arrived_pct, r->curve[i - 1].arrived_pct);
        EXPECT_GE(r->curve[i].alloc_pct, r->curve[i - 1].alloc_pct);  // pods never depart
      }
    }
  }
}

TEST(FgdProtocol, SameSeedSameRunOtherSeedOtherArrivals) {
  const FgdOptions o{topology::SharePolicy::kFgd, 1.3, 7};
  auto a = RunFgdProtocol(SmallCluster(), SmallWorkload(), o);
  auto b = RunFgdProtocol(SmallCluster(), SmallWorkload(), o);
  ASSERT_TRUE(a.ok() && b.ok());
  EXPECT_EQ(a->allocated_milli, b->allocated_milli);
  EXPECT_EQ(a->failed_pods, b->failed_pods);
  ASSERT_EQ(a->curve.size(), b->curve.size());
  for (size_t i = 0; i < a->curve.size(); ++i) EXPECT_EQ(a->curve[i].frag_pct, b->curve[i].frag_pct);
  bool differs = false;
  for (uint64_t seed = 8; seed < 20 && !differs; ++seed) {
    auto c = RunFgdProtocol(SmallCluster(), SmallWorkload(), {topology::SharePolicy::kFgd, 1.3, seed});
    ASSERT_TRUE(c.ok());
    differs = c->pods != a->pods || c->arrived_milli != a->arrived_milli;
  }
  EXPECT_TRUE(differs);
}

TEST(FgdProtocol, AuthorsLoopIsAnEnginePolicy) {
  // The authors' loop is the same engine with other gpu-share arguments:
  // every node scored, lowest-index ties, the exact score, the pod list's
  // classes given as the workload (not learned).
  const FgdOptions authors = AuthorsLoop({topology::SharePolicy::kFgd, 1.3, 5});
  EXPECT_EQ(authors.nodes_to_score, 0);
  EXPECT_EQ(authors.ties, "lowest");
  EXPECT_EQ(authors.score, "exact");
  EXPECT_EQ(authors.typical_pct, 100);
  EXPECT_EQ(authors.seed, 5u);
  const std::string yaml = FgdPolicyYaml(SmallWorkload(), authors);
  EXPECT_THAT(yaml, HasSubstr("nodesToScore: 0\n"));
  EXPECT_THAT(yaml, HasSubstr("      ties: lowest\n"));
  // Four classes (the two 1000m pods differ in CPU), most popular first.
  EXPECT_THAT(yaml, HasSubstr("      workload: \"cpu=1000 weight=1; cpu=2000 gpus=1 milli=300 weight=1; "));
  EXPECT_THAT(yaml, ::testing::Not(HasSubstr("halfLife")));
  const std::string learned = FgdPolicyYaml(SmallWorkload(), {topology::SharePolicy::kBestFit, 1.3, 5});
  EXPECT_THAT(learned, HasSubstr("nodesToScore: 16\n"));
  EXPECT_THAT(learned, HasSubstr("      policy: bestfit\n"));
  EXPECT_THAT(learned, HasSubstr("      halfLife: 1\n      relearnPct: 0\n"));
  EXPECT_THAT(learned, ::testing::Not(HasSubstr("workload")));
  for (auto policy : {topology::SharePolicy::kFgd, topology::SharePolicy::kBestFit}) {
    auto engine = RunFgdProtocol(SmallCluster(), SmallWorkload(), {policy, 1.3, 5});
    ASSERT_TRUE(engine.ok()) << engine.status();
    auto loop = RunFgdProtocol(SmallCluster(), SmallWorkload(), AuthorsLoop({policy, 1.3, 5}));
    ASSERT_TRUE(loop.ok()) << loop.status();
    // Same arrivals (same sampling), placed by the two configurations.
    EXPECT_EQ(loop->pods, engine->pods);
    EXPECT_EQ(loop->arrived_milli, engine->arrived_milli);
    EXPECT_LE(loop->allocated_milli, loop->capacity_milli);
    EXPECT_GT(loop->allocated_milli, 0);
    EXPECT_GT(loop->failed_pods, 0);
  }
  // Bad options are the policy's errors.
  FgdOptions bad{topology::SharePolicy::kBestFit, 1.3, 5};
  bad.score = "authors";
  auto r = RunFgdProtocol(SmallCluster(), SmallWorkload(), bad);
  ASSERT_ERROR(r, absl::StatusCode::kInvalidArgument, "fgd-protocol-policy:12:14");
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("authors is FGD's integer score: only with policy fgd"));
}

TEST(FgdProtocol, TypicalTaskClassesKeepThePopularOnes) {
  // Six 500m shares (two of them with more memory: same class), three
  // whole GPUs, one CPU-only pod.
  const std::string csv =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli\n"
      "s0,1000,9000,1,500\ns1,1000,9000,1,500\ns2,1000,100,1,500\ns3,1000,100,1,500\n"
      "s4,1000,100,1,500\ns5,1000,100,1,500\n"
      "w0,2000,100,1,1000\nw1,2000,100,1,1000\nw2,2000,100,1,1000\n"
      "c,1000,100,0,0\n";
  auto pods = ParseOpenbPodList(csv, "t.csv");
  ASSERT_TRUE(pods.ok());
  auto all = TypicalTaskClasses(*pods, 100);
  ASSERT_EQ(all.size(), 3u);
  EXPECT_EQ(all[0].gpu_milli, 500);
  EXPECT_EQ(all[0].popularity, 6);
  EXPECT_EQ(all[1].gpu_milli, 1000);
  EXPECT_EQ(all[1].popularity, 3);
  EXPECT_EQ(all[2].num_gpu, 0);
  EXPECT_EQ(TypicalTaskClasses(*pods, 90).size(), 2u);  // 6 + 3 cover 90 %
  EXPECT_EQ(TypicalTaskClasses(*pods, 91).size(), 3u);
  EXPECT_EQ(TypicalTaskClasses(*pods, 50).size(), 1u);
}

TEST(FgdProtocol, FidelityOptionsRepeatAndMatter) {
  // Random ties and the authors' integer FGD score: same seed, same run.
  FgdOptions o = AuthorsLoop({topology::SharePolicy::kFgd, 1.3, 11});
  o.ties = "random";
  o.score = "authors";
  o.typical_pct = 95;
  auto a = RunFgdProtocol(SmallCluster(), SmallWorkload(), o);
  auto b = RunFgdProtocol(SmallCluster(), SmallWorkload(), o);
  ASSERT_TRUE(a.ok() && b.ok()) << a.status();
  EXPECT_EQ(a->allocated_milli, b->allocated_milli);
  ASSERT_EQ(a->curve.size(), b->curve.size());
  for (size_t i = 0; i < a->curve.size(); ++i) EXPECT_EQ(a->curve[i].frag_pct, b->curve[i].frag_pct);
  // Over some seeds, each option changes some run (they are not ignored).
  // Nodes a and b tie on every score (memory is not scored) but b has little
  // memory, so which of them a tie goes to shows later.
  auto tied = topology::ParseOpenbNodeList(
      "sn,cpu_milli,memory_mib,gpu,model\na,32000,65536,4,T4\nb,32000,9000,4,T4\nc,16000,32768,2,P100\n",
      "tied.csv");
  ASSERT_TRUE(tied.ok());
  auto changes = [&](auto set) {
    for (uint64_t seed = 1; seed <= 30; ++seed) {
      FgdOptions base = AuthorsLoop({topology::SharePolicy::kFgd, 1.3, seed});
      FgdOptions other = base;
      set(other);
      auto x = RunFgdProtocol(*tied, SmallWorkload(), base);
      auto y = RunFgdProtocol(*tied, SmallWorkload(), other);
      if (!x.ok() || !y.ok()) return false;
      if (x->allocated_milli != y->allocated_milli) return true;
      for (size_t i = 0; i < x->curve.size() && i < y->curve.size(); ++i) {
        if (x->curve[i].frag_pct != y->curve[i].frag_pct) return true;
      }
    }
    return false;
  };
  EXPECT_TRUE(changes([](FgdOptions& o) { o.ties = "random"; }));
  EXPECT_TRUE(changes([](FgdOptions& o) { o.score = "authors"; }));
}

TEST(FgdProtocol, RejectsEmptyInputs) {
  EXPECT_ERROR(RunFgdProtocol({}, SmallWorkload(), {}), absl::StatusCode::kInvalidArgument, "FGD protocol: no nodes");
  EXPECT_ERROR(RunFgdProtocol(SmallCluster(), {}, {}), absl::StatusCode::kInvalidArgument, "FGD protocol: no pods");
  auto cpu_only = ParseOpenbPodList("name,cpu_milli,memory_mib,num_gpu,gpu_milli\nc,1000,1,0,0\n", "c.csv");
  ASSERT_TRUE(cpu_only.ok());
  EXPECT_ERROR(RunFgdProtocol(SmallCluster(), *cpu_only, {}), absl::StatusCode::kInvalidArgument, "FGD protocol: no pod requests a GPU");
}

}  // namespace
}  // namespace ringmaster::simulator
