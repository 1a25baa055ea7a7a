// The contract every trace reader keeps (simulator/trace.h), run as one
// TYPED_TEST over all of them: each row one job, sorted by submit time,
// line-numbered errors naming the field, auto detection of its own header,
// and the bundled real trace read whole.
#include <algorithm>
#include <set>
#include <string>

#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "simulator/alibaba2023_trace.h"
#include "simulator/dlrm2025_trace.h"
#include "simulator/gavel_trace.h"
#include "simulator/native_trace.h"
#include "simulator/philly_trace.h"
#include "simulator/pollux_trace.h"
#include "simulator/tiresias_trace.h"
#include "simulator/trace.h"
#include "tests/support/source_dir.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::simulator {
namespace {

using ::testing::HasSubstr;

// Per reader: a small sample (rows out of submit order), a bad sample with
// the line and field its error must name, and the bundled trace.
template <typename Reader>
struct Sample;

template <>
struct Sample<NativeTraceReader> {
  static constexpr std::string_view kGood =
      "submit_time_s,job_id,duration_s,tasks,extra\n"
      "20,b,100,2,x\n"
      "\n"
      "10,a,50,1,y\n"
      "10,c,5,4,z\n";
  static constexpr std::string_view kBad = "job_id,submit_time_s,duration_s,tasks\na,0,10,1\nb,5,ten,1\n";
  static constexpr int kBadLine = 3;
  static constexpr std::string_view kBadField = "duration_s";
  static constexpr std::string_view kBundled = "tests/simulator/native_example.csv";
  static constexpr size_t kBundledJobs = 5;
};

template <>
struct Sample<PhillyTraceReader> {
  static constexpr std::string_view kGood =
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
      "2017-10-09 06:13:03,2951.0,16,47216.0,6214e9\n"
      "2017-10-09 06:13:03,10.0,2,20.0,6214e9\n";
  static constexpr std::string_view kBad =
      "timestamp,duration,num_gpus,gpu_time,cluster\n"
      "2017-10-09 07:01:55,66.0,1,66.0,11cb48\n"
      "2017-10-09 07:01:55,66.0,one,66.0,11cb48\n";
  static constexpr int kBadLine = 3;
  static constexpr std::string_view kBadField = "num_gpus";
  static constexpr std::string_view kBundled = "data/traces/philly/philly.csv";
  static constexpr size_t kBundledJobs = 82247;
};

template <>
struct Sample<GavelTraceReader> {
  static constexpr std::string_view kGood =
      "ResNet-50 (batch size 128)\tcd %s && python3 train.py\t-n\t1\t1000\t6.000000\t16\n"
      "A3C\tcd %s && python3 main.py\t--max-steps\t0\t500\t0.000000\t1\n"
      "LM (batch size 20)\tcd %s\t--steps\t1\t70\t6.000000\t4\n";
  static constexpr std::string_view kBad =
      "A3C\tcmd\t-n\t0\t500\t0.0\t1\n"
      "A3C\tcmd\t-n\t0\t500\t1.0\t1\n"
      "A3C\tcmd\t-n\t0\t500\tsoon\t1\n";
  static constexpr int kBadLine = 3;
  static constexpr std::string_view kBadField = "arrival_time";
  static constexpr std::string_view kBundled = "data/traces/gavel-philly-msr/seed0/0e4a51.trace";
  static constexpr size_t kBundledJobs = 1181;
};

template <>
struct Sample<TiresiasTraceReader> {
  static constexpr std::string_view kGood =
      "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
      "1,8,30,133,vgg11,147,23\n"
      "0,1,0,606,vgg19,164,30\n"
      "2,32,30,10,resnet50,1000,0\n";
  static constexpr std::string_view kBad =
      "job_id,num_gpu,submit_time,iterations,model_name,duration,interval\n"
      "0,1,0,606,vgg19,164,30\n"
      "1,8,30,133,vgg11,-5,23\n";
  static constexpr int kBadLine = 3;
  static constexpr std::string_view kBadField = "duration";
  static constexpr std::string_view kBundled = "data/traces/tiresias/60_job.csv";
  static constexpr size_t kBundledJobs = 60;
};

template <>
struct Sample<Alibaba2023TraceReader> {
  static constexpr std::string_view kGood =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
      "openb-pod-0001,6000,12288,1,460,,LS,Running,427061,12902960,427061\n"
      "openb-pod-0000,12000,16384,1,1000,V100M16|V100M32,LS,Running,0,12537496,0\n"
      "openb-pod-0002,4000,8192,0,0,,BE,Running,5,9,5\n";
  static constexpr std::string_view kBad =
      "name,cpu_milli,memory_mib,num_gpu,gpu_milli,gpu_spec,qos,pod_phase,creation_time,deletion_time,scheduled_time\n"
      "openb-pod-0000,12000,16384,1,1000,,LS,Running,0,12537496,0\n"
      "openb-pod-0001,6000,12288,1,460,,LS,Running,427061,400000,427061\n";
  static constexpr int kBadLine = 3;
  static constexpr std::string_view kBadField = "deletion_time";
  static constexpr std::string_view kBundled = "data/traces/alibaba-gpu-v2023/openb_pod_list_default.csv";
  static constexpr size_t kBundledJobs = 8152;
};

template <>
struct Sample<Dlrm2025TraceReader> {
  static constexpr std::string_view kGood =
      "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,rdma_limit,"
      "memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,creation_time,"
      "scheduled_time,deletion_time\n"
      "instance_0,HN,app_0,12,12,1,1,25,25,120.0,120.0,640.0,800.0,8,,,\n"
      "instance_1,CN,app_1,4,4,0,0,0,0,16.5,16.5,10,10,-1,100.0,101.0,300.0\n"
      "instance_2,HN,app_0,12,12,1,1,25,25,120.0,120.0,640.0,800.0,8,50.0,52.0,\n";
  static constexpr std::string_view kBad =
      "instance_sn,role,app_name,cpu_request,cpu_limit,gpu_request,gpu_limit,rdma_request,rdma_limit,"
      "memory_request,memory_limit,disk_request,disk_limit,max_instance_per_node,creation_time,"
      "scheduled_time,deletion_time\n"
      "instance_0,HN,app_0,12,12,1,1,25,25,120.0,120.0,640.0,800.0,8,,,\n"
      "instance_1,HN,app_0,12,12,0.5,1,25,25,120.0,120.0,640.0,800.0,8,,,\n";
  static constexpr int kBadLine = 3;
  static constexpr std::string_view kBadField = "gpu_request";
  static constexpr std::string_view kBundled = "data/traces/alibaba-gpu-v2025-dlrm/disaggregated_DLRM_trace.csv";
  static constexpr size_t kBundledJobs = 23871;
};

template <>
struct Sample<PolluxTraceReader> {
  static constexpr std::string_view kGood =
      "name,time,application,num_replicas,batch_size\n"
      "cifar10-1,120,cifar10,6,2048\n"
      "ncf-0,60,ncf,1,32768\n"
      "bert-2,60,bert,8,384\n";
  static constexpr std::string_view kBad =
      "name,time,application,num_replicas,batch_size\n"
      "ncf-0,60,ncf,1,32768\n"
      "ncf-1,soon,ncf,1,32768\n";
  static constexpr int kBadLine = 3;
  static constexpr std::string_view kBadField = "time";
  static constexpr std::string_view kBundled = "data/traces/pollux/workloads/workload-1.csv";
  static constexpr size_t kBundledJobs = 160;
};

template <typename Reader>
class TraceReaderContract : public ::testing::Test {};

using Readers = ::testing::Types<NativeTraceReader, PhillyTraceReader, GavelTraceReader,
                                 TiresiasTraceReader, Alibaba2023TraceReader, Dlrm2025TraceReader,
                                 PolluxTraceReader>;
TYPED_TEST_SUITE(TraceReaderContract, Readers);

// The lines of `text` that hold data (non-blank, after the header if any).
std::set<int> DataLines(std::string_view text, bool header) {
  std::set<int> lines;
  int n = 0;
  bool seen_header = !header;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    ++n;
    if (end > pos) {
      if (seen_header) lines.insert(n);
      seen_header = true;
    }
    pos = end + 1;
  }
  return lines;
}

