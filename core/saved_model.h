// A fitted model kept for later: one kernel, the natural hyperparameter values of its MLL and MAP
// fits, whether and how y was standardised, the x scaling of the fit, and a fingerprint of the
// training data (n, d and a hash of x and y), so that predicting from it needs no refit and
// refuses other data. `gpsel score|search --save-model FILE` writes it (as the gpsel.v1.SavedModel
// message in the protobuf JSON mapping, proto/bridge/convert.h); `gpsel predict --model FILE`,
// the Predict RPC's `model` field and the Python client's `predict(model=...)` read it.
//
//   SavedModel model = SaveModel(score, data);     // score: a KernelScore of `data`
//   GPSEL_RETURN_IF_ERROR(CheckModelMatchesData(model, data));
//   absl::StatusOr<std::map<std::string, double>> values = ModelValues(model, objective);
#ifndef GPSEL_CORE_SAVED_MODEL_H_
#define GPSEL_CORE_SAVED_MODEL_H_

#include <cstdint>
#include <map>
#include <optional>
#include <string>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/fit.h"
#include "gpsel/core/score.h"

namespace gpsel {

// The version of gpsel that wrote a model (the project's CMake version).
const char* GpselVersion();

// A 64-bit FNV-1a hash of the data, as "fnv1a64:" and 16 hex digits: the IEEE-754 bits of x
// row by row, then of y, each double's 8 bytes little-endian. Not cryptographic: it tells a
// model's training data from other data (another file, a changed value, other rows dropped),
// not from data crafted to collide. The same on every platform gpsel builds on (x86-64, arm64:
// both little-endian IEEE doubles), whatever the thread count.
std::string DatasetHash(const Dataset& data);

struct SavedModel {
  std::string kernel;  // canonical text
  // The fits the score made (a score without the MLL metrics has no MLL fit, and so on); their
  // `values` are natural values by name, in the units of x as given, "noise" the variance.
  std::optional<FitResult> mll_fit;
  std::optional<FitResult> map_fit;
  bool standardized = true;         // y standardised before fitting (and so before predicting)
  Standardization standardization;  // of the training y (recomputed from the data on predict)
  double x_scale = 1.0;             // x was divided by it for fitting (values are unscaled)
  std::string x_scale_reason;
  std::map<std::string, double> metrics;  // the score's metric values, for the record
  // The training data's fingerprint.
  int64_t num_points = 0;
  int num_dims = 0;
  std::string data_hash;  // DatasetHash
  std::string gpsel_version;
  std::string Summary() const;
};

// The model of one kernel's score on `data` (the data it was fitted on).
SavedModel SaveModel(const KernelScore& score, const Dataset& data);

// INVALID_ARGUMENT naming the field ("model.kernel: is empty", "model.mll_fit.values[noise]:
// ...") when the model is malformed: no kernel, no fit, a non-positive x scale, no fingerprint of
// its data, a fitted value not finite and positive. The one check of a model read from a file or
// a request (proto/bridge FromProto) and of CheckModelMatchesData.
absl::Status ValidateSavedModel(const SavedModel& model);

// INVALID_ARGUMENT naming what differs ("model: fitted on 521 points of 1 column(s), the data
// has 500 ...", or the hashes) when `data` is not the data the model was fitted on; also when the
// model itself is malformed (ValidateSavedModel).
absl::Status CheckModelMatchesData(const SavedModel& model, const Dataset& data);

// The natural values of the model's fit with `objective`; INVALID_ARGUMENT naming the missing
// fit (and how to get one) when the model has none.
absl::StatusOr<std::map<std::string, double>> ModelValues(const SavedModel& model,
                                                          FitObjective objective);

}  // namespace gpsel

#endif  // GPSEL_CORE_SAVED_MODEL_H_
