// Saved model files: JSON in and out; see model_file.h.
#include "gpsel/client/cli/model_file.h"

#include <google/protobuf/util/json_util.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpsel/proto/bridge/convert.h"
#include "gpsel/v1/types.pb.h"

namespace gpsel::cli {

absl::Status SaveScoreModel(const std::string& path, const KernelScore& score,
                            const Dataset& data) {
  if (score.method == "sparse") {
    return absl::InvalidArgumentError(absl::StrCat(
        "--save-model: ", score.kernel, " was scored with the sparse GP (m = ",
        score.num_inducing, "); only exact scores are saved as models (use --approx exact)"));
  }
  return WriteModelFile(path, SaveModel(score, data));
}

absl::Status WriteModelFile(const std::string& path, const SavedModel& model) {
  v1::SavedModel proto;
  bridge::ToProto(model, &proto);
  google::protobuf::util::JsonPrintOptions options;
  options.add_whitespace = true;
  options.preserve_proto_field_names = true;
  options.always_print_primitive_fields = true;
  std::string json;
  if (!google::protobuf::util::MessageToJsonString(proto, &json, options).ok()) {
    return absl::InternalError("--save-model: the model could not be written as JSON");
  }
  const std::string temporary = absl::StrCat(path, ".tmp");
  {
    std::ofstream out(temporary, std::ios::binary | std::ios::trunc);
    out << json;
    if (json.empty() || json.back() != '\n') out << "\n";
    out.close();
    if (!out) {
      std::remove(temporary.c_str());
      return absl::InvalidArgumentError(absl::StrCat("--save-model ", path, ": cannot write it"));
    }
  }
  if (std::rename(temporary.c_str(), path.c_str()) != 0) {
    std::remove(temporary.c_str());
    return absl::InvalidArgumentError(absl::StrCat("--save-model ", path, ": cannot write it"));
  }
  return absl::OkStatus();
}

absl::StatusOr<SavedModel> ReadModelFile(const std::string& path, const std::string& flag) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat(flag, " ", path, ": cannot be read"));
  std::stringstream text;
  text << in.rdbuf();
  v1::SavedModel proto;
  google::protobuf::util::JsonParseOptions options;  // unknown fields are an error
  if (auto s = google::protobuf::util::JsonStringToMessage(text.str(), &proto, options);
      !s.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": not a gpsel saved model (",
                     std::string(s.message().data(), s.message().size()), ")"));
  }
  absl::StatusOr<SavedModel> model = bridge::FromProto(proto, "model");
  if (!model.ok()) {
    return absl::InvalidArgumentError(
        absl::StrCat(flag, " ", path, ": ", model.status().message()));
  }
  return model;
}

absl::StatusOr<const KernelScore*> ChooseScoreToSave(const std::vector<KernelScore>& scores,
                                                     const std::string& metric,
                                                     std::string* why) {
  if (scores.empty()) return absl::InvalidArgumentError("--save-model: no kernel was scored");
  if (scores.size() == 1 && metric.empty()) {
    *why = "the only kernel scored";
    return &scores[0];
  }
  std::string name = metric;
  if (name.empty()) {
    name = scores[0].metrics.count("lap0") ? "lap0"
           : scores[0].metrics.empty()     ? ""
                                           : scores[0].metrics.begin()->first;
  }
  const KernelScore* best = nullptr;
  for (const KernelScore& s : scores) {
    auto it = s.metrics.find(name);
    if (it == s.metrics.end()) continue;
    if (best == nullptr || it->second > best->metrics.at(name)) best = &s;
  }
  if (best == nullptr) {
    return absl::InvalidArgumentError(absl::StrCat(
        "--save-by: no scored kernel has the metric '", name, "' (score it with --metrics)"));
  }
  *why = absl::StrFormat("the best of %d kernels by %s = %.4f", scores.size(), name,
                         best->metrics.at(name));
  return best;
}

}  // namespace gpsel::cli
