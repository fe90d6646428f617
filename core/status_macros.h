// Early-return helpers for absl::Status and absl::StatusOr, which Debian 12's Abseil (20220623)
// does not ship: GPSEL_RETURN_IF_ERROR(expr) returns a non-OK Status from the enclosing function;
// GPSEL_ASSIGN_OR_RETURN(lhs, expr) assigns the value of an OK StatusOr to lhs (a declaration or
// an lvalue) and returns its Status otherwise. The enclosing function returns absl::Status or
// any absl::StatusOr<T>. Prefixed so that an installed consumer's own macros of the common names
// never collide. Used by every layer that links core (server/store, which knows no core, keeps
// its checks written out).
#ifndef GPSEL_CORE_STATUS_MACROS_H_
#define GPSEL_CORE_STATUS_MACROS_H_

#include <utility>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

#define GPSEL_RETURN_IF_ERROR(expr)                                           \
  do {                                                                        \
    if (::absl::Status gpsel_return_if_error_ = (expr);                       \
        !gpsel_return_if_error_.ok()) {                                       \
      return gpsel_return_if_error_;                                          \
    }                                                                         \
  } while (false)

#define GPSEL_STATUS_MACROS_CONCAT_INNER_(a, b) a##b
#define GPSEL_STATUS_MACROS_CONCAT_(a, b) GPSEL_STATUS_MACROS_CONCAT_INNER_(a, b)

#define GPSEL_ASSIGN_OR_RETURN(lhs, expr)                                                   \
  GPSEL_ASSIGN_OR_RETURN_IMPL_(GPSEL_STATUS_MACROS_CONCAT_(gpsel_statusor_, __LINE__), lhs, \
                               expr)
#define GPSEL_ASSIGN_OR_RETURN_IMPL_(statusor, lhs, expr) \
  auto statusor = (expr);                                 \
  if (!statusor.ok()) return std::move(statusor).status(); \
  lhs = *std::move(statusor)

#endif  // GPSEL_CORE_STATUS_MACROS_H_
