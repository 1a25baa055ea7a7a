// One logging setup for every long-running part of ringmaster (the daemon,
// the coordinator, the worker shim): spdlog's default logger on stderr,
// lines in logfmt (key=value) so that job ids, tasks and generations can be
// searched and parsed:
//
//   ts=2025-01-31T07:00:00.123Z level=info msg=bind job=llm-pretrain task=3 node=dgx-7
//
// The level comes from a --log-level flag, else the RINGMASTER_LOG
// environment variable, else info. User-facing CLI output (tables, error
// messages of a command) does not go through here.
#ifndef RINGMASTER_COMMON_LOGGING_H_
#define RINGMASTER_COMMON_LOGGING_H_

#include <initializer_list>
#include <string>
#include <string_view>
#include <utility>

#include <spdlog/spdlog.h>

#include "absl/status/statusor.h"
#include "absl/strings/str_cat.h"

namespace ringmaster::common {

using LogLevel = spdlog::level::level_enum;

// trace, debug, info, warn (or warning), error, critical, off; any case.
// The error names `source` and lists the levels.
absl::StatusOr<LogLevel> ParseLogLevel(std::string_view text, std::string_view source = "log level");

// The flag's level when `flag` is not empty, else `env` (RINGMASTER_LOG's
// value; may be null), else info.
absl::StatusOr<LogLevel> ResolveLogLevel(std::string_view flag, const char* env);

// Points spdlog's default logger at stderr with the logfmt pattern, at the
// level ResolveLogLevel(flag, getenv("RINGMASTER_LOG")) gives. Safe to call
// again (the level changes). Fails, changing nothing, on a bad level.
absl::Status InitLogging(std::string_view flag);

// One key=value field of a log line.
struct LogField {
  // Numbers (and absl::string_view) through AlphaNum; text as it is.
  LogField(std::string_view k, const absl::AlphaNum& v) : key(k), value(v.Piece()) {}
  LogField(std::string_view k, std::string_view v) : key(k), value(v) {}
  LogField(std::string_view k, const std::string& v) : key(k), value(v) {}
  LogField(std::string_view k, const char* v) : key(k), value(v) {}
  std::string_view key;
  std::string value;  // a copy: an AlphaNum of a number holds its digits itself
};

// "msg=EVENT k=v ...", each value quoted (Go %q style) when it is empty or
// has a space, quote, '=' or control character.
std::string FormatLogLine(std::string_view event, std::initializer_list<LogField> fields);

// Logs one event with its fields at `level` (formatted only when enabled).
void Log(LogLevel level, std::string_view event, std::initializer_list<LogField> fields = {});

// For a Status whose failure needs nothing done but a trace (a call whose
// precondition the caller checked, or whose failure a later step repairs):
// a failure is logged at warn level as EVENT with its fields and
// error="<status>"; OK logs nothing.
void LogIfError(const absl::Status& status, std::string_view event, std::initializer_list<LogField> fields = {});

}  // namespace ringmaster::common

#endif  // RINGMASTER_COMMON_LOGGING_H_
