// Saved model files of the `gpsel` CLI: `score|search --save-model FILE` writes a SavedModel
// (core/saved_model.h) as the gpsel.v1.SavedModel message in the protobuf JSON mapping, and
// `predict --model FILE` reads it back. The file is written whole or not at all (a temporary
// file renamed over FILE).
//
//   absl::Status s = WriteModelFile("model.json", SaveModel(score, data));
//   absl::StatusOr<SavedModel> model = ReadModelFile("model.json", "--model");
#ifndef GPSEL_CLI_MODEL_FILE_H_
#define GPSEL_CLI_MODEL_FILE_H_

#include <string>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/saved_model.h"
#include "gpsel/core/score.h"

namespace gpsel::cli {

// INVALID_ARGUMENT / NOT_FOUND naming the path when it cannot be written.
absl::Status WriteModelFile(const std::string& path, const SavedModel& model);

// WriteModelFile(path, SaveModel(score, data)) for a score of the exact GP; a sparse score is
// refused (INVALID_ARGUMENT naming --save-model): its posterior needs its inducing inputs, which a
// SavedModel does not hold, and predicting exactly at its hyperparameters would not be the model
// that was scored.
absl::Status SaveScoreModel(const std::string& path, const KernelScore& score,
                            const Dataset& data);

// The model in `path`; NOT_FOUND naming `flag` and the path when it cannot be read,
// INVALID_ARGUMENT saying what is wrong (not JSON, JSON of something else, a malformed field)
// otherwise.
absl::StatusOr<SavedModel> ReadModelFile(const std::string& path, const std::string& flag);

// The score `score --save-model` saves: the only one, or the best by `metric` (a metric every
// score computed; "" means lap0 when computed, else the first metric of the first score).
// INVALID_ARGUMENT naming --save-by when no score has the metric.
absl::StatusOr<const KernelScore*> ChooseScoreToSave(const std::vector<KernelScore>& scores,
                                                     const std::string& metric,
                                                     std::string* why);

}  // namespace gpsel::cli

#endif  // GPSEL_CLI_MODEL_FILE_H_
