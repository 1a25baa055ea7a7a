#include "topology/nvidia_smi.h"

#include <algorithm>
#include <map>
#include <numeric>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"

namespace ringmaster::topology {
namespace {

struct Token {
  std::string text;
  int column = 0;  // 1-based character column in the line
};

// Removes terminal escape sequences (ESC [ ... letter) and a trailing CR.
std::string CleanLine(absl::string_view line) {
  std::string out;
  for (size_t i = 0; i < line.size(); ++i) {
    if (line[i] == '\x1b' && i + 1 < line.size() && line[i + 1] == '[') {
      i += 2;
      while (i < line.size() && !absl::ascii_isalpha(static_cast<unsigned char>(line[i]))) ++i;
      continue;
    }
    if (line[i] == '\r') continue;
    out.push_back(line[i]);
  }
  return out;
}

// Splits on runs of `sep` characters (any whitespace when sep is 0).
std::vector<Token> Tokenize(absl::string_view line, char sep) {
  std::vector<Token> out;
  size_t i = 0;
  auto is_sep = [&](char c) { return sep ? c == sep : absl::ascii_isspace(static_cast<unsigned char>(c)); };
  while (i < line.size()) {
    while (i < line.size() && is_sep(line[i])) ++i;
    if (i >= line.size()) break;
    size_t j = i;
    while (j < line.size() && !is_sep(line[j])) ++j;
    absl::string_view cell = absl::StripAsciiWhitespace(line.substr(i, j - i));
    if (!cell.empty()) {
      const size_t lead = line.substr(i, j - i).find(cell);
      out.push_back({std::string(cell), static_cast<int>(i + lead + 1)});
    }
    i = j;
  }
  return out;
}

// Header names: tab-separated when tabs are present, else words with the
// known multi-word names joined back.
std::vector<Token> HeaderTokens(absl::string_view line) {
  if (line.find('\t') != absl::string_view::npos) return Tokenize(line, '\t');
  std::vector<Token> words = Tokenize(line, 0), out;
  for (size_t i = 0; i < words.size(); ++i) {
    auto joins = [&](std::initializer_list<const char*> seq) {
      size_t k = 0;
      for (const char* w : seq) {
        if (i + k >= words.size() || words[i + k].text != w) return false;
        ++k;
      }
      return true;
    };
    if (joins({"GPU", "NUMA", "ID"})) {
      out.push_back({"GPU NUMA ID", words[i].column});
      i += 2;
    } else if (joins({"CPU", "Affinity"}) || joins({"NUMA", "Affinity"})) {
      out.push_back({words[i].text + " Affinity", words[i].column});
      i += 1;
    } else {
      out.push_back(words[i]);
    }
  }
  return out;
}

bool ParseGpuName(absl::string_view s, int* index) {
  if (!absl::ConsumePrefix(&s, "GPU") || s.empty()) return false;
  return absl::SimpleAtoi(s, index) && *index >= 0;
}

// Union-find over GPU indices; groups numbered by lowest member.
class Groups {
 public:
  explicit Groups(int n) : parent_(n) { std::iota(parent_.begin(), parent_.end(), 0); }
  int Find(int x) { return parent_[x] == x ? x : parent_[x] = Find(parent_[x]); }
  void Join(int a, int b) {
    a = Find(a);
    b = Find(b);
    if (a != b) parent_[std::max(a, b)] = std::min(a, b);
  }
  std::vector<int> Ids() {
    std::map<int, int> id;
    std::vector<int> out(parent_.size());
    for (size_t i = 0; i < parent_.size(); ++i) {
      const int root = Find(static_cast<int>(i));
      auto it = id.try_emplace(root, static_cast<int>(id.size())).first;
      out[i] = it->second;
    }
    return out;
  }

