// The daemon's learned speed models (issue 24 §4): the journal's text of
// observations, their merge, and the path reports -> fit -> engine job ->
// speedup plugin, beside a control without the reports that decides
// otherwise; when a model is replaced, and what a restart restores.
#include "server/daemon/speed_learner.h"

#include <gtest/gtest.h>
#include <stdlib.h>

#include <string>
#include <vector>

#include "server/journal/journal.h"
#include "tests/support/builders.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::server {
namespace {

using testing::ClusterBuilder;
using testing::EngineHarness;
using testing::JobBuilder;
using testing::PolicyFromYaml;

TEST(SpeedObservationsText, RoundTripsExactly) {
  const std::vector<SpeedObservation> obs = {{.gpus = 1, .nodes = 1, .step_seconds = 0.1, .step_samples = 32, .reports = 3},
                                             {.gpus = 8, .nodes = 2, .step_seconds = 1.0 / 3, .step_samples = 0, .reports = 1}};
  const std::string text = SpeedObservationsText(obs);
  EXPECT_EQ(text.substr(0, 6), "1 1 3 ") << text;
  auto back = ParseSpeedObservations(text);
  ASSERT_TRUE(back.ok()) << back.status();
  ASSERT_EQ(back->size(), 2u);
  for (size_t i = 0; i < obs.size(); ++i) {
    EXPECT_EQ((*back)[i].gpus, obs[i].gpus);
    EXPECT_EQ((*back)[i].nodes, obs[i].nodes);
    EXPECT_EQ((*back)[i].reports, obs[i].reports);
    EXPECT_EQ((*back)[i].step_seconds, obs[i].step_seconds) << "bit for bit";
    EXPECT_EQ((*back)[i].step_samples, obs[i].step_samples);
  }
  EXPECT_TRUE(ParseSpeedObservations("").ok()) << "no observation is no error";
}

TEST(SpeedObservationsText, ABadLineIsNamedWithItsField) {
  ASSERT_ERROR(ParseSpeedObservations("1 1 2 0.5 32\n2 3 1 0.5 32\n"), absl::StatusCode::kInvalidArgument,
               "speed observations line 2: NODES is not in 1..GPUS");
  ASSERT_ERROR(ParseSpeedObservations("1 1 0 0.5 32"), absl::StatusCode::kInvalidArgument,
               "line 1: REPORTS is not a positive integer");
  ASSERT_ERROR(ParseSpeedObservations("1 1 1 -0.5 32"), absl::StatusCode::kInvalidArgument,
               "line 1: STEP_SECONDS is not a positive number");
  ASSERT_ERROR(ParseSpeedObservations("1 1 1 nan 32"), absl::StatusCode::kInvalidArgument,
               "line 1: STEP_SECONDS is not a positive number");
  ASSERT_ERROR(ParseSpeedObservations("1 1 1 0.5"), absl::StatusCode::kInvalidArgument,
               "line 1: 4 fields, want 5");
  ASSERT_ERROR(ParseSpeedObservations("x 1 1 0.5 1"), absl::StatusCode::kInvalidArgument,
               "line 1: GPUS is not in 1..1000000");
}

TEST(MergeSpeedObservations, MeansWeightedByReportsAndUnknownSamplesLeftOut) {
  const auto merged = MergeSpeedObservations(
      {{.gpus = 2, .nodes = 1, .step_seconds = 1.0, .step_samples = 64, .reports = 1},
       {.gpus = 1, .nodes = 1, .step_seconds = 4.0, .step_samples = 0, .reports = 2}},
      {{.gpus = 2, .nodes = 1, .step_seconds = 2.0, .step_samples = 0, .reports = 3},
       {.gpus = 1, .nodes = 1, .step_seconds = 1.0, .step_samples = 10, .reports = 2}});
  ASSERT_EQ(merged.size(), 2u);
  EXPECT_EQ(merged[0].gpus, 1) << "ordered by size";
  EXPECT_EQ(merged[0].reports, 4);
  EXPECT_DOUBLE_EQ(merged[0].step_seconds, (2 * 4.0 + 2 * 1.0) / 4);
  EXPECT_DOUBLE_EQ(merged[0].step_samples, 10) << "only the reports that said";
  EXPECT_EQ(merged[1].reports, 4);
  EXPECT_DOUBLE_EQ(merged[1].step_seconds, (1.0 + 3 * 2.0) / 4);
  EXPECT_DOUBLE_EQ(merged[1].step_samples, 64);
}

// Every sizing action at once, the speedup plugin on (growth one member per
// cycle would need a clock; here all at once).
scheduler::Policy Policy() {
  return PolicyFromYaml(R"(actions: "enqueue, allocate, elastic"
configurations:
- name: elastic
  arguments: {growIdle: 0, cooldown: 0, returnLoans: false}
tiers:
- plugins:
  - name: priority
  - name: gang
- plugins:
  - name: predicates
  - name: binpack
  - name: speedup
)");
}

// A global batch of 32 at each size; the step's seconds at 1 and 2 workers.
Coordinator::SpeedReports Reports(const std::string& job, double one, double two, int64_t n = 2) {
  Coordinator::SpeedReports r;
  r.job = job;
  r.sizes = {{.gpus = 1, .nodes = 1, .step_seconds = one, .step_samples = 32, .reports = n},
             {.gpus = 2, .nodes = 1, .step_seconds = two, .step_samples = 32, .reports = n}};
  r.reports = 2 * n;
  return r;
}

class SpeedLearnerTest : public ::testing::Test {
 protected:
  // One node of 8 GPUs; `flat` (submitted first) and `lin`, elastic 1..8,
  // start at 2 GPUs each; 4 stay idle until the elastic action grows.
  SpeedLearnerTest() : h_(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), Policy()) {
    h_.Submit(JobBuilder("flat").Gang(2).Elastic(1, 8).GpusPerTask(1).Build());
    h_.Submit(JobBuilder("lin").Gang(2).Elastic(1, 8).GpusPerTask(1).Build());
  }
  // What the workers measured: flat is hardly faster on 2 (400 -> 350 ms a
  // step), lin twice as fast (400 -> 200 ms).
  std::vector<Coordinator::SpeedReports> reports_ = {Reports("flat", 0.4, 0.35), Reports("lin", 0.4, 0.2)};
  EngineHarness h_;
};

