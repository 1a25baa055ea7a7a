// Application models (simulator/app_model.h): the speed model against
// points of the tables worked out by hand, bad folders and workload rows
// with line-numbered errors, and a rigid replay whose JCTs are computed by
// hand.
#include "simulator/app_model.h"

#include <cmath>
#include <filesystem>
#include <fstream>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "plugins/registry.h"
#include "scheduler/policy.h"
#include "simulator/native_trace.h"
#include "simulator/pollux_trace.h"
#include "simulator/replay.h"
#include "tests/support/source_dir.h"
#include "topology/uniform_cluster.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::simulator {
namespace {

using ::testing::HasSubstr;

std::string Apps() { return ringmaster::testing::SourceDir() + "/data/traces/pollux/apps"; }

// A scratch folder under the test's temp dir, emptied first.
std::string Scratch(const std::string& name) {
  const std::string dir = ::testing::TempDir() + "/app_model_test_" + name;
  std::filesystem::remove_all(dir);
  std::filesystem::create_directories(dir);
  return dir;
}

void Write(const std::string& path, const std::string& text) {
  std::ofstream(path) << text;
}

// A small application: one node of up to 2 GPUs measured, two nodes by
// counts only; batches 8 and 16 validated over two epochs.
std::string TinyApp(const std::string& name) {
  const std::string dir = Scratch(name) + "/tiny";
  std::filesystem::create_directories(dir);
  Write(dir + "/placements.csv",
        "placement,local_bsz,step_time,sync_time\n"
        "1,4,1.0,0.0\n"
        "1,8,2.0,0.0\n"
        "2,4,1.2,0.2\n"
        "2,8,2.2,0.4\n"
        "11,4,1.6,0.6\n"
        "11,8,3.0,1.0\n");
  Write(dir + "/scalability.csv",
        "num_nodes,num_replicas,local_bsz,step_time,sync_time\n"
        "2,4,4,2.0,1.0\n"
        "2,4,8,4.0,2.0\n");
  Write(dir + "/validation-8.csv",
        "progress,iteration,metric,grad_sqr,grad_var\n"
        "100,100,0.5,1.0,3.0\n"
        "300,300,0.7,1.0,1.0\n");
  Write(dir + "/validation-16.csv",
        "progress,iteration,metric,grad_sqr,grad_var\n"
        "120,60,0.5,3.0,1.0\n"
        "250,130,0.7,1.0,3.0\n");
  return dir;
}

TEST(AppModel, AMeasuredPlacementIsItsRowAndRotationsAreOnePlacement) {
  auto m = AppModel::Load(Apps() + "/cifar10");
  ASSERT_TRUE(m.ok()) << m.status();
  // cifar10/placements.csv: "1,32,0.0427886962890625,0.0004995360016822816".
  const StepTime one = (*m)->Throughput({1}, 32);
  EXPECT_DOUBLE_EQ(one.step_s, 0.0427886962890625);
  EXPECT_DOUBLE_EQ(one.sync_s, 0.0004995360016822816);
  // Between the rows at 32 and 45, halfway: the mean of the two step times.
  EXPECT_DOUBLE_EQ((*m)->Throughput({1}, 38.5).step_s, (0.0427886962890625 + 0.05048525333404541) / 2);
  // 3 GPUs on one node and 1 on another is the placement "13" whichever node comes first.
  EXPECT_DOUBLE_EQ((*m)->Throughput({3, 1}, 64).step_s, (*m)->Throughput({1, 3}, 64).step_s);
}

TEST(AppModel, AnUnmeasuredPlacementInterpolatesOverConfigurations) {
  auto m = AppModel::Load(TinyApp("interp"));
  ASSERT_TRUE(m.ok()) << m.status();
  // "12" is not measured: 2 nodes, 3 GPUs lies between the configurations
  // (2 nodes, 2 GPUs) = placement 11 and (2, 4) from scalability.csv.
  // At local batch 6: 11 gives step (1.6 + 3.0) / 2 = 2.3, sync 0.8;
  // (2, 4) gives step 3.0, sync 1.5; halfway in GPUs: 2.65 and 1.15.
  const StepTime s = (*m)->Throughput({1, 2}, 6);
  EXPECT_DOUBLE_EQ(s.step_s, 2.65);
  EXPECT_DOUBLE_EQ(s.sync_s, 1.15);
  // A local batch beyond the measured range is clamped to its end.
  EXPECT_DOUBLE_EQ((*m)->Throughput({1}, 100).step_s, 2.0);
}

TEST(AppModel, AccumulationStepsFollowTheLargestLocalBatch) {
  auto yolo = AppModel::Load(Apps() + "/yolov3");
  ASSERT_TRUE(yolo.ok()) << yolo.status();
  // yolov3's largest local batch is 8 (limits.csv): batch 64 on 4 GPUs is
  // 16 per GPU, so two micro-steps of 8.
  const BatchPlan p = (*yolo)->Plan(64, 4);
  EXPECT_EQ(p.micro_batch, 8);
  EXPECT_EQ(p.accum_steps, 1);
  EXPECT_EQ(p.batch, 64);
  // One step: the micro-step, plus one more without the all-reduce.
  const StepTime st = (*yolo)->Throughput({4}, 8);
  const double gain = (*yolo)->Gain(64, 0);
  EXPECT_DOUBLE_EQ((*yolo)->Goodput({4}, 64, 0), gain / (st.step_s + (st.step_s - st.sync_s)));
  // On one GPU a batch above the smallest validated one always accumulates
  // (ncf: 32768 fits one micro-step of 32768, yet runs two of 16384).
  auto ncf = AppModel::Load(Apps() + "/ncf");
  ASSERT_TRUE(ncf.ok()) << ncf.status();
  const BatchPlan q = (*ncf)->Plan(32768, 1);
  EXPECT_EQ(q.accum_steps, 1);
  EXPECT_EQ(q.micro_batch, 16384);
  // Ceilings: 2048 on 6 GPUs is 342 per GPU, 2052 in all.
  auto cifar = AppModel::Load(Apps() + "/cifar10");
  ASSERT_TRUE(cifar.ok());
  EXPECT_EQ((*cifar)->Plan(2048, 6).batch, 2052);
}

TEST(AppModel, GainIsTheStatisticalEfficiencyFormula) {
  auto m = AppModel::Load(TinyApp("gain"));
  ASSERT_TRUE(m.ok()) << m.status();
  // B0 = 8. Batch 8: scale 1, gain 1.
  EXPECT_DOUBLE_EQ((*m)->Gain(8, 0), 1.0);
  // Batch 16, epoch 0: sqr 3, var 1, scale 2: (1 + 3) / (1/2 + 3) = 8/7.
  EXPECT_DOUBLE_EQ((*m)->Gain(16, 0), 8.0 / 7.0);
  // Batch 12, epoch 1: halfway, sqr 1, var 2; scale 1.5: 3 / (2/1.5 + 1) = 9/7.
  EXPECT_DOUBLE_EQ((*m)->Gain(12, 1), 9.0 / 7.0);
  // Epoch ends: the smallest progress per row over the files: 100, then 250.
  EXPECT_EQ((*m)->max_epochs(), 2);
  EXPECT_DOUBLE_EQ((*m)->EpochEnd(0), 100);
  EXPECT_DOUBLE_EQ((*m)->EpochEnd(1), 250);
  // A job of batch 8 (= B0: no accumulation on one GPU) on one GPU: local
  // batch 8, step 2 s, gain 1: 250 progress in 500 s.
  AppRun run(*m, 8);
  run.SetPlacement({1});
  EXPECT_DOUBLE_EQ(run.SecondsToFinish(), 500);
  run.Advance(300);  // epoch 0 done at 200 s, then 100 s of epoch 1
  EXPECT_EQ(run.epoch(), 1);
  EXPECT_DOUBLE_EQ(run.progress(), 150);
  EXPECT_DOUBLE_EQ(run.SecondsToFinish(), 200);
}

TEST(AppModel, BadFoldersGiveLineNumberedErrors) {
  const std::string dir = TinyApp("bad");
  Write(dir + "/placements.csv", "placement,local_bsz,step_time,sync_time\n1,4,1.0,0.0\n1,eight,2.0,0.0\n");
  auto m = AppModel::Load(dir);
  ASSERT_ERROR(m, absl::StatusCode::kInvalidArgument, "local_bsz: not a number: 'eight'");
  EXPECT_THAT(m.status().message(), HasSubstr("placements.csv:3: local_bsz"));
  Write(dir + "/placements.csv", "placement,local_bsz,step_time,sync_time\n1,4,1.0,2.0\n");
  m = AppModel::Load(dir);
  ASSERT_ERROR(m, absl::StatusCode::kInvalidArgument, "sync_time: must not exceed step_time");
  EXPECT_THAT(m.status().message(), HasSubstr("placements.csv:2: sync_time"));
  Write(dir + "/placements.csv", "placement,local_bsz,step_time,sync_time\n1,4,1.0,0.0\n");
  Write(dir + "/validation-8.csv", "progress,iteration,metric,grad_sqr,grad_var\n100,1,0,1,1\n90,2,0,1,1\n");
  m = AppModel::Load(dir);
  ASSERT_ERROR(m, absl::StatusCode::kInvalidArgument, "progress: must increase from one epoch to the next");
  EXPECT_THAT(m.status().message(), HasSubstr("validation-8.csv:3: progress"));
  std::filesystem::remove(dir + "/placements.csv");
  EXPECT_ERROR(AppModel::Load(dir), absl::StatusCode::kNotFound, "cannot read");
  auto none = LoadAppModels(Scratch("empty"));
  ASSERT_ERROR(none, absl::StatusCode::kInvalidArgument, "no application models (subfolders with a placements.csv");
  EXPECT_THAT(none.status().message(), HasSubstr("no application models"));
}

TEST(PolluxTrace, BadRowsAndUnknownApplicationsNameTheLine) {
  auto bad = PolluxTraceReader::Parse(
      "name,time,application,num_replicas,batch_size\na,0,cifar10,4,128\nb,5,cifar10,0,128\n", "w.csv");
  ASSERT_ERROR(bad, absl::StatusCode::kInvalidArgument, "w.csv:3: num_replicas: must be in [1, 64]");
  EXPECT_THAT(bad.status().message(), HasSubstr("w.csv:3: num_replicas"));
  auto jobs = PolluxTraceReader::Parse(
      "name,time,application,num_replicas,batch_size\na,0,cifar10,4,128\nb,5,resnet,2,128\n", "w.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  auto models = LoadAppModels(Apps());
  ASSERT_TRUE(models.ok()) << models.status();
  const absl::Status s = AttachAppModels(*jobs, *models, false, "w.csv");
  EXPECT_THAT(s.message(), HasSubstr("w.csv:3: application: no model 'resnet'"));
}

TEST(PolluxTrace, ElasticJobsSpanOneGpuToTheLargestSupportedSize) {
  auto jobs = PolluxTraceReader::Parse(
      "name,time,application,num_replicas,batch_size\na,0,cifar10,6,2048\nb,0,bert,8,384\n", "w.csv");
  ASSERT_TRUE(jobs.ok());
  auto models = LoadAppModels(Apps());
  ASSERT_TRUE(models.ok());
  std::vector<TraceJob> rigid = *jobs;
  ASSERT_TRUE(AttachAppModels(rigid, *models, false, "w.csv").ok());
  EXPECT_EQ(rigid[0].spec.size, scheduler::GangSize{});  // every one of its 6 tasks
  EXPECT_EQ(rigid[0].tasks(), 6);
  ASSERT_TRUE(AttachAppModels(*jobs, *models, true, "w.csv").ok());
  // cifar10's smallest local batch is 32: 2048 / 64 = 32, so up to 64 GPUs.
  EXPECT_EQ((*jobs)[0].spec.size, (scheduler::GangSize{1, 64}));
  EXPECT_EQ((*jobs)[0].tasks(), 6);
  // bert's is 4: ceil(384 / 64) = 6 >= 4, 64 as well; a 30 s re-form pause.
  EXPECT_EQ((*jobs)[1].spec.size.max, 64);
  EXPECT_EQ((*jobs)[1].reform_pause_s, 30);
}

// Three rigid jobs of the tiny model on one node of 4 GPUs, FIFO, 60 s cycles.
// Batch 8 (= B0, gain 1); local batches 8 on 1 GPU (step 2 s), 4 on 2 GPUs
// (placement 2: step 1.2 s).
//   a at 0, 1 GPU: starts at 0, 30 s pause, 250 progress x 2 s = 500 s: ends 530.
//   b at 10, 2 GPUs: cycle at 60, ends 60 + 30 + 250 x 1.2 = 390: JCT 380.
//   c at 20, 2 GPUs: no room until b ends (390); next cycle at 420: ends
//   420 + 30 + 300 = 750: JCT 730.
TEST(AppModel, RigidReplayJctsByHand) {
  auto models = LoadAppModels(std::filesystem::path(TinyApp("replay")).parent_path().string());
  ASSERT_TRUE(models.ok()) << models.status();
  auto jobs = PolluxTraceReader::Parse(
      "name,time,application,num_replicas,batch_size\na,0,tiny,1,8\nb,10,tiny,2,8\nc,20,tiny,2,8\n", "w.csv");
  ASSERT_TRUE(jobs.ok());
  ASSERT_TRUE(AttachAppModels(*jobs, *models, false, "w.csv").ok());
  topology::UniformClusterSpec spec;
  spec.nodes = 1;
  spec.gpus_per_node = 4;
  std::vector<queue::ConfigError> errors;
  auto policy = scheduler::ParsePolicy("actions: \"enqueue, allocate\"\ntiers:\n- plugins:\n  - name: gang\n  - name: predicates\n",
                                       "p.yaml", plugins::BuiltinRegistry(), &errors);
  ASSERT_TRUE(policy.ok()) << policy.status();
  ReplayOptions o;
  o.cycle_period_s = 60;
  auto r = Replay(topology::MakeUniformCluster(spec).value(), *policy, *jobs, "w.csv", o);
  ASSERT_TRUE(r.ok()) << r.status();
  ASSERT_EQ(r->jobs.size(), 3u);
  EXPECT_EQ(r->jobs[0].end_ms - r->jobs[0].submit_ms, 530'000);
  EXPECT_EQ(r->jobs[1].end_ms - r->jobs[1].submit_ms, 380'000);
  EXPECT_EQ(r->jobs[2].end_ms - r->jobs[2].submit_ms, 730'000);
}

TEST(AppModel, ANativeTraceCanNameAnApplication) {
  auto models = LoadAppModels(std::filesystem::path(TinyApp("native")).parent_path().string());
  ASSERT_TRUE(models.ok()) << models.status();
  // The duration is ignored: the model decides (as job a above: 530 s).
  auto jobs = NativeTraceReader::Parse(
      "job_id,submit_time_s,duration_s,tasks,application,batch_size\na,0,99999,1,tiny,8\nplain,0,50,1,,\n", "n.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_TRUE(AttachAppModels(*jobs, *models, false, "n.csv").ok());
  topology::UniformClusterSpec spec;
  spec.nodes = 1;
  spec.gpus_per_node = 4;
  ReplayOptions o;
  o.cycle_period_s = 60;
  auto r = Replay(topology::MakeUniformCluster(spec).value(), scheduler::DefaultPolicy(), *jobs, "n.csv", o);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_EQ(r->jobs[0].end_ms, 530'000);
  EXPECT_EQ(r->jobs[1].end_ms, 50'000) << "a job without a model runs its duration";
  auto bad = NativeTraceReader::Parse("job_id,submit_time_s,duration_s,application\na,0,5,tiny\n", "n.csv");
  ASSERT_ERROR(bad, absl::StatusCode::kInvalidArgument, "n.csv:2: batch_size: a job with an application needs its");
  EXPECT_THAT(bad.status().message(), HasSubstr("n.csv:2: batch_size"));
}

}  // namespace
}  // namespace ringmaster::simulator
