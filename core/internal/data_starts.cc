// Data-informed starting points: the rules of core/internal/data_starts.h applied leaf by leaf.
#include "gpsel/core/internal/data_starts.h"

#include <algorithm>
#include <cmath>
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
  std::vector<StartPoint> starts;
  for (const auto& [long_first, peak_index] : pairings) {
    Eigen::VectorXd full(static_cast<Eigen::Index>(parameters.size()));
    size_t index = 0;
    std::string periods;
    for (const LeafPlace& place : places) {
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
                                absl::StrFormat(", noise %.3g", noise_variance));
    starts.push_back(std::move(start));
  }
  return starts;
}

}  // namespace gpsel
