#include "topology/fragmentation.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "tests/topology/random_cluster.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::topology {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

// A node whose GPUs are `model` with the given free milli, 8 cores.
struct TestNode {
  std::vector<Gpu> gpus;
  std::vector<Quantity> free;
  std::vector<Quantity> hosted;
  Quantity cpu_free = 8000;
  NodeGpuState State() const {
    NodeGpuState s;
    s.gpus = gpus;
    s.gpu_free_milli = free;
    s.cpu_free_milli = cpu_free;
    s.cpu_capacity_milli = 8000;
    s.memory_free = int64_t{1} << 40;
    s.hosted_gpu_milli = hosted;
    return s;
  }
};

TestNode Node(std::vector<Quantity> free, std::string model = "T4") {
  TestNode n;
  for (size_t i = 0; i < free.size(); ++i) n.gpus.push_back(Gpu{static_cast<int>(i), model, 0, 0, 0, 0});
  n.free = std::move(free);
  return n;
}

TaskClass Share(Quantity milli, double p = 1, Quantity cpu = 1000) { return {cpu, 0, 1, milli, {}, p}; }
TaskClass Whole(int gpus, double p = 1, Quantity cpu = 1000) { return {cpu, 0, gpus, 1000, {}, p}; }
TaskClass CpuOnly(double p = 1) { return {1000, 0, 0, 0, {}, p}; }

TEST(Fragmentation, FragmentOfOneTaskClass) {
  const TestNode n = Node({1000, 300});
  // A 500m share fits GPU 0; GPU 1's 300m cannot hold it: 300 fragmented.
  EXPECT_EQ(TaskFragment(n.State(), Share(500)), 300);
  // A 200m share fits both: nothing fragmented.
  EXPECT_EQ(TaskFragment(n.State(), Share(200)), 0);
  // One whole GPU fits GPU 0; the partly used GPU 1 is fragmented.
  EXPECT_EQ(TaskFragment(n.State(), Whole(1)), 300);
  // Two whole GPUs do not fit: every free milli is fragmented.
  EXPECT_EQ(TaskFragment(n.State(), Whole(2)), 1300);
  // A task without GPUs can use none of them.
  EXPECT_EQ(TaskFragment(n.State(), CpuOnly()), 1300);
  // CPU short: nothing is usable.
  EXPECT_EQ(TaskFragment(n.State(), Share(100, 1, 9000)), 1300);
  // Wrong model: nothing is usable.
  TaskClass v100 = Share(100);
  v100.gpu_models = {"V100"};
  EXPECT_EQ(TaskFragment(n.State(), v100), 1300);
  v100.gpu_models = {"V100", "T4"};
  EXPECT_EQ(TaskFragment(n.State(), v100), 0);
}

TEST(Fragmentation, NodeMeasureIsThePopularityWeightedSum) {
  // Popularity 3:1 normalizes to .75/.25.
  auto m = FragmentationModel::Create({Share(500, 3), Whole(2, 1)});
  ASSERT_TRUE(m.ok()) << m.status();
  EXPECT_DOUBLE_EQ(m->classes()[0].popularity, 0.75);
  const TestNode n = Node({1000, 300});
  // .75 * 300 + .25 * 1300 = 225 + 325 = 550.
  EXPECT_DOUBLE_EQ(m->NodeFragmentation(n.State()), 550);
  // Same answer from the memo, and in any GPU order.
  EXPECT_DOUBLE_EQ(m->NodeFragmentation(n.State()), 550);
  EXPECT_DOUBLE_EQ(m->NodeFragmentation(Node({300, 1000}).State()), 550);
}

TEST(Fragmentation, ModelMergesEqualClassesAndRejectsBadOnes) {
  auto m = FragmentationModel::Create({Share(500, 1), Share(500, 1), CpuOnly(2)});
  ASSERT_TRUE(m.ok());
  ASSERT_EQ(m->classes().size(), 2u);
  EXPECT_DOUBLE_EQ(m->classes()[0].popularity, 0.5);
  EXPECT_ERROR(FragmentationModel::Create({}), absl::StatusCode::kInvalidArgument, "workload has no task classes with positive popularity");
  EXPECT_ERROR(FragmentationModel::Create({TaskClass{0, 0, 2, 500, {}, 1}}), absl::StatusCode::kInvalidArgument, "task class 0: 2 GPUs must each be whole (gpu_milli 1000)");
  EXPECT_ERROR(FragmentationModel::Create({TaskClass{0, 0, 1, 1500, {}, 1}}), absl::StatusCode::kInvalidArgument, "task class 0: negative or out-of-range amount");
  EXPECT_ERROR(FragmentationModel::Create({Share(500, -1)}), absl::StatusCode::kInvalidArgument, "task class 0: negative or out-of-range amount");
}

