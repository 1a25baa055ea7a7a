// What the active jobs accumulated, across a daemon restart
// (server/daemon/job_history.h): one engine's running jobs journaled as
// serve journals them, then a new engine that re-adopts them as
// Daemon::Readopt does (Engine::RestoreJob, then the histories). Their
// attained service, start, stop and resize stamps are the uninterrupted
// engine's, las orders them the same, and the default policy stops the
// same job for a waiting one; a restart that forgot them (the old daemon)
// does neither. A record the engine refuses is skipped, naming the job and
// the field, and that job starts fresh.
#include "server/daemon/job_history.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <map>
#include <string>
#include <vector>

#include "plugins/las.h"
#include "tests/support/builders.h"

namespace ringmaster::server {
namespace {

using scheduler::JobPhase;
using scheduler::Timestamp;
using testing::ClusterBuilder;
using testing::EngineHarness;
using testing::JobBuilder;

constexpr Timestamp kStart = 1'700'000'000'000;  // the wall clock's ms since the epoch
constexpr Timestamp kDown = 300'000;             // the daemon is down 5 min

// Two 8-GPU nodes (an engine holds its harness' clock: built in place).
topology::Cluster TwoNodes() { return ClusterBuilder().NodesPerRack(2).Gpus(8).Build(); }

// The default policy's las: levels at 1 h and 10 h of time run, and a 3 h
// level cooldown.
std::unique_ptr<plugins::LasPlugin> DefaultLas() {
  auto p = plugins::LasPlugin::Create(scheduler::PluginArgs(
      "las", "p.yaml",
      {{"thresholds", {"3600, 36000", 1, 1}}, {"byTime", {"true", 1, 1}}, {"levelCooldown", {"10800", 1, 1}}}));
  EXPECT_TRUE(p.ok()) << p.status();
  return std::unique_ptr<plugins::LasPlugin>(static_cast<plugins::LasPlugin*>(p->release()));
}

// The active jobs in las' job order at `now`: higher OrderRank first, then
// the earlier creation, then the id (the session's tie-break).
std::vector<std::string> LasOrder(const scheduler::State& st, Timestamp now) {
  auto las = DefaultLas();
  std::vector<const scheduler::Job*> jobs;
  for (scheduler::JobId id : st.active_jobs()) jobs.push_back(&st.job(id));
  std::sort(jobs.begin(), jobs.end(), [&](const scheduler::Job* a, const scheduler::Job* b) {
    const int64_t ra = las->OrderRank(*a, now), rb = las->OrderRank(*b, now);
    if (ra != rb) return ra > rb;
    if (a->created() != b->created()) return a->created() < b->created();
    return a->id() < b->id();
  });
  std::vector<std::string> out;
  for (const scheduler::Job* j : jobs) out.push_back(j->name());
  return out;
}

// What the policy reads of each job at `now`, by name.
struct Seen {
  int64_t attained;
  Timestamp started, last_stopped, last_resize;
  bool cooldown_now, cooldown_in_1h;
  bool operator==(const Seen&) const = default;
};
std::map<std::string, Seen> WhatThePolicyReads(const scheduler::State& st, Timestamp now) {
  auto las = DefaultLas();
  std::map<std::string, Seen> out;
  for (scheduler::JobId id : st.active_jobs()) {
    const scheduler::Job& j = st.job(id);
    out[j.name()] = {j.AttainedMilliMs(now), j.started(), j.last_stopped(), j.last_resize(),
                     las->InLevelCooldown(j, now), las->InLevelCooldown(j, now + 3'600'000)};
  }
  return out;
}

std::vector<std::string> RunningJobs(const EngineHarness& h) {
  std::vector<std::string> out;
  for (scheduler::JobId id : h.state().active_jobs()) {
    if (h.state().job(id).phase() == JobPhase::kRunning) out.push_back(h.state().job(id).name());
  }
  std::sort(out.begin(), out.end());
  return out;
}

// A waiting 8-GPU job 1 h on: the default policy preempts a job of a
// higher level out of its 3 h level cooldown (old), none inside it.
std::vector<std::string> AfterAnHourWithAWaitingJob(EngineHarness& h) {
  h.Submit(JobBuilder("new").GpusPerTask(8).Build());
  h.Cycle();
  h.clock().Advance(3'600'000);
  for (int k = 0; k < 40; ++k) h.Cycle();  // the victim's grace period (30 s), then the start
  return RunningJobs(h);
}

class JobHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rm_history_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The first daemon: "old" runs 2 h, then "young" 10 min beside it (each
  // 8 GPUs); what they accumulated is journaled as the background thread
  // does, the daemon stops.
  void FirstRun(EngineHarness& h) {
    h.clock().Set(kStart);
    auto j = *Journal::Open(dir_);
    ActiveJobHistory history(j.get());
    EXPECT_EQ(history.Restore(*j->Load(), h.engine()), 0u);
    h.Submit(JobBuilder("old").GpusPerTask(8).Build());
    h.Cycle();
    ASSERT_TRUE(h.Running("old"));
    EXPECT_EQ(history.Save(h.engine(), h.clock().Now(), false), 1u);
    h.clock().Advance(7'200'000);
    h.Submit(JobBuilder("young").GpusPerTask(8).Build());
    h.Cycle();
    ASSERT_TRUE(h.Running("young"));
    EXPECT_EQ(history.Save(h.engine(), h.clock().Now(), false), 1u) << "old's record did not change";
    h.clock().Advance(600'000);
    EXPECT_EQ(history.Save(h.engine(), h.clock().Now(), true), 0u) << "the clock alone changes no record";
    ASSERT_TRUE(j->Flush().ok());
  }

  // A restarted daemon kDown later: the jobs re-adopted where they ran
  // (AdminService::Recover), but `lost` whose placement is gone (it waits),
  // then, `with_history`, their records.
  void Restart(EngineHarness& first, EngineHarness& h, bool with_history, const std::string& lost = "") {
    h.clock().Set(first.clock().Now() + kDown);
    for (scheduler::JobId id : first.state().active_jobs()) {
      const scheduler::Job& job = first.state().job(id);
      std::vector<scheduler::Engine::RestoredTask> placed;
      for (const scheduler::Task& t : job.tasks()) {
        if (scheduler::HoldsNode(t.state) && job.name() != lost) {
          placed.push_back({t.index, t.role, first.state().cluster().node(t.node).name, t.gpus});
        }
      }
      ASSERT_TRUE(h.engine().RestoreJob(job.spec(), job.created(), placed, job.generation()).ok());
    }
    auto j = *Journal::Open(dir_);
    ActiveJobHistory history(j.get());
    const Recovered r = *j->Load();
    EXPECT_EQ(history.Restore(with_history ? r : Recovered{}, h.engine()), with_history ? 2u : 0u);
  }

  std::string dir_;
};

TEST_F(JobHistoryTest, ARestartKeepsWhatRunningJobsAttainedAndLasOrdersThemAsWithoutIt) {
  EngineHarness first(TwoNodes());
  FirstRun(first);
  EngineHarness restarted(TwoNodes()), forgot(TwoNodes());
  Restart(first, restarted, true);
  Restart(first, forgot, false);
  // The uninterrupted daemon: the same 5 min on. Their pods ran on while
  // the daemon was down, so that time counts as run (old: 2 h 15 min, young
  // 15 min, each on 8 GPUs).
  first.clock().Advance(kDown);
  const Timestamp now = first.clock().Now();
  ASSERT_EQ(restarted.clock().Now(), now);
  const auto want = WhatThePolicyReads(first.state(), now);
  for (const std::string name : {"old", "young"}) {
    EXPECT_EQ(want.at(name).attained, 8000 * (now - want.at(name).started)) << name;
  }
  EXPECT_GE(now - want.at("old").started, 2 * 3'600'000 + 900'000);
  EXPECT_TRUE(want.at("old").cooldown_now);
  EXPECT_FALSE(want.at("old").cooldown_in_1h);  // 3 h 15 min since it started
  EXPECT_EQ(WhatThePolicyReads(restarted.state(), now), want);
  EXPECT_NE(WhatThePolicyReads(forgot.state(), now), want);
  EXPECT_EQ(forgot.job("old").started(), now) << "the old daemon: every job starts again at the restart";

  // las: young (level 0, under 1 h) before old (level 1); forgotten, both
  // are level 0 and old goes first (the earlier).
  const std::vector<std::string> order = {"young", "old"};
  EXPECT_EQ(LasOrder(first.state(), now), order);
  EXPECT_EQ(LasOrder(restarted.state(), now), order);
  EXPECT_NE(LasOrder(forgot.state(), now), order);

  // The policy's decision an hour on: a waiting job stops old, out of its
  // level cooldown; forgotten, old's cooldown began at the restart and
  // nothing is stopped.
  const std::vector<std::string> running = {"new", "young"};
  EXPECT_EQ(AfterAnHourWithAWaitingJob(first), running);
  EXPECT_EQ(AfterAnHourWithAWaitingJob(restarted), running);
  EXPECT_NE(AfterAnHourWithAWaitingJob(forgot), running);
}

TEST_F(JobHistoryTest, AJobNotReadoptedCountsItsServiceUntilTheDaemonWasLastSeenAndHasStopped) {
  EngineHarness first(TwoNodes());
  FirstRun(first);
  // Old's placement is lost (its node gone, say): it waits again.
  EngineHarness restarted(TwoNodes());
  Restart(first, restarted, true, /*lost=*/"old");
  const Timestamp seen = first.clock().Now();  // FirstRun's last (forced) write
  const scheduler::Job& old = restarted.job("old");
  ASSERT_EQ(old.phase(), JobPhase::kPending);
  // Its service up to the last write (2 h 10 min on 8 GPUs), not the time
  // down; stopped then.
  EXPECT_EQ(old.started(), first.job("old").started());
  EXPECT_EQ(old.AttainedMilliMs(restarted.clock().Now()), 8000 * (seen - old.started()));
  EXPECT_EQ(old.last_stopped(), seen);
  EXPECT_EQ(restarted.job("young").AttainedMilliMs(restarted.clock().Now()),
            first.job("young").AttainedMilliMs(restarted.clock().Now()))
      << "re-adopted: the time down counts";
}

TEST_F(JobHistoryTest, ARecordTheEngineRefusesIsSkippedAndThatJobStartsFresh) {
  EngineHarness first(TwoNodes());
  FirstRun(first);
  auto j = *Journal::Open(dir_);
  Recovered r = *j->Load();
  ASSERT_EQ(r.histories.size(), 2u);
  r.histories[0].attained_milli_ms = INT64_MAX - 5;  // old: overflows with the time since
  EngineHarness restarted(TwoNodes());
  restarted.clock().Set(first.clock().Now() + kDown);
  for (const std::string name : {"old", "young"}) {
    const scheduler::Job& job = first.job(name);
    std::vector<scheduler::Engine::RestoredTask> placed = {
        {0, 0, first.state().cluster().node(job.task(0).node).name, job.task(0).gpus}};
    ASSERT_TRUE(restarted.engine().RestoreJob(job.spec(), job.created(), placed, job.generation()).ok());
  }
  ActiveJobHistory history(j.get());
  EXPECT_EQ(history.Restore(r, restarted.engine()), 1u);
  EXPECT_EQ(restarted.job("old").started(), restarted.clock().Now()) << "fresh, as a new job";
  EXPECT_EQ(restarted.job("young").started(), first.job("young").started());
  // The engine's refusal names the job and the field.
  scheduler::JobHistory h = ActiveJobHistory::FromJournal(restarted.engine(), r.histories[1]);
  h.last_resize = -3;
  const absl::Status s = restarted.engine().RestoreJobHistory(restarted.engine().FindJob("young"), h, 0);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(s.message(), "job 'young': last_resize: -3 is below -1");
}

}  // namespace
}  // namespace ringmaster::server
