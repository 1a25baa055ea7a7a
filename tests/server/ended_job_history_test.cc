// The jobs seen to end across a daemon restart
// (server/daemon/ended_job_history.h): one engine's ended jobs written to
// the journal, read back and given to a new engine as Daemon::Readopt does.
// The learners (gittins' table, backfill's learned walltimes) then answer
// exactly as in the engine that saw the jobs end, and a backfill that only
// the estimates allow is made after the restart too; without the journal's
// records neither holds. A damaged row is skipped, the others restored;
// only the last `keep` are kept.
#include "server/daemon/ended_job_history.h"

#include <gtest/gtest.h>
#include <sqlite3.h>
#include <stdlib.h>

#include <algorithm>
#include <filesystem>
#include <string>
#include <vector>

#include "plugins/gittins.h"
#include "scheduler/actions/learned_walltime.h"
#include "tests/support/builders.h"

namespace ringmaster::server {
namespace {

using plugins::GittinsPlugin;
using scheduler::JobPhase;
using scheduler::Timestamp;
using testing::ClusterBuilder;
using testing::EngineHarness;
using testing::JobBuilder;
using testing::PolicyFromYaml;

// The ended-job records the state holds, oldest first.
std::vector<scheduler::EndedJob> Ended(const scheduler::State& st) {
  std::vector<scheduler::EndedJob> out;
  for (uint64_t i = st.ended_begin(); i < st.ended_end(); ++i) out.push_back(st.ended_job(i));
  return out;
}

// The default policy, backfill on learned walltimes (p90 of at least 5
// runs), queues a and b.
scheduler::Policy LearningPolicy() {
  std::string yaml(scheduler::DefaultPolicyYaml());
  const std::string entry =
      "- name: backfill\n  arguments: {learnedWalltimePercentile: 90, learnedWalltimeMinSamples: 5}\n";
  yaml.insert(yaml.find("configurations:\n") + std::string("configurations:\n").size(), entry);
  yaml += "queues:\n- {name: a, weight: 1}\n- {name: b, weight: 1}\n";
  return PolicyFromYaml(yaml);
}

// Two 8-GPU nodes (an engine holds its harness' clock: built in place).
topology::Cluster TwoNodes() { return ClusterBuilder().NodesPerRack(2).Gpus(8).Build(); }

// Runs `name` (g GPUs, queue q) alone for `secs` seconds, then ends it
// (Completed, or Failed with `failed`).
void RunFor(EngineHarness& h, const std::string& name, int g, const std::string& q, int secs, bool failed = false) {
  h.Submit(JobBuilder(name).GpusPerTask(g).Queue(q).Build());
  h.Cycle();
  ASSERT_TRUE(h.Running(name)) << h.job(name).pending_reason();
  h.clock().Advance(secs * 1000 - 1000);  // Cycle() moved the clock 1 s on
  ASSERT_TRUE(h.engine().FinishJob(h.engine().FindJob(name), !failed).ok());
  h.Cycle();
}

// What backfill's estimates need (5 x 1 GPU for 10 s, 5 x 8 GPUs for 100 s
// in queue a), and more for the tables: b's runs, a failed one, a job
// cancelled after running and one cancelled before it ran (neither
// teaches).
void Teach(EngineHarness& h) {
  for (int k = 0; k < 5; ++k) RunFor(h, "one" + std::to_string(k), 1, "a", 10);
  for (int k = 0; k < 5; ++k) RunFor(h, "eight" + std::to_string(k), 8, "a", 100);
  for (int k = 0; k < 6; ++k) RunFor(h, "b" + std::to_string(k), 2, "b", 30 + 70 * k);
  RunFor(h, "failed", 4, "b", 3000, /*failed=*/true);
  h.Submit(JobBuilder("cancelled-running").GpusPerTask(8).Queue("a").Build());
  h.Cycle();
  ASSERT_TRUE(h.Running("cancelled-running"));
  h.clock().Advance(50'000);
  ASSERT_TRUE(h.engine().CancelJob(h.engine().FindJob("cancelled-running")).ok());
  h.Submit(JobBuilder("never-ran").GpusPerTask(8).Queue("b").Build());
  ASSERT_TRUE(h.engine().CancelJob(h.engine().FindJob("never-ran")).ok());
  h.Cycle();
  ASSERT_EQ(h.job("cancelled-running").phase(), JobPhase::kAborted);
  ASSERT_EQ(h.job("never-ran").phase(), JobPhase::kAborted);
  ASSERT_EQ(Ended(h.state()).size(), 19u);
}

// The 2 x 8 gang reserves both nodes while "running" (8 GPUs) holds one:
// "short" (1 GPU) may take the free node only on its estimate (10 s, before
// running's estimated end at 100 s); docs/POLICY.md, "Learned walltimes for
// backfill".
bool ShortIsBackfilled(EngineHarness& h) {
  h.Submit(JobBuilder("running").GpusPerTask(8).Queue("a").Build());
  h.Cycle();
  EXPECT_TRUE(h.Running("running"));
  h.Submit(JobBuilder("gang").Gang(2).GpusPerTask(8).Queue("a").Build());
  h.Submit(JobBuilder("short").GpusPerTask(1).Queue("a").Build());
  h.Cycle();
  EXPECT_FALSE(h.Running("gang"));
  return h.Running("short");
}

// The probes' estimates: every queue (one unknown) x GPU count.
std::vector<int64_t> Estimates(EngineHarness& h, const std::string& tag) {
  scheduler::WalltimeEstimator p90(90, 5), p50(50, 1);
  p90.Learn(h.state());
  p50.Learn(h.state());
  std::vector<int64_t> out;
  for (const std::string q : {"a", "b"}) {
    for (const int g : {1, 2, 4, 8}) {
      const std::string name = tag + q + std::to_string(g);
      h.Submit(JobBuilder(name).GpusPerTask(g).Queue(q).Build());
      out.push_back(p90.Walltime(h.job(name)));
      out.push_back(p50.Walltime(h.job(name)));
    }
  }
  out.push_back(static_cast<int64_t>(p90.version()));
  return out;
}

// gittins' table (GPU-time, and byTime) learned from the state's ended
// jobs: samples, then each bin's figures.
std::vector<double> GittinsFigures(const scheduler::State& state) {
  std::vector<double> out;
  for (const bool by_time : {false, true}) {
    auto p = GittinsPlugin::Create(scheduler::PluginArgs(
        "gittins", "p.yaml",
        {{"byTime", {by_time ? "true" : "false", 1, 1}}, {"quantum", {"20", 1, 1}}, {"minSamples", {"3", 1, 1}}}));
    EXPECT_TRUE(p.ok()) << p.status();
    auto& g = static_cast<GittinsPlugin&>(**p);
    g.Learn(state);
    out.push_back(static_cast<double>(g.table().samples()));
    for (int k = 0; k < g.table().bins(); ++k) {
      const auto& e = g.table().At(k);
      out.insert(out.end(), {e.index, e.quantum, e.remaining, e.learned ? 1.0 : 0.0});
    }
  }
  return out;
}

class EndedJobHistoryTest : public ::testing::Test {
 protected:
  void SetUp() override {
    char tmpl[] = "/tmp/rm_ended_XXXXXX";
    ASSERT_NE(mkdtemp(tmpl), nullptr);
    dir_ = tmpl;
  }
  void TearDown() override { std::filesystem::remove_all(dir_); }

  // The first daemon: starts on an empty journal, sees Teach's jobs end,
  // writes them (as its background thread does), and stops.
  void FirstRun(EngineHarness& h, int64_t keep = EndedJobHistory::kDefaultKeep) {
    auto j = *Journal::Open(dir_);
    const Recovered empty = *j->Load();
    EndedJobHistory history(j.get(), keep);
    EXPECT_EQ(history.Restore(empty, h.engine()), 0u);
    Teach(h);
    // 5 + 5 + 6 + failed: the two cancelled ones teach nothing.
    EXPECT_EQ(history.Save(h.engine()), 17u);
    EXPECT_EQ(history.Save(h.engine()), 0u) << "each is written once";
    ASSERT_TRUE(j->Flush().ok());
  }

  // A restarted daemon's engine with the journal's records.
  size_t Restart(EngineHarness& h, int64_t keep = EndedJobHistory::kDefaultKeep) {
    auto j = *Journal::Open(dir_);
    const Recovered r = *j->Load();
    EndedJobHistory history(j.get(), keep);
    return history.Restore(r, h.engine());
  }

  std::string dir_;
};

TEST_F(EndedJobHistoryTest, ARestartLearnsExactlyWhatTheUninterruptedRunLearned) {
  EngineHarness first(TwoNodes(), LearningPolicy());
  FirstRun(first);
  EngineHarness restarted(TwoNodes(), LearningPolicy());
  EXPECT_EQ(Restart(restarted), 17u);
  EngineHarness forgot(TwoNodes(), LearningPolicy());  // the same restart without the journal's records

  // The records as the learners read them: equal on every field but the id
  // (none: restored) for the 17 that teach.
  std::vector<scheduler::EndedJob> want;
  for (const scheduler::EndedJob& e : Ended(first.state())) {
    if (!e.Teaches()) continue;
    want.push_back(e);
    want.back().id = scheduler::JobId();
  }
  EXPECT_EQ(Ended(restarted.state()), want);

  const std::vector<double> gittins = GittinsFigures(first.state());
  EXPECT_EQ(GittinsFigures(restarted.state()), gittins);
  EXPECT_NE(GittinsFigures(forgot.state()), gittins);
  ASSERT_GT(gittins.front(), 0);

  // The engine's own backfill reads them: "short" is backfilled on its
  // estimate in the run that saw the jobs end and after the restart, not
  // after a restart that forgot them.
  EXPECT_TRUE(ShortIsBackfilled(first));
  EXPECT_TRUE(ShortIsBackfilled(restarted)) << restarted.job("short").pending_reason();
  EXPECT_FALSE(ShortIsBackfilled(forgot));

  // (The probes wait: no cycle runs after them.)
  const std::vector<int64_t> estimates = Estimates(first, "u-");
  EXPECT_EQ(Estimates(restarted, "r-"), estimates);
  EXPECT_NE(Estimates(forgot, "f-"), estimates);
}

TEST_F(EndedJobHistoryTest, JobsThatEndAfterARestartAreAppendedAfterTheRestoredOnes) {
  EngineHarness first(TwoNodes(), LearningPolicy());
  FirstRun(first);
  EngineHarness second(TwoNodes(), LearningPolicy());
  auto j = *Journal::Open(dir_);
  EndedJobHistory history(j.get(), EndedJobHistory::kDefaultKeep);
  ASSERT_EQ(history.Restore(*j->Load(), second.engine()), 17u);
  RunFor(second, "later", 1, "b", 7);
  EXPECT_EQ(history.Save(second.engine()), 1u);
  ASSERT_TRUE(j->Flush().ok());
  j.reset();
  const Recovered r = *(*Journal::Open(dir_))->Load();
  ASSERT_EQ(r.ended_jobs.size(), 18u);
  EXPECT_EQ(r.ended_jobs.front().name, "one0");
  EXPECT_EQ(r.ended_jobs.back().name, "later");
  EXPECT_EQ(r.ended_jobs.back().last_stopped_ms - r.ended_jobs.back().started_ms, 7000);
  for (size_t i = 1; i < r.ended_jobs.size(); ++i) EXPECT_EQ(r.ended_jobs[i].seq, r.ended_jobs[i - 1].seq + 1);
}

TEST_F(EndedJobHistoryTest, ADamagedRowIsSkippedAndTheOthersRestored) {
  EngineHarness first(TwoNodes(), LearningPolicy());
  FirstRun(first);
  sqlite3* db = nullptr;
  ASSERT_EQ(sqlite3_open((dir_ + "/journal.db").c_str(), &db), SQLITE_OK);
  // eight4: its run unreadable; b5: a phase no job ends in (Running).
  ASSERT_EQ(sqlite3_exec(db,
                         "UPDATE ended_jobs SET started='soon' WHERE job='eight4';"
                         "UPDATE ended_jobs SET phase=2 WHERE job='b5';",
                         nullptr, nullptr, nullptr),
            SQLITE_OK)
      << sqlite3_errmsg(db);
  sqlite3_close(db);
  auto j = *Journal::Open(dir_);
  const Recovered r = *j->Load();
  ASSERT_EQ(r.ended_skipped.size(), 1u);
  EXPECT_NE(r.ended_skipped[0].find("table ended_jobs, row 10 (seq 10, job 'eight4'), column started: text, expected "
                                    "an integer"),
            std::string::npos)
      << r.ended_skipped[0];
  EXPECT_NE(r.ended_skipped[0].find(dir_ + "/journal.db"), std::string::npos) << r.ended_skipped[0];
  ASSERT_EQ(r.ended_jobs.size(), 16u);
  EngineHarness h(TwoNodes(), LearningPolicy());
  EndedJobHistory history(j.get(), EndedJobHistory::kDefaultKeep);
  EXPECT_EQ(history.Restore(r, h.engine()), 15u);  // logs both
  std::vector<std::string> names;
  for (const scheduler::EndedJob& e : Ended(h.state())) names.push_back(e.name);
  EXPECT_EQ(std::count(names.begin(), names.end(), "eight4"), 0);
  EXPECT_EQ(std::count(names.begin(), names.end(), "b5"), 0);
  EXPECT_EQ(names.front(), "one0");
  EXPECT_EQ(names.back(), "failed");
}

TEST_F(EndedJobHistoryTest, OnlyTheLastKeepAreKeptAndRestored) {
  EngineHarness first(TwoNodes(), LearningPolicy());
  FirstRun(first, /*keep=*/4);
  auto j = *Journal::Open(dir_);
  const Recovered r = *j->Load();
  ASSERT_EQ(r.ended_jobs.size(), 4u);  // b3, b4, b5, failed: the last 4 of 17
  EXPECT_EQ(r.ended_jobs.front().name, "b3");
  EXPECT_EQ(r.ended_jobs.back().name, "failed");
  EXPECT_EQ(r.ended_jobs.back().seq, 17);
  // A restart that keeps fewer restores the last of them.
  EngineHarness h(TwoNodes(), LearningPolicy());
  EXPECT_EQ(Restart(h, 2), 2u);
  ASSERT_EQ(Ended(h.state()).size(), 2u);
  EXPECT_EQ(Ended(h.state())[0].name, "b5");
  EXPECT_EQ(Ended(h.state())[1].name, "failed");
  // keep 0: nothing restored, and the table is emptied.
  EngineHarness none(TwoNodes(), LearningPolicy());
  EXPECT_EQ(Restart(none, 0), 0u);
  EXPECT_TRUE((*Journal::Open(dir_))->Load()->ended_jobs.empty());
}

}  // namespace
}  // namespace ringmaster::server
