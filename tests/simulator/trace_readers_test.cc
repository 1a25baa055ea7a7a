// Format-specific rules of each trace reader (the shared contract is in
// trace_contract_test.cc): defaults of the native CSV, Philly's dates, VCs
// and gang split, Gavel's queue from the file name, the Alibaba lifetimes.
#include <algorithm>
#include <random>
#include <string>
#include <vector>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simulator/dlrm2025_trace.h"
#include "simulator/gavel_trace.h"
#include "simulator/native_trace.h"
#include "simulator/philly_trace.h"
#include "simulator/trace.h"
#include "tests/support/source_dir.h"
#include "tests/support/status_matchers.h"
#include "topology/node_lists.h"

namespace ringmaster::simulator {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

TEST(NativeTrace, OptionalColumnsTakeTheirDefaults) {
  auto jobs = NativeTraceReader::Parse("job_id,submit_time_s,duration_s\nj1,0,60\n", "t.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  const TraceJob& j = jobs->front();
  EXPECT_EQ(j.spec.queue, "default");
  EXPECT_EQ(j.spec.priority, 0);
  EXPECT_EQ(j.tasks(), 1);
  ASSERT_EQ(j.spec.roles.size(), 1u);
  EXPECT_EQ(j.worker().name, "worker");
  EXPECT_EQ(j.worker().gpu.count, 1);
  EXPECT_EQ(j.spec.size, scheduler::GangSize{});  // a rigid gang of its 1 task
  EXPECT_EQ(j.worker().gpu.milli, 1000);
  EXPECT_EQ(j.spec.topology_mode, scheduler::TopologyMode::kNone);
  EXPECT_EQ(j.spec.walltime_ms, 0);
  EXPECT_LT(j.comm_fraction, 0);  // the replay's default
  EXPECT_FALSE(j.spec.size.elastic());
}

TEST(NativeTrace, ReadsEveryColumnInAnyOrder) {
  auto jobs = NativeTraceReader::Parse(
      "gpu_model,max_tasks,min_tasks,tasks,gpus_per_task,queue,priority,duration_s,submit_time_s,job_id,"
      "cpu_milli_per_task,memory_mib_per_task,gpu_milli,topology_mode,highest_tier,walltime_s,"
      "checkpoint_interval_s,comm_fraction\n"
      "A100|H100,8,2,4,8,research,5,3600,12.5,big,4000,8192,1000,hard,1,7200,600,0.3\n",
      "t.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  const TraceJob& j = jobs->front();
  EXPECT_EQ(j.id(), "big");
  EXPECT_EQ(j.spec.name, "big");
  EXPECT_EQ(j.submit_s, 12.5);
  EXPECT_EQ(j.duration_s, 3600);
  EXPECT_EQ(j.spec.queue, "research");
  EXPECT_EQ(j.spec.priority, 5);
  EXPECT_EQ(j.tasks(), 4);
  EXPECT_EQ(j.worker().replicas, 4);
  EXPECT_EQ(j.worker().gpu.count, 8);
  EXPECT_EQ(j.gpus(), 32);
  EXPECT_EQ(j.spec.size, (scheduler::GangSize{2, 8}));
  EXPECT_TRUE(j.spec.size.elastic());
  EXPECT_EQ(j.worker().request.cpu_milli(), 4000);
  EXPECT_EQ(j.worker().request.memory(), int64_t{8192} << 20);
  EXPECT_EQ(j.spec.topology_mode, scheduler::TopologyMode::kHard);
  EXPECT_EQ(j.spec.highest_tier, 1);
  EXPECT_EQ(j.spec.walltime_ms, 7'200'000);
  // The replay's progress model; the engine is not told (TraceJob).
  EXPECT_EQ(j.checkpoint_interval_s, 600);
  EXPECT_EQ(j.spec.checkpoint_interval_ms, 0);
  EXPECT_EQ(j.comm_fraction, 0.3);
  EXPECT_THAT(j.spec.gpu_models, ElementsAre("A100", "H100"));
  EXPECT_TRUE(j.spec.Validate().ok());
}

TEST(NativeTrace, GpuSharesAndTasksWithoutGpus) {
  auto jobs = NativeTraceReader::Parse(
      "job_id,submit_time_s,duration_s,gpus_per_task,gpu_milli\nshare,0,1,1,250\ncpu,0,1,0,250\n", "t.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ((*jobs)[0].worker().gpu.count, 1);
  EXPECT_EQ((*jobs)[0].worker().gpu.milli, 250);
  EXPECT_EQ((*jobs)[1].worker().gpu.count, 0);
  EXPECT_EQ((*jobs)[1].worker().gpu.milli, 1000);  // no GPU, no share of one
  EXPECT_EQ((*jobs)[1].gpus(), 0);
}

TEST(NativeTrace, ErrorsNameLineAndField) {
  auto missing = NativeTraceReader::Parse("job_id,duration_s\na,1\n", "t.csv");
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("t.csv:1: header has no column 'submit_time_s'"));
  auto mode = NativeTraceReader::Parse("job_id,submit_time_s,duration_s,topology_mode\na,0,1,tight\n", "t.csv");
  EXPECT_THAT(std::string(mode.status().message()), HasSubstr("t.csv:2: topology_mode: 'tight'"));
  auto range = NativeTraceReader::Parse("job_id,submit_time_s,duration_s,tasks,min_tasks\na,0,1,2,3\n", "t.csv");
  EXPECT_THAT(std::string(range.status().message()), HasSubstr("t.csv:2: min_tasks:"));
  auto empty = NativeTraceReader::Parse("job_id,submit_time_s,duration_s\na,,1\n", "t.csv");
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("t.csv:2: submit_time_s: required"));
  auto dup = NativeTraceReader::Parse("job_id,submit_time_s,duration_s\na,0,1\nb,0,1\na,3,1\n", "t.csv");
  EXPECT_THAT(std::string(dup.status().message()), HasSubstr("t.csv:4: job_id: 'a' already on line 2"));
  auto short_row = NativeTraceReader::Parse("job_id,submit_time_s,duration_s\na,0\n", "t.csv");
  EXPECT_THAT(std::string(short_row.status().message()), HasSubstr("t.csv:2: duration_s: missing"));
  auto shared =
      NativeTraceReader::Parse("job_id,submit_time_s,duration_s,gpus_per_task,gpu_milli\na,0,1,2,500\n", "t.csv");
  EXPECT_THAT(std::string(shared.status().message()),
              HasSubstr("t.csv:2: gpu_milli: a share below 1000 needs gpus_per_task 1"));
  auto walltime = NativeTraceReader::Parse("job_id,submit_time_s,duration_s,walltime_s\na,0,1,-1\n", "t.csv");
  EXPECT_THAT(std::string(walltime.status().message()), HasSubstr("t.csv:2: walltime_s: must be in [0, 1e12]"));
  auto checkpoint =
      NativeTraceReader::Parse("job_id,submit_time_s,duration_s,checkpoint_interval_s\na,0,1,-1\n", "t.csv");
  EXPECT_THAT(std::string(checkpoint.status().message()), HasSubstr("t.csv:2: checkpoint_interval_s: must be >= 0"));
  // What the engine would refuse is refused on reading, by the spec's own
  // validation (JobSpec::Validate), with the line.
  auto no_share = NativeTraceReader::Parse("job_id,submit_time_s,duration_s,gpu_milli\na,0,1,0\n", "t.csv");
  EXPECT_THAT(std::string(no_share.status().message()),
              HasSubstr("t.csv:2: job 'a': roles[0] (worker): gpu share must be in (0, 1000] milli"));
}

TEST(PhillyTrace, DatesCountFromTheEarliestRowAndBigGangsSplit) {
  auto jobs = PhillyTraceReader::Parse(
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-09 07:01:55,66.0,1,66.0,vcA\n"
      "2017-10-08 23:59:59,10.0,16,160.0,vcB\n"
      "2017-10-09 00:00:01,10.0,12,120.0,vcB\n",
      "p.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ((*jobs)[0].id(), "philly-2");  // the earliest: second data row
  EXPECT_EQ((*jobs)[0].submit_s, 0);
  EXPECT_EQ((*jobs)[0].tasks(), 2);  // 16 GPUs = 2 x 8
  EXPECT_EQ((*jobs)[0].worker().gpu.count, 8);
  EXPECT_EQ((*jobs)[0].spec.queue, "vcB");
  EXPECT_EQ((*jobs)[1].submit_s, 2);   // 00:00:01 is 2 s after 23:59:59
  EXPECT_EQ((*jobs)[1].tasks(), 2);    // 12 GPUs = 2 x 6
  EXPECT_EQ((*jobs)[1].worker().gpu.count, 6);
  EXPECT_EQ((*jobs)[2].submit_s, 7 * 3600 + 1 * 60 + 56);
}

TEST(PhillyTrace, BadDateNamesTheField) {
  auto jobs = PhillyTraceReader::Parse("timestamp,duration,num_gpus,gpu_time,cluster\n2017-13-01 00:00:00,1,1,1,a\n", "p.csv");
  EXPECT_THAT(std::string(jobs.status().message()), HasSubstr("p.csv:2: timestamp: '2017-13-01 00:00:00'"));
}

// FinishTrace orders jobs by submit time, ties by line, in place: on a
// shuffled list with many ties every job comes out whole, where a stable
// sort of the input puts it.
TEST(FinishTrace, SortsInPlaceAsAStableSortBySubmitTimeThenLine) {
  std::mt19937 rng(7);
  for (int n : {0, 1, 2, 5, 64, 1000}) {
    std::vector<TraceJob> jobs(n);
    std::vector<int> lines(n);
    for (int i = 0; i < n; ++i) lines[i] = i + 2;
    std::shuffle(lines.begin(), lines.end(), rng);
    for (int i = 0; i < n; ++i) {
      jobs[i].spec.name = "j" + std::to_string(i);
      jobs[i].line = lines[i];
      jobs[i].submit_s = static_cast<double>(rng() % 7);  // many ties
      jobs[i].duration_s = i;
    }
    std::vector<TraceJob> want = jobs;
    std::stable_sort(want.begin(), want.end(), [](const TraceJob& a, const TraceJob& b) {
      return a.submit_s != b.submit_s ? a.submit_s < b.submit_s : a.line < b.line;
    });
    auto got = FinishTrace(std::move(jobs), "t");
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), want.size());
    for (size_t i = 0; i < want.size(); ++i) {
      EXPECT_EQ((*got)[i].id(), want[i].id()) << "n " << n << " at " << i;
      EXPECT_EQ((*got)[i].line, want[i].line);
      EXPECT_EQ((*got)[i].duration_s, want[i].duration_s);
      EXPECT_EQ((*got)[i].tasks(), 1);
    }
  }
}

// SliceTrace keeps [from, until) and the first max_jobs, shifts submit times
// to the window's start and fills what the slice asks, in the same order.
TEST(SliceTrace, KeepsTheWindowInOrderAndShiftsIt) {
  std::vector<TraceJob> jobs(6);
  for (int i = 0; i < 6; ++i) {
    jobs[i].spec.name = "j" + std::to_string(i);
    jobs[i].submit_s = 10.0 * i;  // 0, 10, ..., 50
    jobs[i].duration_s = 5;
  }
  auto window = SliceTrace(jobs, {.from_s = 10, .until_s = 45, .one_queue = "q", .walltime_oracle = true,
                                  .checkpoint_interval_s = 60});
  ASSERT_EQ(window.size(), 4u);
  for (size_t i = 0; i < window.size(); ++i) {
    EXPECT_EQ(window[i].id(), "j" + std::to_string(i + 1));
    EXPECT_EQ(window[i].submit_s, 10.0 * static_cast<double>(i));
    EXPECT_EQ(window[i].spec.queue, "q");
    EXPECT_EQ(window[i].spec.walltime_ms, 5000);
    EXPECT_EQ(window[i].checkpoint_interval_s, 60);
  }
  auto first = SliceTrace(jobs, {.from_s = 20, .max_jobs = 2});
  ASSERT_EQ(first.size(), 2u);
  EXPECT_EQ(first[0].id(), "j2");
  EXPECT_EQ(first[1].id(), "j3");
  EXPECT_EQ(first[0].spec.queue, "default");
  EXPECT_EQ(first[0].spec.walltime_ms, 0);
  EXPECT_EQ(SliceTrace(jobs, {.from_s = 60}).size(), 0u);
  EXPECT_EQ(SliceTrace(jobs, {}).size(), 6u);
}

// ParseTraceSlice builds only the jobs a slice keeps (Philly) and gives what
// SliceTrace gives on the whole parse: on the bundled trace, for windows,
// counts and the slice's fills, the same jobs field by field.
TEST(ParseTraceSlice, PhillyGivesWhatSlicingTheWholeTraceGives) {
  const std::string path = ringmaster::testing::SourceDir() + "/data/traces/philly/philly.csv";
  auto text = topology::ReadTextFile(path);
  ASSERT_TRUE(text.ok()) << text.status();
  auto whole = ParseTrace(*text, path, TraceFormat::kPhilly);
  ASSERT_TRUE(whole.ok()) << whole.status();
  const std::vector<TraceSlice> slices = {
      {},
      {.max_jobs = 10000},
      {.from_s = 2073600, .until_s = 2678400, .one_queue = "default", .checkpoint_interval_s = 600},
      {.from_s = 86400 * 40, .max_jobs = 777, .walltime_oracle = true},
      {.from_s = 1e12},
  };
  for (size_t k = 0; k < slices.size(); ++k) {
    const std::vector<TraceJob> want = SliceTrace(*whole, slices[k]);
    auto got = ParseTraceSlice(*text, path, TraceFormat::kAuto, slices[k]);
    ASSERT_TRUE(got.ok()) << got.status();
    ASSERT_EQ(got->size(), want.size()) << "slice " << k;
    for (size_t i = 0; i < want.size(); ++i) {
      const TraceJob& a = (*got)[i];
      const TraceJob& b = want[i];
      ASSERT_EQ(a.id(), b.id()) << "slice " << k << " at " << i;
      EXPECT_EQ(a.line, b.line);
      EXPECT_EQ(a.submit_s, b.submit_s);
      EXPECT_EQ(a.duration_s, b.duration_s);
      EXPECT_EQ(a.checkpoint_interval_s, b.checkpoint_interval_s);
      EXPECT_EQ(a.spec.queue, b.spec.queue);
      EXPECT_EQ(a.spec.walltime_ms, b.spec.walltime_ms);
      EXPECT_EQ(a.tasks(), b.tasks());
      EXPECT_EQ(a.gpus(), b.gpus());
    }
  }
  EXPECT_EQ(SliceTrace(*whole, slices[1]).size(), 10000u);
  // A bad row outside the slice is still an error, named by its line.
  std::string bad = *text;
  bad += "2017-13-01 00:00:00,10,1,10,vc\n";
  auto refused = ParseTraceSlice(bad, "p.csv", TraceFormat::kPhilly, {.max_jobs = 5});
  ASSERT_FALSE(refused.ok());
  EXPECT_THAT(std::string(refused.status().message()), HasSubstr("p.csv:82250: timestamp"));
}

TEST(SplitGang, FewestEvenTasksOfAtMostEightGpus) {
  TraceJob j;
  auto shape = [&](int gpus) {
    SplitGang(gpus, 8, j);
    return std::pair{j.tasks(), j.worker().gpu.count};
  };
  EXPECT_EQ(shape(1), (std::pair{1, 1}));
  EXPECT_EQ(shape(7), (std::pair{1, 7}));
  EXPECT_EQ(shape(8), (std::pair{1, 8}));
  EXPECT_EQ(shape(12), (std::pair{2, 6}));
  EXPECT_EQ(shape(20), (std::pair{4, 5}));
  EXPECT_EQ(shape(24), (std::pair{3, 8}));
  EXPECT_EQ(shape(128), (std::pair{16, 8}));
  EXPECT_EQ(shape(0), (std::pair{1, 0}));
}

TEST(GavelTrace, QueueIsTheFileStemAndStepsAreSeconds) {
  auto jobs = GavelTraceReader::Parse("A3C\tcmd\t-n\t0\t500\t3.5\t2\n", "traces/seed0/0e4a51.trace");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->front().spec.queue, "0e4a51");
  EXPECT_EQ(jobs->front().id(), "0e4a51-1");
  EXPECT_EQ(jobs->front().duration_s, 500);
  EXPECT_EQ(jobs->front().submit_s, 3.5);
  EXPECT_EQ(jobs->front().gpus(), 2);
}

