// What the data says about its own scales, before any fit: the geometry of an input column, the
// periodogram of y, the noise level left by a local smooth, and the factor --scale-x auto divides
// x by. Data-informed starts (core/internal/data_starts.h) and x scaling (core/score.h) are made of these.
#ifndef GPSEL_CORE_DATA_HEURISTICS_H_
#define GPSEL_CORE_DATA_HEURISTICS_H_

#include <string>
#include <vector>

#include <Eigen/Dense>

#include "absl/status/statusor.h"

namespace gpsel {

// Geometry of one input column: what lengthscale starts are made of.
struct InputColumnGeometry {
  double range = 0.0;                     // max − min
  double median_spacing = 0.0;            // median gap between consecutive distinct values
  // Median |x_i − x_j| over pairs i < j; exact up to 2,000 points, beyond that over an evenly
  // strided subsample of 2,000 (deterministic).
  double median_pairwise_distance = 0.0;
};
InputColumnGeometry DescribeInputColumn(const Eigen::VectorXd& x);

// The generalised (floating-mean) Lomb–Scargle power of y at `frequency` (cycles per unit of
// x), Zechmeister & Kürster's normalisation: the fraction of y's variance that a least-squares
// fit of a·cos(2πfx) + b·sin(2πfx) + c removes, in [0, 1]. y is used as given.
double LombScarglePower(const Eigen::VectorXd& x, const Eigen::VectorXd& y, double frequency);

struct PeriodogramPeak {
  double period = 0.0;                   // in the units of x
  double power = 0.0;                    // LombScarglePower of the detrended y, in [0, 1]
  // Chance that pure Gaussian noise gives a peak this high anywhere on the grid:
  // 1 − (1 − (1 − p)^((n−3)/2))^M with M = (f_max − f_min)·range independent frequencies
  // (Zechmeister & Kürster's single-frequency tail, Bonferroni over the grid).
  double false_alarm_probability = 1.0;
};
// Peaks of the periodogram of y after removing a least-squares quadratic in x (a trend is no
// cycle), on frequencies from 2/range (two full cycles in the data) to 1/(2·median spacing) in
// steps of 1/(5·range) (at most 20,000 of them; coarser beyond), each refined by a golden-section
// search between its grid neighbours. At most `max_peaks`, highest first, skipping a peak within
// 10 % in period of a stronger one. Empty when n < 8 or x has fewer than 3 distinct values. Every
// frequency is a multiple of 1/range, so periods scale exactly with x.
std::vector<PeriodogramPeak> LombScarglePeaks(const Eigen::VectorXd& x, const Eigen::VectorXd& y,
                                              int max_peaks);

// Noise variance of y from the Gasser–Sargent–Engel pseudo-residuals: each interior point (in
// sorted x) against the straight line through its two neighbours, e_i = a·y_{i−1} + b·y_{i+1} −
// y_i, scaled by 1/(1 + a² + b²) so that each has the noise variance when the signal is locally
// linear; tied x give a = b = ½. At least 1e-12·var(y); var(y) (or 1) for n < 3.
double NoiseVarianceFromSmooth(const Eigen::VectorXd& x, const Eigen::VectorXd& y);

// The factor s that --scale-x auto divides x by. One column: the strongest period of y when its
// false-alarm probability is below 1 % (the PER.period prior is centred near 1, so the dominant
// cycle lands on it), else range/10 (the SE lengthscale prior's central 95 % then spans about
// range/500 to range/3). Several columns: the geometric mean of each column's range/10 (one
// factor for all, since a LIN kernel over all columns is expressible in the user's units only
// with a common factor), and in column_factors each column's own range/10, which ScaleInputs
// (core/score.h) uses instead when every x-dependent parameter belongs to one column (pinned
// kernels, BASE[*]). Homogeneous: AutoXScale(c·x, y) = c·AutoXScale(x, y), up to the
// golden-section refinement of a peak's flat top (about 1e-9 relative). INVALID_ARGUMENT
// for a constant column or a non-finite value.
struct XScaleChoice {
  double factor = 1.0;
  std::string reason;
  std::vector<double> column_factors;  // several columns: column c's range/10; else empty
};
absl::StatusOr<XScaleChoice> AutoXScale(const Eigen::MatrixXd& x, const Eigen::VectorXd& y);

}  // namespace gpsel

#endif  // GPSEL_CORE_DATA_HEURISTICS_H_