TYPED_TEST(TraceReaderContract, EveryRowBecomesOneJobSortedBySubmitTime) {
  using S = Sample<TypeParam>;
  auto jobs = TypeParam::Parse(S::kGood, "sample");
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  const bool header = TypeParam::kFormat != TraceFormat::kGavel;
  const std::set<int> want = DataLines(S::kGood, header);
  std::set<int> got;
  std::set<std::string> ids;
  for (const TraceJob& j : *jobs) {
    got.insert(j.line);
    ids.insert(j.id());
    EXPECT_GE(j.submit_s, 0);
    EXPECT_GE(j.duration_s, 0);
    EXPECT_GE(j.tasks(), 1);
  }
  EXPECT_EQ(got, want);
  EXPECT_EQ(ids.size(), jobs->size());
  EXPECT_TRUE(std::is_sorted(jobs->begin(), jobs->end(), [](const TraceJob& a, const TraceJob& b) {
    return a.submit_s != b.submit_s ? a.submit_s < b.submit_s : a.line < b.line;
  }));
}

TYPED_TEST(TraceReaderContract, BadRowNamesItsLineAndField) {
  using S = Sample<TypeParam>;
  auto jobs = TypeParam::Parse(S::kBad, "bad.trace");
  ASSERT_ERROR(jobs, absl::StatusCode::kInvalidArgument, "bad.trace:3:");
  EXPECT_THAT(std::string(jobs.status().message()),
              HasSubstr(std::string("bad.trace:") + std::to_string(S::kBadLine) + ": " +
                        std::string(S::kBadField) + ":"));
}

