// GoogleMock matchers for absl::Status and absl::StatusOr, which Debian 12's Abseil (20220623)
// does not ship: EXPECT_THAT(result, StatusIs(absl::StatusCode::kInvalidArgument)) and
// StatusIs(code, HasSubstr("field")) match a Status or a StatusOr<T> by code (and message);
// IsOk() matches an OK one. A failure prints the whole status.
#ifndef GPSEL_TESTS_STATUS_MATCHERS_H_
#define GPSEL_TESTS_STATUS_MATCHERS_H_

#include <gmock/gmock.h>

#include <ostream>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpsel::status_matchers {

inline const absl::Status& GetStatus(const absl::Status& status) { return status; }
template <typename T>
const absl::Status& GetStatus(const absl::StatusOr<T>& status_or) {
  return status_or.status();
}

MATCHER_P2(StatusIsImpl, code, message_matcher,
           "status code " + ::testing::PrintToString(absl::StatusCodeToString(code))) {
  const absl::Status& status = GetStatus(arg);
  *result_listener << "whose status is " << status;
  return status.code() == code &&
         ::testing::Matches(message_matcher)(std::string(status.message()));
}

// StatusIs(code) or StatusIs(code, message matcher): the code, and the message when given.
inline auto StatusIs(absl::StatusCode code) { return StatusIsImpl(code, ::testing::_); }
template <typename MessageMatcher>
auto StatusIs(absl::StatusCode code, MessageMatcher message) {
  return StatusIsImpl(code, message);
}

MATCHER(IsOk, "is OK") {
  const absl::Status& status = GetStatus(arg);
  *result_listener << "whose status is " << status;
  return status.ok();
}

}  // namespace gpsel::status_matchers

#endif  // GPSEL_TESTS_STATUS_MATCHERS_H_
