// The one switch between the exact GP and the sparse one (core/sparse_score.h): which a score,
// search or prediction uses, and m. Carried inside ScoreOptions (so score, search, predict, the
// RPCs and the jobs all see the same setting); the decision and the sparse run are in
// core/approx_score.h.
//
//   ApproxOptions approx;                      // exact unless asked
//   approx.mode = ApproxMode::kAuto;           // exact when the estimate is ≤ 60 s, else sparse
//   approx.inducing_points = 256;              // m fixed (0: grown until the bounds' gap is small)
#ifndef GPSEL_CORE_APPROX_H_
#define GPSEL_CORE_APPROX_H_

#include <cstdint>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/sparse_cost.h"

namespace gpsel {

enum class ApproxMode {
  kExact,   // the exact GP (O(n³)); the default
  kSparse,  // the VFE bound with Titsias' upper bound, every metric as an interval
  kAuto,    // exact when its time estimate is at most kAutoExactMaxSeconds, sparse otherwise
};

// "exact", "sparse", "auto".
std::string_view ApproxModeName(ApproxMode mode);
// "auto", "exact" or "sparse"; INVALID_ARGUMENT naming `field` otherwise.
absl::StatusOr<ApproxMode> ParseApproxMode(std::string_view text,
                                           std::string_view field = "approx");

// `auto` picks exact when the exact work's time estimate (core/time_estimate.h) is at most this.
inline constexpr double kAutoExactMaxSeconds = 60.0;
// The most points a sparse request may have (the exact path keeps DatasetLimits' 10⁴).
inline constexpr int64_t kSparseMaxPoints = 1000000;
// The most inducing points a request may ask for.
inline constexpr int kMaxInducingPoints = 16384;
// With m left to the data (inducing_points = 0), m grows from 32 by doubling up to this: beyond
// it one bound evaluation at n = 10⁴ costs seconds, and the gap on series with tiny noise stays
// wide however many points are added (core/sparse_gp.h, the jitter note).
inline constexpr int kDefaultMaxInducingPoints = 512;
// A search run sparse re-scores its best kernel exactly when the exact score's estimate is at
// most this (and n within the exact limit); otherwise the result says why not.
inline constexpr double kExactRescoreMaxSeconds = 600.0;

struct ApproxOptions {
  ApproxMode mode = ApproxMode::kExact;
  // m of the sparse model: 0 = chosen by the data (grown until UB − ELBO is within tolerance,
  // at most kDefaultMaxInducingPoints); M > 0 = exactly M (capped at n).
  int inducing_points = 0;
  // Bytes each sparse fit may hold (SparseFitOptions::memory_budget_bytes): m is capped where the
  // fit's estimated peak (core/sparse_cost.h SparseInducingCap) meets it, and the memory and time
  // estimates cost the fit at that same cap. The CLI keeps the default; gpsel-server sets it
  // from its per-request budget, --max-request-bytes, less what the request holds beside its
  // fits (ApplyRequestBudget, core/memory_estimate.h), both below and above the default, so that
  // the refusal and the fit agree (docs/scaling.md, "The memory budget"). Not on the wire.
  int64_t memory_budget_bytes = kSparseMemoryBudgetBytes;
  bool sparse_possible() const { return mode != ApproxMode::kExact; }
  // The largest m the sparse model of n points reaches: the M asked for, else the default cap;
  // never more than n. The one rule the fits, the estimates and predict share.
  int64_t MaxInducing(int64_t n) const {
    const int64_t cap = inducing_points > 0 ? inducing_points : kDefaultMaxInducingPoints;
    return cap < n ? cap : n;
  }
  // INVALID_ARGUMENT naming "inducing_points" outside [0, kMaxInducingPoints], or
  // "memory_budget_bytes" below 1.
  absl::Status Validate() const;
};

}  // namespace gpsel

#endif  // GPSEL_CORE_APPROX_H_
