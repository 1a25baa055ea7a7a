#include "plugins/gang.h"

#include <gtest/gtest.h>

#include <algorithm>
#include <random>

#include "tests/support/builders.h"

namespace ringmaster::testing {
namespace {

TEST(GangPlugin, ReadyOnlyAtMinimumAndVictimsKeepGangWhole) {
  EngineHarness h(ClusterBuilder().NodesPerRack(4).Gpus(8).Build());
  h.Submit(JobBuilder("g").Gang(4).MinMember(2).GpusPerTask(8).Build());
  const auto& job = h.job("g");
  EXPECT_FALSE(plugins::GangPlugin::Ready(job));
  EXPECT_TRUE(plugins::GangPlugin::Starving(job));
  h.Cycle();
  ASSERT_EQ(job.ReadyCount(), 4);
  EXPECT_TRUE(plugins::GangPlugin::Ready(job));
  // 4 running, minimum 2: of 3 candidates only 2 may go; of all 4, all may.
  std::vector<scheduler::TaskRef> three{{&job, 0}, {&job, 1}, {&job, 2}};
  EXPECT_EQ(plugins::GangPlugin::Victims(three).size(), 2u);
  std::vector<scheduler::TaskRef> four{{&job, 0}, {&job, 1}, {&job, 2}, {&job, 3}};
  EXPECT_EQ(plugins::GangPlugin::Victims(four).size(), 4u);
}

TEST(GangPlugin, ValidOnlyWithAtLeastMinimumTasksAndNotReadyGoesFirst) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  h.Submit(JobBuilder("g").Gang(2).GpusPerTask(4).Build());
  h.Submit(JobBuilder("w").Gang(2).GpusPerTask(8).Build());  // cannot fit: stays not ready
  EXPECT_TRUE(plugins::GangPlugin::Valid(h.job("g")).ok());
  h.Cycle();
  ASSERT_TRUE(plugins::GangPlugin::Ready(h.job("g")));
  ASSERT_FALSE(plugins::GangPlugin::Ready(h.job("w")));
  EXPECT_LT(plugins::GangPlugin::Order(h.job("w"), h.job("g")), 0);
  EXPECT_GT(plugins::GangPlugin::Order(h.job("g"), h.job("w")), 0);
}

// Victims against a reference written from the rule alone (a job offers all
// its candidates when they are all its ready tasks, else its first
// `ready - minimum` of them, in the candidates' order), on candidate lists
// grouped by job in id order (the engine's, walked without a table) and
// shuffled (the table).
TEST(GangPlugin, VictimsMatchTheRuleGroupedOrNot) {
  EngineHarness h(ClusterBuilder().Racks(4).NodesPerRack(8).Gpus(8).Build());
  std::mt19937 rng(11);
  std::vector<const scheduler::Job*> jobs;
  for (int j = 0; j < 12; ++j) {
    const int tasks = 1 + static_cast<int>(rng() % 6);
    const int min = 1 + static_cast<int>(rng() % tasks);
    h.Submit(JobBuilder("g" + std::to_string(j)).Gang(tasks).MinMember(min).GpusPerTask(2).Build());
  }
  h.Cycle();
  for (int j = 0; j < 12; ++j) jobs.push_back(&h.job("g" + std::to_string(j)));
  for (const auto* j : jobs) ASSERT_GE(j->ReadyCount(), j->min_member());
  for (int round = 0; round < 200; ++round) {
    std::vector<scheduler::TaskRef> candidates;
    for (const auto* j : jobs) {
      for (uint32_t i = 0; i < j->tasks().size(); ++i) {
        if (rng() % 4 != 0) candidates.push_back({j, i});
      }
    }
    if (round % 2 == 1) std::shuffle(candidates.begin(), candidates.end(), rng);
    std::vector<scheduler::TaskRef> want;
    for (size_t k = 0; k < candidates.size(); ++k) {
      const auto* j = candidates[k].job;
      int total = 0, pos = 0;
      for (size_t x = 0; x < candidates.size(); ++x) {
        if (candidates[x].job != j) continue;
        ++total;
        if (x < k) ++pos;
      }
      if (total >= j->ReadyCount() || pos < j->ReadyCount() - j->min_member()) want.push_back(candidates[k]);
    }
    const auto got = plugins::GangPlugin::Victims(candidates);
    ASSERT_EQ(got.size(), want.size()) << "round " << round;
    for (size_t k = 0; k < want.size(); ++k) {
      ASSERT_EQ(got[k].job, want[k].job) << "round " << round;
      ASSERT_EQ(got[k].index, want[k].index) << "round " << round;
    }
  }
}

}  // namespace
}  // namespace ringmaster::testing
