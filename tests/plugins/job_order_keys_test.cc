// Job orders given as keys (Session::AddJobOrderKeyFn): priority, las, gang,
// drf and sjf register their orders so, and SortInJobOrder sorts by keys
// computed once per job with the fast paths on. The keyed sort must give
// exactly the comparators' order (issue 22: decisions unchanged).
#include <gtest/gtest.h>

#include <algorithm>
#include <map>
#include <random>

#include "plugins/drf.h"
#include "plugins/gang.h"
#include "plugins/las.h"
#include "plugins/priority.h"
#include "plugins/sjf.h"
#include "scheduler/actions/action.h"
#include "tests/support/builders.h"

namespace ringmaster::testing {
namespace {

using scheduler::Job;
using scheduler::Session;

// Sorts `jobs` with the keyed path (fast paths on) and the comparator path.
void ExpectSameOrder(Session& s, std::vector<Job*> jobs) {
  std::vector<Job*> keyed = jobs, compared = jobs;
  s.set_fast_paths(true);
  scheduler::SortInJobOrder(s, keyed.begin(), keyed.end());
  s.set_fast_paths(false);
  scheduler::SortInJobOrder(s, compared.begin(), compared.end());
  s.set_fast_paths(true);
  ASSERT_EQ(keyed.size(), compared.size());
  for (size_t k = 0; k < keyed.size(); ++k) {
    EXPECT_EQ(keyed[k]->name(), compared[k]->name()) << "position " << k;
  }
  for (size_t k = 1; k < keyed.size(); ++k) EXPECT_TRUE(s.JobOrder(*keyed[k - 1], *keyed[k]));
}

TEST(JobOrderKeys, KeyedSortIsTheComparatorsOrderUnderEveryShippedOrderPlugin) {
  // 8 nodes x 8 GPUs; 80 jobs of random size, priority and walltime, some
  // of them running (attained service and DRF shares differ), some done.
  EngineHarness h(ClusterBuilder().NodesPerRack(8).Gpus(8).Build());
  std::mt19937 rng(7);
  for (int i = 0; i < 80; ++i) {
    JobBuilder b("j" + std::to_string(i));
    const int gpus = 1 << (rng() % 4);  // 1, 2, 4, 8
    b.GpusPerTask(gpus).Gang(1 + static_cast<int>(rng() % 3)).Priority(static_cast<int>(rng() % 3));
    if (rng() % 2) b.Walltime(1000 * (1 + static_cast<int64_t>(rng() % 5)));
    h.Submit(b.Build());
    if (i % 10 == 9) {
      h.clock().Advance(900'000);
      h.Cycle();
    }
  }
  h.clock().Advance(3'600'000);
  h.Cycle();
  auto& state = const_cast<scheduler::State&>(h.state());
  plugins::PriorityPlugin priority(false);
  plugins::LasOptions o;
  o.by_time = true;
  o.gpu_exponent = 0;
  plugins::LasPlugin las({3600LL * 1'000'000, 36000LL * 1'000'000}, o);
  plugins::LasPlugin las_gpu_time({1800LL * 1'000'000});
  plugins::GangPlugin gang;
  plugins::DrfPlugin drf;
  plugins::SjfPlugin sjf;
  std::vector<Job*> jobs;
  for (scheduler::JobId id : state.active_jobs()) jobs.push_back(&state.job(id));
  ASSERT_GT(jobs.size(), 20u);
  std::shuffle(jobs.begin(), jobs.end(), rng);
  const std::vector<std::vector<std::vector<scheduler::Plugin*>>> policies = {
      {{&priority, &las, &gang}, {&drf}},  // the default policy's order plugins
      {{&priority, &gang}, {&drf}},
      {{&las_gpu_time}, {&drf, &gang}},
      {{&sjf}},
      {{&drf}},
      {{&gang, &sjf, &priority}},
  };
  int64_t cycle = 100;
  for (const auto& tiers : policies) {
    Session s(state, h.clock(), ++cycle, tiers);
    EXPECT_TRUE(s.job_order_keyed());
    ExpectSameOrder(s, jobs);
    s.Close();
  }
}

TEST(JobOrderKeys, TheEnginesCacheKeepsTheOrderAsJobsStartSubsetsAndRowsChange) {
  // One JobOrderCache across sessions (as the engine keeps it): sorts of
  // shuffled subsets, while jobs start, run (las levels, drf shares and
  // gang readiness change) and new ones arrive, each equal to the
  // comparators' sort.
  EngineHarness h(ClusterBuilder().NodesPerRack(4).Gpus(8).Build());
  auto& state = const_cast<scheduler::State&>(h.state());
  plugins::PriorityPlugin priority(false);
  plugins::LasPlugin las({600LL * 1'000'000, 3600LL * 1'000'000});
  plugins::GangPlugin gang;
  plugins::DrfPlugin drf;
  const std::vector<std::vector<scheduler::Plugin*>> tiers = {{&priority, &las, &gang}, {&drf}};
  scheduler::JobOrderCache cache;
  std::mt19937 rng(11);
  int next = 0;
  for (int round = 0; round < 30; ++round) {
    for (int k = 0; k < 6; ++k) {
      JobBuilder b("j" + std::to_string(next++));
      b.GpusPerTask(1 << (rng() % 3)).Gang(1 + static_cast<int>(rng() % 2)).Priority(static_cast<int>(rng() % 2));
      h.Submit(b.Build());
    }
    h.clock().Advance(300'000);
    h.Cycle();
    Session s(state, h.clock(), 1000 + round, tiers);
    s.set_job_order_cache(&cache);
    ASSERT_TRUE(s.job_order_keyed());
    std::vector<Job*> all;
    for (scheduler::JobId id : state.active_jobs()) all.push_back(&state.job(id));
    for (int pass = 0; pass < 4; ++pass) {
      std::vector<Job*> some;
      for (Job* j : all) {
        if (pass == 0 || rng() % 3 != 0) some.push_back(j);
      }
      std::shuffle(some.begin(), some.end(), rng);
      ExpectSameOrder(s, some);
    }
    s.Close();
  }
  EXPECT_GT(cache.rows.size(), 0u) << "the cache was used";
}

// With every key fixed for a job that holds nothing
// (Plugin::PendingOrderReadsOnlySpec), the engine's cache keeps a waiting
// job's row from one session to the next: its keys are asked again only
// when its tasks change, the policy changes, or it holds something; a
// plugin that does not say so is asked every session.
TEST(JobOrderKeys, RowsOfJobsThatHoldNothingAreKeptAcrossSessions) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build());
  h.Submit(JobBuilder("run").GpusPerTask(8).Build());  // takes the node
  h.Cycle();
  for (int i = 0; i < 5; ++i) h.Submit(JobBuilder("w" + std::to_string(i)).GpusPerTask(8).Build());
  h.clock().Advance(1000);
  h.Cycle();
  auto& state = const_cast<scheduler::State&>(h.state());
  class Counting : public scheduler::Plugin {
   public:
    explicit Counting(bool fixed) : fixed_(fixed) {}
    std::string_view name() const override { return "counting"; }
    bool PendingOrderReadsOnlySpec() const override { return fixed_; }
    void OnSessionOpen(Session& s) override {
      s.AddJobOrderKeyFn(name(), [this](const Job& j) {
        ++asked[j.name()];
        return -static_cast<int64_t>(j.created());
      });
    }
    std::map<std::string, int> asked;

   private:
    bool fixed_;
  };
  Counting fixed(true), unfixed(false);
  std::vector<Job*> jobs;
  for (scheduler::JobId id : state.active_jobs()) jobs.push_back(&state.job(id));
  ASSERT_EQ(jobs.size(), 6u);
  ASSERT_TRUE(jobs[0]->name() == "run" && !jobs[0]->allocated().IsZero());
  auto sort_in = [&](Counting& p, uint64_t policy, scheduler::JobOrderCache& cache, int session) {
    const std::vector<std::vector<scheduler::Plugin*>> tiers = {{&p}};
    scheduler::VerdictContext context;
    context.policy = policy;
    Session s(state, h.clock(), session, tiers);
    s.set_job_order_cache(&cache);
    s.set_verdict_context(&context);
    std::vector<Job*> some = jobs;
    scheduler::SortInJobOrder(s, some.begin(), some.end());
    EXPECT_EQ(some.front()->name(), "w4") << "the latest first";
    s.Close();
  };
  scheduler::JobOrderCache cache;
  sort_in(fixed, 1, cache, 1);
  for (const Job* j : jobs) EXPECT_EQ(fixed.asked[j->name()], 1) << j->name();
  sort_in(fixed, 1, cache, 2);
  sort_in(fixed, 1, cache, 3);
  EXPECT_EQ(fixed.asked["run"], 3) << "it holds GPUs: asked every session";
  for (int i = 0; i < 5; ++i) EXPECT_EQ(fixed.asked["w" + std::to_string(i)], 1) << "kept";
  // A task more for w2 (its tasks changed): w2 asked again, the others not.
  state.job(jobs[3]->id()).AddTask(0);
  sort_in(fixed, 1, cache, 4);
  EXPECT_EQ(fixed.asked["w2"], 2);
  EXPECT_EQ(fixed.asked["w1"], 1);
  // Another policy: every row asked again.
  sort_in(fixed, 2, cache, 5);
  for (int i = 0; i < 5; ++i) EXPECT_EQ(fixed.asked["w" + std::to_string(i)], i == 2 ? 3 : 2);
  // Without the promise, every session asks every job.
  scheduler::JobOrderCache other;
  sort_in(unfixed, 1, other, 6);
  sort_in(unfixed, 1, other, 7);
  for (const Job* j : jobs) EXPECT_EQ(unfixed.asked[j->name()], 2) << j->name();
}

TEST(JobOrderKeys, LasKeysAreFixedForAWaitingJobUnlessStarvationPromotes) {
  plugins::LasOptions o;
  EXPECT_TRUE(plugins::LasPlugin({3600LL * 1'000'000}, o).PendingOrderReadsOnlySpec());
  o.starve_limit = 2;
  EXPECT_FALSE(plugins::LasPlugin({3600LL * 1'000'000}, o).PendingOrderReadsOnlySpec());
}

TEST(JobOrderKeys, AComparatorAmongTheOrdersTurnsTheKeyedSortOff) {
  EngineHarness h(ClusterBuilder().NodesPerRack(2).Gpus(8).Build());
  h.Submit(JobBuilder("a").Priority(1).Build());
  h.Submit(JobBuilder("b").Priority(2).Build());
  auto& state = const_cast<scheduler::State&>(h.state());
  plugins::PriorityPlugin priority;
  class Reverse : public scheduler::Plugin {
   public:
    std::string_view name() const override { return "reverse"; }
    void OnSessionOpen(Session& s) override {
      s.AddJobOrderFn(name(), [](const Job& l, const Job& r) { return l.id() < r.id() ? 1 : l.id() == r.id() ? 0 : -1; });
    }
  } reverse;
  std::vector<std::vector<scheduler::Plugin*>> tiers = {{&reverse}, {&priority}};
  Session s(state, h.clock(), 1, tiers);
  EXPECT_FALSE(s.job_order_keyed());
  std::vector<Job*> jobs;
  for (scheduler::JobId id : state.active_jobs()) jobs.push_back(&state.job(id));
  scheduler::SortInJobOrder(s, jobs.begin(), jobs.end());
  ASSERT_EQ(jobs.size(), 2u);
  EXPECT_EQ(jobs[0]->name(), "b") << "the comparator decides first: the later id";
  s.Close();
}

}  // namespace
}  // namespace ringmaster::testing