TEST(Dlrm2025Trace, OpenLifetimesCloseAtTheTraceWindow) {
  const std::string head =
      "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,rdma_limit,"
      "memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,creation_time,"
      "scheduled_time,deletion_time\n";
  auto jobs = Dlrm2025TraceReader::Parse(head +
                                             "old,HN,a,12,12,1,1,25,25,120.0,120.0,1,1,8,,,\n"
                                             "mid,CN,a,4,4,0,0,0,0,0.5,0.5,1,1,-1,100,101,300\n"
                                             "new,HN,a,2,2,1,1,0,0,1,1,1,1,8,200,,\n",
                                         "d.csv");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  ASSERT_EQ(jobs->size(), 3u);
  EXPECT_EQ((*jobs)[0].id(), "old");  // before the window: submit 0, ends at the last time (300)
  EXPECT_EQ((*jobs)[0].duration_s, 300);
  EXPECT_EQ((*jobs)[0].worker().request.cpu_milli(), 12000);
  EXPECT_EQ((*jobs)[0].worker().request.memory(), int64_t{120 * 1024} << 20);
  EXPECT_EQ((*jobs)[1].id(), "mid");
  EXPECT_EQ((*jobs)[1].duration_s, 200);
  EXPECT_EQ((*jobs)[1].worker().gpu.count, 0);
  EXPECT_EQ((*jobs)[1].worker().request.memory(), int64_t{512} << 20);
  EXPECT_EQ((*jobs)[2].duration_s, 100);  // 200 -> 300
}

