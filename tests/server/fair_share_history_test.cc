// The queues' decayed past use across a daemon restart
// (server/daemon/fair_share_history.h): written by one engine to the
// journal, read back and given to a new engine on a manual clock, as
// Daemon::Readopt does; a damaged row is skipped, the others restored.
#include "server/daemon/fair_share_history.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <cmath>
#include <filesystem>
#include <numbers>
#include <string>
#include <vector>

#include "plugins/proportion.h"
#include "tests/support/builders.h"

namespace ringmaster::server {
namespace {

using scheduler::Timestamp;
using testing::ClusterBuilder;
using testing::EngineHarness;
using testing::JobBuilder;
using testing::PolicyFromYaml;

constexpr Timestamp kHour = 3'600'000;  // ms

// Queues a and b of equal weight, usageHalfLife 1 h, only the queue order
// decides (no preempt, no reclaim).
scheduler::Policy HalfLifePolicy() {
  return PolicyFromYaml(R"(
actions: "enqueue, allocate"
tiers:
- plugins:
  - name: gang
- plugins:
  - name: drf
  - name: predicates
  - name: proportion
    arguments: {usageHalfLife: 3600}
queues:
- {name: a}
- {name: b}
)");
}

void CycleAt(EngineHarness& h, Timestamp t) {
  h.clock().Set(t);
  h.Cycle();
  h.clock().Set(t);
}

double UsageGpus(EngineHarness& h, const std::string& queue) {
  const auto* p = static_cast<const plugins::ProportionPlugin*>(h.engine().plugin(plugins::ProportionPlugin::kName));
  return p->UsageGpus(scheduler::QueueId(*h.state().queues().Find(queue)));
}

class FairShareHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rm_usage_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The first daemon: a holds the whole cluster (8 GPUs) over [0, H), then
  // nothing; its usage is written at H:
  //   R_a(H) = 8 (1 - 1/2) = 4 GPUs, U_a = 4 H / ln 2 = 20,774.8 GPU-s; b 0.
  void FirstRun() {
    EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), HalfLifePolicy());
    h.Submit(JobBuilder("a0").Queue("a").GpusPerTask(8).Build());
    CycleAt(h, 0);
    ASSERT_TRUE(h.Running("a0"));
    h.clock().Set(kHour);
    ASSERT_TRUE(h.engine().FinishJob(h.job("a0").id(), true).ok());
    CycleAt(h, kHour);
    auto j = *Journal::Open(dir_);
    ASSERT_TRUE(j->Load().ok());
    EXPECT_EQ(SaveQueueUsage(h.engine(), *j), 2u);  // a and b
    ASSERT_TRUE(j->Flush().ok());
  }

  std::string dir_;
};

TEST_F(FairShareHistoryTest, ARestartStartsFromTheJournaledUsageDecayedToTheRestart) {
  FirstRun();
  // The daemon comes back one half-life later (down in between: no use
  // counted): R_a(2H) = 4 / 2 = 2 GPUs, U_a = 2 H / ln 2 = 10,387.4 GPU-s.
  auto j = *Journal::Open(dir_);
  const Recovered r = *j->Load();
  ASSERT_EQ(r.queue_usage.size(), 2u);
  EXPECT_EQ(r.queue_usage[0].queue, "a");
  EXPECT_NEAR(r.queue_usage[0].gpu_seconds, 4 * 3600 / std::numbers::ln2, 1e-6);
  EXPECT_EQ(r.queue_usage[0].valued_at_ms, kHour);
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), HalfLifePolicy());
  h.clock().Set(2 * kHour);
  EXPECT_EQ(RestoreQueueUsage(r, h.engine()), 2u);
  // Valued before the first cycle (the admin API, a write at once).
  const std::vector<scheduler::DecayedUsage> u = h.engine().DecayedUsages();
  ASSERT_EQ(u.size(), 2u);
  EXPECT_EQ(u[0].queue, "a");
  EXPECT_NEAR(u[0].gpu_seconds, 10'387.4, 0.1);
  EXPECT_EQ(u[0].at, 2 * kHour);
  // a1 and b1 (8 GPUs each) arrive; both deserve 4 and hold none:
  //   key_a = 0 + 2/4 = 0.5 > key_b = 0, so b1 starts. (A restart from no
  //   history ties them, and a, declared first, would win.)
  h.Submit(JobBuilder("a1").Queue("a").GpusPerTask(8).Build());
  h.Submit(JobBuilder("b1").Queue("b").GpusPerTask(8).Build());
  CycleAt(h, 2 * kHour);
  EXPECT_TRUE(h.Running("b1"));
  EXPECT_FALSE(h.Running("a1"));
  EXPECT_NEAR(UsageGpus(h, "a"), 2, 1e-9);
  EXPECT_EQ(UsageGpus(h, "b"), 0);
}

TEST_F(FairShareHistoryTest, WithoutTheJournaledUsageTheRestartTiesAndAGoesFirst) {
  // The control of the test above: the same restart with nothing restored.
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), HalfLifePolicy());
  h.clock().Set(2 * kHour);
  h.Submit(JobBuilder("a1").Queue("a").GpusPerTask(8).Build());
  h.Submit(JobBuilder("b1").Queue("b").GpusPerTask(8).Build());
  CycleAt(h, 2 * kHour);
  EXPECT_TRUE(h.Running("a1"));
  EXPECT_FALSE(h.Running("b1"));
}

TEST_F(FairShareHistoryTest, ADamagedRowIsSkippedAndTheOthersRestored) {
  FirstRun();
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/journal.db").c_str(), &db), SQLITE_OK);
  ASSERT_EQ(sqlite3_exec(db, "UPDATE queue_usage SET gpu_seconds='x' WHERE queue='b'", nullptr, nullptr, nullptr),
            SQLITE_OK);
  sqlite3_close(db);
  auto j = *Journal::Open(dir_);
  const Recovered r = *j->Load();
  ASSERT_EQ(r.skipped.size(), 1u);
  EXPECT_NE(r.skipped[0].find("table queue_usage, row 2 (queue 'b'), column gpu_seconds: text, expected a real"),
            std::string::npos)
      << r.skipped[0];
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), HalfLifePolicy());
  h.clock().Set(kHour);
  EXPECT_EQ(RestoreQueueUsage(r, h.engine()), 1u);  // logs the skipped row
  h.Submit(JobBuilder("b-never").Queue("b").Gang(2).GpusPerTask(8).Build());
  CycleAt(h, kHour);
  EXPECT_NEAR(UsageGpus(h, "a"), 4, 1e-9);
  EXPECT_EQ(UsageGpus(h, "b"), 0);
  // The next write replaces the table: the damaged row is gone.
  EXPECT_EQ(SaveQueueUsage(h.engine(), *j), 2u);
  ASSERT_TRUE(j->Flush().ok());
  j.reset();
  EXPECT_TRUE((*Journal::Open(dir_))->Load()->skipped.empty());
}

}  // namespace
}  // namespace ringmaster::server
