// Period aliases on a sampling grid: which of a periodic kernel's equally likely periods the data
// resolve, so that a fit reports that one.
//
// PER reads the inputs only through sin²(π d / p) at the lags d between data points. When a
// column's values all lie on a grid x_min + kΔ (k integer: yearly, monthly, daily series), every
// lag is d = mΔ, and with f = 1/p
//   sin²(π m Δ f) = sin²(π m Δ (j/Δ ± f))   for every integer j,
// so the periods 1/|j/Δ ± f| give the same kernel matrix, the same likelihood and the same
// gradient norm: a fit can end at any of them (yearly sunspots: 10.33, 1.107 and 0.912 years).
// Only the one with f ≤ 1/(2Δ), the period of at least two grid steps, is seen by the data; the
// others are its reflections (Nyquist).
#ifndef GPSEL_CORE_PERIOD_ALIAS_H_
#define GPSEL_CORE_PERIOD_ALIAS_H_

#include <optional>

#include <Eigen/Dense>

#include "gpsel/core/gp_model.h"

namespace gpsel {

// The grid step Δ of `column` when every value is x_min + kΔ for an integer k (to 1e-4 of Δ,
// so that dates rounded to a few decimals count), with Δ the smallest gap between distinct
// values; nullopt for fewer than two distinct values or values off such a grid.
std::optional<double> GridStep(const Eigen::VectorXd& column);

// The alias 1/|f − j/Δ| (j = round(fΔ), f = 1/period) that the grid resolves: `period` itself
// when it already spans at least two steps, or when f is a multiple of 1/Δ (then PER is constant
// on the grid and no period is resolved).
double ResolvedPeriod(double period, double grid_step);

// `free_raw` with every free PER period moved to its resolved alias, for periods that read one
// input column (pinned, or the only one) whose values lie on a grid; nullopt when no period
// moves. The likelihood there equals the likelihood at `free_raw` up to rounding when the values
// lie on the grid exactly, and nearly so within its tolerance: callers evaluate it before taking
// it. The prior differs.
std::optional<Eigen::VectorXd> ResolvePeriodAliases(const GpModel& model,
                                                    const Eigen::VectorXd& free_raw);

}  // namespace gpsel

#endif  // GPSEL_CORE_PERIOD_ALIAS_H_
