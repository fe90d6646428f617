// Datasets: n×d inputs and n targets, CSV loading, validation and standardisation of y.
//
// CSV layout: optional header row, one row per point, last column y, the others x.
//   absl::StatusOr<gpsel::Dataset> data = gpsel::LoadCsvFile("data/interpretable_linear.csv");
#ifndef GPSEL_CORE_DATASET_H_
#define GPSEL_CORE_DATASET_H_

#include <string>
#include <string_view>

#include <Eigen/Dense>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpsel {

struct Dataset {
  Eigen::MatrixXd x;  // n×d inputs
  Eigen::VectorXd y;  // n targets
  int num_points() const { return static_cast<int>(y.size()); }
  int num_dims() const { return static_cast<int>(x.cols()); }
};

// Points n of one dataset by default: the in-process CLI's limit and gpsel-server's --max-points
// default (server/validation/validation.h ServiceLimits), one constant so that the two agree. At n = 10,000
// the exact Hessian alone holds about 4 n² doubles = 3.2 GB and one likelihood evaluation takes
// about 25 s (core/time_estimate.h), so a score takes hours: more is an operator's choice.
inline constexpr int kDefaultMaxPoints = 10000;
// The most any configuration accepts (the ceiling of --max-points): n² doubles are 80 GB there.
// The CLI loads data up to it when a server decides (--server).
inline constexpr int kMaxPointsCeiling = 100000;

struct DatasetLimits {
  int min_points = 2;
  int max_points = kDefaultMaxPoints;
  int max_dims = 64;
  absl::Status Validate() const;
};

// INVALID_ARGUMENT naming the field ("x", "y") for: size mismatch, too few/many points or
// dimensions, NaN/Inf values, constant y when it is to be standardised is NOT an error here.
absl::Status ValidateDataset(const Dataset& data, const DatasetLimits& limits = {});

// Parses CSV text (comma separated, optional header, '#' comment lines and blank lines skipped).
// Errors name the line and column: "line 4, column 2: 'abc' is not a number".
absl::StatusOr<Dataset> ParseCsv(std::string_view text, const DatasetLimits& limits = {});
absl::StatusOr<Dataset> LoadCsvFile(const std::string& path, const DatasetLimits& limits = {});
// Rows of inputs only (every column numeric, same layout rules as ParseCsv), e.g. the new
// inputs of a prediction. INVALID_ARGUMENT naming the line, or for no rows / too many.
absl::StatusOr<Eigen::MatrixXd> ParseCsvInputs(std::string_view text, int max_rows = 1'000'000);

// y ↦ (y − mean)/sd with the sample standard deviation (n − 1). The priors (the paper's appendix, Table 5) were
// fitted on standardised data, so scoring standardises by default.
struct Standardization {
  bool applied = false;
  double mean = 0.0;
  double scale = 1.0;  // sd when applied
};
// Returns the transform to apply; a constant y (sd == 0) cannot be standardised: INVALID_ARGUMENT.
absl::StatusOr<Standardization> ComputeStandardization(const Eigen::VectorXd& y, bool standardize);
Eigen::VectorXd ApplyStandardization(const Standardization& s, const Eigen::VectorXd& y);

}  // namespace gpsel

#endif  // GPSEL_CORE_DATASET_H_
