// Nested kernels: whether one kernel expression contains another, and the smaller kernel's
// optimum embedded into the larger one's parameters with the extra part switched off, so that the
// larger kernel's fit can start at (nearly) the smaller one's likelihood. A kernel that contains
// another can then never report a lower maximum likelihood than it, up to what the bounds leave.
//
// Switching off, with the optimiser's box [raw_lower, raw_upper] on raw values (softplus(−30) =
// 9.4e-14, softplus(500) = 500):
//   - an extra SUMMAND → 0: a product with a C factor gets C on the lower bound (a LIN factor's
//     variance when there is no C), its other factors their prior means (they multiply ~0); a
//     sum switches off each summand; a bare C or LIN goes to the lower bound. Exact up to a
//     variance of 9.4e-14. A bare stationary kernel (SE, MAT*, RQ, PER: unit variance) cannot
//     go to 0: its lengthscale goes to the upper bound, making it ≈ a constant 1 (approximate).
//   - an extra FACTOR → 1: C = 1 exactly; SE, MAT*, RQ and PER with the lengthscale on the upper
//     bound (k = 1 − O(d²/500²): exact only in the limit); a product switches each factor to 1;
//     a sum keeps one summand at 1 and switches the others to 0. A LIN factor cannot be 1
//     (approximate: its variance stays at the prior mean).
//   - a CHANGEPOINT or CHANGEWINDOW CP(A, B) / CW(A, B) reduces to A (or B) exactly: the kernel
//     sits in that operand, the other at its prior means, and the change's weights give it all
//     of the data (transition 1 % of the range; CP: location three ranges after the data for A,
//     on the lower bound, a range before it, for B; CW: the window after the data for A, ten
//     ranges wide over it for B), where tanh rounds to ±1. As a factor it is switched to 1 the
//     same way through A; as a summand, to 0 with both operands. A change node of the same kind
//     and column is matched operand by operand, its own values copied.
// Matched leaves (same base kernel, same input column) take the smaller kernel's values; when
// several matchings exist, the one with the fewest approximate, then limit, then switched-off
// leaves wins (ties: the first in canonical operand order). The noise is copied.
#ifndef GPSEL_CORE_NESTED_EMBEDDING_H_
#define GPSEL_CORE_NESTED_EMBEDDING_H_

#include <map>
#include <string>

#include "absl/status/statusor.h"
#include "gpsel/core/kernel_expr.h"

namespace gpsel {

enum class EmbeddingQuality {
  kExact,        // every extra part switched off at bound values (residue ≤ 9.4e-14 variance)
  kLimit,        // some factor → 1 only as a lengthscale → ∞ (upper bound used)
  kApproximate,  // some extra part cannot be switched off (bare stationary summand, LIN factor)
};

struct NestedEmbedding {
  // Raw value of every parameter of the larger kernel by name (DescribeHyperparameters names,
  // "noise" included).
  std::map<std::string, double> raw;
  EmbeddingQuality quality = EmbeddingQuality::kExact;
  std::string description;  // e.g. "C*SE into C#1*SE#1; off: C#2*PER*SE#2 (→0)"
};

// True when `super` reduces to `sub` (exactly or in the limit of a lengthscale → ∞) by setting
// some summands to zero and some factors to one, recursively; `sub` == `super` included. A base
// kernel replaced by another, or a part that cannot be switched off, is not containment.
bool KernelContains(const KernelExpr& super, const KernelExpr& sub);

// The embedding of `sub`'s raw values (`sub_raw`: every parameter of sub by
// DescribeHyperparameters name, noise included) into `super`'s parameters, possibly approximate
// (see quality). NOT_FOUND when sub's leaves cannot be matched into super at all (a base kernel
// super does not have); INVALID_ARGUMENT when sub_raw lacks a name.
absl::StatusOr<NestedEmbedding> EmbedNestedOptimum(const KernelExpr& sub,
                                                   const std::map<std::string, double>& sub_raw,
                                                   const KernelExpr& super, double raw_lower,
                                                   double raw_upper);

}  // namespace gpsel

#endif  // GPSEL_CORE_NESTED_EMBEDDING_H_
