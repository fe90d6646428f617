// CSV loading (absl::StrSplit + absl::SimpleAtod), dataset validation and standardisation.
#include "gpsel/core/dataset.h"

#include <cmath>
#include <fstream>
#include <sstream>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"

namespace gpsel {

absl::Status DatasetLimits::Validate() const {
  if (min_points < 1 || max_points < min_points || max_dims < 1) {
    return absl::InvalidArgumentError("dataset limits: need 1 ≤ min_points ≤ max_points, max_dims ≥ 1");
  }
  return absl::OkStatus();
}

absl::Status ValidateDataset(const Dataset& data, const DatasetLimits& limits) {
  if (absl::Status s = limits.Validate(); !s.ok()) return s;
  const Eigen::Index n = data.y.size();
  if (n == 0) return absl::InvalidArgumentError("y: empty dataset");
  if (data.x.rows() != n) {
    return absl::InvalidArgumentError(absl::StrCat("x: has ", data.x.rows(), " rows but y has ",
                                                   n, " values"));
  }
  if (n < limits.min_points) {
    return absl::InvalidArgumentError(
        absl::StrCat("y: need at least ", limits.min_points, " points, got ", n));
  }
  if (n > limits.max_points) {
    return absl::InvalidArgumentError(
        absl::StrCat("y: ", n, " points exceed the limit of ", limits.max_points));
  }
  if (data.x.cols() < 1) return absl::InvalidArgumentError("x: need at least one input column");
  if (data.x.cols() > limits.max_dims) {
    return absl::InvalidArgumentError(absl::StrCat("x: ", data.x.cols(),
                                                   " input dimensions exceed the limit of ",
                                                   limits.max_dims));
  }
  for (Eigen::Index i = 0; i < n; ++i) {
    if (!std::isfinite(data.y(i))) {
      return absl::InvalidArgumentError(absl::StrCat("y[", i, "]: not a finite number"));
    }
    for (Eigen::Index j = 0; j < data.x.cols(); ++j) {
      if (!std::isfinite(data.x(i, j))) {
        return absl::InvalidArgumentError(
            absl::StrCat("x[", i, "][", j, "]: not a finite number"));
      }
    }
  }
  return absl::OkStatus();
}

namespace {

// The numeric rows of CSV text: comma separated, optional header (every cell non-numeric),
// '#' comment lines and blank lines skipped, every row as wide as the first.
struct CsvTable {
  std::vector<std::vector<double>> rows;
  size_t columns = 0;
};

absl::StatusOr<CsvTable> ParseCsvTable(std::string_view text) {
  CsvTable table;
  std::vector<std::vector<double>>& rows = table.rows;
  size_t& columns = table.columns;
  int line_number = 0;
  bool header_allowed = true;
  for (absl::string_view line : absl::StrSplit(absl::string_view(text.data(), text.size()), '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    std::vector<absl::string_view> fields = absl::StrSplit(line, ',');
    std::vector<double> values;
    values.reserve(fields.size());
    bool numeric = true;
    bool any_numeric = false;
    std::string bad_field;
    size_t bad_column = 0;
    for (size_t c = 0; c < fields.size(); ++c) {
      absl::string_view field = absl::StripAsciiWhitespace(fields[c]);
      if (field.size() >= 2 && field.front() == '"' && field.back() == '"') {
        field = field.substr(1, field.size() - 2);
      }
      double value;
      if (!absl::SimpleAtod(field, &value)) {
        if (numeric) {
          bad_field = std::string(field);
          bad_column = c + 1;
        }
        numeric = false;
        continue;
      }
      any_numeric = true;
      if (!std::isfinite(value)) {
        return absl::InvalidArgumentError(absl::StrCat(
            "line ", line_number, ", column ", c + 1, ": '", field, "' is not a finite number"));
      }
      values.push_back(value);
    }
    if (!numeric) {
      // The first non-comment line may be a header: every cell of it non-numeric.
      if (header_allowed && !any_numeric) {
        header_allowed = false;
        columns = fields.size();
        continue;
      }
      return absl::InvalidArgumentError(absl::StrCat("line ", line_number, ", column ", bad_column,
                                                     ": '", bad_field, "' is not a number"));
    }
    header_allowed = false;
    if (columns == 0) columns = values.size();
    if (values.size() != columns) {
      return absl::InvalidArgumentError(absl::StrCat("line ", line_number, ": has ", values.size(),
                                                     " columns, expected ", columns));
    }
    rows.push_back(std::move(values));
  }
  return table;
}

}  // namespace

absl::StatusOr<Dataset> ParseCsv(std::string_view text, const DatasetLimits& limits) {
  absl::StatusOr<CsvTable> table = ParseCsvTable(text);
  if (!table.ok()) return table.status();
  const std::vector<std::vector<double>>& rows = table->rows;
  const size_t columns = table->columns;
  if (columns < 2 && !rows.empty()) {
    return absl::InvalidArgumentError(
        "csv: need at least two columns (inputs x…, then the target y last)");
  }
  Dataset data;
  const Eigen::Index n = static_cast<Eigen::Index>(rows.size());
  if (n > limits.max_points) {
    return absl::InvalidArgumentError(
        absl::StrCat("y: ", n, " points exceed the limit of ", limits.max_points));
  }
  data.x.resize(n, columns >= 1 ? static_cast<Eigen::Index>(columns) - 1 : 0);
  data.y.resize(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (size_t c = 0; c + 1 < columns; ++c) data.x(i, static_cast<Eigen::Index>(c)) = rows[i][c];
    data.y(i) = rows[i][columns - 1];
  }
  if (absl::Status s = ValidateDataset(data, limits); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("csv: ", s.message()));
  }
  return data;
}

absl::StatusOr<Eigen::MatrixXd> ParseCsvInputs(std::string_view text, int max_rows) {
  absl::StatusOr<CsvTable> table = ParseCsvTable(text);
  if (!table.ok()) return table.status();
  if (table->rows.empty()) return absl::InvalidArgumentError("csv: has no rows of numbers");
  if (static_cast<int64_t>(table->rows.size()) > max_rows) {
    return absl::InvalidArgumentError(absl::StrCat("csv: ", table->rows.size(),
                                                   " rows exceed the limit of ", max_rows));
  }
  Eigen::MatrixXd x(static_cast<Eigen::Index>(table->rows.size()),
                    static_cast<Eigen::Index>(table->columns));
  for (size_t i = 0; i < table->rows.size(); ++i) {
    for (size_t c = 0; c < table->columns; ++c) x(i, c) = table->rows[i][c];
  }
  return x;
}

absl::StatusOr<Dataset> LoadCsvFile(const std::string& path, const DatasetLimits& limits) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open data file '", path, "'"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  absl::StatusOr<Dataset> data = ParseCsv(buffer.str(), limits);
  if (!data.ok()) {
    return absl::InvalidArgumentError(absl::StrCat(path, ": ", data.status().message()));
  }
  return data;
}

absl::StatusOr<Standardization> ComputeStandardization(const Eigen::VectorXd& y, bool standardize) {
  Standardization s;
  if (!standardize) return s;
  if (y.size() < 2) return absl::InvalidArgumentError("y: need two points to standardise");
  s.mean = y.mean();
  const double sd = std::sqrt((y.array() - s.mean).square().sum() / (y.size() - 1));
  // A constant y rarely gives sd == 0 exactly: the rounded mean of n copies of 3.7 is off by an
  // ulp, so sd ≈ 1e-16·|y|. Dividing by that would turn rounding noise into unit-variance data.
  if (!(sd > 1e-12 * y.cwiseAbs().maxCoeff()) || !std::isfinite(sd)) {
    return absl::InvalidArgumentError(
        "y: constant targets cannot be standardised (turn standardisation off)");
  }
  s.scale = sd;
  s.applied = true;
  return s;
}

Eigen::VectorXd ApplyStandardization(const Standardization& s, const Eigen::VectorXd& y) {
  if (!s.applied) return y;
  return (y.array() - s.mean) / s.scale;
}

}  // namespace gpsel
