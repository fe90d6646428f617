// SummarizeChanges: the change nodes' parameters (core/hyperparameters.h units, fractions of the
// column's range) turned into the user's x units, with Laplace standard deviations.
#include "gpsel/core/change_summary.h"

#include <cmath>
#include <map>

#include "absl/strings/str_cat.h"
#include "gpsel/core/hyperparameters.h"

namespace gpsel {

namespace {

void CollectChangeNodes(const KernelExpr& expr, std::vector<const KernelExpr*>* nodes) {
  for (const KernelExpr& operand : expr.operands) CollectChangeNodes(operand, nodes);
  if (expr.is_change()) nodes->push_back(&expr);
}

}  // namespace

absl::StatusOr<std::vector<ChangeSummary>> SummarizeChanges(const Dataset& data,
                                                            const KernelScore& score) {
  absl::StatusOr<KernelExpr> kernel = ParseKernel(score.kernel);
  if (!kernel.ok()) return kernel.status();
  const FitResult* fit = score.map_fit ? &*score.map_fit : score.mll_fit ? &*score.mll_fit : nullptr;
  if (fit == nullptr) return absl::InvalidArgumentError("score: has no fit");
  std::vector<const KernelExpr*> nodes;
  CollectChangeNodes(*kernel, &nodes);
  const std::vector<std::string> labels = ChangeLabels(*kernel);
  // Free-parameter index by name, for the raw values and the Laplace covariance.
  std::map<std::string, int> free_index;
  for (size_t k = 0; k < score.parameter_names.size(); ++k) {
    free_index[score.parameter_names[k]] = static_cast<int>(k);
  }
  const bool with_covariance = score.map_fit.has_value() && fit == &*score.map_fit && score.laplace &&
                               score.laplace->covariance.rows() == fit->raw.size() &&
                               fit->raw.size() > 0;
  std::vector<ChangeSummary> out;
  for (size_t i = 0; i < nodes.size(); ++i) {
    ChangeSummary summary;
    summary.label = labels[i];
    summary.kind = nodes[i]->kind;
    summary.column = std::max(nodes[i]->active_dim, 0);
    summary.first = ToString(nodes[i]->operands[0]);
    summary.second = ToString(nodes[i]->operands[1]);
    if (summary.column >= data.num_dims()) {
      return absl::InvalidArgumentError(absl::StrCat("data: has no column ", summary.column));
    }
    const double lo = data.x.col(summary.column).minCoeff();
    const double hi = data.x.col(summary.column).maxCoeff();
    const double range = hi > lo ? hi - lo : 1.0;
    // Natural value and its Laplace sd (d softplus/dr = sigmoid) of one own parameter.
    auto natural = [&](const std::string& parameter, std::optional<double>* sd) -> absl::StatusOr<double> {
      const std::string name = absl::StrCat(summary.label, ".", parameter);
      auto value = fit->values.find(name);
      if (value == fit->values.end()) {
        return absl::InvalidArgumentError(absl::StrCat("score: no value for ", name));
      }
      auto index = free_index.find(name);
      if (sd != nullptr && with_covariance && index != free_index.end()) {
        const int k = index->second;
        const double variance = score.laplace->covariance(k, k);
        if (variance >= 0) *sd = Sigmoid(fit->raw(k)) * std::sqrt(variance);
      }
      return value->second;
    };
    std::optional<double> location_sd, width_sd;
    absl::StatusOr<double> location = natural("location", &location_sd);
    if (!location.ok()) return location.status();
    absl::StatusOr<double> transition = natural("transition", nullptr);
    if (!transition.ok()) return transition.status();
    summary.location = lo + (*location - 1.0) * range;
    summary.transition = *transition * range;
    if (location_sd) summary.location_sd = *location_sd * range;
    if (summary.kind == KernelExpr::Kind::kChangeWindow) {
      absl::StatusOr<double> width = natural("width", &width_sd);
      if (!width.ok()) return width.status();
      summary.width = *width * range;
      if (width_sd) summary.width_sd = *width_sd * range;
      summary.inside_data = summary.location + 0.5 * summary.width > lo &&
                            summary.location - 0.5 * summary.width < hi &&
                            summary.width < 2.0 * range;
    } else {
      summary.inside_data = summary.location > lo && summary.location < hi;
    }
    out.push_back(std::move(summary));
  }
  return out;
}

}  // namespace gpsel
