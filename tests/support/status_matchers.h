// Checks that a call failed the way it should, not just that it failed:
//   EXPECT_ERROR(ParseQuantity("-1", true), absl::StatusCode::kInvalidArgument, "negative");
//   ASSERT_ERROR(r, absl::StatusCode::kNotFound, "job 'x'");
// The first argument is an absl::Status or an absl::StatusOr<T> (evaluated
// once); the error must have exactly that code and a message containing the
// substring. On failure the message names the expression and the status it
// had. Header-only.
#ifndef RINGMASTER_TESTS_SUPPORT_STATUS_MATCHERS_H_
#define RINGMASTER_TESTS_SUPPORT_STATUS_MATCHERS_H_

#include <gtest/gtest.h>

#include "absl/strings/string_view.h"

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"

namespace ringmaster::testing {

inline const absl::Status& StatusOf(const absl::Status& s) { return s; }
template <typename T>
const absl::Status& StatusOf(const absl::StatusOr<T>& s) {
  return s.status();
}

template <typename S>
::testing::AssertionResult IsError(const char* expr, const char* /*code_expr*/,
                                   const char* /*substring_expr*/, const S& value,
                                   absl::StatusCode code, absl::string_view substring) {
  const absl::Status& s = StatusOf(value);
  if (s.code() == code && absl::StrContains(s.message(), substring)) {
    return ::testing::AssertionSuccess();
  }
  return ::testing::AssertionFailure()
         << expr << " is " << (s.ok() ? "OK" : s.ToString()) << "\n  want "
         << absl::StatusCodeToString(code) << " with \"" << substring << "\" in the message";
}

}  // namespace ringmaster::testing

#define EXPECT_ERROR(expr, code, substring) \
  EXPECT_PRED_FORMAT3(::ringmaster::testing::IsError, expr, code, substring)
#define ASSERT_ERROR(expr, code, substring) \
  ASSERT_PRED_FORMAT3(::ringmaster::testing::IsError, expr, code, substring)

#endif  // RINGMASTER_TESTS_SUPPORT_STATUS_MATCHERS_H_
