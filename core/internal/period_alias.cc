// Period aliases on a sampling grid; see period_alias.h for the maths.
#include "gpsel/core/internal/period_alias.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "gpsel/core/hyperparameters.h"

namespace gpsel {

// Largest distance of a value from its grid point, in grid steps: monthly dates written in years
// to six decimals are up to 6e-6 of a step off; a visible fraction of a step is no grid. Off by
// this much, an alias's phase at a lag of m steps differs by 2π·m·1e-4·(fΔ), and the fit checks
// the likelihood there anyway.
constexpr double kGridTolerance = 1e-4;

std::optional<double> GridStep(const Eigen::VectorXd& column) {
  std::vector<double> values(column.data(), column.data() + column.size());
  std::sort(values.begin(), values.end());
  const double x_min = values.empty() ? 0.0 : values.front();
  const double range = values.empty() ? 0.0 : values.back() - x_min;
  if (!(range > 0.0) || !std::isfinite(range)) return std::nullopt;
  // Gaps below this are repeated values (several points at one x), not a finer grid.
  const double same = 1e-12 * std::max(range, std::abs(x_min));
  double step = range;
  for (size_t i = 1; i < values.size(); ++i) {
    const double gap = values[i] - values[i - 1];
    if (gap > same) step = std::min(step, gap);
  }
  // The smallest gap carries the rounding of two values; the whole range spread over its count
  // of steps carries that of two values over many steps (monthly dates written to six decimals).
  step = range / std::round(range / step);
  for (double v : values) {
    const double k = (v - x_min) / step;
    if (std::abs(k - std::round(k)) > kGridTolerance) return std::nullopt;
  }
  return step;
}

double ResolvedPeriod(double period, double grid_step) {
  if (!(period > 0.0) || !(grid_step > 0.0) || period >= 2.0 * grid_step) return period;
  const double frequency = 1.0 / period;
  const double folded = std::abs(frequency - std::round(frequency * grid_step) / grid_step);
  if (!(folded > 0.0)) return period;
  return 1.0 / folded;
}

namespace {

// The input column a PER period reads: its pinned column, or column 0 of one-column data; −1
// for any other parameter or an unpinned PER on several columns (there the lag is a distance
// over all columns, not a multiple of one grid step).
int PeriodColumn(const HyperparameterInfo& parameter, int columns) {
  if (!parameter.IsPeriod()) return -1;
  if (parameter.active_dim >= 0) return parameter.active_dim < columns ? parameter.active_dim : -1;
  return columns == 1 ? 0 : -1;
}

}  // namespace

std::optional<Eigen::VectorXd> ResolvePeriodAliases(const GpModel& model,
                                                    const Eigen::VectorXd& free_raw) {
  const std::vector<HyperparameterInfo> parameters = model.free_parameters();
  const Eigen::MatrixXd& x = model.x();
  std::vector<std::optional<double>> steps(x.cols());
  std::vector<bool> stepped(x.cols(), false);
  Eigen::VectorXd resolved = free_raw;
  bool moved = false;
  for (int k = 0; k < free_raw.size() && k < static_cast<int>(parameters.size()); ++k) {
    const int column = PeriodColumn(parameters[k], static_cast<int>(x.cols()));
    if (column < 0) continue;
    if (!stepped[column]) {
      steps[column] = GridStep(x.col(column));
      stepped[column] = true;
    }
    if (!steps[column]) continue;
    const double period = Softplus(free_raw(k));
    const double alias = ResolvedPeriod(period, *steps[column]);
    if (alias > period * (1.0 + 1e-12)) {
      resolved(k) = InverseSoftplus(alias);
      moved = true;
    }
  }
  if (!moved) return std::nullopt;
  return resolved;
}

}  // namespace gpsel
