// Invariant checks for the libFuzzer targets of tests/fuzz: a failed check prints what broke and
// aborts, which libFuzzer reports as a crash and saves the input as a reproducer.
#ifndef GPSEL_TESTS_FUZZ_FUZZ_CHECK_H_
#define GPSEL_TESTS_FUZZ_FUZZ_CHECK_H_

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/status/status.h"

namespace gpsel::fuzz {

[[noreturn]] inline void FailCheck(const char* file, int line, const char* condition,
                                   const std::string& detail) {
  std::fprintf(stderr, "%s:%d: fuzz invariant failed: %s\n  %s\n", file, line, condition,
               detail.c_str());
  std::abort();
}

// Rejections of user input must be INVALID_ARGUMENT: anything else (INTERNAL, OK with garbage,
// a crash) would reach a client as a server fault.
inline std::string StatusText(const absl::Status& status) { return status.ToString(); }

}  // namespace gpsel::fuzz

// GPSEL_FUZZ_CHECK(condition, detail): `detail` (a std::string expression) is evaluated only
// when the check fails.
#define GPSEL_FUZZ_CHECK(condition, detail)                                               \
  do {                                                                                    \
    if (!(condition)) ::gpsel::fuzz::FailCheck(__FILE__, __LINE__, #condition, (detail)); \
  } while (false)

// The status is OK or INVALID_ARGUMENT.
#define GPSEL_FUZZ_CHECK_OK_OR_INVALID(status)                       \
  GPSEL_FUZZ_CHECK((status).ok() || absl::IsInvalidArgument(status), \
                   ::gpsel::fuzz::StatusText(status))

#endif  // GPSEL_TESTS_FUZZ_FUZZ_CHECK_H_
