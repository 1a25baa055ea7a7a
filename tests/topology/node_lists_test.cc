// The readers of real cluster lists share one contract, run over all of them.
#include "topology/node_lists.h"
#include "tests/support/source_dir.h"
#include "tests/support/status_matchers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <sys/stat.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>
#include <numeric>
#include <thread>

namespace ringmaster::topology {
namespace {

using ::testing::HasSubstr;

std::string DataPath(const std::string& rel) { return ringmaster::testing::SourceDir() + "/data/" + rel; }

struct OpenbList {
  static absl::StatusOr<std::vector<NodeSpec>> Parse(std::string_view t) { return ParseOpenbNodeList(t, "f.csv"); }
  static absl::StatusOr<std::vector<NodeSpec>> Read(const std::string& p) { return ReadOpenbNodeList(p); }
  static std::string Header() { return "sn,cpu_milli,memory_mib,gpu,model\n"; }
  static std::string Row(int, const std::string& name, const std::string& gpus) {
    return name + ",32000,1024," + gpus + (gpus == "0" ? ",\n" : ",T4\n");
  }
  static constexpr const char* kGpuColumn = "column 4 (gpu)";
  static std::string RealFile() { return DataPath("traces/alibaba-gpu-v2023/openb_node_list_gpu_node.csv"); }
  static constexpr size_t kRealNodes = 1213;
  static constexpr int64_t kRealGpus = 6212;
};

struct PhillyOriginalList {
  static absl::StatusOr<std::vector<NodeSpec>> Parse(std::string_view t) { return ParsePhillyMachineList(t, "f.csv"); }
  static absl::StatusOr<std::vector<NodeSpec>> Read(const std::string& p) { return ReadPhillyMachineList(p); }
  static std::string Header() { return "machineId, number of GPUs, single GPU mem\n"; }
  static std::string Row(int, const std::string& name, const std::string& gpus) {
    return name + "," + gpus + ", 12GB\n";
  }
  static constexpr const char* kGpuColumn = "column 2 (number of GPUs)";
  static std::string RealFile() { return DataPath("traces/philly-machines/cluster_machine_list"); }
  static constexpr size_t kRealNodes = 552;
  static constexpr int64_t kRealGpus = 321 * 2 + 231 * 8;
};

struct PhillyRevisedList {
  static absl::StatusOr<std::vector<NodeSpec>> Parse(std::string_view t) { return ParsePhillyMachineList(t, "f.csv"); }
  static absl::StatusOr<std::vector<NodeSpec>> Read(const std::string& p) { return ReadPhillyMachineList(p); }
  static std::string Header() { return ",machineId,number of GPUs\n"; }
  static std::string Row(int i, const std::string& name, const std::string& gpus) {
    return std::to_string(i) + "," + name + "," + gpus + "\n";
  }
  static constexpr const char* kGpuColumn = "column 3 (number of GPUs)";
  static std::string RealFile() { return DataPath("traces/philly-machines/revised_machine_list.csv"); }
  static constexpr size_t kRealNodes = 552;
  static constexpr int64_t kRealGpus = 2 * 3 + 3 + 4 * 271 + 8 * 264;
};

template <typename T>
class NodeListReader : public ::testing::Test {};
using Readers = ::testing::Types<OpenbList, PhillyOriginalList, PhillyRevisedList>;
TYPED_TEST_SUITE(NodeListReader, Readers);

TYPED_TEST(NodeListReader, ParsesEveryRowInOrder) {
  const std::string text = TypeParam::Header() + TypeParam::Row(0, "a", "2") + TypeParam::Row(1, "b", "8") +
                           TypeParam::Row(2, "c", "0");
  auto nodes = TypeParam::Parse(text);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 3u);
  EXPECT_EQ((*nodes)[0].name, "a");
  EXPECT_EQ((*nodes)[1].gpus.size(), 8u);
  EXPECT_EQ((*nodes)[1].gpus[7].index, 7);
  EXPECT_TRUE((*nodes)[2].gpus.empty());
}

TYPED_TEST(NodeListReader, AcceptsCrlfAndBlankLines) {
  std::string text = TypeParam::Header() + TypeParam::Row(0, "a", "4") + "\n" + TypeParam::Row(1, "b", "1");
  std::string crlf;
  for (char c : text) {
    if (c == '\n') crlf += '\r';
    crlf += c;
  }
  auto nodes = TypeParam::Parse(crlf);
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  ASSERT_EQ(nodes->size(), 2u);
  EXPECT_EQ((*nodes)[0].gpus.size(), 4u);
  EXPECT_EQ((*nodes)[1].name, "b");
}

TYPED_TEST(NodeListReader, EmptyFileAndHeaderOnlyAreErrors) {
  auto empty = TypeParam::Parse("");
  ASSERT_ERROR(empty, absl::StatusCode::kInvalidArgument, "f.csv: empty file (no header)");
  EXPECT_THAT(std::string(empty.status().message()), HasSubstr("f.csv"));
  auto header_only = TypeParam::Parse(TypeParam::Header());
  ASSERT_ERROR(header_only, absl::StatusCode::kInvalidArgument, "f.csv: no");
  EXPECT_THAT(std::string(header_only.status().message()), HasSubstr("f.csv"));
}

TYPED_TEST(NodeListReader, WrongHeaderNamesLineOne) {
  auto r = TypeParam::Parse("name,gpus\n" + TypeParam::Row(0, "a", "1"));
  ASSERT_ERROR(r, absl::StatusCode::kInvalidArgument, "f.csv:1: column 1");
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("f.csv:1:"));
}

