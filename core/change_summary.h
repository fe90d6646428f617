// Changepoints and changewindows of a scored kernel in the user's units of x: where the change
// is, with its Laplace standard deviation, how abrupt, and which kernels it separates. The
// report's sentence "the flow changes at about 1898 from … to …" reads this.
//
//   absl::StatusOr<std::vector<ChangeSummary>> changes = SummarizeChanges(data, score);
//   (*changes)[0].location, (*changes)[0].location_sd   // e.g. 1898.4, 1.1 (years)
#ifndef GPSEL_CORE_CHANGE_SUMMARY_H_
#define GPSEL_CORE_CHANGE_SUMMARY_H_

#include <optional>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/score.h"

namespace gpsel {

struct ChangeSummary {
  std::string label;          // "CP", "CW[1]", "CP#2" (the parameters' prefix)
  KernelExpr::Kind kind = KernelExpr::Kind::kChangePoint;
  int column = 0;             // the input column the change reads
  std::string first;          // CP: the kernel before; CW: outside the window (canonical text)
  std::string second;         // CP: the kernel after; CW: inside the window
  // In the user's units of x, at the MAP optimum (the MLL one when there is no MAP fit).
  double location = 0.0;      // ℓ: the change's middle (CW: the window's centre)
  double transition = 0.0;    // τ·range = 1/steepness: the change's half width
  double width = 0.0;         // CW: the window's width
  // Laplace standard deviations (delta method through softplus, from the MAP Hessian's inverse);
  // absent without a positive definite Laplace covariance.
  std::optional<double> location_sd;
  std::optional<double> width_sd;
  // The change lies inside the data's range (CP) / the window overlaps it (CW); else the fit
  // has put one operand over all of the data.
  bool inside_data = true;
};

// One entry per change node of `score`'s kernel, in parameter order. INVALID_ARGUMENT when
// `score` is not a score of a kernel on `data` (no fit, a parameter missing).
absl::StatusOr<std::vector<ChangeSummary>> SummarizeChanges(const Dataset& data,
                                                            const KernelScore& score);

}  // namespace gpsel

#endif  // GPSEL_CORE_CHANGE_SUMMARY_H_