TEST_F(SpeedLearnerTest, ReportsBecomeModelsThatSendIdleGpusToTheJobThatScales) {
  for (const bool learn : {true, false}) {
    SCOPED_TRACE(learn ? "learned" : "no reports (control)");
    EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), Policy());
    h.Submit(JobBuilder("flat").Gang(2).Elastic(1, 8).GpusPerTask(1).Build());
    h.Submit(JobBuilder("lin").Gang(2).Elastic(1, 8).GpusPerTask(1).Build());
    // The jobs start at 2 with the 4 idle GPUs kept idle by a third job
    // that holds them for the first cycle.
    h.Submit(JobBuilder("hold").Gang(4).GpusPerTask(1).Build());
    h.Cycle();
    ASSERT_EQ(h.job("flat").ReadyCount(), 2);
    ASSERT_EQ(h.job("lin").ReadyCount(), 2);
    SpeedLearner learner([&] { return learn ? reports_ : std::vector<Coordinator::SpeedReports>{}; }, nullptr);
    EXPECT_EQ(learner.Learn(h.engine(), absl::FromUnixSeconds(100)), learn ? 2 : 0);
    EXPECT_EQ(h.job("lin").spec().speed != nullptr, learn);
    ASSERT_TRUE(h.engine().FinishJob(h.engine().FindJob("hold"), true).ok());
    const scheduler::Decisions d = h.Cycle();
    if (learn) {
      EXPECT_EQ(h.job("lin").ReadyCount(), 6) << "every idle GPU to the job its reports say scales";
      EXPECT_EQ(h.job("flat").ReadyCount(), 2);
      bool said = false;
      for (const scheduler::MembershipChange& m : d.membership) {
        if (m.job_name != "lin") continue;
        said = true;
        EXPECT_NE(m.reason.find("grew into idle GPUs: 2 -> 6 GPUs on 1 -> 1 node, x3.00 the rate (speed model: learned "
                                "from 4 reports (1 GPUs on 1 node, 2 GPUs on 1 node)"),
                  std::string::npos)
            << m.reason;
      }
      EXPECT_TRUE(said) << "no membership change for lin";
    } else {
      EXPECT_EQ(h.job("flat").ReadyCount(), 6) << "job order: the first submitted grows first";
      EXPECT_EQ(h.job("lin").ReadyCount(), 2);
    }
  }
}

TEST_F(SpeedLearnerTest, AModelIsReplacedAtANewSizeAtOnceOtherwiseAtMostEveryRefitPeriod) {
  h_.Cycle();
  SpeedLearner learner([&] { return reports_; }, nullptr, absl::Seconds(30));
  const absl::Time t0 = absl::FromUnixSeconds(1000);
  EXPECT_EQ(learner.Learn(h_.engine(), t0), 2);
  const auto* first = h_.job("lin").spec().speed.get();
  EXPECT_EQ(learner.Learn(h_.engine(), t0 + absl::Seconds(1)), 0) << "nothing new";
  reports_[1] = Reports("lin", 0.4, 0.21, 3);  // more reports, same sizes
  EXPECT_EQ(learner.Learn(h_.engine(), t0 + absl::Seconds(10)), 0) << "same sizes within 30 s";
  EXPECT_EQ(h_.job("lin").spec().speed.get(), first);
  reports_[1].reports = 7;
  EXPECT_EQ(learner.Learn(h_.engine(), t0 + absl::Seconds(31)), 1) << "same sizes, 30 s on";
  EXPECT_NE(h_.job("lin").spec().speed.get(), first);
  reports_[1].sizes.push_back({.gpus = 4, .nodes = 1, .step_seconds = 0.1, .step_samples = 32, .reports = 1});
  reports_[1].reports = 8;
  EXPECT_EQ(learner.Learn(h_.engine(), t0 + absl::Seconds(32)), 1) << "a new size: at once";
  EXPECT_NE(h_.job("lin").spec().speed->Describe().find("4 GPUs on 1 node"), std::string::npos);
  // A job the engine does not run gets nothing (and no error), nor one that
  // ended since.
  reports_.push_back(Reports("gone", 1, 1));
  EXPECT_EQ(learner.Learn(h_.engine(), t0 + absl::Seconds(33)), 0);
  ASSERT_TRUE(h_.engine().CancelJob(h_.engine().FindJob("flat")).ok());
  reports_[0] = Reports("flat", 0.4, 0.35, 9);
  reports_[0].sizes.push_back({.gpus = 4, .nodes = 1, .step_seconds = 0.5, .step_samples = 32, .reports = 1});
  EXPECT_EQ(learner.Learn(h_.engine(), t0 + absl::Seconds(34)), 0) << "flat was cancelled";
}

