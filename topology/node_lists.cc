#include "topology/node_lists.h"

#include <array>
#include <filesystem>
#include <fstream>
#include <set>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "common/status_macros.h"

namespace ringmaster::topology {
namespace {

// One CSV table without quoting (none of these lists quote), read row by row
// with the position of every error.
class Table {
 public:
  Table(absl::string_view text, absl::string_view filename)
      : lines_(absl::StrSplit(text, '\n')), filename_(filename) {}

  // Reads the header and checks it against `expected` (cells trimmed).
  absl::Status ExpectHeader(const std::vector<std::string>& expected) {
    if (!Next()) return absl::InvalidArgumentError(absl::StrCat(filename_, ": empty file (no header)"));
    header_ = expected;
    if (cells_.size() != expected.size()) {
      return Error(0, absl::StrCat("header has ", cells_.size(), " columns, expected ",
                                   expected.size(), " (", absl::StrJoin(expected, ","), ")"));
    }
    for (size_t i = 0; i < expected.size(); ++i) {
      if (cells_[i] != expected[i]) {
        return Error(i, absl::StrCat("header is '", cells_[i], "', expected '", expected[i], "'"));
      }
    }
    return absl::OkStatus();
  }

  // Advances to the next non-blank line; false at the end.
  bool Next() {
    while (pos_ < lines_.size()) {
      absl::string_view line = lines_[pos_++];
      if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
      if (absl::StripAsciiWhitespace(line).empty()) continue;
      cells_.clear();
      for (absl::string_view c : absl::StrSplit(line, ',')) {
        cells_.emplace_back(absl::StripAsciiWhitespace(c));
      }
      return true;
    }
    return false;
  }

  int line() const { return static_cast<int>(pos_); }  // 1-based line of the current row
  size_t size() const { return cells_.size(); }
  const std::string& cell(size_t i) const { return cells_[i]; }

  absl::Status CheckWidth() const {
    if (cells_.size() == header_.size()) return absl::OkStatus();
    return absl::InvalidArgumentError(absl::StrCat(filename_, ":", line(), ": row has ",
                                                   cells_.size(), " columns, the header has ",
                                                   header_.size()));
  }

  absl::Status Error(size_t col, absl::string_view what) const {
    const std::string name = col < header_.size() ? header_[col] : "";
    return absl::InvalidArgumentError(absl::StrCat(filename_, ":", line(), ": column ", col + 1,
                                                   " (", name, "): ", what));
  }

  absl::StatusOr<int64_t> Int(size_t col, int64_t min, int64_t max) const {
    int64_t v = 0;
    if (!absl::SimpleAtoi(cells_[col], &v) || v < min || v > max) {
      return Error(col, absl::StrCat("'", cells_[col], "' is not an integer in [", min, ", ", max,
                                     "]"));
    }
    return v;
  }

  absl::Status Name(size_t col, std::set<std::string>& seen) const {
    if (cells_[col].empty()) return Error(col, "empty name");
    if (!seen.insert(cells_[col]).second) return Error(col, absl::StrCat("duplicate name '", cells_[col], "'"));
    return absl::OkStatus();
  }

 private:
  std::vector<absl::string_view> lines_;
  size_t pos_ = 0;
  std::string filename_;
  std::vector<std::string> header_;
  std::vector<std::string> cells_;
};

NodeSpec MakeNode(std::string name, Quantity cpu_milli, Quantity memory, int64_t gpus,
                  const std::string& model, Quantity gpu_memory) {
  NodeSpec n;
  n.name = std::move(name);
  n.allocatable = Resources(cpu_milli, memory, 0);
  for (int i = 0; i < gpus; ++i) n.gpus.push_back(Gpu{i, model, gpu_memory, 0, 0, 0});
  return n;
}

constexpr int64_t kMaxGpusPerNode = 1024;
constexpr int64_t kMiB = 1024 * 1024;

}  // namespace

absl::StatusOr<std::string> ReadTextFile(const std::string& path) {
  std::error_code ec;
  const std::filesystem::file_status kind = std::filesystem::status(path, ec);
  if (!ec && std::filesystem::is_directory(kind)) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": is a directory, not a file"));
  }
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(path, ": cannot read"));
  auto too_big = [&] {
    return absl::InvalidArgumentError(
        absl::StrCat(path, ": larger than ", kMaxTextFileBytes >> 20, " MiB, more than any input file here needs"));
  };
  // Read straight into the string: sized from a regular file's length, then
  // whatever more there is (a pipe, or a file that grew), in blocks.
  std::string out;
  if (!ec && std::filesystem::is_regular_file(kind)) {
    const std::uintmax_t size = std::filesystem::file_size(path, ec);
    if (!ec && size > kMaxTextFileBytes) return too_big();
    if (!ec && size > 0) {
      out.resize(static_cast<size_t>(size));
      in.read(out.data(), static_cast<std::streamsize>(size));
      out.resize(static_cast<size_t>(in.gcount()));
      in.clear();
    }
  }
  std::array<char, 1 << 16> block;
  while (in.read(block.data(), block.size()), in.gcount() > 0) {
    if (out.size() + static_cast<size_t>(in.gcount()) > kMaxTextFileBytes) return too_big();
    out.append(block.data(), static_cast<size_t>(in.gcount()));
  }
  if (in.bad()) return absl::DataLossError(absl::StrCat(path, ": read failed"));
  return out;
}