TYPED_TEST(NodeListReader, BadNumberNamesLineAndColumn) {
  // Line 3 (header is line 1) holds the bad GPU count.
  auto r = TypeParam::Parse(TypeParam::Header() + TypeParam::Row(0, "a", "1") + TypeParam::Row(1, "b", "two"));
  ASSERT_ERROR(r, absl::StatusCode::kInvalidArgument, "f.csv:3: column");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("f.csv:3: "));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr(TypeParam::kGpuColumn));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("'two'"));
}

TYPED_TEST(NodeListReader, NegativeGpuCountIsAnError) {
  auto r = TypeParam::Parse(TypeParam::Header() + TypeParam::Row(0, "a", "-2"));
  ASSERT_ERROR(r, absl::StatusCode::kInvalidArgument, "f.csv:2: column");
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("f.csv:2: "));
}

TYPED_TEST(NodeListReader, ShortRowNamesItsLine) {
  auto r = TypeParam::Parse(TypeParam::Header() + TypeParam::Row(0, "a", "1") + "x\n");
  ASSERT_ERROR(r, absl::StatusCode::kInvalidArgument, "f.csv:3: row has 1 columns, the header has");
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("f.csv:3: row has 1 columns"));
}

TYPED_TEST(NodeListReader, DuplicateNameNamesTheSecondLine) {
  auto r = TypeParam::Parse(TypeParam::Header() + TypeParam::Row(0, "a", "1") + TypeParam::Row(1, "a", "1"));
  ASSERT_ERROR(r, absl::StatusCode::kInvalidArgument, "f.csv:3: column");
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("f.csv:3: "));
  EXPECT_THAT(std::string(r.status().message()), HasSubstr("duplicate name 'a'"));
}

TYPED_TEST(NodeListReader, MissingFileIsNotFound) {
  auto r = TypeParam::Read("/nonexistent/list.csv");
  EXPECT_EQ(r.status().code(), absl::StatusCode::kNotFound);
}

TYPED_TEST(NodeListReader, ReadsTheRealListIntoAFlatCluster) {
  auto nodes = TypeParam::Read(TypeParam::RealFile());
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_EQ(nodes->size(), TypeParam::kRealNodes);
  auto cluster = Cluster::Build({}, std::move(*nodes));
  ASSERT_TRUE(cluster.ok()) << cluster.status();
  EXPECT_EQ(cluster->total_gpus(), TypeParam::kRealGpus);
}