// Requests whose bytes or milli-cores would not fit the engine's quantities
// are refused with the line and the column.
TEST(TraceReaders, HugeRequestsAreRefused) {
  auto pods = ParseTrace(
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,creation_time,deletion_time\np,1,9999999999999999,1,1000,0,1\n",
      "pods.csv", TraceFormat::kAlibaba2023);
  EXPECT_THAT(std::string(pods.status().message()), HasSubstr("pods.csv:2: memory_mib: must be <= 2^40"));
  auto dlrm = ParseTrace(
      "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,rdma_limit,"
      "memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,creation_time,"
      "scheduled_time,deletion_time\n"
      "i,HN,a,1e300,1,1,1,0,0,1,1,1,1,8,,,\n",
      "d.csv", TraceFormat::kDlrm2025);
  EXPECT_THAT(std::string(dlrm.status().message()), HasSubstr("d.csv:2: cpu_request: must be <= 1e9"));
}

TEST(TraceFormat, AutoFailsListingTheFormats) {
  auto f = DetectTraceFormat("a,b,c\n1,2,3\n", "x.csv");
  ASSERT_ERROR(f, absl::StatusCode::kInvalidArgument, "x.csv:1: header: no trace format recognizes it; give");
  EXPECT_THAT(std::string(f.status().message()),
              HasSubstr("x.csv:1: header: no trace format recognizes it; give --format (one of native, "
                        "philly, gavel, tiresias, alibaba2023, dlrm2025"));
  EXPECT_ERROR(ParseTraceFormat("csv"), absl::StatusCode::kInvalidArgument, "unknown trace format 'csv' (formats: auto, native, philly");
}

TEST(TraceFormat, MultiGpuPodListsWithoutTimesAreRefused) {
  auto jobs = ParseTrace("name,cpu_milli,memory_mib,num_gpu,gpu_milli\np,1,1,1,1000\n", "m.csv", TraceFormat::kAuto);
  EXPECT_THAT(std::string(jobs.status().message()), HasSubstr("m.csv:1: header has no column 'creation_time'"));
}

}  // namespace
}  // namespace ringmaster::simulator
