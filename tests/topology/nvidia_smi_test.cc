#include "topology/nvidia_smi.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "absl/strings/str_join.h"
#include "absl/strings/str_replace.h"
#include "tests/support/status_matchers.h"

namespace ringmaster::topology {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr char kLegend[] = R"(
Legend:

  X    = Self
  SYS  = Connection traversing PCIe as well as the SMP interconnect between NUMA nodes (e.g., QPI/UPI)
  NODE = Connection traversing PCIe as well as the interconnection between PCIe Host Bridges within a NUMA node
  PHB  = Connection traversing PCIe as well as a PCIe Host Bridge (typically the CPU)
  PXB  = Connection traversing multiple PCIe bridges (without traversing the PCIe Host Bridge)
  PIX  = Connection traversing at most a single PCIe bridge
  NV#  = Connection traversing a bonded set of # NVLinks
)";

// DGX A100: 8 GPUs on NVSwitch (NV12 everywhere), two NICs, four NUMA nodes
// (GPU pairs share one), as `nvidia-smi topo -m` prints it (tab separated).
std::string DgxA100() {
  std::vector<std::string> lines = {
      "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7\tmlx5_0\tmlx5_1\tCPU Affinity\tNUMA Affinity"};
  const char* cpus[] = {"48-63,176-191", "48-63,176-191", "16-31,144-159", "16-31,144-159",
                        "112-127,240-255", "112-127,240-255", "80-95,208-223", "80-95,208-223"};
  const char* numa[] = {"3", "3", "1", "1", "7", "7", "5", "5"};
  for (int i = 0; i < 8; ++i) {
    std::vector<std::string> cells = {"GPU" + std::to_string(i)};
    for (int j = 0; j < 8; ++j) cells.push_back(i == j ? " X " : "NV12");
    cells.push_back(i < 2 ? "PXB" : "SYS");
    cells.push_back(i >= 2 && i < 4 ? "PXB" : "SYS");
    cells.push_back(cpus[i]);
    cells.push_back(numa[i]);
    lines.push_back(absl::StrJoin(cells, "\t"));
  }
  lines.push_back("mlx5_0\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\tSYS\t X \tSYS");
  lines.push_back("mlx5_1\tSYS\tSYS\tPXB\tPXB\tSYS\tSYS\tSYS\tSYS\tSYS\t X ");
  return absl::StrJoin(lines, "\n") + "\n" + kLegend;
}

// 8 PCIe GPUs, two sockets. Socket 0: GPUs 0-3 under one PCIe switch tree
// (0-1 and 2-3 on leaf switches: PIX; across: PXB). Socket 1: pairs 4-5 and
// 6-7 on separate root ports (NODE between the pairs). SYS across sockets.
std::string PcieTwoSocket(bool with_affinity) {
  auto link = [](int i, int j) -> std::string {
    if (i == j) return " X ";
    if ((i < 4) != (j < 4)) return "SYS";
    if (i / 2 == j / 2) return "PIX";
    return i < 4 ? "PXB" : "NODE";
  };
  std::string header = "\tGPU0\tGPU1\tGPU2\tGPU3\tGPU4\tGPU5\tGPU6\tGPU7";
  if (with_affinity) header += "\tCPU Affinity\tNUMA Affinity\tGPU NUMA ID";
  std::vector<std::string> lines = {header};
  for (int i = 0; i < 8; ++i) {
    std::vector<std::string> cells = {"GPU" + std::to_string(i)};
    for (int j = 0; j < 8; ++j) cells.push_back(link(i, j));
    if (with_affinity) {
      cells.push_back(i < 4 ? "0-31,64-95" : "32-63,96-127");
      cells.push_back(i < 4 ? "0" : "1");
      cells.push_back("");  // empty cell before N/A, as newer drivers print
      cells.push_back("N/A");
    }
    lines.push_back(absl::StrJoin(cells, "\t"));
  }
  return absl::StrJoin(lines, "\n") + "\n" + kLegend;
}

// 4 GPUs with NVLink bridges in pairs (0-1, 2-3), pairs on different
// sockets; NUMA Affinity not reported (N/A), CPU Affinity tells sockets.
constexpr char kFourGpuPairs[] =
    "\tGPU0\tGPU1\tGPU2\tGPU3\tCPU Affinity\tNUMA Affinity\n"
    "GPU0\t X \tNV4\tSYS\tSYS\t0-15\tN/A\n"
    "GPU1\tNV4\t X \tSYS\tSYS\t0-15\tN/A\n"
    "GPU2\tSYS\tSYS\t X \tNV4\t16-31\tN/A\n"
    "GPU3\tSYS\tSYS\tNV4\t X \t16-31\tN/A\n";