TYPED_TEST(TraceReaderContract, AutoDetectionPicksThisReaderOnly) {
  using S = Sample<TypeParam>;
  auto format = DetectTraceFormat(S::kGood, "sample");
  ASSERT_TRUE(format.ok()) << format.status();
  EXPECT_EQ(*format, TypeParam::kFormat);
  EXPECT_TRUE(TypeParam::Recognizes(FirstLine(S::kGood)));
  auto via_auto = ParseTrace(S::kGood, "sample", TraceFormat::kAuto);
  ASSERT_TRUE(via_auto.ok()) << via_auto.status();
  EXPECT_EQ(ParseTraceFormat(TraceFormatName(TypeParam::kFormat)).value(), TypeParam::kFormat);
}

TYPED_TEST(TraceReaderContract, DuplicateRowsAreNotMerged) {
  // A row twice is two jobs or an error naming the second line; never one job.
  using S = Sample<TypeParam>;
  const std::string_view first = FirstLine(S::kGood);
  const bool header = TypeParam::kFormat != TraceFormat::kGavel;
  std::string row(header ? FirstLine(S::kGood.substr(first.size() + 1)) : first);
  std::string text = header ? std::string(first) + "\n" + row + "\n" + row + "\n" : row + "\n" + row + "\n";
  auto jobs = TypeParam::Parse(text, "twice");
  if (jobs.ok()) {
    EXPECT_EQ(jobs->size(), 2u);
  } else {
    EXPECT_THAT(std::string(jobs.status().message()), HasSubstr(header ? "twice:3: " : "twice:2: "));
  }
}

TYPED_TEST(TraceReaderContract, ReadsTheBundledTraceWhole) {
  using S = Sample<TypeParam>;
  auto jobs = ReadTrace(ringmaster::testing::SourceDir() + "/" + std::string(S::kBundled), TraceFormat::kAuto);
  ASSERT_TRUE(jobs.ok()) << jobs.status();
  EXPECT_EQ(jobs->size(), S::kBundledJobs);
}

}  // namespace
}  // namespace ringmaster::simulator