absl::StatusOr<std::vector<NodeSpec>> ParseOpenbNodeList(std::string_view text_in,
                                                         std::string_view filename_in) {
  const absl::string_view text(text_in.data(), text_in.size());
  const absl::string_view filename(filename_in.data(), filename_in.size());
  Table t(text, filename);
  RM_RETURN_IF_ERROR(t.ExpectHeader({"sn", "cpu_milli", "memory_mib", "gpu", "model"}));
  std::vector<NodeSpec> nodes;
  std::set<std::string> seen;
  while (t.Next()) {
    RM_RETURN_IF_ERROR(t.CheckWidth());
    RM_RETURN_IF_ERROR(t.Name(0, seen));
    RM_ASSIGN_OR_RETURN(auto cpu, t.Int(1, 0, int64_t{1} << 40));
    RM_ASSIGN_OR_RETURN(auto mem, t.Int(2, 0, int64_t{1} << 30));
    RM_ASSIGN_OR_RETURN(auto gpu, t.Int(3, 0, kMaxGpusPerNode));
    if (gpu > 0 && t.cell(4).empty()) return t.Error(4, "a node with GPUs needs a model");
    if (gpu == 0 && !t.cell(4).empty()) return t.Error(4, "a node without GPUs has no model");
    nodes.push_back(MakeNode(t.cell(0), cpu, mem * kMiB, gpu, t.cell(4), 0));
  }
  if (nodes.empty()) return absl::InvalidArgumentError(absl::StrCat(filename, ": no nodes"));
  return nodes;
}

absl::StatusOr<std::vector<NodeSpec>> ParsePhillyMachineList(std::string_view text_in,
                                                             std::string_view filename_in) {
  const absl::string_view text(text_in.data(), text_in.size());
  const absl::string_view filename(filename_in.data(), filename_in.size());
  // Which of the two lists: look at the first non-blank line.
  absl::string_view first = text.substr(0, text.find('\n'));
  const bool revised = absl::StartsWith(absl::StripLeadingAsciiWhitespace(first), ",");
  Table t(text, filename);
  if (revised) {
    RM_RETURN_IF_ERROR(t.ExpectHeader({"", "machineId", "number of GPUs"}));
  } else {
    RM_RETURN_IF_ERROR(t.ExpectHeader({"machineId", "number of GPUs", "single GPU mem"}));
  }
  const size_t name_col = revised ? 1 : 0;
  constexpr int64_t kMaxGpuMemoryGb = 1 << 20;  // a GPU's memory in bytes stays far inside int64
  std::vector<NodeSpec> nodes;
  std::set<std::string> seen;
  while (t.Next()) {
    RM_RETURN_IF_ERROR(t.CheckWidth());
    if (revised) {
      RM_RETURN_IF_ERROR(t.Int(0, 0, int64_t{1} << 40).status());
    }
    RM_RETURN_IF_ERROR(t.Name(name_col, seen));
    RM_ASSIGN_OR_RETURN(auto gpu, t.Int(name_col + 1, 0, kMaxGpusPerNode));
    Quantity gpu_memory = 0;
    if (!revised) {
      absl::string_view mem = t.cell(2);
      int64_t gb = 0;
      if (!absl::ConsumeSuffix(&mem, "GB") || !absl::SimpleAtoi(mem, &gb) || gb <= 0) {
        return t.Error(2, absl::StrCat("'", t.cell(2), "' is not a size like 12GB"));
      }
      if (gb > kMaxGpuMemoryGb) {
        return t.Error(2, absl::StrCat("'", t.cell(2), "' is more than ", kMaxGpuMemoryGb, "GB"));
      }
      gpu_memory = gb * 1024 * kMiB;
    }
    nodes.push_back(MakeNode(t.cell(name_col), 0, 0, gpu, "", gpu_memory));
  }
  if (nodes.empty()) return absl::InvalidArgumentError(absl::StrCat(filename, ": no machines"));
  return nodes;
}

absl::StatusOr<std::vector<NodeSpec>> ReadOpenbNodeList(const std::string& path) {
  RM_ASSIGN_OR_RETURN(auto text, ReadTextFile(path));
  return ParseOpenbNodeList(text, path);
}

absl::StatusOr<std::vector<NodeSpec>> ReadPhillyMachineList(const std::string& path) {
  RM_ASSIGN_OR_RETURN(auto text, ReadTextFile(path));
  return ParsePhillyMachineList(text, path);
}

}  // namespace ringmaster::topology