TEST(Fragmentation, FgdPicksTheGpuWhereFragmentationGrowsLeast) {
  // Workload: only 500m shares. GPUs free {1000, 600}.
  // On GPU 1: {1000, 100}: 100 < 500 is fragmented -> +100.
  // On GPU 0: {500, 600}: both still hold a 500m share -> +0.
  auto m = FragmentationModel::Create({Share(500)});
  ASSERT_TRUE(m.ok());
  std::mt19937_64 rng(1);
  const TestNode n = Node({1000, 600});
  auto fgd = ScoreNode(SharePolicy::kFgd, n.State(), Share(500), *m, rng);
  ASSERT_TRUE(fgd.has_value());
  EXPECT_THAT(fgd->gpus, ElementsAre(0));
  EXPECT_NEAR(fgd->score, 0, 1e-5);  // plus the tiny BestFit tie-break
  // BestFit packs into the fuller GPU.
  auto bf = ScoreNode(SharePolicy::kBestFit, n.State(), Share(500), *m, rng);
  ASSERT_TRUE(bf.has_value());
  EXPECT_THAT(bf->gpus, ElementsAre(1));
}

TEST(Fragmentation, PoliciesRankNodesAsDescribed) {
  auto m = FragmentationModel::Create({Share(500), Whole(1)});
  ASSERT_TRUE(m.ok());
  std::mt19937_64 rng(3);
  const TestNode idle = Node({1000, 1000});
  TestNode partly = Node({1000, 400});
  partly.cpu_free = 7000;
  partly.hosted = {600};
  const TaskClass t = Share(300);
  auto score = [&](SharePolicy p, const TestNode& n) { return ScoreNode(p, n.State(), t, *m, rng)->score; };
  // BestFit, DotProd and GpuPacking prefer the partly used node.
  EXPECT_GT(score(SharePolicy::kBestFit, partly), score(SharePolicy::kBestFit, idle));
  EXPECT_GT(score(SharePolicy::kDotProd, partly), score(SharePolicy::kDotProd, idle));
  EXPECT_GT(score(SharePolicy::kGpuPacking, partly), score(SharePolicy::kGpuPacking, idle));
  // GpuClustering prefers a node hosting the same share size.
  TestNode same = Node({1000, 1000});
  same.hosted = {300};
  EXPECT_GT(score(SharePolicy::kGpuClustering, same), score(SharePolicy::kGpuClustering, partly));
  // FGD on `partly` ({1000, 400}): before, GPU 1's 400 is a fragment for
  // both classes (.5 * 400 + .5 * 400 = 400). 300m on GPU 1 leaves 100
  // (fragment 100: growth -300); on GPU 0 it leaves {700, 400} (.5 * 400 +
  // .5 * 1100 = 750: growth +350). FGD fills the fragment: score +300.
  auto fgd = ScoreNode(SharePolicy::kFgd, partly.State(), t, *m, rng);
  ASSERT_TRUE(fgd.has_value());
  EXPECT_THAT(fgd->gpus, ElementsAre(1));
  EXPECT_NEAR(fgd->score, 300, 1e-5);
  // On the idle node ({1000, 1000}) it breaks a whole GPU: {700, 1000} gives
  // .5 * 0 + .5 * 700 = 350 -> score -350, so FGD prefers `partly`.
  EXPECT_NEAR(score(SharePolicy::kFgd, idle), -350, 1e-5);
  // Random is reproducible from the seed.
  std::mt19937_64 a(42), b(42);
  EXPECT_EQ(ScoreNode(SharePolicy::kRandom, idle.State(), t, *m, a)->score,
            ScoreNode(SharePolicy::kRandom, idle.State(), t, *m, b)->score);
}

