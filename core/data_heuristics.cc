// Input geometry, the generalised Lomb–Scargle periodogram, a smooth's noise level and the auto
// x scale (see core/data_heuristics.h for the definitions).
#include "gpsel/core/data_heuristics.h"

#include <algorithm>
#include <cmath>
#include <numeric>

#include "absl/status/status.h"
#include "absl/strings/str_format.h"

namespace gpsel {

namespace {

constexpr double kTwoPi = 6.283185307179586476925;
constexpr int kMaxExactPairs = 2000;
constexpr int kMaxFrequencies = 20000;
constexpr double kOversampling = 5.0;
constexpr double kSignificantFalseAlarm = 0.01;

double Median(std::vector<double>& values) {
  if (values.empty()) return 0.0;
  const size_t mid = values.size() / 2;
  std::nth_element(values.begin(), values.begin() + mid, values.end());
  double median = values[mid];
  if (values.size() % 2 == 0) {
    median = 0.5 * (median + *std::max_element(values.begin(), values.begin() + mid));
  }
  return median;
}

std::vector<double> Sorted(const Eigen::VectorXd& x) {
  std::vector<double> v(x.data(), x.data() + x.size());
  std::sort(v.begin(), v.end());
  return v;
}

// y minus its least-squares quadratic in x (x centred and scaled for conditioning).
Eigen::VectorXd RemoveQuadratic(const Eigen::VectorXd& x, const Eigen::VectorXd& y) {
  const double centre = x.mean();
  const double scale = std::max((x.array() - centre).abs().maxCoeff(), 1e-300);
  Eigen::MatrixXd design(x.size(), 3);
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    const double t = (x(i) - centre) / scale;
    design(i, 0) = 1.0;
    design(i, 1) = t;
    design(i, 2) = t * t;
  }
  const Eigen::VectorXd coefficients = design.colPivHouseholderQr().solve(y);
  return y - design * coefficients;
}

// Sums of the generalised Lomb–Scargle power for one frequency from cos/sin of 2πf·x_i.
double PowerFromTrig(const Eigen::VectorXd& y, const Eigen::ArrayXd& c, const Eigen::ArrayXd& s,
                     double y_mean, double yy) {
  const double n = static_cast<double>(y.size());
  const double cm = c.sum() / n, sm = s.sum() / n;
  const double yc = (y.array() * c).sum() / n - y_mean * cm;
  const double ys = (y.array() * s).sum() / n - y_mean * sm;
  const double cc = (c * c).sum() / n - cm * cm;
  const double ss = (s * s).sum() / n - sm * sm;
  const double cs = (c * s).sum() / n - cm * sm;
  const double d = cc * ss - cs * cs;
  if (!(yy > 0) || !(d > 1e-14 * std::max(cc * ss, 1e-300))) return 0.0;
  const double power = (ss * yc * yc + cc * ys * ys - 2.0 * cs * yc * ys) / (yy * d);
  return std::clamp(power, 0.0, 1.0);
}

}  // namespace

InputColumnGeometry DescribeInputColumn(const Eigen::VectorXd& x) {
  InputColumnGeometry g;
  if (x.size() == 0) return g;
  const std::vector<double> sorted = Sorted(x);
  g.range = sorted.back() - sorted.front();
  std::vector<double> gaps;
  for (size_t i = 1; i < sorted.size(); ++i) {
    if (sorted[i] > sorted[i - 1]) gaps.push_back(sorted[i] - sorted[i - 1]);
  }
  g.median_spacing = Median(gaps);
  // Pairwise distances over at most kMaxExactPairs points, evenly strided through x's order.
  std::vector<double> points;
  const size_t n = sorted.size();
  if (n <= static_cast<size_t>(kMaxExactPairs)) {
    points = sorted;
  } else {
    for (int k = 0; k < kMaxExactPairs; ++k) {
      points.push_back(sorted[static_cast<size_t>(k) * (n - 1) / (kMaxExactPairs - 1)]);
    }
  }
  std::vector<double> distances;
  distances.reserve(points.size() * (points.size() - 1) / 2);
  for (size_t i = 0; i < points.size(); ++i) {
    for (size_t j = i + 1; j < points.size(); ++j) distances.push_back(points[j] - points[i]);
  }
  g.median_pairwise_distance = Median(distances);
  return g;
}

