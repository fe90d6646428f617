// CSV loading (absl::StrSplit + absl::SimpleAtod, ISO dates with absl::ParseTime), dataset
// validation and standardisation.
#include "gpsel/core/dataset.h"

#include <algorithm>
#include <cmath>
#include <fstream>
#include <sstream>
#include <utility>
#include <vector>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "absl/strings/strip.h"
#include "absl/time/civil_time.h"
#include "absl/time/time.h"
#include "gpsel/core/status_macros.h"

namespace gpsel {

absl::Status DatasetLimits::Validate() const {
  if (min_points < 1 || max_points < min_points || max_dims < 1) {
    return absl::InvalidArgumentError("dataset limits: need 1 ≤ min_points ≤ max_points, max_dims ≥ 1");
  }
  return absl::OkStatus();
}

absl::Status ValidateDataset(const Dataset& data, const DatasetLimits& limits) {
  GPSEL_RETURN_IF_ERROR(limits.Validate());
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

absl::Status CsvOptions::Validate() const {
  if (delimiter != 0 && delimiter != ',' && delimiter != ';' && delimiter != '\t') {
    return absl::InvalidArgumentError("delimiter: expected ',', ';' or a tab");
  }
  for (const std::string& column : x_columns) {
    if (column.empty()) return absl::InvalidArgumentError("x columns: an empty column name");
    if (column == y_column) {
      return absl::InvalidArgumentError(
          absl::StrCat("x columns: '", column, "' is the y column too"));
    }
  }
  return absl::OkStatus();
}

namespace {

std::string DelimiterName(char delimiter) {
  return delimiter == '\t' ? "tab" : absl::StrCat("'", std::string(1, delimiter), "'");
}

// "5, 9, 12" of the first `shown` numbers, then "… and N more".
std::string LineList(const std::vector<int>& lines, size_t shown = 10) {
  std::string out;
  for (size_t i = 0; i < lines.size() && i < shown; ++i) absl::StrAppend(&out, i ? ", " : "", lines[i]);
  if (lines.size() > shown) absl::StrAppend(&out, " and ", lines.size() - shown, " more");
  return out;
}

}  // namespace

std::vector<std::string> CsvReadReport::Notes() const {
  std::vector<std::string> notes;
  if (delimiter != ',') notes.push_back(absl::StrCat("fields separated by ", DelimiterName(delimiter)));
  for (const std::string& name : date_columns) {
    notes.push_back(absl::StrCat(
        "x column '", name, "' holds ISO dates, read as ",
        date_unit == DateUnit::kYears ? "decimal years (2024-07-02 = 2024.5)"
                                      : "days since 1970-01-01 UTC (2000-01-01 = 10957)"));
  }
  if (!dropped_lines.empty()) {
    notes.push_back(absl::StrCat("dropped ", dropped_lines.size(), " row",
                                 dropped_lines.size() == 1 ? "" : "s",
                                 " with missing values (line", dropped_lines.size() == 1 ? " " : "s ",
                                 LineList(dropped_lines), ")"));
  }
  return notes;
}

absl::StatusOr<double> ParseIsoDate(std::string_view text, DateUnit unit) {
  const absl::string_view s(text.data(), text.size());
  // Only YYYY-MM… is tried: a plain number is never a date (and "-5" never a year).
  auto digit = [&](size_t i) { return i < s.size() && absl::ascii_isdigit(s[i]); };
  if (!(digit(0) && digit(1) && digit(2) && digit(3) && s.size() > 4 && s[4] == '-' && digit(5) &&
        digit(6))) {
    return absl::InvalidArgumentError(absl::StrCat("'", s, "' is not an ISO date"));
  }
  // absl::ParseTime rejects out-of-range fields (2023-02-30, 25:00) and wants the whole input; %Ez
  // takes "Z" or ±hh:mm, %ET 'T' or 't'. Without an offset the time is UTC.
  static constexpr const char* kFormats[] = {
      "%Y-%m-%d",           "%Y-%m",
      "%Y-%m-%d%ET%H:%M",   "%Y-%m-%d%ET%H:%M%Ez",   "%Y-%m-%d%ET%H:%M:%E*S",
      "%Y-%m-%d%ET%H:%M:%E*S%Ez", "%Y-%m-%d %H:%M", "%Y-%m-%d %H:%M%Ez",
      "%Y-%m-%d %H:%M:%E*S", "%Y-%m-%d %H:%M:%E*S%Ez"};
  const absl::TimeZone utc = absl::UTCTimeZone();
  absl::Time time;
  bool parsed = false;
  for (const char* format : kFormats) {
    std::string error;
    if (absl::ParseTime(format, s, utc, &time, &error)) {
      parsed = true;
      break;
    }
  }
  if (!parsed) return absl::InvalidArgumentError(absl::StrCat("'", s, "' is not an ISO date"));
  if (unit == DateUnit::kDays) {
    return absl::FDivDuration(time - absl::UnixEpoch(), absl::Hours(24));
  }
  const absl::CivilYear year(absl::ToCivilSecond(time, utc));
  const absl::Time start = absl::FromCivil(year, utc);
  const absl::Time next = absl::FromCivil(year + 1, utc);
  return static_cast<double>(year.year()) + absl::FDivDuration(time - start, next - start);
}

namespace {

// One line split into fields at `delimiter` outside double quotes (RFC 4180: "" inside quotes
// is a quote), each field stripped of surrounding whitespace and its quotes.
absl::StatusOr<std::vector<std::string>> SplitFields(absl::string_view line, char delimiter,
                                                     int line_number) {
  std::vector<std::string> fields(1);
  bool quoted = false;
  for (size_t i = 0; i < line.size(); ++i) {
    const char c = line[i];
    if (c == '"') {
      if (quoted && i + 1 < line.size() && line[i + 1] == '"') {
        fields.back() += '"';
        ++i;
      } else {
        quoted = !quoted;
      }
    } else if (c == delimiter && !quoted) {
      fields.emplace_back();
    } else {
      fields.back() += c;
    }
  }
  if (quoted) {
    return absl::InvalidArgumentError(
        absl::StrCat("line ", line_number, ": a double quote is not closed"));
  }
  for (std::string& field : fields) absl::StripAsciiWhitespace(&field);
  return fields;
}

// The separator of `first_line` (the first non-comment line) when none is given: a tab or a ';'
// outside quotes is taken to be one (neither occurs inside numbers), else ','.
char DetectDelimiter(absl::string_view first_line) {
  bool quoted = false, tab = false, semicolon = false;
  for (char c : first_line) {
    if (c == '"') quoted = !quoted;
    if (!quoted && c == '\t') tab = true;
    if (!quoted && c == ';') semicolon = true;
  }
  return tab ? '\t' : semicolon ? ';' : ',';
}

// The spellings of a missing value in exported tables (R, pandas, spreadsheets, FRED's ".").
bool IsMissing(absl::string_view field) {
  static constexpr absl::string_view kMissing[] = {"",     "na",   "n/a", "nan", "-nan", "null",
                                                   "none", "#n/a", "<na>", ".",  "?"};
  for (absl::string_view m : kMissing) {
    if (absl::EqualsIgnoreCase(field, m)) return true;
  }
  return false;
}

enum class CellKind { kNumber, kDate, kMissing, kText };
struct Cell {
  CellKind kind = CellKind::kText;
  double value = 0.0;  // for kNumber (possibly ±inf) and kDate
};

Cell ClassifyCell(const std::string& field, char delimiter, DateUnit unit) {
  Cell cell;
  if (IsMissing(field)) {
    cell.kind = CellKind::kMissing;
    return cell;
  }
  double value;
  bool number = absl::SimpleAtod(field, &value);
  // Decimal comma: with ';' separating fields, "315,7" is 315.7 (one comma, no point).
  if (!number && delimiter == ';' && std::count(field.begin(), field.end(), ',') == 1 &&
      field.find('.') == std::string::npos) {
    std::string dotted = field;
    std::replace(dotted.begin(), dotted.end(), ',', '.');
    number = absl::SimpleAtod(dotted, &value);
  }
  if (number) {
    cell.kind = std::isnan(value) ? CellKind::kMissing : CellKind::kNumber;
    cell.value = value;
    return cell;
  }
  if (absl::StatusOr<double> date = ParseIsoDate(field, unit); date.ok()) {
    cell.kind = CellKind::kDate;
    cell.value = *date;
  }
  return cell;
}

// The columns read from a CSV: each row holds the chosen x columns, then y's when there is one.
struct CsvTable {
  std::vector<std::vector<double>> rows;
  size_t num_x = 0;
  bool has_y = false;
};

// Resolves a column given by header name or 1-based index to a 0-based index.
absl::StatusOr<size_t> ResolveColumn(const std::string& spec, const std::string& role,
                                     const std::vector<std::string>& header, size_t columns) {
  for (size_t c = 0; c < header.size(); ++c) {
    if (header[c] == spec) return c;
  }
  int index = 0;
  if (absl::SimpleAtoi(spec, &index)) {
    if (index >= 1 && static_cast<size_t>(index) <= columns) return static_cast<size_t>(index - 1);
    return absl::InvalidArgumentError(absl::StrCat(role, " column ", spec,
                                                   ": out of range (columns are numbered 1 to ",
                                                   columns, ")"));
  }
  if (header.empty()) {
    return absl::InvalidArgumentError(absl::StrCat(
        role, " column '", spec, "': the file has no header; give the column's number (1 to ",
        columns, ")"));
  }
  return absl::InvalidArgumentError(absl::StrCat(role, " column '", spec,
                                                 "': no such column (the header has: ",
                                                 absl::StrJoin(header, ", "), ")"));
}

absl::StatusOr<CsvTable> ReadCsvTable(std::string_view text, const CsvOptions& options, bool with_y,
                                      CsvReadReport* report) {
  GPSEL_RETURN_IF_ERROR(options.Validate());
  // The file's lines with their 1-based numbers, comment and blank lines left out.
  std::vector<std::pair<int, absl::string_view>> lines;
  int line_number = 0;
  absl::string_view all(text.data(), text.size());
  absl::ConsumePrefix(&all, "\xEF\xBB\xBF");  // the UTF-8 byte-order mark spreadsheets write
  for (absl::string_view line : absl::StrSplit(all, '\n')) {
    ++line_number;
    line = absl::StripAsciiWhitespace(line);
    if (line.empty() || absl::StartsWith(line, "#")) continue;
    lines.emplace_back(line_number, line);
  }
  CsvTable table;
  table.has_y = with_y;
  if (lines.empty()) return table;
  const char delimiter = options.delimiter != 0 ? options.delimiter : DetectDelimiter(lines[0].second);

  // A header is the first line when none of its cells is a number or a date.
  std::vector<std::string> header;
  size_t first_data = 0;
  {
    absl::StatusOr<std::vector<std::string>> fields =
        SplitFields(lines[0].second, delimiter, lines[0].first);
    if (!fields.ok()) return fields.status();
    bool any_value = false;
    for (const std::string& f : *fields) {
      const CellKind kind = ClassifyCell(f, delimiter, options.date_unit).kind;
      if (kind == CellKind::kNumber || kind == CellKind::kDate) any_value = true;
    }
    if (!any_value) {
      header = *std::move(fields);
      first_data = 1;
    }
  }
  size_t columns = header.size();
  if (columns == 0) {
    absl::StatusOr<std::vector<std::string>> fields =
        SplitFields(lines[0].second, delimiter, lines[0].first);
    if (!fields.ok()) return fields.status();
    columns = fields->size();
  }

  // The columns to read, in order: x…, then y.
  std::vector<size_t> chosen;
  if (with_y) {
    if (columns < 2) {
      return absl::InvalidArgumentError(
          "csv: need at least two columns (inputs x…, then the target y last)");
    }
    size_t y = columns - 1;
    if (!options.y_column.empty()) {
      absl::StatusOr<size_t> resolved = ResolveColumn(options.y_column, "y", header, columns);
      if (!resolved.ok()) return resolved.status();
      y = *resolved;
    }
    if (options.x_columns.empty()) {
      for (size_t c = 0; c < columns; ++c) {
        if (c != y) chosen.push_back(c);
      }
    } else {
      for (const std::string& spec : options.x_columns) {
        absl::StatusOr<size_t> resolved = ResolveColumn(spec, "x", header, columns);
        if (!resolved.ok()) return resolved.status();
        if (*resolved == y) {
          return absl::InvalidArgumentError(
              absl::StrCat("x column '", spec, "' is the y column too"));
        }
        if (std::find(chosen.begin(), chosen.end(), *resolved) != chosen.end()) {
          return absl::InvalidArgumentError(absl::StrCat("x column '", spec, "' is given twice"));
        }
        chosen.push_back(*resolved);
      }
    }
    table.num_x = chosen.size();
    chosen.push_back(y);
  } else {
    for (size_t c = 0; c < columns; ++c) chosen.push_back(c);
    table.num_x = columns;
  }
  auto column_name = [&](size_t c) {
    return c < header.size() && !header[c].empty() ? header[c] : absl::StrCat("column ", c + 1);
  };

  // Each chosen column holds numbers or dates, whichever its first value is.
  std::vector<CellKind> column_kind(chosen.size(), CellKind::kMissing);
  std::vector<int> missing_lines;
  std::string first_missing;  // "line 5, column 2 ('NA')" of the first missing cell
  for (size_t l = first_data; l < lines.size(); ++l) {
    const int number = lines[l].first;
    absl::StatusOr<std::vector<std::string>> fields = SplitFields(lines[l].second, delimiter, number);
    if (!fields.ok()) return fields.status();
    if (fields->size() != columns) {
      return absl::InvalidArgumentError(absl::StrCat("line ", number, ": has ", fields->size(),
                                                     " columns, expected ", columns));
    }
    std::vector<double> values;
    values.reserve(chosen.size());
    bool missing = false;
    for (size_t k = 0; k < chosen.size(); ++k) {
      const size_t c = chosen[k];
      const std::string& field = (*fields)[c];
      const Cell cell = ClassifyCell(field, delimiter, options.date_unit);
      auto where = [&] { return absl::StrCat("line ", number, ", column ", c + 1, ": '", field, "'"); };
      const bool is_y = with_y && k + 1 == chosen.size();
      switch (cell.kind) {
        case CellKind::kText:
          return absl::InvalidArgumentError(absl::StrCat(
              where(), is_y ? " is not a number" : " is not a number (nor an ISO date)"));
        case CellKind::kMissing:
          if (!missing && first_missing.empty()) {
            first_missing = absl::StrCat("line ", number, ", column ", c + 1, " ('", field, "')");
          }
          missing = true;
          continue;
        case CellKind::kNumber:
          if (!std::isfinite(cell.value)) {
            return absl::InvalidArgumentError(absl::StrCat(where(), " is not a finite number"));
          }
          break;
        case CellKind::kDate:
          if (is_y) {
            return absl::InvalidArgumentError(
                absl::StrCat(where(), " is a date; the target y must be a number"));
          }
          break;
      }
      if (column_kind[k] == CellKind::kMissing) column_kind[k] = cell.kind;
      if (column_kind[k] != cell.kind) {
        return absl::InvalidArgumentError(absl::StrCat(
            where(), cell.kind == CellKind::kDate ? " is a date but the column's earlier cells are numbers"
                                                : " is a number but the column's earlier cells are dates"));
      }
      values.push_back(cell.value);
    }
    if (missing) {
      missing_lines.push_back(number);
      continue;
    }
    table.rows.push_back(std::move(values));
  }
  if (!missing_lines.empty() && options.missing == MissingValues::kError) {
    return absl::InvalidArgumentError(absl::StrCat(
        "missing value", missing_lines.size() == 1 ? " on line " : "s on lines ",
        LineList(missing_lines), " (first: ", first_missing,
        "); --missing drop skips such rows"));
  }
  if (report != nullptr) {
    *report = CsvReadReport{};
    report->delimiter = delimiter;
    report->date_unit = options.date_unit;
    report->dropped_lines = missing_lines;
    for (size_t k = 0; k < table.num_x; ++k) {
      report->x_names.push_back(column_name(chosen[k]));
      if (column_kind[k] == CellKind::kDate) report->date_columns.push_back(column_name(chosen[k]));
    }
    if (with_y) report->y_name = column_name(chosen.back());
  }
  return table;
}

std::string ReadFile(std::ifstream& in) {
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

}  // namespace

absl::StatusOr<Dataset> ParseCsv(std::string_view text, const DatasetLimits& limits) {
  return ParseCsv(text, CsvOptions{}, limits);
}

absl::StatusOr<Dataset> ParseCsv(std::string_view text, const CsvOptions& options,
                                 const DatasetLimits& limits, CsvReadReport* report) {
  absl::StatusOr<CsvTable> table = ReadCsvTable(text, options, /*with_y=*/true, report);
  if (!table.ok()) return table.status();
  const std::vector<std::vector<double>>& rows = table->rows;
  Dataset data;
  const Eigen::Index n = static_cast<Eigen::Index>(rows.size());
  if (n > limits.max_points) {
    return absl::InvalidArgumentError(
        absl::StrCat("y: ", n, " points exceed the limit of ", limits.max_points));
  }
  const size_t num_x = table->num_x;
  data.x.resize(n, static_cast<Eigen::Index>(num_x));
  data.y.resize(n);
  for (Eigen::Index i = 0; i < n; ++i) {
    for (size_t c = 0; c < num_x; ++c) data.x(i, static_cast<Eigen::Index>(c)) = rows[i][c];
    data.y(i) = rows[i][num_x];
  }
  if (absl::Status s = ValidateDataset(data, limits); !s.ok()) {
    return absl::InvalidArgumentError(absl::StrCat("csv: ", s.message()));
  }
  return data;
}

absl::StatusOr<Eigen::MatrixXd> ParseCsvInputs(std::string_view text, int max_rows) {
  return ParseCsvInputs(text, CsvOptions{}, max_rows);
}

absl::StatusOr<Eigen::MatrixXd> ParseCsvInputs(std::string_view text, const CsvOptions& options,
                                               int max_rows, CsvReadReport* report) {
  CsvOptions inputs_only = options;
  inputs_only.x_columns.clear();
  inputs_only.y_column.clear();
  absl::StatusOr<CsvTable> table = ReadCsvTable(text, inputs_only, /*with_y=*/false, report);
  if (!table.ok()) return table.status();
  if (table->rows.empty()) return absl::InvalidArgumentError("csv: has no rows of numbers");
  if (static_cast<int64_t>(table->rows.size()) > max_rows) {
    return absl::InvalidArgumentError(absl::StrCat("csv: ", table->rows.size(),
                                                   " rows exceed the limit of ", max_rows));
  }
  Eigen::MatrixXd x(static_cast<Eigen::Index>(table->rows.size()),
                    static_cast<Eigen::Index>(table->num_x));
  for (size_t i = 0; i < table->rows.size(); ++i) {
    for (size_t c = 0; c < table->num_x; ++c) x(i, c) = table->rows[i][c];
  }
  return x;
}

absl::StatusOr<Dataset> LoadCsvFile(const std::string& path, const DatasetLimits& limits) {
  return LoadCsvFile(path, CsvOptions{}, limits);
}

absl::StatusOr<Dataset> LoadCsvFile(const std::string& path, const CsvOptions& options,
                                    const DatasetLimits& limits, CsvReadReport* report) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::NotFoundError(absl::StrCat("cannot open data file '", path, "'"));
  absl::StatusOr<Dataset> data = ParseCsv(ReadFile(in), options, limits, report);
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
