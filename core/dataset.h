// Datasets: n×d inputs and n targets, CSV loading, validation and standardisation of y.
//
// CSV layout: optional header row, one row per point, last column y, the others x. CsvOptions
// read files as people have them: ';' or tab separators (detected), ISO dates in x (as decimal
// years or days), missing cells (an error naming the lines, or the rows dropped), columns picked
// by header name or 1-based index.
//   absl::StatusOr<gpsel::Dataset> data = gpsel::LoadCsvFile("data/interpretable_linear.csv");
#ifndef GPSEL_CORE_DATASET_H_
#define GPSEL_CORE_DATASET_H_

#include <string>
#include <string_view>
#include <vector>

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

// What to do with a row that has a missing cell ("", NA, N/A, NaN, null, None, "." …) in a
// column that is read.
enum class MissingValues {
  kError,  // INVALID_ARGUMENT naming the lines (the default: nothing is dropped silently)
  kDrop,   // skip the row, and list it in CsvReadReport::dropped_lines
};
// What an ISO date or date-time in an x column becomes. Both are absolute (not relative to the
// first row), so that the same date maps to the same x in the data and in new inputs.
enum class DateUnit {
  kYears,  // decimal years: year + (time since 1 January) / (length of that year), in UTC;
           // 2024-07-02 = 2024.5 (leap year, day 183 of 366), matching the bundled series'
           // decimal-year x
  kDays,   // days since 1970-01-01T00:00Z; 1970-01-02 = 1, 2000-01-01T12:00Z = 10957.5
};

struct CsvOptions {
  // The field separator: ',' ';' or '\t'; 0 (default) detects it from the first non-comment
  // line: tab if it holds one, else ';' if it holds one, else ','. With ';' a number may use a
  // decimal comma ("315,7"), as spreadsheets in such locales write it.
  char delimiter = 0;
  // The input columns, each a header name or a 1-based index ("3"); a name wins over an index
  // when a header cell reads like a number. Empty (default): every column but y's.
  std::vector<std::string> x_columns;
  // The target column, a header name or a 1-based index; empty (default): the last column.
  std::string y_column;
  MissingValues missing = MissingValues::kError;
  DateUnit date_unit = DateUnit::kYears;
  absl::Status Validate() const;
};

// What reading did beyond plain numbers, for the caller to say so.
struct CsvReadReport {
  char delimiter = ',';
  std::vector<std::string> x_names;       // header names of the x columns ("column 2" without)
  std::string y_name;                     // empty for ParseCsvInputs
  std::vector<std::string> date_columns;  // names of the x columns read as ISO dates
  DateUnit date_unit = DateUnit::kYears;
  std::vector<int> dropped_lines;  // file lines (1-based) of rows skipped for a missing cell
  // One sentence per fact worth telling ("x column 'date': ISO dates as decimal years …",
  // "dropped 3 rows with missing values (lines 5, 9, 12)"); empty when there is none.
  std::vector<std::string> Notes() const;
};

// Parses CSV text (optional header, '#' comment lines and blank lines skipped, RFC 4180 quotes).
// Errors name the line and column: "line 4, column 2: 'abc' is not a number".
absl::StatusOr<Dataset> ParseCsv(std::string_view text, const DatasetLimits& limits = {});
absl::StatusOr<Dataset> ParseCsv(std::string_view text, const CsvOptions& options,
                                 const DatasetLimits& limits, CsvReadReport* report = nullptr);
absl::StatusOr<Dataset> LoadCsvFile(const std::string& path, const DatasetLimits& limits = {});
absl::StatusOr<Dataset> LoadCsvFile(const std::string& path, const CsvOptions& options,
                                    const DatasetLimits& limits, CsvReadReport* report = nullptr);
// Rows of inputs only (every column an input, same layout rules as ParseCsv; of CsvOptions the
// delimiter, missing and date_unit apply), e.g. the new inputs of a prediction. INVALID_ARGUMENT
// naming the line, or for no rows / too many.
absl::StatusOr<Eigen::MatrixXd> ParseCsvInputs(std::string_view text, int max_rows = 1'000'000);
absl::StatusOr<Eigen::MatrixXd> ParseCsvInputs(std::string_view text, const CsvOptions& options,
                                               int max_rows = 1'000'000,
                                               CsvReadReport* report = nullptr);

// An ISO 8601 date or date-time ("1959-03-31", "1959-03", "2024-07-02T06:30:00Z",
// "2024-07-02 06:30", "…+02:00"; no offset means UTC) as x in `unit`; INVALID_ARGUMENT when
// `text` is not one (out-of-range fields such as 2023-02-30 included).
absl::StatusOr<double> ParseIsoDate(std::string_view text, DateUnit unit);

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