 private:
  std::vector<int> parent_;
};

template <typename Key>
std::vector<int> GroupBy(const std::vector<Key>& keys) {
  std::map<Key, int> id;
  std::vector<int> out;
  for (const Key& k : keys) out.push_back(id.try_emplace(k, static_cast<int>(id.size())).first->second);
  return out;
}

std::string FormatGroups(const std::vector<Gpu>& gpus, int Gpu::*member) {
  std::map<int, std::vector<int>> groups;
  for (const Gpu& g : gpus) groups[g.*member].push_back(g.index);
  std::vector<std::string> parts;
  for (const auto& [id, members] : groups) parts.push_back(absl::StrCat("[", absl::StrJoin(members, ", "), "]"));
  return absl::StrCat("[", absl::StrJoin(parts, ", "), "]");
}

}  // namespace

absl::StatusOr<NvidiaSmiTopology> ParseNvidiaSmiTopo(std::string_view text_in,
                                                     std::string_view filename_in) {
  const absl::string_view text(text_in.data(), text_in.size());
  const absl::string_view filename(filename_in.data(), filename_in.size());
  std::vector<std::string> lines;
  for (absl::string_view l : absl::StrSplit(text, '\n')) lines.push_back(CleanLine(l));
  auto error = [&](size_t line, int column, absl::string_view what) {
    return absl::InvalidArgumentError(absl::StrCat(filename, ":", line + 1, ":", column, ": ", what));
  };

  // 1. The header: the first line whose first name is GPU0.
  size_t h = 0;
  std::vector<Token> header;
  for (; h < lines.size(); ++h) {
    header = HeaderTokens(lines[h]);
    if (!header.empty() && header[0].text == "GPU0") break;
  }
  if (h == lines.size()) {
    return absl::InvalidArgumentError(
        absl::StrCat(filename, ": no header row starting with GPU0 (is this `nvidia-smi topo -m` output?)"));
  }
  int n = 0;
  while (n < static_cast<int>(header.size())) {
    int idx = -1;
    if (!ParseGpuName(header[n].text, &idx)) break;
    if (idx != n) {
      return error(h, header[n].column, absl::StrCat("header column ", header[n].text, " out of order, expected GPU", n));
    }
    ++n;
  }
  int cpu_col = -1, numa_col = -1;
  for (size_t c = n; c < header.size(); ++c) {
    if (header[c].text == "CPU Affinity") cpu_col = static_cast<int>(c);
    if (header[c].text == "NUMA Affinity") numa_col = static_cast<int>(c);
  }

  NvidiaSmiTopology topo;
  topo.link.assign(n, std::vector<GpuLink>(n, GpuLink::kSys));
  topo.nvlinks.assign(n, std::vector<int>(n, 0));
  topo.cpu_affinity.assign(n, "");
  topo.numa_affinity.assign(n, -1);

  // 2. One row per GPU, in order.
  size_t line = h + 1;
  for (int i = 0; i < n; ++i, ++line) {
    if (line >= lines.size() || Tokenize(lines[line], 0).empty()) {
      return error(std::min(line, lines.size() - 1), 1,
                   absl::StrCat("the header has ", n, " GPU columns but the matrix has only ", i, " GPU rows"));
    }
    std::vector<Token> row = Tokenize(lines[line], 0);
    int idx = -1;
    if (!ParseGpuName(row[0].text, &idx) || idx != i) {
      return error(line, row[0].column, absl::StrCat("expected the row of GPU", i, ", found '", row[0].text, "'"));
    }
    if (static_cast<int>(row.size()) < n + 1) {
      return error(line, static_cast<int>(lines[line].size()) + 1,
                   absl::StrCat("row GPU", i, " has ", row.size() - 1, " cells, expected at least ", n));
    }
    for (int j = 0; j < n; ++j) {
      const Token& cell = row[j + 1];
      const std::string where = absl::StrCat("row GPU", i, ", column GPU", j, ": ");
      GpuLink link;
      int bonds = 0;
      absl::string_view t = cell.text;
      if (t == "X") {
        link = GpuLink::kSelf;
      } else if (absl::ConsumePrefix(&t, "NV")) {
        if (!absl::SimpleAtoi(t, &bonds) || bonds <= 0) {
          return error(line, cell.column, absl::StrCat(where, "'", cell.text, "' is not NV followed by a link count"));
        }
        link = GpuLink::kNvLink;
      } else if (t == "PIX") {
        link = GpuLink::kPix;
      } else if (t == "PXB") {
        link = GpuLink::kPxb;
      } else if (t == "PHB") {
        link = GpuLink::kPhb;
      } else if (t == "NODE") {
        link = GpuLink::kNode;
      } else if (t == "SYS" || t == "SOC") {
        link = GpuLink::kSys;
      } else {
        return error(line, cell.column,
                     absl::StrCat(where, "unknown link '", cell.text, "' (expected X, NV#, PIX, PXB, PHB, NODE or SYS)"));
      }
      if ((link == GpuLink::kSelf) != (i == j)) {
        return error(line, cell.column, absl::StrCat(where, i == j ? "the diagonal must be X" : "X off the diagonal"));
      }
      if (j < i && (topo.link[j][i] != link || topo.nvlinks[j][i] != bonds)) {
        return error(line, cell.column,
                     absl::StrCat(where, "'", cell.text, "' disagrees with row GPU", j, " (the matrix must be symmetric)"));
      }
      topo.link[i][j] = link;
      topo.nvlinks[i][j] = bonds;
    }
    // Affinity columns: positions after the link cells follow the header
    // order, but empty cells are dropped, so count from the row's end when
    // the row is shorter than the header.
    auto cell_of = [&](int col) -> const Token* {
      if (col < 0) return nullptr;
      const int pos = col + 1;  // +1 for the row label
      if (static_cast<int>(row.size()) == static_cast<int>(header.size()) + 1) return &row[pos];
      const int from_end = static_cast<int>(header.size()) - col;
      const int k = static_cast<int>(row.size()) - from_end;
      return k > n ? &row[k] : nullptr;
    };
    if (const Token* c = cell_of(cpu_col); c && c->text != "N/A") topo.cpu_affinity[i] = c->text;
    if (const Token* c = cell_of(numa_col); c && c->text != "N/A") {
      int v = -1;
      if (!absl::SimpleAtoi(c->text, &v) || v < 0) {
        return error(line, c->column, absl::StrCat("row GPU", i, ", NUMA Affinity: '", c->text, "' is not a number or N/A"));
      }
      topo.numa_affinity[i] = v;
    }
  }

  // 3. Groups.
  Groups nv(n), pcie(n), socket(n);
  for (int i = 0; i < n; ++i) {
    for (int j = i + 1; j < n; ++j) {
      const GpuLink l = topo.link[i][j];
      if (l == GpuLink::kNvLink) nv.Join(i, j);
      if (l == GpuLink::kPix || l == GpuLink::kPxb) pcie.Join(i, j);
      if (l == GpuLink::kPix || l == GpuLink::kPxb || l == GpuLink::kPhb || l == GpuLink::kNode) socket.Join(i, j);
    }
  }
  std::vector<int> islands = nv.Ids(), switches = pcie.Ids(), numa;
  const bool all_numa = std::all_of(topo.numa_affinity.begin(), topo.numa_affinity.end(), [](int v) { return v >= 0; });
  const bool all_cpu = std::all_of(topo.cpu_affinity.begin(), topo.cpu_affinity.end(), [](const std::string& s) { return !s.empty(); });
  if (n > 0 && all_numa) {
    numa = GroupBy(topo.numa_affinity);
  } else if (n > 0 && all_cpu) {
    numa = GroupBy(topo.cpu_affinity);
  } else {
    numa = socket.Ids();
  }
  for (int i = 0; i < n; ++i) topo.gpus.push_back(Gpu{i, "", 0, islands[i], switches[i], numa[i]});
  return topo;
}

std::string LinkGroupsYaml(const NvidiaSmiTopology& topo) {
  return absl::StrCat("links:\n  nvlink_islands: ", FormatGroups(topo.gpus, &Gpu::nvlink_island),
                      "\n  pcie_switches: ", FormatGroups(topo.gpus, &Gpu::pcie_switch),
                      "\n  numa: ", FormatGroups(topo.gpus, &Gpu::numa), "\n");
}

}  // namespace ringmaster::topology