TEST_F(SpeedLearnerTest, TheJournalKeepsWhatWasLearnedAndARestartStartsFromIt) {
  char tmpl[] = "/tmp/speed_learner_XXXXXX";
  ASSERT_NE(mkdtemp(tmpl), nullptr);
  const std::string dir = tmpl;
  h_.Cycle();
  {
    auto journal = Journal::Open(dir);
    ASSERT_TRUE(journal.ok()) << journal.status();
    ASSERT_TRUE((*journal)->Load().ok());
    SpeedLearner learner([&] { return reports_; }, journal->get());
    EXPECT_EQ(learner.Learn(h_.engine(), absl::FromUnixSeconds(100)), 2);
    ASSERT_TRUE((*journal)->Flush().ok());
  }
  auto journal = Journal::Open(dir);
  ASSERT_TRUE(journal.ok()) << journal.status();
  auto recovered = (*journal)->Load();
  ASSERT_TRUE(recovered.ok()) << recovered.status();
  ASSERT_EQ(recovered->speeds.size(), 2u);
  EXPECT_EQ(recovered->speeds[1].first, "lin");
  // A restarted daemon: the engine's jobs get their models at once, before
  // any new report; a row that does not parse is skipped.
  EngineHarness again(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), Policy());
  again.Submit(JobBuilder("flat").Gang(2).Elastic(1, 8).GpusPerTask(1).Build());
  again.Submit(JobBuilder("lin").Gang(2).Elastic(1, 8).GpusPerTask(1).Build());
  again.Cycle();
  std::vector<std::pair<std::string, std::string>> rows = recovered->speeds;
  rows[0].second = "1 1 1 bad 32\n";
  rows.emplace_back("ended-before-the-restart", rows[1].second);  // no such job: left out
  SpeedLearner learner([] { return std::vector<Coordinator::SpeedReports>{}; }, nullptr);
  learner.Restore(rows, again.engine());
  EXPECT_EQ(again.job("flat").spec().speed, nullptr) << "a damaged row is skipped";
  ASSERT_NE(again.job("lin").spec().speed, nullptr);
  EXPECT_EQ(again.job("lin").spec().speed->Describe(), h_.job("lin").spec().speed->Describe());
  // New reports after the restart add to the journaled ones.
  SpeedLearner merging([&] { return std::vector<Coordinator::SpeedReports>{Reports("lin", 0.4, 0.2, 1)}; }, nullptr);
  merging.Restore(recovered->speeds, again.engine());
  EXPECT_EQ(merging.Learn(again.engine(), absl::FromUnixSeconds(200)), 1);
  EXPECT_NE(again.job("lin").spec().speed->Describe().find("learned from 6 reports"), std::string::npos)
      << again.job("lin").spec().speed->Describe();
  std::string cmd = "rm -rf " + dir;
  ASSERT_EQ(system(cmd.c_str()), 0);
}

TEST(EngineSetJobSpeed, AnUnknownOrEndedJobIsNotFound) {
  EngineHarness h(ClusterBuilder().NodesPerRack(1).Gpus(8).Build(), Policy());
  const scheduler::JobId id = h.Submit(JobBuilder("a").Gang(1).GpusPerTask(1).Build());
  auto model = LearnedSpeedModel::Fit({{.gpus = 1, .nodes = 1, .step_seconds = 1, .step_samples = 1, .reports = 1}});
  ASSERT_TRUE(model.ok()) << model.status();
  EXPECT_TRUE(h.engine().SetJobSpeed(id, *model).ok());
  EXPECT_EQ(h.job("a").spec().speed.get(), model->get());
  ASSERT_TRUE(h.engine().CancelJob(id).ok());
  ASSERT_ERROR(h.engine().SetJobSpeed(id, *model), absl::StatusCode::kNotFound, "no such active job");
  ASSERT_ERROR(h.engine().SetJobSpeed(scheduler::JobId(), *model), absl::StatusCode::kNotFound, "no such active job");
}

}  // namespace
}  // namespace ringmaster::server
