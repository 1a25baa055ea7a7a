// The Philly job CSV: dates to seconds, VCs to queues, big gangs to 8-GPU tasks.
#include "simulator/philly_trace.h"

#include <algorithm>
#include <charconv>

#include "absl/strings/str_cat.h"
#include "common/status_macros.h"
#include "simulator/trace_table.h"

namespace ringmaster::simulator {
namespace {

// Days from 1970-01-01 to the civil date y-m-d (proleptic Gregorian).
int64_t DaysFromCivil(int64_t y, int64_t m, int64_t d) {
  y -= m <= 2 ? 1 : 0;
  const int64_t era = (y >= 0 ? y : y - 399) / 400;
  const int64_t yoe = y - era * 400;
  const int64_t doy = (153 * (m + (m > 2 ? -3 : 9)) + 2) / 5 + d - 1;
  const int64_t doe = yoe * 365 + yoe / 4 - yoe / 100 + doy;
  return era * 146097 + doe - 719468;
}

bool Digits(std::string_view s, size_t pos, size_t n, int64_t& out) {
  if (pos + n > s.size()) return false;
  auto [p, ec] = std::from_chars(s.data() + pos, s.data() + pos + n, out);
  return ec == std::errc() && p == s.data() + pos + n;
}

}  // namespace

std::optional<int64_t> ParseDateTime(std::string_view s) {
  // 0123456789012345678
  // YYYY-MM-DD HH:MM:SS
  if (s.size() != 19 || s[4] != '-' || s[7] != '-' || s[10] != ' ' || s[13] != ':' || s[16] != ':') {
    return std::nullopt;
  }
  int64_t y, mo, d, h, mi, se;
  if (!Digits(s, 0, 4, y) || !Digits(s, 5, 2, mo) || !Digits(s, 8, 2, d) || !Digits(s, 11, 2, h) ||
      !Digits(s, 14, 2, mi) || !Digits(s, 17, 2, se)) {
    return std::nullopt;
  }
  if (mo < 1 || mo > 12 || d < 1 || d > 31 || h > 23 || mi > 59 || se > 60) return std::nullopt;
  return DaysFromCivil(y, mo, d) * 86400 + h * 3600 + mi * 60 + se;
}

bool PhillyTraceReader::Recognizes(std::string_view first_line) {
  const TraceTable t = TraceTable::Split(first_line, "", ',', true);
  return t.Column("timestamp") >= 0 && t.Column("duration") >= 0 && t.Column("num_gpus") >= 0 &&
         t.Column("cluster") >= 0;
}

namespace {

// A data row as read and checked: every job of the trace is one of these
// before any is built.
struct PhillyRow {
  int line;
  int64_t stamp;  // seconds since 1970
  double duration_s;
  int gpus;
  std::string_view vc;
};

// Reads and checks every row (the errors name the line and the field).
absl::StatusOr<std::vector<PhillyRow>> ReadRows(const TraceTable& t) {
  int cols[4];
  const char* names[4] = {"timestamp", "duration", "num_gpus", "cluster"};
  for (int i = 0; i < 4; ++i) {
    RM_ASSIGN_OR_RETURN(cols[i], t.RequireColumn(names[i]));
  }
  std::vector<PhillyRow> rows;
  rows.reserve(t.rows().size());
  for (const TableRow& r : t.rows()) {
    PhillyRow& row = rows.emplace_back();
    row.line = r.line;
    RM_ASSIGN_OR_RETURN(auto stamp, t.Text(r, cols[0], "timestamp", true));
    const std::optional<int64_t> secs = ParseDateTime(stamp);
    if (!secs) return t.Error(r.line, "timestamp", absl::StrCat("'", std::string(stamp), "': expected YYYY-MM-DD HH:MM:SS"));
    row.stamp = *secs;
    RM_ASSIGN_OR_RETURN(row.duration_s, t.Double(r, cols[1], "duration", 0, true));
    if (row.duration_s < 0) return t.Error(r.line, "duration", "must be >= 0");
    RM_ASSIGN_OR_RETURN(auto gpus, t.Int(r, cols[2], "num_gpus", 0, true));
    if (gpus < 0 || gpus > 100000) return t.Error(r.line, "num_gpus", "must be in [0, 100000]");
    row.gpus = static_cast<int>(gpus);
    RM_ASSIGN_OR_RETURN(row.vc, t.Text(r, cols[3], "cluster", true));
  }
  return rows;
}

// The job of rows[i] (its id counts rows from 1 in file order), its submit
// time counted from `start`.
void BuildJob(const PhillyRow& row, size_t i, int64_t start, TraceJob& j) {
  j.line = row.line;
  j.spec.name = absl::StrCat("philly-", i + 1);
  j.submit_s = static_cast<double>(row.stamp - start);
  j.duration_s = row.duration_s;
  SplitGang(row.gpus, PhillyTraceReader::kMaxGpusPerTask, j);
  j.spec.queue = std::string(row.vc);
}

// The earliest row's time (0 for none): submit times count from it.
int64_t Start(const std::vector<PhillyRow>& rows) {
  auto first = std::min_element(rows.begin(), rows.end(),
                                [](const PhillyRow& a, const PhillyRow& b) { return a.stamp < b.stamp; });
  return first == rows.end() ? 0 : first->stamp;
}

}  // namespace

absl::StatusOr<std::vector<TraceJob>> PhillyTraceReader::Parse(std::string_view text,
                                                               std::string_view filename) {
  const TraceTable t = TraceTable::Split(text, filename, ',', true);
  RM_ASSIGN_OR_RETURN(const std::vector<PhillyRow> rows, ReadRows(t));
  const int64_t start = Start(rows);
  std::vector<TraceJob> jobs(rows.size());
  for (size_t i = 0; i < rows.size(); ++i) BuildJob(rows[i], i, start, jobs[i]);
  return FinishTrace(std::move(jobs), filename);
}

absl::StatusOr<std::vector<TraceJob>> PhillyTraceReader::ParseSlice(std::string_view text, std::string_view filename,
                                                                    const TraceSlice& slice) {
  const TraceTable t = TraceTable::Split(text, filename, ',', true);
  RM_ASSIGN_OR_RETURN(const std::vector<PhillyRow> rows, ReadRows(t));
  const int64_t start = Start(rows);
  // FinishTrace's order (submit time, then line) on the rows, then
  // SliceTrace's choice (SliceChoice).
  // A row that passed ReadRows makes a job FinishTrace accepts (a generated
  // unique id, times >= 0, 0-100,000 GPUs as tasks of at most 8), so the
  // rows left out need no job built to be checked.
  std::vector<uint32_t> order(rows.size());
  for (uint32_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(), [&rows](uint32_t a, uint32_t b) {
    return rows[a].stamp != rows[b].stamp ? rows[a].stamp < rows[b].stamp : rows[a].line < rows[b].line;
  });
  std::vector<uint32_t> kept;
  for (uint32_t i : order) {
    const SliceStep step = SliceChoice(slice, static_cast<double>(rows[i].stamp - start), kept.size());
    if (step == SliceStep::kSkip) continue;
    if (step == SliceStep::kEnd) break;
    kept.push_back(i);
  }
  std::vector<TraceJob> jobs(kept.size());
  for (size_t k = 0; k < kept.size(); ++k) BuildJob(rows[kept[k]], kept[k], start, jobs[k]);
  return FinishTrace(std::move(jobs), filename);
}

}  // namespace ringmaster::simulator
