// PrepareModel: the one prologue of every core workflow (score, evidence, predict, the search's
// evidence scorer): check the data, standardise y, scale x into the model's units, and build the
// GpModel. Internal to core; callers outside core go through ScoreKernel, ComputeEvidence or
// FitAndPredict.
//
//   absl::StatusOr<PreparedModel> prepared =
//       PrepareModel(data, kernel, options.standardize, options.scale_x, options.hyperparameters);
//   const GpModel& gp = prepared->model;
#ifndef GPSEL_CORE_PREPARED_MODEL_H_
#define GPSEL_CORE_PREPARED_MODEL_H_

#include <map>
#include <string>
#include <vector>

#include "absl/status/statusor.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/score.h"

namespace gpsel {

struct PreparedModel {
  Standardization standardization;  // of y (applied or not)
  double x_factor = 1.0;            // model x = user x / x_factor (ScaleInputs)
  std::vector<double> x_factors;    // or column c / x_factors[c] when not empty (ScaleInputs)
  std::string x_scale_reason;       // "as given", "given", "auto: ..."
  GpModel model;                    // on the scaled x and standardised y
};

// INVALID_ARGUMENT for a bad dataset (ValidateDataset), a constant y with standardize, a bad x
// scaling, or settings that do not fit the kernel (GpModel::Create).
absl::StatusOr<PreparedModel> PrepareModel(const Dataset& data, const KernelExpr& kernel,
                                           bool standardize, const XScaling& scale_x,
                                           const HyperparameterSettings& settings);

// The model of a fitted kernel, every parameter fixed at its value in the user's units (x is not
// rescaled): the prologue of Predict, PredictSparse and HeldOutLikelihoodAt. INVALID_ARGUMENT
// naming `hyperparameters` when a value is missing (the model would have free parameters).
absl::StatusOr<PreparedModel> PrepareFixedModel(const Dataset& data, const KernelExpr& kernel,
                                                const std::map<std::string, double>& natural_values,
                                                bool standardize);

}  // namespace gpsel

#endif  // GPSEL_CORE_PREPARED_MODEL_H_