TEST(OpenbNodeList, ReadsCpuMemoryAndModel) {
  auto nodes = ParseOpenbNodeList("sn,cpu_milli,memory_mib,gpu,model\nn1,96000,786432,8,G2\nn2,32000,1024,0,\n", "f.csv");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_EQ((*nodes)[0].allocatable.cpu_milli(), 96000);
  EXPECT_EQ((*nodes)[0].allocatable.memory(), int64_t{786432} << 20);
  EXPECT_EQ((*nodes)[0].gpus[3].model, "G2");
  EXPECT_TRUE((*nodes)[1].gpus.empty());
  auto bad = ParseOpenbNodeList("sn,cpu_milli,memory_mib,gpu,model\nn1,96000,1,8,\n", "f.csv");
  ASSERT_ERROR(bad, absl::StatusCode::kInvalidArgument, "f.csv:2: column 5 (model): a node with GPUs needs a model");
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("f.csv:2: column 5 (model)"));
}

TEST(PhillyMachineList, ReadsGpuMemoryAndRejectsBadSizes) {
  auto nodes = ParsePhillyMachineList("machineId, number of GPUs, single GPU mem\nm0,2, 12GB\n", "f");
  ASSERT_TRUE(nodes.ok()) << nodes.status();
  EXPECT_EQ((*nodes)[0].gpus[1].memory, int64_t{12} << 30);
  auto bad = ParsePhillyMachineList("machineId, number of GPUs, single GPU mem\nm0,2, 12\n", "f");
  ASSERT_ERROR(bad, absl::StatusCode::kInvalidArgument, "f:2: column 3 (single GPU mem): '12' is not a size like 12GB");
  EXPECT_THAT(std::string(bad.status().message()), HasSubstr("f:2: column 3 (single GPU mem)"));
  // Found by fuzz_trace: a size whose bytes overflow int64.
  auto huge = ParsePhillyMachineList("machineId, number of GPUs, single GPU mem\nm0,2, 66666666666612GB\n", "f");
  ASSERT_ERROR(huge, absl::StatusCode::kInvalidArgument, "f:2: column 3 (single GPU mem): '66666666666612GB' is more than 1048576GB");
}

}  // namespace
// ReadTextFile reads a regular file whole (sized from its length) and a pipe
// whole (in blocks), byte for byte, and says which path it could not read
// (a directory is refused, not read as an empty file or a huge one).
TEST(ReadTextFile, ReadsFilesAndPipesWholeAndRefusesADirectory) {
  std::string text;
  for (int i = 0; text.size() < 200'000; ++i) {
    text += "row " + std::to_string(i) + ",\r\n";
    text += std::string("\0\xff", 2);  // bytes a text reader must keep too
  }
  const std::string dir = ::testing::TempDir();
  const std::string file = dir + "/read_text_file.txt";
  {
    std::ofstream out(file, std::ios::binary);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  }
  auto got = ReadTextFile(file);
  ASSERT_TRUE(got.ok()) << got.status();
  EXPECT_EQ(*got, text);
  std::remove(file.c_str());

  const std::string fifo = dir + "/read_text_file.fifo";
  std::remove(fifo.c_str());
  ASSERT_EQ(mkfifo(fifo.c_str(), 0600), 0);
  std::thread writer([&] {
    std::ofstream out(fifo, std::ios::binary);
    out.write(text.data(), static_cast<std::streamsize>(text.size()));
  });
  auto piped = ReadTextFile(fifo);
  writer.join();
  std::remove(fifo.c_str());
  ASSERT_TRUE(piped.ok()) << piped.status();
  EXPECT_EQ(*piped, text);

  auto empty_file = dir + "/read_text_file.empty";
  { std::ofstream out(empty_file); }
  auto empty = ReadTextFile(empty_file);
  ASSERT_TRUE(empty.ok()) << empty.status();
  EXPECT_EQ(*empty, "");
  std::remove(empty_file.c_str());

  auto directory = ReadTextFile(dir);
  ASSERT_FALSE(directory.ok());
  EXPECT_THAT(std::string(directory.status().message()), HasSubstr(": is a directory, not a file"));

  auto missing = ReadTextFile(dir + "/no/such/file");
  ASSERT_FALSE(missing.ok());
  EXPECT_THAT(std::string(missing.status().message()), HasSubstr("/no/such/file: cannot read"));
}

}  // namespace ringmaster::topology