std::vector<int> Islands(const NvidiaSmiTopology& t) {
  std::vector<int> v;
  for (const Gpu& g : t.gpus) v.push_back(g.nvlink_island);
  return v;
}
std::vector<int> Switches(const NvidiaSmiTopology& t) {
  std::vector<int> v;
  for (const Gpu& g : t.gpus) v.push_back(g.pcie_switch);
  return v;
}
std::vector<int> Sockets(const NvidiaSmiTopology& t) {
  std::vector<int> v;
  for (const Gpu& g : t.gpus) v.push_back(g.numa);
  return v;
}

TEST(NvidiaSmiTopo, NvSwitchBoxIsOneIsland) {
  auto t = ParseNvidiaSmiTopo(DgxA100(), "dgx.txt");
  ASSERT_TRUE(t.ok()) << t.status();
  ASSERT_EQ(t->gpus.size(), 8u);
  EXPECT_THAT(Islands(*t), ElementsAre(0, 0, 0, 0, 0, 0, 0, 0));
  EXPECT_EQ(t->nvlinks[2][5], 12);
  // NUMA nodes 3, 1, 7, 5 numbered by their first GPU.
  EXPECT_THAT(Sockets(*t), ElementsAre(0, 0, 1, 1, 2, 2, 3, 3));
  EXPECT_EQ(t->cpu_affinity[4], "112-127,240-255");
  EXPECT_EQ(t->numa_affinity[6], 5);
  EXPECT_EQ(LinkGroupsYaml(*t),
            "links:\n  nvlink_islands: [[0, 1, 2, 3, 4, 5, 6, 7]]\n"
            "  pcie_switches: [[0], [1], [2], [3], [4], [5], [6], [7]]\n"
            "  numa: [[0, 1], [2, 3], [4, 5], [6, 7]]\n");
}

TEST(NvidiaSmiTopo, PcieBoxWithTwoSockets) {
  auto t = ParseNvidiaSmiTopo(PcieTwoSocket(true), "pcie.txt");
  ASSERT_TRUE(t.ok()) << t.status();
  // No NVLink: every GPU its own island.
  EXPECT_THAT(Islands(*t), ElementsAre(0, 1, 2, 3, 4, 5, 6, 7));
  // PIX/PXB join 0-3; NODE does not join 4-5 with 6-7.
  EXPECT_THAT(Switches(*t), ElementsAre(0, 0, 0, 0, 1, 1, 2, 2));
  EXPECT_THAT(Sockets(*t), ElementsAre(0, 0, 0, 0, 1, 1, 1, 1));
  EXPECT_EQ(t->link[0][3], GpuLink::kPxb);
  EXPECT_EQ(t->link[4][6], GpuLink::kNode);
  EXPECT_EQ(t->link[1][7], GpuLink::kSys);
}

TEST(NvidiaSmiTopo, SocketsFromTheMatrixWhenAffinityIsAbsent) {
  auto t = ParseNvidiaSmiTopo(PcieTwoSocket(false), "pcie.txt");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(Sockets(*t), ElementsAre(0, 0, 0, 0, 1, 1, 1, 1));
}

TEST(NvidiaSmiTopo, FourGpusWithNvLinkPairs) {
  auto t = ParseNvidiaSmiTopo(kFourGpuPairs, "pairs.txt");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(Islands(*t), ElementsAre(0, 0, 1, 1));
  EXPECT_THAT(Switches(*t), ElementsAre(0, 1, 2, 3));
  EXPECT_THAT(Sockets(*t), ElementsAre(0, 0, 1, 1));  // from CPU Affinity
  EXPECT_EQ(t->numa_affinity[0], -1);
  EXPECT_EQ(t->nvlinks[3][2], 4);
}

