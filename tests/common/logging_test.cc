// Tests for common/logging.h: level parsing (flag over environment over the
// default), bad levels, and the logfmt line.
#include "common/logging.h"
#include "tests/support/status_matchers.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

namespace ringmaster::common {
namespace {

using ::testing::HasSubstr;

TEST(Logging, ParsesEveryLevelInAnyCase) {
  EXPECT_EQ(*ParseLogLevel("trace"), LogLevel::trace);
  EXPECT_EQ(*ParseLogLevel("DEBUG"), LogLevel::debug);
  EXPECT_EQ(*ParseLogLevel("Info"), LogLevel::info);
  EXPECT_EQ(*ParseLogLevel("warn"), LogLevel::warn);
  EXPECT_EQ(*ParseLogLevel("warning"), LogLevel::warn);
  EXPECT_EQ(*ParseLogLevel("error"), LogLevel::err);
  EXPECT_EQ(*ParseLogLevel("critical"), LogLevel::critical);
  EXPECT_EQ(*ParseLogLevel("off"), LogLevel::off);
}

TEST(Logging, BadLevelSaysWhereAndListsTheLevels) {
  auto flag = ResolveLogLevel("verbose", nullptr);
  ASSERT_ERROR(flag, absl::StatusCode::kInvalidArgument, "--log-level: unknown log level 'verbose' (one of trace");
  EXPECT_THAT(flag.status().message(), HasSubstr("--log-level: unknown log level 'verbose'"));
  EXPECT_THAT(flag.status().message(), HasSubstr("trace, debug, info, warn, error, critical, off"));
  auto env = ResolveLogLevel("", "loud");
  ASSERT_ERROR(env, absl::StatusCode::kInvalidArgument, "RINGMASTER_LOG: unknown log level 'loud' (one of trace");
  EXPECT_THAT(env.status().message(), HasSubstr("RINGMASTER_LOG: unknown log level 'loud'"));
  EXPECT_ERROR(ParseLogLevel(""), absl::StatusCode::kInvalidArgument, "log level: unknown log level '' (one of trace, debug, info");
}

TEST(Logging, FlagWinsOverEnvironmentWhichWinsOverInfo) {
  EXPECT_EQ(*ResolveLogLevel("error", "debug"), LogLevel::err);
  EXPECT_EQ(*ResolveLogLevel("", "debug"), LogLevel::debug);
  EXPECT_EQ(*ResolveLogLevel("", ""), LogLevel::info);
  EXPECT_EQ(*ResolveLogLevel("", nullptr), LogLevel::info);
  // A bad environment does not matter when the flag is given.
  EXPECT_EQ(*ResolveLogLevel("warn", "nonsense"), LogLevel::warn);
}

TEST(Logging, InitLoggingSetsTheLevelAndRejectsABadOne) {
  ASSERT_TRUE(InitLogging("debug").ok());
  EXPECT_EQ(spdlog::get_level(), LogLevel::debug);
  EXPECT_ERROR(InitLogging("chatty"), absl::StatusCode::kInvalidArgument, "--log-level: unknown log level 'chatty' (one of trace");
  EXPECT_EQ(spdlog::get_level(), LogLevel::debug);  // unchanged
  ASSERT_TRUE(InitLogging("error").ok());
  EXPECT_EQ(spdlog::get_level(), LogLevel::err);
}

TEST(Logging, FieldsAreKeyValueAndQuotedWhenNeeded) {
  EXPECT_EQ(FormatLogLine("bind", {{"job", "llm-pretrain"}, {"task", 3}, {"node", "dgx-7"}}),
            "msg=bind job=llm-pretrain task=3 node=dgx-7");
  EXPECT_EQ(FormatLogLine("gang waits", {{"reason", "needs 16 \"GPUs\""}, {"why", ""}, {"k", "a=b"}}),
            "msg=\"gang waits\" reason=\"needs 16 \\\"GPUs\\\"\" why=\"\" k=\"a=b\"");
  EXPECT_EQ(FormatLogLine("x", {{"v", "line\nbreak\x01"}}), "msg=x v=\"line\\nbreak\\x01\"");
}

}  // namespace
}  // namespace ringmaster::common
