// A delimited text table as trace files carry it (CSV or TSV): rows split
// into fields, each row with its 1-based line number in the file, and typed
// field readers whose errors say "file:line: field: what is wrong". The trace
// readers (simulator/trace.h) are built on it.
//
// Blank lines (and a trailing CR) are skipped: they are not rows. Fields are
// not quoted; a field holds no delimiter.
#ifndef RINGMASTER_SIMULATOR_TRACE_TABLE_H_
#define RINGMASTER_SIMULATOR_TRACE_TABLE_H_

#include <cstdint>
#include <span>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace ringmaster::simulator {

struct TableRow {
  int line = 0;  // 1-based line in the file
  std::span<const std::string_view> fields;  // into its table (TraceTable::fields_)
};

class TraceTable {
 public:
  // Splits `text` into rows of fields separated by `delimiter`. With
  // `has_header` the first non-blank line becomes the header. The table
  // borrows `text`: it must outlive the table.
  static TraceTable Split(std::string_view text, std::string_view filename, char delimiter,
                          bool has_header);
  // Rows point into the table's own field storage: it moves, never copies.
  TraceTable(TraceTable&&) = default;
  TraceTable& operator=(TraceTable&&) = default;
  TraceTable(const TraceTable&) = delete;
  TraceTable& operator=(const TraceTable&) = delete;

  const std::string& filename() const { return filename_; }
  const std::vector<std::string>& header() const { return header_; }
  int header_line() const { return header_line_; }
  const std::vector<TableRow>& rows() const { return rows_; }

  // Index of the header column named `name`, or -1.
  int Column(std::string_view name) const;
  // Like Column, but a missing column is an error naming the header line.
  absl::StatusOr<int> RequireColumn(std::string_view name) const;

  // "file:line: field: message".
  absl::Status Error(int line, std::string_view field, std::string_view message) const;

  // Typed fields of `row`. `column` may be -1 (absent column): the default is
  // returned. An empty field also gives the default, unless `required`.
  absl::StatusOr<std::string_view> Text(const TableRow& row, int column, std::string_view field,
                                        bool required) const;
  absl::StatusOr<double> Double(const TableRow& row, int column, std::string_view field,
                                double def, bool required) const;
  absl::StatusOr<int64_t> Int(const TableRow& row, int column, std::string_view field, int64_t def,
                              bool required) const;

 private:
  TraceTable() = default;
  std::string filename_;
  std::vector<std::string> header_;
  int header_line_ = 0;
  std::vector<TableRow> rows_;
  std::vector<std::string_view> fields_;  // every row's, in order
};

}  // namespace ringmaster::simulator

#endif  // RINGMASTER_SIMULATOR_TRACE_TABLE_H_
