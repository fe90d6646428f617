// Softplus transform, the paper's default priors and the naming of hyperparameters.
#include "gpsel/core/hyperparameters.h"

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"

namespace gpsel {

double Softplus(double raw) {
  // log(1 + e^r) without overflow for large r and without loss for very negative r.
  if (raw > 35.0) return raw;
  if (raw < -35.0) return std::exp(raw);
  return std::log1p(std::exp(raw));
}

double InverseSoftplus(double value) {
  // r = log(e^v − 1) = v + log(1 − e^{−v}).
  if (value > 35.0) return value;
  return value + std::log(-std::expm1(-value));
}

double Sigmoid(double raw) {
  if (raw >= 0) return 1.0 / (1.0 + std::exp(-raw));
  const double e = std::exp(raw);
  return e / (1.0 + e);
}

NormalPrior DefaultPrior(BaseKernel base, int parameter_index) {
  // Paper appendix: Normal priors on the raw values, (mean, sd).
  switch (base) {
    case BaseKernel::kSE:
      return {-0.212, 1.89};
    case BaseKernel::kMAT12:
    case BaseKernel::kMAT32:
    case BaseKernel::kMAT52:
      return {0.8, 2.15};
    case BaseKernel::kPER:
      return parameter_index == 0 ? NormalPrior{0.78, 2.29} : NormalPrior{0.65, 1.0};
    case BaseKernel::kRQ:
      return parameter_index == 0 ? NormalPrior{-0.05, 1.94} : NormalPrior{1.88, 3.1};
    case BaseKernel::kLIN:
      return {-0.8, 1.0};
    case BaseKernel::kConst:
      return {-1.63, 2.26};
  }
  return {0.0, 1.0};
}

NormalPrior DefaultNoisePrior() { return {-3.52, 3.58}; }

absl::Status HyperparameterSettings::Validate() const {
  for (const auto& [name, prior] : prior_overrides) {
    if (!std::isfinite(prior.mean) || !std::isfinite(prior.sd) || prior.sd <= 0) {
      return absl::InvalidArgumentError(absl::StrCat(
          "prior for '", name, "': mean must be finite and sd finite and > 0"));
    }
  }
  for (const auto& [name, value] : fixed_values) {
    if (!std::isfinite(value) || value <= 0) {
      return absl::InvalidArgumentError(
          absl::StrCat("fixed value for '", name, "' must be finite and > 0"));
    }
    if (name == kNoiseName && value <= kNoiseFloor) {
      return absl::InvalidArgumentError(
          absl::StrCat("fixed noise variance must exceed the floor ", kNoiseFloor));
    }
  }
  return absl::OkStatus();
}

namespace {
void CollectLeaves(const KernelExpr& expr, std::vector<const KernelExpr*>* leaves) {
  if (expr.is_base()) {
    leaves->push_back(&expr);
    return;
  }
  for (const KernelExpr& operand : expr.operands) CollectLeaves(operand, leaves);
}

std::string BaseLabel(const KernelExpr& leaf) {
  std::string label(BaseKernelName(leaf.base));
  if (leaf.active_dim >= 0) absl::StrAppend(&label, "[", leaf.active_dim, "]");
  return label;
}
}  // namespace

std::vector<std::string> LeafLabels(const KernelExpr& kernel) {
  std::vector<const KernelExpr*> leaves;
  CollectLeaves(kernel, &leaves);
  std::map<std::string, int> total;
  for (const KernelExpr* leaf : leaves) ++total[BaseLabel(*leaf)];
  std::map<std::string, int> seen;
  std::vector<std::string> labels;
  for (const KernelExpr* leaf : leaves) {
    std::string label = BaseLabel(*leaf);
    if (total[label] > 1) absl::StrAppend(&label, "#", ++seen[label]);
    labels.push_back(label);
  }
  return labels;
}

absl::StatusOr<std::vector<HyperparameterInfo>> DescribeHyperparameters(
    const KernelExpr& kernel, const HyperparameterSettings& settings) {
  if (absl::Status s = settings.Validate(); !s.ok()) return s;
  std::vector<const KernelExpr*> leaves;
  CollectLeaves(kernel, &leaves);
  const std::vector<std::string> labels = LeafLabels(kernel);
  std::vector<HyperparameterInfo> params;
  for (size_t i = 0; i < leaves.size(); ++i) {
    const auto& names = BaseKernelParameterNames(leaves[i]->base);
    for (size_t p = 0; p < names.size(); ++p) {
      HyperparameterInfo info;
      info.name = absl::StrCat(labels[i], ".", names[p]);
      info.prior = DefaultPrior(leaves[i]->base, static_cast<int>(p));
      info.base = leaves[i]->base;
      info.active_dim = leaves[i]->active_dim;
      info.parameter = names[p];
      params.push_back(info);
    }
  }
  HyperparameterInfo noise;
  noise.name = kNoiseName;
  noise.prior = DefaultNoisePrior();
  params.push_back(noise);

  std::set<std::string> valid;
  for (const auto& p : params) valid.insert(p.name);
  auto unknown = [&](const std::string& name, const char* what) {
    return absl::InvalidArgumentError(absl::StrCat(
        what, ": unknown hyperparameter '", name, "' for kernel ", ToString(kernel),
        " (valid: ", absl::StrJoin(valid, ", "), ")"));
  };
  for (const auto& [name, prior] : settings.prior_overrides) {
    if (!valid.count(name)) return unknown(name, "prior");
  }
  for (const auto& [name, value] : settings.fixed_values) {
    if (!valid.count(name)) return unknown(name, "fixed");
  }
  for (auto& p : params) {
    if (auto it = settings.prior_overrides.find(p.name); it != settings.prior_overrides.end()) {
      p.prior = it->second;
    }
    if (auto it = settings.fixed_values.find(p.name); it != settings.fixed_values.end()) {
      p.fixed = true;
      p.fixed_raw = InverseSoftplus(p.name == kNoiseName ? it->second - kNoiseFloor : it->second);
    }
  }
  return params;
}

}  // namespace gpsel
