// Splitting trace text into numbered rows, and typed field readers.
#include "simulator/trace_table.h"

#include <charconv>
#include <cmath>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::simulator {
namespace {

std::vector<std::string_view> SplitFields(std::string_view line, char delimiter) {
  std::vector<std::string_view> out;
  size_t start = 0;
  while (true) {
    const size_t end = line.find(delimiter, start);
    std::string_view f = line.substr(start, end == std::string_view::npos ? end : end - start);
    while (!f.empty() && (f.front() == ' ' || f.front() == '\t')) f.remove_prefix(1);
    while (!f.empty() && (f.back() == ' ' || f.back() == '\t')) f.remove_suffix(1);
    out.push_back(f);
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return out;
}

}  // namespace

TraceTable TraceTable::Split(std::string_view text, std::string_view filename, char delimiter,
                             bool has_header) {
  TraceTable t;
  t.filename_ = std::string(filename);
  int line_no = 0;
  size_t pos = 0;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (absl::StripAsciiWhitespace(std::string(line)).empty()) continue;
    if (has_header && t.header_line_ == 0) {
      t.header_line_ = line_no;
      for (std::string_view f : SplitFields(line, delimiter)) t.header_.emplace_back(f);
      continue;
    }
    t.rows_.push_back({line_no, SplitFields(line, delimiter)});
  }
  return t;
}

int TraceTable::Column(std::string_view name) const {
  for (size_t i = 0; i < header_.size(); ++i) {
    if (header_[i] == name) return static_cast<int>(i);
  }
  return -1;
}

absl::StatusOr<int> TraceTable::RequireColumn(std::string_view name) const {
  const int c = Column(name);
  if (c < 0) {
    return absl::InvalidArgumentError(absl::StrCat(filename_, ":", header_line_ == 0 ? 1 : header_line_,
                                                   ": header has no column '", std::string(name), "'"));
  }
  return c;
}

absl::Status TraceTable::Error(int line, std::string_view field, std::string_view message) const {
  return absl::InvalidArgumentError(
      absl::StrCat(filename_, ":", line, ": ", std::string(field), ": ", std::string(message)));
}

absl::StatusOr<std::string_view> TraceTable::Text(const TableRow& row, int column,
                                                  std::string_view field, bool required) const {
  if (column >= 0 && static_cast<size_t>(column) >= row.fields.size()) {
    return Error(row.line, field,
                 absl::StrCat("missing: the row has ", row.fields.size(), " fields, the header ",
                              header_.size()));
  }
  std::string_view v = column < 0 ? std::string_view() : row.fields[column];
  if (v.empty() && required) return Error(row.line, field, "required, but empty");
  return v;
}

absl::StatusOr<double> TraceTable::Double(const TableRow& row, int column, std::string_view field,
                                          double def, bool required) const {
  RM_ASSIGN_OR_RETURN(auto text, Text(row, column, field, required));
  if (text.empty()) return def;
  double v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end || !std::isfinite(v)) {
    return Error(row.line, field, absl::StrCat("not a number: '", std::string(text), "'"));
  }
  return v;
}

absl::StatusOr<int64_t> TraceTable::Int(const TableRow& row, int column, std::string_view field,
                                        int64_t def, bool required) const {
  RM_ASSIGN_OR_RETURN(auto text, Text(row, column, field, required));
  if (text.empty()) return def;
  int64_t v = 0;
  const char* end = text.data() + text.size();
  auto [p, ec] = std::from_chars(text.data(), end, v);
  if (ec != std::errc() || p != end) {
    return Error(row.line, field, absl::StrCat("not an integer: '", std::string(text), "'"));
  }
  return v;
}

}  // namespace ringmaster::simulator
