// PrepareModel; see prepared_model.h.
#include "gpsel/core/internal/prepared_model.h"
#include "gpsel/core/status_macros.h"

#include <utility>

namespace gpsel {

absl::StatusOr<PreparedModel> PrepareModel(const Dataset& data, const KernelExpr& kernel,
                                           bool standardize, const XScaling& scale_x,
                                           const HyperparameterSettings& settings) {
  GPSEL_RETURN_IF_ERROR(ValidateDataset(data));
  absl::StatusOr<Standardization> standardization = ComputeStandardization(data.y, standardize);
  if (!standardization.ok()) return standardization.status();
  absl::StatusOr<ScaledInputs> inputs = ScaleInputs(data, scale_x, settings);
  if (!inputs.ok()) return inputs.status();
  absl::StatusOr<GpModel> model = GpModel::Create(
      kernel, inputs->x, ApplyStandardization(*standardization, data.y), inputs->settings);
  if (!model.ok()) return model.status();
  return PreparedModel{*std::move(standardization), inputs->factor, std::move(inputs->reason),
                       *std::move(model)};
}

}  // namespace gpsel