TEST(Fragmentation, FgdBreaksTiesByBestFitAndFgdBestFitWeighsIt) {
  auto m = FragmentationModel::Create({Share(500)});
  ASSERT_TRUE(m.ok());
  std::mt19937_64 rng(5);
  // Both nodes: 500m on an idle GPU leaves {500, 1000}: no growth either
  // way. The node with less CPU left is the better fit.
  TestNode roomy = Node({1000, 1000});
  TestNode packed = Node({1000, 1000});
  packed.cpu_free = 2000;
  const double a = ScoreNode(SharePolicy::kFgd, packed.State(), Share(500), *m, rng)->score;
  const double b = ScoreNode(SharePolicy::kFgd, roomy.State(), Share(500), *m, rng)->score;
  EXPECT_GT(a, b);
  EXPECT_LT(a - b, 1e-5);  // only a tie-break
  // FGD-BestFit: BestFit shares (1/8 and 7/8 CPU left) weigh 20 each:
  // 20 * (7/8 - 1/8) = 15 apart.
  const double c = ScoreNode(SharePolicy::kFgdBestFit, packed.State(), Share(500), *m, rng)->score;
  const double d = ScoreNode(SharePolicy::kFgdBestFit, roomy.State(), Share(500), *m, rng)->score;
  EXPECT_NEAR(c - d, kFgdBestFitWeight * (7.0 / 8 - 1.0 / 8), 1e-9);
}

TEST(Fragmentation, NothingScoresWhereTheTaskDoesNotFit) {
  auto m = FragmentationModel::Create({Share(500)});
  ASSERT_TRUE(m.ok());
  std::mt19937_64 rng(3);
  for (SharePolicy p : {SharePolicy::kFgd, SharePolicy::kBestFit, SharePolicy::kDotProd,
                        SharePolicy::kGpuClustering, SharePolicy::kGpuPacking, SharePolicy::kRandom,
                        SharePolicy::kFgdBestFit}) {
    EXPECT_FALSE(ScoreNode(p, Node({400, 400}).State(), Share(500), *m, rng).has_value());
    EXPECT_FALSE(ScoreNode(p, Node({1000, 400}).State(), Whole(2), *m, rng).has_value());
    EXPECT_FALSE(ScoreNode(p, Node({1000}).State(), Share(100, 1, 9000), *m, rng).has_value());
  }
}

TEST(Fragmentation, PlacingByAnyPolicyNeverOverfillsAGpu) {
  std::mt19937_64 rng(11);
  auto m = FragmentationModel::Create({Share(250, 2), Share(600, 1), Whole(1, 1), Whole(2, 1), CpuOnly(1)});
  ASSERT_TRUE(m.ok());
  for (int trial = 0; trial < 60; ++trial) {
    const SharePolicy policy = static_cast<SharePolicy>(trial % kNumSharePolicies);
    TestNode n = Node(std::vector<Quantity>(testing::Uniform(rng, 1, 8), 1000));
    n.cpu_free = 64000;
    for (int step = 0; step < 30; ++step) {
      const TaskClass& t = m->classes()[rng() % m->classes().size()];
      auto c = ScoreNode(policy, n.State(), t, *m, rng);
      if (!c) continue;
      ASSERT_EQ(static_cast<int>(c->gpus.size()), t.num_gpu);
      for (int g : c->gpus) {
        ASSERT_GE(n.free[g], t.gpu_milli) << SharePolicyName(policy);
        n.free[g] -= t.gpu_milli;
      }
      n.cpu_free -= t.cpu_milli;
      for (Quantity f : n.free) ASSERT_GE(f, 0);
    }
  }
}

TEST(Fragmentation, PolicyNames) {
  EXPECT_EQ(*ParseSharePolicy("FGD"), SharePolicy::kFgd);
  EXPECT_EQ(*ParseSharePolicy("best-fit"), SharePolicy::kBestFit);
  EXPECT_EQ(*ParseSharePolicy("GpuPacking"), SharePolicy::kGpuPacking);
  for (int p = 0; p < kNumSharePolicies; ++p) {
    EXPECT_EQ(*ParseSharePolicy(SharePolicyName(static_cast<SharePolicy>(p))), static_cast<SharePolicy>(p));
  }
  auto bad = ParseSharePolicy("worstfit");
  ASSERT_ERROR(bad, absl::StatusCode::kInvalidArgument, "unknown placement policy 'worstfit' (fgd, fgd-bestfit");
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("unknown placement policy 'worstfit'"));
}

}  // namespace
}  // namespace ringmaster::topology

