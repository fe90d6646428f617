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
  bool IsPeriod() const { return base == BaseKernel::kPER && parameter == "period"; }
};

// Names and priors for every parameter of `kernel` (canonical leaf order) followed by "noise",
// with `settings` applied. Unknown names in the settings are INVALID_ARGUMENT listing the valid ones.
absl::StatusOr<std::vector<HyperparameterInfo>> DescribeHyperparameters(
    const KernelExpr& kernel, const HyperparameterSettings& settings);

// Leaf labels in canonical leaf order: "SE", "LIN[1]", and "SE#1", "SE#2" when a label repeats.
std::vector<std::string> LeafLabels(const KernelExpr& kernel);

}  // namespace gpsel

#endif  // GPSEL_CORE_HYPERPARAMETERS_H_
