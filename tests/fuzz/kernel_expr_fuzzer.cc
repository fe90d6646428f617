// libFuzzer target: the kernel expression grammar of core/kernel_expr.h (ParseKernel,
// ParseBaseKernelName) on arbitrary text, the way request kernels and CLI arguments reach it.
// Invariants: OK or INVALID_ARGUMENT only; an accepted expression is canonical and within the
// limits it was parsed with; its printed form (ToString) parses back to the same expression and
// prints identically, also under the server's default limits (server/validation/validation.h), because the
// service stores and returns the printed form (server/service/service.cc, SubmitEvidence).
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>

#include "absl/strings/str_cat.h"
#include "gpsel/core/kernel_expr.h"
#include "tests/fuzz/fuzz_check.h"

namespace {

using gpsel::KernelExpr;

void CheckBaseKernelName(std::string_view text) {
  absl::StatusOr<gpsel::BaseKernel> base = gpsel::ParseBaseKernelName(text);
  GPSEL_FUZZ_CHECK_OK_OR_INVALID(base.status());
  if (!base.ok()) return;
  const std::string_view name = gpsel::BaseKernelName(*base);
  absl::StatusOr<gpsel::BaseKernel> again = gpsel::ParseBaseKernelName(name);
  GPSEL_FUZZ_CHECK(again.ok() && *again == *base, std::string(name));
  GPSEL_FUZZ_CHECK(!gpsel::BaseKernelParameterNames(*base).empty(), std::string(name));
}

void CheckKernel(std::string_view text, const gpsel::ParseLimits& limits) {
  absl::StatusOr<KernelExpr> kernel = gpsel::ParseKernel(text, limits);
  GPSEL_FUZZ_CHECK_OK_OR_INVALID(kernel.status());
  if (!kernel.ok()) return;
  const std::string printed = gpsel::ToString(*kernel);
  GPSEL_FUZZ_CHECK(gpsel::Canonicalize(*kernel) == *kernel, printed);
  GPSEL_FUZZ_CHECK(gpsel::NumBaseKernels(*kernel) <= limits.max_base_kernels, printed);
  GPSEL_FUZZ_CHECK(gpsel::Depth(*kernel) <= limits.max_depth, printed);
  GPSEL_FUZZ_CHECK(gpsel::MaxActiveDim(*kernel) >= -1, printed);
  absl::StatusOr<KernelExpr> again = gpsel::ParseKernel(printed, limits);
  GPSEL_FUZZ_CHECK(again.ok(), absl::StrCat(printed, ": ", again.status().ToString()));
  GPSEL_FUZZ_CHECK(*again == *kernel, printed);
  GPSEL_FUZZ_CHECK(gpsel::ToString(*again) == printed, printed);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  CheckBaseKernelName(text);
  CheckKernel(text, gpsel::ParseLimits{});
  // Tight limits as well, so inputs that run into each limit stay interesting to the fuzzer.
  gpsel::ParseLimits tight;
  tight.max_length = 40;
  tight.max_depth = 3;
  tight.max_base_kernels = 4;
  CheckKernel(text, tight);
  return 0;
}
