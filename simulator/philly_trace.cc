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

absl::StatusOr<std::vector<TraceJob>> PhillyTraceReader::Parse(std::string_view text,
                                                               std::string_view filename) {
  const TraceTable t = TraceTable::Split(text, filename, ',', true);
  int cols[4];
  const char* names[4] = {"timestamp", "duration", "num_gpus", "cluster"};
  for (int i = 0; i < 4; ++i) {
    RM_ASSIGN_OR_RETURN(cols[i], t.RequireColumn(names[i]));
  }
  std::vector<TraceJob> jobs;
  jobs.reserve(t.rows().size());
  std::vector<int64_t> stamps;
  stamps.reserve(t.rows().size());
  for (const TableRow& r : t.rows()) {
    TraceJob j;
    j.line = r.line;
    j.spec.name = absl::StrCat("philly-", jobs.size() + 1);
    RM_ASSIGN_OR_RETURN(auto stamp, t.Text(r, cols[0], "timestamp", true));
    const std::optional<int64_t> secs = ParseDateTime(stamp);
    if (!secs) return t.Error(r.line, "timestamp", absl::StrCat("'", std::string(stamp), "': expected YYYY-MM-DD HH:MM:SS"));
    stamps.push_back(*secs);
    RM_ASSIGN_OR_RETURN(auto duration, t.Double(r, cols[1], "duration", 0, true));
    if (duration < 0) return t.Error(r.line, "duration", "must be >= 0");
    j.duration_s = duration;
    RM_ASSIGN_OR_RETURN(auto gpus, t.Int(r, cols[2], "num_gpus", 0, true));
    if (gpus < 0 || gpus > 100000) return t.Error(r.line, "num_gpus", "must be in [0, 100000]");
    SplitGang(static_cast<int>(gpus), kMaxGpusPerTask, j);
    RM_ASSIGN_OR_RETURN(auto vc, t.Text(r, cols[3], "cluster", true));
    j.spec.queue = std::string(vc);
    jobs.push_back(std::move(j));
  }
  if (!stamps.empty()) {
    const int64_t start = *std::min_element(stamps.begin(), stamps.end());
    for (size_t i = 0; i < jobs.size(); ++i) jobs[i].submit_s = static_cast<double>(stamps[i] - start);
  }
  return FinishTrace(std::move(jobs), filename);
}

}  // namespace ringmaster::simulator
