// Splitting trace text into numbered rows, and typed field readers.
#include "simulator/trace_table.h"

#include <algorithm>
#include <charconv>
#include <cmath>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"

namespace ringmaster::simulator {
namespace {

// Appends the fields of `line` (split at `delimiter`, blanks and tabs
// trimmed) to `out`; returns how many.
size_t SplitFields(std::string_view line, char delimiter, std::vector<std::string_view>& out) {
  size_t start = 0, n = 0;
  while (true) {
    const size_t end = line.find(delimiter, start);
    std::string_view f = line.substr(start, end == std::string_view::npos ? end : end - start);
    while (!f.empty() && (f.front() == ' ' || f.front() == '\t')) f.remove_prefix(1);
    while (!f.empty() && (f.back() == ' ' || f.back() == '\t')) f.remove_suffix(1);
    out.push_back(f);
    ++n;
    if (end == std::string_view::npos) break;
    start = end + 1;
  }
  return n;
}

}  // namespace

TraceTable TraceTable::Split(std::string_view text, std::string_view filename, char delimiter,
                             bool has_header) {
  TraceTable t;
  t.filename_ = std::string(filename);
  int line_no = 0;
  size_t pos = 0;
  // Every row's fields in one vector (a row is a span of it, made once the
  // vector stops growing): no allocation per row. One row a line at most.
  const size_t lines = static_cast<size_t>(std::count(text.begin(), text.end(), '\n')) + 1;
  struct Pending {
    int line;
    size_t from, n;
  };
  std::vector<Pending> spans;
  spans.reserve(lines);
  std::vector<std::string_view> header;
  while (pos < text.size()) {
    size_t end = text.find('\n', pos);
    if (end == std::string_view::npos) end = text.size();
    std::string_view line = text.substr(pos, end - pos);
    pos = end + 1;
    ++line_no;
    if (!line.empty() && line.back() == '\r') line.remove_suffix(1);
    if (line.find_first_not_of(" \t\n\v\f\r") == std::string_view::npos) continue;  // blank
    if (has_header && t.header_line_ == 0) {
      t.header_line_ = line_no;
      SplitFields(line, delimiter, header);
      for (std::string_view f : header) t.header_.emplace_back(f);
      // Every row as wide as the header, but never more than the text
      // holds (a field per delimiter, plus one a line).
      const size_t delimiters = static_cast<size_t>(std::count(text.begin(), text.end(), delimiter));
      t.fields_.reserve(std::min(lines * std::max<size_t>(header.size(), 1), delimiters + lines));
      continue;
    }
    const size_t from = t.fields_.size();
    spans.push_back({line_no, from, SplitFields(line, delimiter, t.fields_)});
  }
  t.rows_.reserve(spans.size());
  const std::string_view* base = t.fields_.data();
  for (const Pending& p : spans) t.rows_.push_back({p.line, std::span<const std::string_view>(base + p.from, p.n)});
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