double LombScarglePower(const Eigen::VectorXd& x, const Eigen::VectorXd& y, double frequency) {
  const Eigen::ArrayXd phase = kTwoPi * frequency * x.array();
  const double y_mean = y.mean();
  const double yy = (y.array() - y_mean).square().mean();
  return PowerFromTrig(y, phase.cos(), phase.sin(), y_mean, yy);
}

std::vector<PeriodogramPeak> LombScarglePeaks(const Eigen::VectorXd& x, const Eigen::VectorXd& y,
                                              int max_peaks) {
  std::vector<PeriodogramPeak> peaks;
  const Eigen::Index n = x.size();
  if (n < 8 || y.size() != n || max_peaks < 1) return peaks;
  const InputColumnGeometry g = DescribeInputColumn(x);
  {
    std::vector<double> sorted = Sorted(x);
    if (std::unique(sorted.begin(), sorted.end()) - sorted.begin() < 3) return peaks;
  }
  if (!(g.range > 0) || !(g.median_spacing > 0)) return peaks;
  const Eigen::VectorXd residual = RemoveQuadratic(x, y);
  const double y_mean = residual.mean();
  const double yy = (residual.array() - y_mean).square().mean();
  if (!(yy > 0)) return peaks;

  // Grid in units of 1/range: f_k = (2 + k·step)/range.
  const double f_min = 2.0 / g.range;
  const double f_max = 0.5 / g.median_spacing;
  if (!(f_max > f_min)) return peaks;
  double step = 1.0 / kOversampling;  // in units of 1/range
  int count = static_cast<int>(std::floor((f_max - f_min) * g.range / step)) + 1;
  if (count > kMaxFrequencies) {
    step *= static_cast<double>(count) / kMaxFrequencies;
    count = kMaxFrequencies;
  }
  if (count < 3) return peaks;
  const double df = step / g.range;
  // cos/sin of 2πf·x_i advanced by the angle-addition recurrence along the grid, renormalised
  // every 64 steps so that rounding cannot accumulate.
  const Eigen::ArrayXd x_array = x.array();
  Eigen::ArrayXd c = (kTwoPi * f_min * x_array).cos(), s = (kTwoPi * f_min * x_array).sin();
  const Eigen::ArrayXd dc = (kTwoPi * df * x_array).cos(), ds = (kTwoPi * df * x_array).sin();
  std::vector<double> power(static_cast<size_t>(count));
  for (int k = 0; k < count; ++k) {
    if (k > 0) {
      if (k % 64 == 0) {
        const Eigen::ArrayXd phase = kTwoPi * (f_min + k * df) * x_array;
        c = phase.cos();
        s = phase.sin();
      } else {
        const Eigen::ArrayXd next_c = c * dc - s * ds;
        s = s * dc + c * ds;
        c = next_c;
      }
    }
    power[static_cast<size_t>(k)] = PowerFromTrig(residual, c, s, y_mean, yy);
  }

  // Local maxima, highest first.
  std::vector<int> maxima;
  for (int k = 0; k < count; ++k) {
    const double left = k > 0 ? power[k - 1] : -1.0;
    const double right = k + 1 < count ? power[k + 1] : -1.0;
    if (power[k] > left && power[k] >= right && power[k] > 0) maxima.push_back(k);
  }
  std::stable_sort(maxima.begin(), maxima.end(),
                   [&](int a, int b) { return power[a] > power[b]; });
  const double independent = std::max(1.0, (f_max - f_min) * g.range);
  for (int k : maxima) {
    if (static_cast<int>(peaks.size()) >= max_peaks) break;
    // Golden-section search for the maximum between the grid neighbours.
    double lo = f_min + std::max(k - 1, 0) * df, hi = f_min + std::min(k + 1, count - 1) * df;
    const double ratio = 0.5 * (std::sqrt(5.0) - 1.0);
    auto at = [&](double f) { return LombScarglePower(x, residual, f); };
    double a = hi - ratio * (hi - lo), b = lo + ratio * (hi - lo);
    double pa = at(a), pb = at(b);
    for (int it = 0; it < 40; ++it) {
      if (pa >= pb) {
        hi = b;
        b = a;
        pb = pa;
        a = hi - ratio * (hi - lo);
        pa = at(a);
      } else {
        lo = a;
        a = b;
        pa = pb;
        b = lo + ratio * (hi - lo);
        pb = at(b);
      }
    }
    double frequency = 0.5 * (lo + hi);
    double best = at(frequency);
    if (power[k] > best) {  // the grid point itself was higher (flat top): keep it
      frequency = f_min + k * df;
      best = power[k];
    }
    const double period = 1.0 / frequency;
    const bool near_stronger = std::any_of(peaks.begin(), peaks.end(), [&](const auto& p) {
      return std::abs(period - p.period) < 0.1 * p.period;
    });
    if (near_stronger) continue;
    PeriodogramPeak peak;
    peak.period = period;
    peak.power = best;
    // Single-frequency tail (1 − p)^((n−3)/2), then Bonferroni-like over `independent`
    // frequencies: FAP = 1 − (1 − tail)^M, computed in logs so that tiny tails survive.
    const double log_tail = 0.5 * (static_cast<double>(n) - 3.0) * std::log1p(-std::min(best, 1.0 - 1e-16));
    const double tail = std::exp(log_tail);
    peak.false_alarm_probability =
        tail < 1e-8 ? std::min(1.0, independent * tail) : -std::expm1(independent * std::log1p(-tail));
    peaks.push_back(peak);
  }
  return peaks;
}

