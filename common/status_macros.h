// Propagating absl::Status without writing `if (!x.ok()) return x.status();`
// at every call:
//
//   RM_RETURN_IF_ERROR(CheckKeys(node, field, {...}));
//   RM_ASSIGN_OR_RETURN(auto count, ReadInt(node["count"], "count"));
//   RM_ASSIGN_OR_RETURN(args.pod, ObjectAt(root, "Pod", "Pod"));
//
// RM_ASSIGN_OR_RETURN's left side is a declaration or an lvalue; the value is
// moved out of the StatusOr. Both return the failed Status unchanged from the
// enclosing function (which returns absl::Status or absl::StatusOr<T>). Not
// for use where a bare `if` would take the expansion as its body without
// braces (RM_ASSIGN_OR_RETURN expands to several statements).
//
// Where a failed Status is a bug (a Statement that cannot fail did):
//
//   RM_CHECK_OK(stmt.Commit());  // a reservation alone cannot fail: a bug
//
// prints "file:line: CHECK failed: stmt.Commit(): INTERNAL: ..." to stderr
// and aborts; an OK Status does nothing.
#ifndef RINGMASTER_COMMON_STATUS_MACROS_H_
#define RINGMASTER_COMMON_STATUS_MACROS_H_

#include <cstdio>
#include <cstdlib>
#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define RM_RETURN_IF_ERROR(expr)                                   \
  do {                                                             \
    if (::absl::Status rm_status_ = (expr); !rm_status_.ok()) {    \
      return rm_status_;                                           \
    }                                                              \
  } while (0)

#define RM_STATUS_CONCAT_INNER_(a, b) a##b
#define RM_STATUS_CONCAT_(a, b) RM_STATUS_CONCAT_INNER_(a, b)
#define RM_ASSIGN_OR_RETURN_IMPL_(tmp, lhs, expr) \
  auto tmp = (expr);                              \
  if (!tmp.ok()) return std::move(tmp).status();  \
  lhs = *std::move(tmp)
#define RM_ASSIGN_OR_RETURN(lhs, expr) \
  RM_ASSIGN_OR_RETURN_IMPL_(RM_STATUS_CONCAT_(rm_status_or_, __LINE__), lhs, expr)

#define RM_CHECK_OK(expr)                                                                   \
  do {                                                                                      \
    if (const ::absl::Status rm_check_status_ = (expr); !rm_check_status_.ok()) {           \
      ::ringmaster::common::status_internal::CheckOkFailed(__FILE__, __LINE__, #expr,       \
                                                           rm_check_status_);               \
    }                                                                                       \
  } while (0)

namespace ringmaster::common::status_internal {

// RM_CHECK_OK's failure: the message, then abort.
[[noreturn]] inline void CheckOkFailed(const char* file, int line, const char* expr, const absl::Status& status) {
  std::fprintf(stderr, "%s:%d: CHECK failed: %s: %s\n", file, line, expr, status.ToString().c_str());
  std::fflush(stderr);
  std::abort();
}

}  // namespace ringmaster::common::status_internal

#endif  // RINGMASTER_COMMON_STATUS_MACROS_H_