namespace ringmaster::topology {
namespace {

TEST(Fragmentation, AuthorsFgdScoreIsTheTruncatedSigmoidOfTheDrop) {
  EXPECT_EQ(AuthorsFgdScore(0), 50);
  EXPECT_EQ(AuthorsFgdScore(1000), 73);   // 100 / (1 + e^-1) = 73.1
  EXPECT_EQ(AuthorsFgdScore(-1000), 26);  // 26.9
  EXPECT_EQ(AuthorsFgdScore(-1e-6), 49);  // a negative millionth: 49.99...
  EXPECT_EQ(AuthorsFgdScore(-1e9), 0);
  EXPECT_EQ(AuthorsFgdScore(1e9), 100);
  // Integer steps: drops 10 milli apart near 0 tie, 100 apart do not.
  EXPECT_EQ(AuthorsFgdScore(5), AuthorsFgdScore(15));
  EXPECT_LT(AuthorsFgdScore(-50), AuthorsFgdScore(50));
  for (double d = -3000; d < 3000; d += 7) EXPECT_LE(AuthorsFgdScore(d), AuthorsFgdScore(d + 7));
}

TEST(Fragmentation, TaskClassesReadBackAsWritten) {
  auto c = ParseTaskClasses(" cpu=8000 gpus=1 milli=500 models=T4|P100 weight=12 ;gpus=2;cpu=4000 weight=0.1");
  ASSERT_TRUE(c.ok()) << c.status();
  ASSERT_EQ(c->size(), 3u);
  EXPECT_EQ((*c)[0].cpu_milli, 8000);
  EXPECT_EQ((*c)[0].num_gpu, 1);
  EXPECT_EQ((*c)[0].gpu_milli, 500);
  EXPECT_EQ((*c)[0].gpu_models, (std::vector<std::string>{"T4", "P100"}));
  EXPECT_EQ((*c)[0].popularity, 12);
  EXPECT_EQ((*c)[1].gpu_milli, 1000);  // whole GPUs by default
  EXPECT_EQ((*c)[1].popularity, 1);
  EXPECT_EQ((*c)[2].num_gpu, 0);
  EXPECT_EQ((*c)[2].gpu_milli, 0);
  const std::string text = FormatTaskClasses(*c);
  EXPECT_EQ(text, "cpu=8000 gpus=1 milli=500 models=T4|P100 weight=12; cpu=0 gpus=2 milli=1000 weight=1; "
                  "cpu=4000 weight=0.10000000000000001");
  auto again = ParseTaskClasses(text);
  ASSERT_TRUE(again.ok());
  ASSERT_EQ(again->size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_EQ((*again)[i].cpu_milli, (*c)[i].cpu_milli);
    EXPECT_EQ((*again)[i].num_gpu, (*c)[i].num_gpu);
    EXPECT_EQ((*again)[i].gpu_milli, (*c)[i].gpu_milli);
    EXPECT_EQ((*again)[i].gpu_models, (*c)[i].gpu_models);
    EXPECT_EQ((*again)[i].popularity, (*c)[i].popularity);  // exactly
  }
}

TEST(Fragmentation, BadTaskClassesNameTheClassAndItem) {
  auto err = [](const char* text) {
    auto c = ParseTaskClasses(text);
    return c.ok() ? std::string("ok") : std::string(c.status().message());
  };
  EXPECT_EQ(err("gpus=1; gpus=2 milli=500"), "task class 2: 'gpus=2 milli=500': more than one GPU must be whole (milli=1000)");
  EXPECT_EQ(err("gpus=1 milli=0"), "task class 1: 'milli=0': milli must be an integer in [1, 1000]");
  EXPECT_EQ(err("cpu=-1"), "task class 1: 'cpu=-1': cpu must be an integer >= 0 (milli-CPUs)");
  EXPECT_EQ(err("gpus=1 weight=0"), "task class 1: 'weight=0': weight must be a number > 0");
  EXPECT_EQ(err("gpus=1 colour=red"), "task class 1: 'colour=red': unknown key (known: cpu, gpus, milli, models, weight)");
  EXPECT_EQ(err("gpus=1 gpus=2"), "task class 1: 'gpus=2': key given twice");
  EXPECT_EQ(err("gpus"), "task class 1: 'gpus': expected key=value");
  EXPECT_EQ(err("cpu=1 milli=500"), "task class 1: 'cpu=1 milli=500': milli needs gpus >= 1");
  EXPECT_EQ(err("gpus=1 models=T4|"), "task class 1: 'models=T4|': empty model name");
  EXPECT_EQ(err("gpus=1;;"), "task class 2: '': empty (classes are separated by ';')");
}

}  // namespace
}  // namespace ringmaster::topology
