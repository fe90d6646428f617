// Softplus transform, the paper's default priors and the naming of hyperparameters.
#include "gpsel/core/hyperparameters.h"

#include <cmath>
#include <set>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "gpsel/core/status_macros.h"

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

const std::vector<std::string>& ChangeParameterNames(KernelExpr::Kind kind) {
  static const auto* const kChangePoint = new std::vector<std::string>{"location", "transition"};
  static const auto* const kChangeWindow =
      new std::vector<std::string>{"location", "transition", "width"};
  static const auto* const kNone = new std::vector<std::string>{};
  if (kind == KernelExpr::Kind::kChangePoint) return *kChangePoint;
  if (kind == KernelExpr::Kind::kChangeWindow) return *kChangeWindow;
  return *kNone;
}

NormalPrior DefaultChangePrior(KernelExpr::Kind /*kind*/, int parameter_index) {
  // Raw values r of natural softplus(r) (header): location softplus(1.19) = 1.46; the 95 %
  // bounds softplus(1.19 ∓ 0.784) = 0.92 and 2.10. τ = softplus(−3.9) ≈ e^−3.9 = 0.020.
  switch (parameter_index) {
    case 0:
      return {1.19, 0.40};
    case 1:
      return {-3.9, 1.5};
    default:
      return {-1.5, 1.0};
  }
}

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

// The nodes owning parameters in the numerics' order (core/internal/kernel_evaluator.cc Build): base
// leaves, and change nodes after their operands (post-order).
void CollectOwners(const KernelExpr& expr, std::vector<const KernelExpr*>* owners) {
  if (expr.is_base()) {
    owners->push_back(&expr);
    return;
  }
  for (const KernelExpr& operand : expr.operands) CollectOwners(operand, owners);
  if (expr.is_change()) owners->push_back(&expr);
}

void CollectChanges(const KernelExpr& expr, std::vector<const KernelExpr*>* changes) {
  for (const KernelExpr& operand : expr.operands) CollectChanges(operand, changes);
  if (expr.is_change()) changes->push_back(&expr);
}

std::string ChangeLabel(const KernelExpr& node) {
  std::string label(ChangeKindName(node.kind));
  if (node.active_dim >= 0) absl::StrAppend(&label, "[", node.active_dim, "]");
  return label;
}

std::string BaseLabel(const KernelExpr& leaf) {
  std::string label(BaseKernelName(leaf.base));
  if (leaf.active_dim >= 0) absl::StrAppend(&label, "[", leaf.active_dim, "]");
  // BASE[*] before ExpandPerColumn (`gpsel priors` without data): the prior every column's copy has.
  if (leaf.active_dim == kPerColumnDim) absl::StrAppend(&label, "[*]");
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

std::vector<std::string> ChangeLabels(const KernelExpr& kernel) {
  std::vector<const KernelExpr*> changes;
  CollectChanges(kernel, &changes);
  std::map<std::string, int> total;
  for (const KernelExpr* node : changes) ++total[ChangeLabel(*node)];
  std::map<std::string, int> seen;
  std::vector<std::string> labels;
  for (const KernelExpr* node : changes) {
    std::string label = ChangeLabel(*node);
    if (total[label] > 1) absl::StrAppend(&label, "#", ++seen[label]);
    labels.push_back(label);
  }
  return labels;
}

absl::StatusOr<std::vector<HyperparameterInfo>> DescribeHyperparameters(
    const KernelExpr& kernel, const HyperparameterSettings& settings) {
  GPSEL_RETURN_IF_ERROR(settings.Validate());
  std::vector<const KernelExpr*> owners;
  CollectOwners(kernel, &owners);
  const std::vector<std::string> labels = LeafLabels(kernel);
  const std::vector<std::string> change_labels = ChangeLabels(kernel);
  std::vector<HyperparameterInfo> params;
  size_t leaf_index = 0, change_index = 0;
  for (const KernelExpr* owner : owners) {
    if (owner->is_change()) {
      const auto& names = ChangeParameterNames(owner->kind);
      for (size_t p = 0; p < names.size(); ++p) {
        HyperparameterInfo info;
        info.name = absl::StrCat(change_labels[change_index], ".", names[p]);
        info.prior = DefaultChangePrior(owner->kind, static_cast<int>(p));
        info.active_dim = owner->active_dim;
        info.parameter = names[p];
        info.change = owner->kind;
        params.push_back(info);
      }
      ++change_index;
      continue;
    }
    const auto& names = BaseKernelParameterNames(owner->base);
    for (size_t p = 0; p < names.size(); ++p) {
      HyperparameterInfo info;
      info.name = absl::StrCat(labels[leaf_index], ".", names[p]);
      info.prior = DefaultPrior(owner->base, static_cast<int>(p));
      info.base = owner->base;
      info.active_dim = owner->active_dim;
      info.parameter = names[p];
      params.push_back(info);
    }
    ++leaf_index;
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
