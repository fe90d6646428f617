// The count of field violations that a bounded INVALID_ARGUMENT (proto/bridge/convert.h InvalidFields:
// at most 20 listed) left out, carried through code that re-wraps violations — the validator
// adding a parser's violations to its own, the service prefixing field names — so that the
// client's count of the rest stays right.
#ifndef GPSEL_BRIDGE_UNLISTED_VIOLATIONS_H_
#define GPSEL_BRIDGE_UNLISTED_VIOLATIONS_H_

#include <cstdint>
#include <string>
#include <utility>
#include <vector>

#include "absl/status/status.h"

namespace gpsel::bridge {

// InvalidFields with `unlisted` violations that were found but already left out, added to the
// count of the rest.
absl::Status InvalidFieldsWithUnlisted(
    const std::vector<std::pair<std::string, std::string>>& violations, int64_t unlisted);

// N of a status whose last violation is InvalidFields' "request: N more violations not listed"
// (0 otherwise). Who re-wraps violations drops that entry and passes N on as `unlisted`.
int64_t UnlistedViolations(const absl::Status& status);

}  // namespace gpsel::bridge

#endif  // GPSEL_BRIDGE_UNLISTED_VIOLATIONS_H_
