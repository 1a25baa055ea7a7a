// The logging setup (see logging.h).
#include "common/logging.h"

#include <cstdlib>

#include <spdlog/sinks/stdout_sinks.h>

#include "absl/strings/ascii.h"
#include "common/status_macros.h"

namespace ringmaster::common {
namespace {

bool NeedsQuotes(std::string_view v) {
  if (v.empty()) return true;
  for (char c : v) {
    if (c == ' ' || c == '"' || c == '=' || c == '\\' || static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
      return true;
    }
  }
  return false;
}

void AppendValue(std::string& out, std::string_view v) {
  if (!NeedsQuotes(v)) {
    out.append(v);
    return;
  }
  out += '"';
  for (char c : v) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\t': out += "\\t"; break;
      case '\r': out += "\\r"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) {
          static constexpr char kHex[] = "0123456789abcdef";
          out += "\\x";
          out += kHex[(c >> 4) & 0xf];
          out += kHex[c & 0xf];
        } else {
          out += c;
        }
    }
  }
  out += '"';
}

// spdlog's own default logger writes to stdout, which belongs to a command's
// output (and to a training program's, in the shim): every line of ours goes
// to stderr in logfmt, whether or not InitLogging ran.
void InstallLogger() {
  static const bool once = [] {
    auto logger = std::make_shared<spdlog::logger>("ringmaster", std::make_shared<spdlog::sinks::stderr_sink_mt>());
    logger->set_pattern("ts=%Y-%m-%dT%H:%M:%S.%eZ level=%l %v", spdlog::pattern_time_type::utc);
    logger->flush_on(LogLevel::trace);  // logs are read live, and a crash must not eat them
    spdlog::set_default_logger(std::move(logger));
    return true;
  }();
  (void)once;
}

}  // namespace

absl::StatusOr<LogLevel> ParseLogLevel(std::string_view text, std::string_view source) {
  const std::string t = absl::AsciiStrToLower(absl::string_view(text.data(), text.size()));
  if (t == "warning") return LogLevel::warn;
  static constexpr std::pair<const char*, LogLevel> kLevels[] = {
      {"trace", LogLevel::trace}, {"debug", LogLevel::debug},       {"info", LogLevel::info}, {"warn", LogLevel::warn},
      {"error", LogLevel::err},   {"critical", LogLevel::critical}, {"off", LogLevel::off}};
  for (const auto& [name, level] : kLevels) {
    if (t == name) return level;
  }
  return absl::InvalidArgumentError(absl::StrCat(std::string(source), ": unknown log level '", std::string(text),
                                                 "' (one of trace, debug, info, warn, error, critical, off)"));
}

absl::StatusOr<LogLevel> ResolveLogLevel(std::string_view flag, const char* env) {
  if (!flag.empty()) return ParseLogLevel(flag, "--log-level");
  if (env != nullptr && *env != '\0') return ParseLogLevel(env, "RINGMASTER_LOG");
  return LogLevel::info;
}

absl::Status InitLogging(std::string_view flag) {
  RM_ASSIGN_OR_RETURN(auto level, ResolveLogLevel(flag, std::getenv("RINGMASTER_LOG")));
  InstallLogger();
  spdlog::set_level(level);
  return absl::OkStatus();
}

std::string FormatLogLine(std::string_view event, std::initializer_list<LogField> fields) {
  std::string out = "msg=";
  AppendValue(out, event);
  for (const LogField& f : fields) {
    out += ' ';
    out.append(f.key);
    out += '=';
    AppendValue(out, f.value);
  }
  return out;
}

void Log(LogLevel level, std::string_view event, std::initializer_list<LogField> fields) {
  InstallLogger();
  if (!spdlog::should_log(level)) return;
  spdlog::log(level, "{}", FormatLogLine(event, fields));
}

void LogIfError(const absl::Status& status, std::string_view event, std::initializer_list<LogField> fields) {
  if (status.ok()) return;
  InstallLogger();
  if (!spdlog::should_log(LogLevel::warn)) return;
  std::string line = FormatLogLine(event, fields);
  line += " error=";
  AppendValue(line, status.ToString());
  spdlog::log(LogLevel::warn, "{}", line);
}

}  // namespace ringmaster::common
