// PrepareModel; see prepared_model.h.
#include "gpsel/core/internal/prepared_model.h"
#include "gpsel/core/approx.h"
#include "gpsel/core/status_macros.h"
#include "absl/strings/str_cat.h"

#include <utility>

namespace gpsel {

absl::StatusOr<PreparedModel> PrepareModel(const Dataset& data, const KernelExpr& kernel,
                                           bool standardize, const XScaling& scale_x,
                                           const HyperparameterSettings& settings) {
  // Up to the sparse limit: the exact paths refuse larger n themselves (ScoreKernel), and the
  // CLI and the server apply their own, smaller limits to exact requests.
  DatasetLimits limits;
  limits.max_points = static_cast<int>(kSparseMaxPoints);
  GPSEL_RETURN_IF_ERROR(ValidateDataset(data, limits));
  absl::StatusOr<Standardization> standardization = ComputeStandardization(data.y, standardize);
  if (!standardization.ok()) return standardization.status();
  // BASE[*] (core/kernel_expr.h) is modelled as its copies pinned to the data's columns.
  GPSEL_ASSIGN_OR_RETURN(const KernelExpr expanded,
                         ExpandPerColumn(kernel, static_cast<int>(data.x.cols())));
  absl::StatusOr<ScaledInputs> inputs = ScaleInputs(data, scale_x, settings, &expanded);
  if (!inputs.ok()) return inputs.status();
  absl::StatusOr<GpModel> model = GpModel::Create(
      expanded, inputs->x, ApplyStandardization(*standardization, data.y), inputs->settings);
  if (!model.ok()) return model.status();
  return PreparedModel{*std::move(standardization), inputs->factor,
                       std::move(inputs->column_factors), std::move(inputs->reason),
                       *std::move(model)};
}

absl::StatusOr<PreparedModel> PrepareFixedModel(const Dataset& data, const KernelExpr& kernel,
                                                const std::map<std::string, double>& natural_values,
                                                bool standardize) {
  HyperparameterSettings settings;
  settings.fixed_values = natural_values;
  absl::StatusOr<PreparedModel> prepared =
      PrepareModel(data, kernel, standardize, XScaling{}, settings);
  if (!prepared.ok()) return prepared.status();
  if (prepared->model.num_free() != 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "hyperparameters: values for all of the kernel's parameters and 'noise' are needed (",
        prepared->model.num_free(), " missing)"));
  }
  return prepared;
}

}  // namespace gpsel
