// Hyperparameters in raw space: softplus transform, the paper's default Normal priors
// (the paper's appendix, Table 5), user overrides and fixed parameters.
//
// Every hyperparameter is a raw real r with natural value softplus(r) = log(1 + e^r); the noise
// variance is 1e-4 + softplus(r_noise). Optimisation, priors and Hessians live in raw space.
#ifndef GPSEL_CORE_HYPERPARAMETERS_H_
#define GPSEL_CORE_HYPERPARAMETERS_H_

#include <map>
#include <optional>
#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/kernel_expr.h"

namespace gpsel {

inline constexpr double kNoiseFloor = 1e-4;
inline constexpr const char* kNoiseName = "noise";

// Numerically safe softplus and friends.
double Softplus(double raw);
double InverseSoftplus(double value);  // value > 0
double Sigmoid(double raw);            // d softplus / d raw

struct NormalPrior {
  double mean = 0.0;
  double sd = 1.0;
};

// The paper's defaults (appendix table). MAT12/MAT52 borrow MAT32's lengthscale prior.
NormalPrior DefaultPrior(BaseKernel base, int parameter_index);
NormalPrior DefaultNoisePrior();

// Parameters of a changepoint (CP) or changewindow (CW) node, all in units of the range of the
// input column it reads over the training data (x_min..x_max; core/internal/kernel_evaluator.h):
//   "location"   = 1 + (ℓ − x_min)/(x_max − x_min): 1 at the first input, 2 at the last, down
//                  to 0 one range before the data (so the change can leave the data on either
//                  side, see core/internal/nested_embedding.h);
//   "transition" = τ, the change's width as a fraction of the range: σ(x) =
//                  ½(1 + tanh(s (x − ℓ))) with steepness s = 1/(τ (x_max − x_min));
//   "width"      = w (CW only), the window's width as a fraction of the range.
// The names in the numerics' order: CP {location, transition}, CW {location, transition, width}.
const std::vector<std::string>& ChangeParameterNames(KernelExpr::Kind kind);
// Their Normal priors on the raw values, fractions of the range so that they scale with x's
// range whatever its units (the Automatic Statistician draws the location uniformly over the
// range and the log-steepness and log-width relative to it; these are the Normal counterparts):
//   location   mean 1.19, sd 0.40: median 1.5 (the middle of the data), 95 % 0.92 to 2.10;
//   transition mean −3.9, sd 1.5: median τ = 0.02 (2 % of the range), 95 % 0.0011 to 0.38;
//   width      mean −1.5, sd 1.0: median w = 0.20, 95 % 0.032 to 1.07.
NormalPrior DefaultChangePrior(KernelExpr::Kind kind, int parameter_index);

// User settings, keyed by full parameter name ("SE.lengthscale", "PER.period", "noise", ...).
struct HyperparameterSettings {
  std::map<std::string, NormalPrior> prior_overrides;
  // Natural-scale values (e.g. "PER.period" -> 1.0); the parameter is then not fitted, has no
  // prior term, and does not count in u. "noise" takes the noise variance (> 1e-4).
  std::map<std::string, double> fixed_values;
  absl::Status Validate() const;  // sd > 0, all finite, fixed values > 0
};

struct HyperparameterInfo {
  std::string name;           // e.g. "SE.lengthscale", "SE#2.lengthscale", "LIN[1].variance"
  NormalPrior prior;
  bool fixed = false;
  double fixed_raw = 0.0;     // raw value when fixed
  // Where it sits, so that code need not parse `name`: its leaf's base kernel and input column
  // (−1 = every column), and its own name in the leaf ("period"); unset/−1/empty for the noise.
  std::optional<BaseKernel> base;
  int active_dim = -1;
  std::string parameter;
  // A changepoint's or changewindow's own parameter ("CP.location"): its node's kind (kBase
  // otherwise) and, in active_dim, the column its σ reads (−1 = column 0).
  KernelExpr::Kind change = KernelExpr::Kind::kBase;
  bool IsChange() const { return change != KernelExpr::Kind::kBase; }
  bool IsPeriod() const { return base == BaseKernel::kPER && parameter == "period"; }
};

// Names and priors for every parameter of `kernel` (canonical leaf order; a changepoint's or
// changewindow's own parameters follow those of its two operands, e.g. for CP(C*SE, LIN):
// C.constant, SE.lengthscale, LIN.variance, CP.location, CP.transition) followed by "noise",
// with `settings` applied. Unknown names in the settings are INVALID_ARGUMENT listing the valid ones.
absl::StatusOr<std::vector<HyperparameterInfo>> DescribeHyperparameters(
    const KernelExpr& kernel, const HyperparameterSettings& settings);

// Leaf labels in canonical leaf order: "SE", "LIN[1]", and "SE#1", "SE#2" when a label repeats.
std::vector<std::string> LeafLabels(const KernelExpr& kernel);
// Labels of the changepoint and changewindow nodes in the same (post-)order: "CP", "CW[1]", and
// "CP#1", "CP#2" when a label repeats.
std::vector<std::string> ChangeLabels(const KernelExpr& kernel);

}  // namespace gpsel

#endif  // GPSEL_CORE_HYPERPARAMETERS_H_
