// SavedModel: saving a score as a model, the data fingerprint and the checks; see saved_model.h.
#include "gpsel/core/saved_model.h"

#include <cmath>
#include <cstring>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpsel/core/status_macros.h"

#ifndef GPSEL_VERSION
#define GPSEL_VERSION "dev"
#endif

namespace gpsel {
namespace {

// FNV-1a, 64 bits: offset basis 14695981039346656037, prime 1099511628211.
struct Fnv1a64 {
  uint64_t state = 14695981039346656037ull;
  void Add(double value) {
    uint64_t bits = 0;
    std::memcpy(&bits, &value, sizeof bits);
    for (int byte = 0; byte < 8; ++byte) {  // little-endian whatever the host
      state ^= (bits >> (8 * byte)) & 0xffu;
      state *= 1099511628211ull;
    }
  }
};

}  // namespace

const char* GpselVersion() { return GPSEL_VERSION; }

std::string DatasetHash(const Dataset& data) {
  Fnv1a64 hash;
  for (Eigen::Index i = 0; i < data.x.rows(); ++i) {
    for (Eigen::Index j = 0; j < data.x.cols(); ++j) hash.Add(data.x(i, j));
  }
  for (Eigen::Index i = 0; i < data.y.size(); ++i) hash.Add(data.y(i));
  return absl::StrFormat("fnv1a64:%016x", hash.state);
}

SavedModel SaveModel(const KernelScore& score, const Dataset& data) {
  SavedModel model;
  model.kernel = score.kernel;
  model.mll_fit = score.mll_fit;
  model.map_fit = score.map_fit;
  model.standardized = score.standardized;
  model.standardization = score.standardization;
  model.x_scale = score.x_scale;
  model.x_scale_reason = score.x_scale_reason;
  model.metrics = score.metrics;
  model.num_points = data.num_points();
  model.num_dims = data.num_dims();
  model.data_hash = DatasetHash(data);
  model.gpsel_version = GpselVersion();
  return model;
}

std::string SavedModel::Summary() const {
  std::string out = absl::StrCat("model ", kernel, " (gpsel ", gpsel_version, "; y ",
                                 standardized ? "standardised" : "as given", "; fitted on ",
                                 num_points, " points of ", num_dims, " column(s), ", data_hash,
                                 ")\n");
  for (const std::optional<FitResult>* fit : {&mll_fit, &map_fit}) {
    if (!fit->has_value()) continue;
    absl::StrAppend(&out, "  ", fit == &mll_fit ? "MLL" : "MAP", " fit:");
    for (const auto& [name, value] : (*fit)->values) {
      absl::StrAppendFormat(&out, " %s=%.6g", name, value);
    }
    absl::StrAppend(&out, "\n");
  }
  return out;
}

absl::Status ValidateSavedModel(const SavedModel& model) {
  if (model.kernel.empty()) return absl::InvalidArgumentError("model.kernel: is empty");
  if (!model.mll_fit && !model.map_fit) {
    return absl::InvalidArgumentError("model.map_fit: the model holds neither an MLL nor a MAP fit");
  }
  if (!(model.x_scale > 0) || !std::isfinite(model.x_scale)) {
    return absl::InvalidArgumentError("model.x_scale: must be finite and > 0");
  }
  if (model.data_hash.empty() || model.num_points <= 0 || model.num_dims <= 0) {
    return absl::InvalidArgumentError(
        "model.data_hash: the model has no fingerprint of its training data (num_points, "
        "num_dims, data_hash)");
  }
  for (const std::optional<FitResult>* fit : {&model.mll_fit, &model.map_fit}) {
    if (!fit->has_value()) continue;
    for (const auto& [name, value] : (*fit)->values) {
      if (!std::isfinite(value) || value <= 0) {
        return absl::InvalidArgumentError(
            absl::StrCat(fit == &model.mll_fit ? "model.mll_fit" : "model.map_fit", ".values[",
                         name, "]: must be finite and > 0 (natural scale)"));
      }
    }
  }
  return absl::OkStatus();
}

absl::Status CheckModelMatchesData(const SavedModel& model, const Dataset& data) {
  GPSEL_RETURN_IF_ERROR(ValidateSavedModel(model));
  if (model.num_points != data.num_points() || model.num_dims != data.num_dims()) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model: was fitted on ", model.num_points, " points of ", model.num_dims,
        " column(s), the data has ", data.num_points(), " of ", data.num_dims(),
        ": predicting from a model needs the data it was fitted on (same file, same "
        "--missing/--x/--y)"));
  }
  const std::string hash = DatasetHash(data);
  if (hash != model.data_hash) {
    return absl::InvalidArgumentError(absl::StrCat(
        "model: was fitted on other data of the same size (data hash ", model.data_hash,
        ", this data's ", hash, "): predicting from a model needs the data it was fitted on"));
  }
  return absl::OkStatus();
}

absl::StatusOr<std::map<std::string, double>> ModelValues(const SavedModel& model,
                                                          FitObjective objective) {
  GPSEL_RETURN_IF_ERROR(ValidateSavedModel(model));
  const bool mll = objective == FitObjective::kMaximumLikelihood;
  const std::optional<FitResult>& fit = mll ? model.mll_fit : model.map_fit;
  if (!fit) {
    return absl::InvalidArgumentError(absl::StrCat(
        mll ? "model.mll_fit" : "model.map_fit", ": the model has no ", mll ? "MLL" : "MAP",
        " fit (its score did not compute ", mll ? "mll, aic or bic" : "map or a Laplace metric",
        "); use the other objective or save the model from a score with those metrics"));
  }
  if (fit->values.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(mll ? "model.mll_fit" : "model.map_fit",
                                                   ".values: is empty"));
  }
  return fit->values;
}

}  // namespace gpsel
