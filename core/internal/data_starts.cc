// Data-informed starting points: the rules of core/internal/data_starts.h applied leaf by leaf.
#include "gpsel/core/internal/data_starts.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <map>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpsel/core/data_heuristics.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/kernel_expr.h"

namespace gpsel {

namespace {

// Where a leaf sits in the canonical tree (leaves in the order of DescribeHyperparameters).
struct LeafPlace {
  const KernelExpr* leaf = nullptr;
  int summand = 0;                 // index of its top-level summand (0 when the root is no sum)
  bool next_to_periodic = false;   // a PER factor in the same product (and not itself PER)
};

void CollectPlaces(const KernelExpr& expr, int summand, bool next_to_periodic,
                   std::vector<LeafPlace>* places) {
  if (expr.is_base()) {
    places->push_back({&expr, summand, next_to_periodic && expr.base != BaseKernel::kPER});
    return;
  }
  bool has_periodic = next_to_periodic;
  if (expr.kind == KernelExpr::Kind::kProduct) {
    for (const KernelExpr& factor : expr.operands) {
      has_periodic = has_periodic || (factor.is_base() && factor.base == BaseKernel::kPER);
    }
  }
  for (const KernelExpr& operand : expr.operands) {
    CollectPlaces(operand, summand, has_periodic, places);
  }
}

std::vector<LeafPlace> Places(const KernelExpr& kernel, int* num_summands) {
  std::vector<LeafPlace> places;
  if (kernel.kind == KernelExpr::Kind::kSum) {
    *num_summands = static_cast<int>(kernel.operands.size());
    for (size_t i = 0; i < kernel.operands.size(); ++i) {
      CollectPlaces(kernel.operands[i], static_cast<int>(i), false, &places);
    }
  } else {
    *num_summands = 1;
    CollectPlaces(kernel, 0, false, &places);
  }
  return places;
}

bool IsStationaryWithLengthscale(BaseKernel base) {
  return base == BaseKernel::kSE || base == BaseKernel::kMAT12 || base == BaseKernel::kMAT32 ||
         base == BaseKernel::kMAT52 || base == BaseKernel::kRQ || base == BaseKernel::kPER;
}

// Lengthscale range of the inputs a leaf reads: [ℓ_short, ℓ_long] (see the header). For a kernel
// over several columns, distances add in squares, so the per-column scales do too.
struct ScaleRange {
  double short_scale = 1.0;
  double long_scale = 1.0;
};

ScaleRange InputScales(const Eigen::MatrixXd& x, int active_dim) {
  double long_squared = 0.0, spacing = 0.0;
  for (Eigen::Index c = 0; c < x.cols(); ++c) {
    if (active_dim >= 0 && c != active_dim) continue;
    const InputColumnGeometry g = DescribeInputColumn(x.col(c));
    long_squared += g.median_pairwise_distance * g.median_pairwise_distance;
    spacing = std::max(spacing, g.median_spacing);
  }
  ScaleRange range;
  range.long_scale = std::sqrt(long_squared);
  range.short_scale = 4.0 * spacing;
  if (!(range.long_scale > 0)) range.long_scale = 1.0;
  if (!(range.short_scale > 0) || range.short_scale > range.long_scale) {
    range.short_scale = range.long_scale;
  }
  return range;
}

// Raw value of a positive natural value (clamped away from 0 so that the raw value is finite).
double RawOf(double value) { return InverseSoftplus(std::max(value, 1e-12)); }

// Starts of a changepoint's or changewindow's own parameters from the column its σ reads, in the
// units of core/hyperparameters.h (fractions of the column's range).
struct ChangeStart {
  double location = 1.5;
  double transition = 0.02;
  double width = 0.2;
  std::string origin;
};

// The coarse scan of core/internal/data_starts.h on one column: with y sorted by x and prefix sums, a split
// after point i (at least kMinSegment points on each side) scores the between-segment sum of
// squares n_L n_R/n (ȳ_R − ȳ_L)², the statistic of the largest jump in mean; a window [i, j)
// scores n_in n_out/n (ȳ_in − ȳ_out)². Windows are scanned on at most kWindowGrid candidate
// boundaries (O(grid²)), splits at every point (O(n)).
ChangeStart ScanForChange(const Eigen::VectorXd& column, const Eigen::VectorXd& y,
                          KernelExpr::Kind kind) {
  constexpr int kMinSegment = 3;
  constexpr int kWindowGrid = 80;
  ChangeStart start;
  const int n = static_cast<int>(column.size());
  std::vector<int> order(n);
  for (int i = 0; i < n; ++i) order[i] = i;
  std::sort(order.begin(), order.end(), [&](int a, int b) { return column(a) < column(b); });
  const double lo = n > 0 ? column(order.front()) : 0.0;
  const double hi = n > 0 ? column(order.back()) : 1.0;
  const double range = hi > lo ? hi - lo : 1.0;
  std::vector<double> prefix(n + 1, 0.0);
  for (int i = 0; i < n; ++i) prefix[i + 1] = prefix[i] + y(order[i]);
  // Abrupt by default: one median spacing of the inputs.
  std::vector<double> gaps;
  for (int i = 1; i < n; ++i) gaps.push_back(column(order[i]) - column(order[i - 1]));
  if (!gaps.empty()) {
    std::nth_element(gaps.begin(), gaps.begin() + gaps.size() / 2, gaps.end());
    start.transition = std::clamp(gaps[gaps.size() / 2] / range, 1e-4, 0.2);
  }
  // Position between sorted points i − 1 and i, in the location's units.
  auto boundary = [&](int i) {
    return 1.0 + (0.5 * (column(order[i - 1]) + column(order[i])) - lo) / range;
  };
  auto between = [&](int begin, int end) {  // n_in n_out / n (ȳ_in − ȳ_out)² of [begin, end)
    const double n_in = end - begin, n_out = n - n_in;
    const double sum_in = prefix[end] - prefix[begin];
    const double mean_in = sum_in / n_in, mean_out = (prefix[n] - sum_in) / n_out;
    return n_in * n_out / n * (mean_in - mean_out) * (mean_in - mean_out);
  };
  if (n < 2 * kMinSegment + 1) {
    start.origin = "too few points to scan";
    return start;
  }
  if (kind == KernelExpr::Kind::kChangePoint) {
    // Two segments, each a straight line with its own noise: the split minimising
    // n_L log(RSS_L/n_L) + n_R log(RSS_R/n_R) (the Gaussian log likelihood of the two fits, up
    // to constants). A jump in mean, a turn of the trend and a change of roughness (a wave that
    // stops: the line leaves the wave in RSS) all show in it, where the largest jump in mean
    // sees only the first (bench/RESULTS.md, "Changepoint and changewindow kernels").
    std::vector<double> sx(n + 1, 0.0), sxx(n + 1, 0.0), sxy(n + 1, 0.0), syy(n + 1, 0.0);
    for (int i = 0; i < n; ++i) {
      const double xi = (column(order[i]) - lo) / range, yi = y(order[i]);
      sx[i + 1] = sx[i] + xi;
      sxx[i + 1] = sxx[i] + xi * xi;
      sxy[i + 1] = sxy[i] + xi * yi;
      syy[i + 1] = syy[i] + yi * yi;
    }
    auto line_rss = [&](int begin, int end) {  // residual sum of squares of a line on [b, e)
      const double m = end - begin;
      const double mx = (sx[end] - sx[begin]) / m, my = (prefix[end] - prefix[begin]) / m;
      const double cxx = (sxx[end] - sxx[begin]) - m * mx * mx;
      const double cxy = (sxy[end] - sxy[begin]) - m * mx * my;
      const double cyy = (syy[end] - syy[begin]) - m * my * my;
      const double rss = cxx > 1e-300 ? cyy - cxy * cxy / cxx : cyy;
      return std::max(rss, 1e-12 * std::max(cyy, 1e-300) + 1e-300);
    };
    constexpr int kMinLineSegment = 4;
    double best = std::numeric_limits<double>::infinity();
    for (int i = kMinLineSegment; i <= n - kMinLineSegment; ++i) {
      const double cost = i * std::log(line_rss(0, i) / i) +
                          (n - i) * std::log(line_rss(i, n) / (n - i));
      if (cost < best) {
        best = cost;
        start.location = boundary(i);
      }
    }
    if (!std::isfinite(best)) {  // too few points for lines: the largest jump in mean
      double largest = -1.0;
      for (int i = kMinSegment; i <= n - kMinSegment; ++i) {
        if (between(0, i) > largest) {
          largest = between(0, i);
          start.location = boundary(i);
        }
      }
    }
    start.origin = absl::StrFormat("change of level, trend or roughness at %.4g",
                                   lo + (start.location - 1) * range);
    return start;
  }
  std::vector<int> grid;
  const int steps = std::min(kWindowGrid, n - 2 * kMinSegment);
  for (int s = 0; s <= steps; ++s) {
    grid.push_back(kMinSegment + static_cast<int>(std::lround(
                                     static_cast<double>(s) * (n - 2 * kMinSegment) / steps)));
  }
  grid.erase(std::unique(grid.begin(), grid.end()), grid.end());
  double best = -1.0;
  for (size_t a = 0; a < grid.size(); ++a) {
    for (size_t b = a + 1; b < grid.size(); ++b) {
      if (grid[b] - grid[a] < kMinSegment) continue;
      const double score = between(grid[a], grid[b]);
      if (score > best) {
        best = score;
        const double first = boundary(grid[a]), last = boundary(grid[b]);
        start.location = 0.5 * (first + last);
        start.width = last - first;
      }
    }
  }
  start.origin = absl::StrFormat("largest window in mean at %.4g, width %.3g",
                                 lo + (start.location - 1) * range, start.width * range);
  return start;
}

}  // namespace

std::vector<StartPoint> DataInformedStarts(const GpModel& model) {
  const Eigen::MatrixXd& x = model.x();
  const Eigen::VectorXd& y = model.y();
  int num_summands = 1;
  const std::vector<LeafPlace> places = Places(model.kernel(), &num_summands);
  const double y_variance = std::max((y.array() - y.mean()).square().mean(), 1e-12);
  const bool one_column = x.cols() == 1;
  const double noise_variance =
      one_column ? NoiseVarianceFromSmooth(x.col(0), y) : 0.1 * y_variance;

  // Periodogram peaks per input column a PER leaf reads (computed once per column).
  std::map<int, std::vector<PeriodogramPeak>> peaks_by_column;
  auto peaks_for = [&](int active_dim) -> const std::vector<PeriodogramPeak>& {
    const int column = active_dim >= 0 ? active_dim : (one_column ? 0 : -1);
    auto it = peaks_by_column.find(column);
    if (it == peaks_by_column.end()) {
      std::vector<PeriodogramPeak> peaks;
      if (column >= 0) peaks = LombScarglePeaks(x.col(column), y, 2);
      it = peaks_by_column.emplace(column, std::move(peaks)).first;
    }
    return it->second;
  };

  const std::vector<HyperparameterInfo>& parameters = model.parameters();
  // (ladder, periodogram peak) of each start: the two of every model, then, with a period, the
  // other two pairings (see the header).
  struct Pairing {
    bool long_first;
    size_t peak;
  };
  std::vector<Pairing> pairings = {{true, 0}, {false, 1}};
  if (ContainsBaseKernel(model.kernel(), BaseKernel::kPER)) {
    pairings.push_back({false, 0});
    pairings.push_back({true, 1});
  }
  // Changepoint and changewindow nodes' starts, in the order of their parameters.
  std::vector<ChangeStart> change_starts;
  for (size_t k = 0; k < parameters.size(); ++k) {
    if (parameters[k].IsChange() && parameters[k].parameter == "location") {
      const int column = std::max(parameters[k].active_dim, 0);
      change_starts.push_back(ScanForChange(x.col(column), y, parameters[k].change));
    }
  }
  std::vector<StartPoint> starts;
  for (const auto& [long_first, peak_index] : pairings) {
    Eigen::VectorXd full(static_cast<Eigen::Index>(parameters.size()));
    size_t index = 0;
    size_t change_index = 0;
    std::string periods, changes;
    // A change node's own parameters follow its operands' (post-order): fill them in wherever
    // the walk over the leaves meets them.
    auto fill_changes = [&]() {
      while (index < parameters.size() && parameters[index].IsChange()) {
        const ChangeStart& change = change_starts[change_index];
        const std::string& name = parameters[index].parameter;
        double value = change.location;
        if (name == "transition") value = change.transition;
        if (name == "width") value = change.width;
        full(static_cast<Eigen::Index>(index)) = RawOf(value);
        ++index;
        if (index == parameters.size() || !parameters[index].IsChange() ||
            parameters[index].parameter == "location") {
          absl::StrAppend(&changes, changes.empty() ? "" : "; ", change.origin);
          ++change_index;
        }
      }
    };
    for (const LeafPlace& place : places) {
      fill_changes();
      const KernelExpr& leaf = *place.leaf;
      const ScaleRange scales = InputScales(x, leaf.active_dim);
      // Position on the ladder from the first scale (summand 0) to the other end.
      const double t = num_summands > 1 ? static_cast<double>(place.summand) / (num_summands - 1)
                                        : 0.0;
      const double from = long_first ? scales.long_scale : scales.short_scale;
      const double to = long_first ? scales.short_scale : scales.long_scale;
      const double ladder = from * std::pow(to / from, t);
      const auto& names = BaseKernelParameterNames(leaf.base);
      for (size_t p = 0; p < names.size(); ++p, ++index) {
        const std::string& name = names[p];
        double raw = parameters[index].prior.mean;
        if (name == "lengthscale" && leaf.base == BaseKernel::kPER) {
          raw = RawOf(1.0);
        } else if (name == "lengthscale" && IsStationaryWithLengthscale(leaf.base)) {
          raw = RawOf(place.next_to_periodic ? scales.long_scale : ladder);
        } else if (name == "period") {
          const std::vector<PeriodogramPeak>& peaks = peaks_for(leaf.active_dim);
          if (!peaks.empty()) {
            const PeriodogramPeak& peak = peaks[std::min(peak_index, peaks.size() - 1)];
            raw = RawOf(peak.period);
            absl::StrAppend(&periods, periods.empty() ? "" : "/",
                            absl::StrFormat("%.4g", peak.period));
          }
        } else if (name == "alpha") {
          raw = RawOf(1.0);
        } else if (name == "constant") {
          raw = RawOf(y_variance / num_summands);
        } else if (name == "variance") {  // LIN: σ²·mean(x·x) ≈ its share of var(y)
          double mean_square = 0.0;
          for (Eigen::Index c = 0; c < x.cols(); ++c) {
            if (leaf.active_dim < 0 || c == leaf.active_dim) {
              mean_square += x.col(c).squaredNorm() / static_cast<double>(x.rows());
            }
          }
          raw = RawOf(y_variance / num_summands / std::max(mean_square, 1e-12));
        }
        full(static_cast<Eigen::Index>(index)) = raw;
      }
    }
    fill_changes();
    full(static_cast<Eigen::Index>(index)) = RawOf(std::max(noise_variance - kNoiseFloor, 1e-8));

    StartPoint start;
    start.kind = StartKind::kDataInformed;
    start.raw.resize(model.num_free());
    Eigen::Index free = 0;
    for (size_t k = 0; k < parameters.size(); ++k) {
      if (!parameters[k].fixed) start.raw(free++) = full(static_cast<Eigen::Index>(k));
    }
    // With a single periodogram peak a pairing can repeat an earlier start exactly.
    const bool repeated = std::any_of(starts.begin(), starts.end(), [&](const StartPoint& other) {
      return other.raw == start.raw;
    });
    if (repeated) continue;
    start.origin = absl::StrCat(long_first ? "long" : "short", " lengthscales",
                                periods.empty() ? "" : ", periods ", periods,
                                changes.empty() ? "" : ", ", changes,
                                absl::StrFormat(", noise %.3g", noise_variance));
    starts.push_back(std::move(start));
  }
  return starts;
}

}  // namespace gpsel