TEST(NvidiaSmiTopo, SpacesColoursAndCrlfAreTolerated) {
  std::string text = absl::StrReplaceAll(kFourGpuPairs, {{"\t", "    "}, {"\n", "\r\n"}});
  text = absl::StrReplaceAll(text, {{"GPU0    GPU1", "\x1b[4mGPU0\x1b[0m    \x1b[4mGPU1\x1b[0m"}});
  auto t = ParseNvidiaSmiTopo(text, "spaces.txt");
  ASSERT_TRUE(t.ok()) << t.status();
  EXPECT_THAT(Islands(*t), ElementsAre(0, 0, 1, 1));
  EXPECT_THAT(Sockets(*t), ElementsAre(0, 0, 1, 1));
}

struct BadMatrix {
  const char* name;
  std::string text;
  const char* where;
  const char* what;
};

// gtest would otherwise print the struct's raw bytes (a std::string's unused
// buffer is uninitialized: valgrind reports it).
void PrintTo(const BadMatrix& m, std::ostream* os) { *os << m.name; }

class NvidiaSmiErrors : public ::testing::TestWithParam<BadMatrix> {};

TEST_P(NvidiaSmiErrors, NameLineColumnAndCell) {
  auto t = ParseNvidiaSmiTopo(GetParam().text, "m.txt");
  ASSERT_ERROR(t, absl::StatusCode::kInvalidArgument, "m.txt:") << GetParam().name;
  EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(t.status().message()), HasSubstr(GetParam().where)) << t.status();
  EXPECT_THAT(std::string(t.status().message()), HasSubstr(GetParam().what)) << t.status();
}

std::string Replace(std::string s, const std::string& from, const std::string& to) {
  return absl::StrReplaceAll(s, {{from, to}});
}

INSTANTIATE_TEST_SUITE_P(
    Bad, NvidiaSmiErrors,
    ::testing::Values(
        BadMatrix{"no_header", "hello\nworld\n", "m.txt", "no header row starting with GPU0"},
        // Line 3, column: "GPU1\tNV4\t" puts the X cell at column 10.
        BadMatrix{"unknown_token", Replace(kFourGpuPairs, "GPU1\tNV4\t X ", "GPU1\tNV4\tQPI"),
                  "m.txt:3:10: row GPU1, column GPU1", "unknown link 'QPI'"},
        BadMatrix{"x_off_diagonal", Replace(kFourGpuPairs, "GPU2\tSYS\tSYS", "GPU2\tSYS\t X "),
                  "m.txt:4:11: row GPU2, column GPU1", "X off the diagonal"},
        BadMatrix{"diagonal_not_x", Replace(kFourGpuPairs, "GPU3\tSYS\tSYS\tNV4\t X ", "GPU3\tSYS\tSYS\tNV4\tSYS"),
                  "m.txt:5:18: row GPU3, column GPU3", "the diagonal must be X"},
        BadMatrix{"asymmetric", Replace(kFourGpuPairs, "GPU1\tNV4", "GPU1\tNV2"),
                  "m.txt:3:6: row GPU1, column GPU0", "disagrees with row GPU0"},
        BadMatrix{"bad_nv", Replace(kFourGpuPairs, "GPU0\t X \tNV4", "GPU0\t X \tNVx"),
                  "m.txt:2:10: row GPU0, column GPU1", "'NVx' is not NV followed by a link count"},
        BadMatrix{"missing_row",
                  "\tGPU0\tGPU1\tGPU2\nGPU0\t X \tPIX\tSYS\nGPU1\tPIX\t X \tSYS\n\nLegend:\n", "m.txt:4:1",
                  "3 GPU columns but the matrix has only 2 GPU rows"},
        BadMatrix{"row_out_of_order", "\tGPU0\tGPU1\nGPU1\t X \tPIX\nGPU0\tPIX\t X \n", "m.txt:2:1",
                  "expected the row of GPU0, found 'GPU1'"},
        BadMatrix{"short_row", "\tGPU0\tGPU1\nGPU0\t X \nGPU1\tPIX\t X \n", "m.txt:2:",
                  "row GPU0 has 1 cells, expected at least 2"},
        BadMatrix{"bad_numa", Replace(kFourGpuPairs, "0-15\tN/A\nGPU1", "0-15\tzero\nGPU1"),
                  "m.txt:2:", "NUMA Affinity: 'zero'"},
        BadMatrix{"header_out_of_order", "\tGPU0\tGPU2\nGPU0\t X \tPIX\n", "m.txt:1:",
                  "header column GPU2 out of order"}),
    [](const ::testing::TestParamInfo<BadMatrix>& i) { return std::string(i.param.name); });

}  // namespace
}  // namespace ringmaster::topology
