// Waits written in tests, stretched for slow builds (issue #14): GPSEL_TEST_TIMEOUT_SCALE in the
// environment (set by scripts/sanitize.sh, and by ctest from the CMake option of the same name,
// tests/CMakeLists.txt) multiplies every bound a test waits for something to happen: a job to
// finish, a worker to come free, a call to be answered. A sanitized binary on a loaded machine
// runs several times slower, and its failures on those waits said nothing about the sanitizer.
//
// Only waits for an expected event scale. Deadlines a test expects to expire (a 1 s client
// deadline on a call that takes minutes) and leases whose lapse is the behaviour under test do
// not: stretching them would change what the test checks. Without the variable the scale is 1,
// so the normal build asserts exactly the bounds written in the tests.
#ifndef GPSEL_TESTS_TEST_TIMEOUT_H_
#define GPSEL_TESTS_TEST_TIMEOUT_H_

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <optional>

#include "absl/time/time.h"

namespace gpsel::testing {

// The scale that `text` (the variable's value) asks for: absent or empty is 1; otherwise a finite
// number ≥ 1 and nothing else. Anything else is nullopt (a scale below 1 would shorten the
// bounds the normal build asserts).
inline std::optional<double> ParseTimeoutScale(const char* text) {
  if (text == nullptr || *text == '\0') return 1.0;
  char* end = nullptr;
  const double scale = std::strtod(text, &end);
  if (end == text || *end != '\0' || !std::isfinite(scale) || scale < 1.0) return std::nullopt;
  return scale;
}

// GPSEL_TEST_TIMEOUT_SCALE, read once. A malformed value ends the test program: silently
// falling back to 1 would bring back the timing failures the variable was set to avoid.
inline double TimeoutScale() {
  static const double scale = [] {
    const char* text = std::getenv("GPSEL_TEST_TIMEOUT_SCALE");
    const std::optional<double> parsed = ParseTimeoutScale(text);
    if (!parsed.has_value()) {
      std::fprintf(stderr, "GPSEL_TEST_TIMEOUT_SCALE=\"%s\" is not a number >= 1\n", text);
      std::abort();
    }
    return *parsed;
  }();
  return scale;
}

// A wait of `d` in the normal build, `d` × the scale in a slow one.
inline absl::Duration Scaled(absl::Duration d) { return d * TimeoutScale(); }
inline double ScaledSeconds(double seconds) { return seconds * TimeoutScale(); }

}  // namespace gpsel::testing

#endif  // GPSEL_TESTS_TEST_TIMEOUT_H_
