// ApproxMode's names and ApproxOptions' checks (see approx.h).
#include "gpsel/core/approx.h"

#include <string>

#include "absl/strings/ascii.h"
#include "absl/strings/str_cat.h"

namespace gpsel {

std::string_view ApproxModeName(ApproxMode mode) {
  switch (mode) {
    case ApproxMode::kExact: return "exact";
    case ApproxMode::kSparse: return "sparse";
    case ApproxMode::kAuto: return "auto";
  }
  return "exact";
}

absl::StatusOr<ApproxMode> ParseApproxMode(std::string_view text, std::string_view field) {
  const std::string lower = absl::AsciiStrToLower(std::string(text));
  for (ApproxMode mode : {ApproxMode::kAuto, ApproxMode::kExact, ApproxMode::kSparse}) {
    if (lower == ApproxModeName(mode)) return mode;
  }
  return absl::InvalidArgumentError(absl::StrCat(
      std::string(field), ": '", std::string(text), "' is not 'auto', 'exact' or 'sparse'"));
}

absl::Status ApproxOptions::Validate() const {
  if (inducing_points < 0 || inducing_points > kMaxInducingPoints) {
    return absl::InvalidArgumentError(absl::StrCat(
        "inducing_points: ", inducing_points, " is outside [0, ", kMaxInducingPoints,
        "] (0 = chosen by the data)"));
  }
  if (memory_budget_bytes < 1) {
    return absl::InvalidArgumentError(
        absl::StrCat("memory_budget_bytes: ", memory_budget_bytes, " must be at least 1"));
  }
  return absl::OkStatus();
}

}  // namespace gpsel
