// The box a fit's raw hyperparameters move in, scaled to the data (issue 27 item 4: no hidden
// bound decides a fit). FitOptions::raw_lower_bound / raw_upper_bound (core/fit.h) are the box
// of a parameter without units, and of every parameter on standardised y and x spanning at most
// 250 units; on data in other units the upper bound of a parameter with units follows them, so
// that a fit of y × 1e12 without standardisation, or of x × 1e9, ends where the fit of y or x
// does, moved by the change of variables.
#ifndef GPSEL_CORE_FIT_BOUNDS_H_
#define GPSEL_CORE_FIT_BOUNDS_H_

#include <Eigen/Dense>

#include "gpsel/core/fit.h"
#include "gpsel/core/gp_model.h"

namespace gpsel {

// The raw box of each free parameter of `model` (free-parameter order) under `options`: below,
// raw_lower_bound; above, the raw value whose natural value is B = softplus(raw_upper_bound)
// times the data's scale in the parameter's units:
//   noise, C.constant                  B · mean(y²)                    (y's units squared)
//   LIN.variance                       B · mean(y²) / mean(x²) over its column(s)
//   lengthscale (not PER's), period    max(B, 2 · range of x)          (x's units)
//   PER.lengthscale, RQ.alpha          B                               (no units)
// y and x as the model sees them (standardised / scaled, or not); a factor of at most 2 leaves
// B: on standardised y (mean(y²) = 1 up to n/(n−1)) and x spanning at most 250 units every bound
// is B, as it always was. A box narrowed below B = 1 (a caller pinning the parameters) is kept.
// `scale` is each parameter's natural upper bound over B (1 where it is B): the fit's stopping
// rule measures raw values and gradients in these units (r / scale, ∂f/∂r · scale), so that a
// fit of y × 1e12 stops where the fit of y does.
struct ParameterBounds {
  Eigen::VectorXd lower, upper, scale;
};
ParameterBounds FitParameterBounds(const GpModel& model, const FitOptions& options);

}  // namespace gpsel

#endif  // GPSEL_CORE_FIT_BOUNDS_H_