double NoiseVarianceFromSmooth(const Eigen::VectorXd& x, const Eigen::VectorXd& y) {
  const Eigen::Index n = y.size();
  const double variance = n > 0 ? (y.array() - y.mean()).square().mean() : 0.0;
  if (n < 3 || x.size() != n) return variance > 0 ? variance : 1.0;
  std::vector<Eigen::Index> order(static_cast<size_t>(n));
  std::iota(order.begin(), order.end(), 0);
  std::stable_sort(order.begin(), order.end(), [&](Eigen::Index a, Eigen::Index b) {
    return x(a) < x(b) || (x(a) == x(b) && y(a) < y(b));
  });
  double sum = 0.0;
  for (Eigen::Index i = 1; i + 1 < n; ++i) {
    const double x0 = x(order[i - 1]), x1 = x(order[i]), x2 = x(order[i + 1]);
    double a = 0.5, b = 0.5;
    if (x2 > x0) {
      a = (x2 - x1) / (x2 - x0);
      b = (x1 - x0) / (x2 - x0);
    }
    const double e = a * y(order[i - 1]) + b * y(order[i + 1]) - y(order[i]);
    sum += e * e / (1.0 + a * a + b * b);
  }
  const double noise = sum / static_cast<double>(n - 2);
  return std::max(noise, 1e-12 * std::max(variance, 1e-300));
}

absl::StatusOr<XScaleChoice> AutoXScale(const Eigen::MatrixXd& x, const Eigen::VectorXd& y) {
  if (!x.allFinite() || !y.allFinite()) {
    return absl::InvalidArgumentError("scale_x: x and y must be finite");
  }
  if (x.cols() == 0) return absl::InvalidArgumentError("scale_x: x has no column");
  double log_sum = 0.0;
  for (Eigen::Index c = 0; c < x.cols(); ++c) {
    const double range = x.col(c).maxCoeff() - x.col(c).minCoeff();
    if (!(range > 0)) {
      return absl::InvalidArgumentError(
          absl::StrFormat("scale_x: auto needs x column %d to vary (it is constant)", c));
    }
    log_sum += std::log(range / 10.0);
  }
  XScaleChoice choice;
  if (x.cols() > 1) {
    for (Eigen::Index c = 0; c < x.cols(); ++c) {
      choice.column_factors.push_back((x.col(c).maxCoeff() - x.col(c).minCoeff()) / 10.0);
    }
  }
  if (x.cols() == 1) {
    const std::vector<PeriodogramPeak> peaks = LombScarglePeaks(x.col(0), y, 1);
    if (!peaks.empty() && peaks[0].false_alarm_probability < kSignificantFalseAlarm) {
      choice.factor = peaks[0].period;
      choice.reason = absl::StrFormat(
          "the strongest period of y, %.6g (false-alarm probability %.2g), becomes 1",
          peaks[0].period, peaks[0].false_alarm_probability);
      return choice;
    }
    choice.factor = std::exp(log_sum);
    choice.reason = "range/10 (no significant period in y)";
    return choice;
  }
  choice.factor = std::exp(log_sum / static_cast<double>(x.cols()));
  choice.reason = "geometric mean of the columns' range/10";
  return choice;
}

}  // namespace gpsel
