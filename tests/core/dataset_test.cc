// Datasets: CSV parsing (optional header, comments, blank lines, quoting, multi-column x), every
// malformed input giving INVALID_ARGUMENT with the line/column in the message, files (missing →
// NOT_FOUND, the bundled data sets), validation limits and standardisation of y.
#include "gpsel/core/dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

namespace gpsel {
namespace {

using ::testing::HasSubstr;

std::string Message(const absl::Status& s) { return std::string(s.message()); }

Dataset Parse(std::string_view text, const DatasetLimits& limits = {}) {
  absl::StatusOr<Dataset> data = ParseCsv(text, limits);
  EXPECT_TRUE(data.ok()) << data.status() << "\n--- input ---\n" << text;
  return data.ok() ? *data : Dataset{};
}

// Expects INVALID_ARGUMENT whose message contains every fragment.
void ExpectInvalid(std::string_view text, const std::vector<std::string>& fragments,
                   const DatasetLimits& limits = {}) {
  absl::StatusOr<Dataset> data = ParseCsv(text, limits);
  ASSERT_FALSE(data.ok()) << "accepted:\n" << text;
  EXPECT_THAT(data, StatusIs(absl::StatusCode::kInvalidArgument)) << data.status();
  for (const std::string& f : fragments) {
    EXPECT_THAT(Message(data.status()), HasSubstr(f)) << "input:\n" << text;
  }
}

std::string WriteTemp(const std::string& name, const std::string& content) {
  const std::string path = ::testing::TempDir() + "/gpsel_dataset_test_" + name;
  std::ofstream out(path, std::ios::binary);
  out << content;
  return path;
}

// ---------------------------------------------------------------------------------------------
// Well-formed input.

TEST(DatasetCsvTest, HeaderIsOptional) {
  const Dataset with = Parse("x,y\n1,2\n3,4.5\n-1e-3,+7\n");
  const Dataset without = Parse("1,2\n3,4.5\n-1e-3,+7\n");
  ASSERT_EQ(with.num_points(), 3);
  ASSERT_EQ(with.num_dims(), 1);
  EXPECT_EQ(with.x, without.x);
  EXPECT_EQ(with.y, without.y);
  EXPECT_EQ(with.x(0, 0), 1.0);
  EXPECT_EQ(with.x(2, 0), -1e-3);
  EXPECT_EQ(with.y(1), 4.5);
  EXPECT_EQ(with.y(2), 7.0);
}

TEST(DatasetCsvTest, MultiColumnInputsTakeAllButTheLastColumn) {
  const Dataset d = Parse("a,b,c,target\n1,2,3,4\n5,6,7,8\n9,10,11,12\n");
  ASSERT_EQ(d.num_points(), 3);
  ASSERT_EQ(d.num_dims(), 3);
  EXPECT_EQ(d.x.row(1), Eigen::RowVector3d(5, 6, 7));
  EXPECT_EQ(d.x.col(2), Eigen::Vector3d(3, 7, 11));
  EXPECT_EQ(d.y, Eigen::Vector3d(4, 8, 12));
}

TEST(DatasetCsvTest, CommentsBlankLinesWhitespaceCrlfAndQuotes) {
  const Dataset d = Parse(
      "# measured on 2024-01-01\n"
      "\n"
      "   # indented comment\n"
      " \"x\" , \"y\" \r\n"
      " 1 , 2 \r\n"
      "\r\n"
      "# between rows\n"
      "\t3,\t4\r\n"
      "\"5\",\"6\"\n"
      "\n\n");
  ASSERT_EQ(d.num_points(), 3);
  EXPECT_EQ(d.x.col(0), Eigen::Vector3d(1, 3, 5));
  EXPECT_EQ(d.y, Eigen::Vector3d(2, 4, 6));
  // No trailing newline at all.
  EXPECT_EQ(Parse("1,2\n3,4").num_points(), 2);
}

TEST(DatasetCsvTest, NumberFormats) {
  const Dataset d = Parse("x,y\n.5,-.25\n1E3,2e-2\n+0,-0\n  12345678901234567890 , 1\n");
  ASSERT_EQ(d.num_points(), 4);
  EXPECT_EQ(d.x(0, 0), 0.5);
  EXPECT_EQ(d.y(0), -0.25);
  EXPECT_EQ(d.x(1, 0), 1000.0);
  EXPECT_EQ(d.y(1), 0.02);
  EXPECT_EQ(d.x(3, 0), 12345678901234567890.0);
}

// ---------------------------------------------------------------------------------------------
// Malformed input: INVALID_ARGUMENT naming the line and, where there is one, the column.

TEST(DatasetCsvTest, NonNumericCellNamesLineAndColumn) {
  ExpectInvalid("x,y\n1,2\n3,abc\n", {"line 3", "column 2", "abc"});
  ExpectInvalid("1,2\n3,4\nfoo,5\n", {"line 3", "column 1", "foo"});
  // Comment and blank lines count in the line numbers (they are the file's lines).
  ExpectInvalid("# c\n\nx,y\n1,2\n\n3,4\n1.2.3,4\n", {"line 7", "column 1", "1.2.3"});
  // CRLF files count lines the same way.
  ExpectInvalid("x,y\r\n1,2\r\n3,4\r\n5,x5\r\n", {"line 4", "column 2", "x5"});
  // A header is only possible on the first non-comment line.
  ExpectInvalid("x,y\nu,v\n1,2\n3,4\n", {"line 2", "column 1", "'u'"});
  // Empty cells.
  ExpectInvalid("x,y\n1,2\n3,\n", {"line 3", "column 2"});
  ExpectInvalid("x,y\n1,2\n,3\n", {"line 3", "column 1"});
  ExpectInvalid("x,y,z\n1,2,3\n4,5,6,\n7,8,9\n", {"line 3"});
}

TEST(DatasetCsvTest, NanAndInfinityAreRejectedWithLineAndColumn) {
  ExpectInvalid("x,y\n1,2\nnan,3\n", {"line 3", "column 1", "nan"});
  ExpectInvalid("x,y\n1,2\n2,NaN\n", {"line 3", "column 2", "NaN"});
  ExpectInvalid("x,y\n1,2\n2,inf\n", {"line 3", "column 2"});
  ExpectInvalid("x,y\n1,2\n-Infinity,3\n4,5\n", {"line 3", "column 1"});
  // Overflowing literals are infinite too.
  ExpectInvalid("x,y\n1,2\n2,1e400\n", {"line 3", "column 2"});
  ExpectInvalid("x,y\n1,2\n-1e999,0\n", {"line 3", "column 1"});
  // Also on the very first line (where a header would be allowed).
  ExpectInvalid("nan,1\n1,2\n3,4\n", {"line 1", "column 1"});
}

TEST(DatasetCsvTest, RaggedRowsNameTheLine) {
  ExpectInvalid("x,y\n1,2\n3,4,5\n", {"line 3", "3", "2"});
  ExpectInvalid("1,2,3\n4,5\n", {"line 2"});
  ExpectInvalid("x,y\n1,2\n3\n", {"line 3"});
  // A header with a different width than the data is ragged too.
  ExpectInvalid("a,b,c\n1,2\n3,4\n", {"line 2"});
}

TEST(DatasetCsvTest, TooFewPointsTooFewColumnsAndEmptyInput) {
  ExpectInvalid("x,y\n1,2\n", {"2"});           // one point
  ExpectInvalid("1,2\n", {"2"});
  ExpectInvalid("y\n1\n2\n3\n", {"column"});    // single column with header
  ExpectInvalid("1\n2\n3\n", {"column"});       // single column without
  ExpectInvalid("", {});                         // empty file
  ExpectInvalid("\n\n  \n", {});                 // blank lines only
  ExpectInvalid("# nothing here\n", {});         // comments only
  ExpectInvalid("x,y\n", {});                    // header only
  ExpectInvalid("x,y\n# no data\n\n", {});
}

TEST(DatasetCsvTest, LimitsApplyWhileParsing) {
  DatasetLimits limits;
  limits.max_points = 3;
  ExpectInvalid("1,1\n2,2\n3,3\n4,4\n", {"3"}, limits);
  EXPECT_EQ(Parse("1,1\n2,2\n3,3\n", limits).num_points(), 3);
  limits = {};
  limits.max_dims = 2;
  ExpectInvalid("1,2,3,4\n5,6,7,8\n", {"x", "2"}, limits);
  EXPECT_EQ(Parse("1,2,3\n5,6,7\n", limits).num_dims(), 2);
  limits = {};
  limits.min_points = 4;
  ExpectInvalid("1,1\n2,2\n3,3\n", {"4"}, limits);
}

// ---------------------------------------------------------------------------------------------
// Files.

TEST(DatasetFileTest, MissingFileIsNotFound) {
  absl::StatusOr<Dataset> d = LoadCsvFile(::testing::TempDir() + "/gpsel_no_such_file.csv");
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d, StatusIs(absl::StatusCode::kNotFound));
  EXPECT_THAT(Message(d.status()), HasSubstr("gpsel_no_such_file.csv"));
  EXPECT_THAT(LoadCsvFile(""), StatusIs(absl::StatusCode::kNotFound));
}

TEST(DatasetFileTest, FileErrorsNameThePathAndLine) {
  const std::string path = WriteTemp("bad.csv", "x,y\n1,2\n3,four\n");
  absl::StatusOr<Dataset> d = LoadCsvFile(path);
  ASSERT_FALSE(d.ok());
  EXPECT_THAT(d, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Message(d.status()), HasSubstr(path));
  EXPECT_THAT(Message(d.status()), HasSubstr("line 3"));
  EXPECT_THAT(Message(d.status()), HasSubstr("column 2"));
  const std::string empty = WriteTemp("empty.csv", "");
  EXPECT_THAT(LoadCsvFile(empty), StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(DatasetFileTest, FileRoundTripWithMultipleColumns) {
  const std::string path = WriteTemp("ok.csv", "# two inputs\nx0,x1,y\n0,1,2\n3,4,5\n6,7,8\n");
  absl::StatusOr<Dataset> d = LoadCsvFile(path);
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_points(), 3);
  EXPECT_EQ(d->num_dims(), 2);
  EXPECT_EQ(d->y, Eigen::Vector3d(2, 5, 8));
}

TEST(DatasetFileTest, BundledMaunaLoaHas521MonthlyPoints) {
  absl::StatusOr<Dataset> d = LoadCsvFile(GPSEL_DATA_DIR "/mauna_loa_monthly.csv");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_points(), 521);
  EXPECT_EQ(d->num_dims(), 1);
  EXPECT_DOUBLE_EQ(d->x(0, 0), 1958.208333);
  EXPECT_DOUBLE_EQ(d->y(0), 316.1);
  // Monthly, strictly increasing, 1958–2001, CO₂ in ppm.
  for (int i = 1; i < d->num_points(); ++i) EXPECT_GT(d->x(i, 0), d->x(i - 1, 0)) << i;
  EXPECT_GE(d->x.minCoeff(), 1958.0);
  EXPECT_LT(d->x.maxCoeff(), 2002.0);
  EXPECT_GT(d->y.minCoeff(), 300.0);
  EXPECT_LT(d->y.maxCoeff(), 400.0);
  EXPECT_TRUE(ValidateDataset(*d).ok());
}

TEST(DatasetFileTest, BundledInterpretableExampleHasTenPoints) {
  absl::StatusOr<Dataset> d = LoadCsvFile(GPSEL_DATA_DIR "/interpretable_linear.csv");
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->num_points(), 10);
  EXPECT_EQ(d->num_dims(), 1);
  // x = 0, 1/9, ..., 1.
  for (int i = 0; i < 10; ++i) EXPECT_NEAR(d->x(i, 0), i / 9.0, 1e-14) << i;
  EXPECT_NEAR(d->y(0), 0.106470838606225, 1e-15);
}

// ---------------------------------------------------------------------------------------------
// CSV as people have it: dates, missing cells, separators, chosen columns (CsvOptions).

Dataset ParseWith(std::string_view text, const CsvOptions& options, CsvReadReport* report = nullptr) {
  absl::StatusOr<Dataset> data = ParseCsv(text, options, DatasetLimits{}, report);
  EXPECT_TRUE(data.ok()) << data.status() << "\n--- input ---\n" << text;
  return data.ok() ? *data : Dataset{};
}

void ExpectInvalidWith(std::string_view text, const CsvOptions& options,
                       const std::vector<std::string>& fragments) {
  absl::StatusOr<Dataset> data = ParseCsv(text, options, DatasetLimits{});
  ASSERT_FALSE(data.ok()) << "accepted:\n" << text;
  EXPECT_THAT(data, StatusIs(absl::StatusCode::kInvalidArgument)) << data.status();
  for (const std::string& f : fragments) {
    EXPECT_THAT(Message(data.status()), HasSubstr(f)) << "input:\n" << text;
  }
}

std::string ReadText(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

// Decimal years and days against hand-counted calendars: days before the date over the days of
// its year (leap years 366), days since 1970-01-01 counted by whole years of 365/366.
TEST(DatasetDatesTest, IsoDatesAsDecimalYearsAndDays) {
  struct Case {
    const char* text;
    double years;
    double days;
  };
  // 1970..1999 hold 7 leap years (72, 76, …, 96): 30·365 + 7 = 10957 days to 2000-01-01.
  const Case cases[] = {
      {"1970-01-01", 1970.0, 0.0},
      {"1970-01-02", 1970.0 + 1.0 / 365, 1.0},
      {"2000-01-01", 2000.0, 10957.0},
      {"2000-01-01T12:00:00Z", 2000.0 + 0.5 / 366, 10957.5},
      {"2000-01-01t12:00Z", 2000.0 + 0.5 / 366, 10957.5},
      {"2000-01-01 18:00", 2000.0 + 0.75 / 366, 10957.75},
      {"2000-01-01T14:00:00+02:00", 2000.0 + 0.5 / 366, 10957.5},  // 12:00 UTC
      {"2000-01-01T06:00:00.5-06:00", 2000.0 + (0.5 + 0.5 / 86400) / 366, 10957.5 + 0.5 / 86400},
      {"2024-07-02", 2024.5, 19906.0},          // day 183 of 366; 54 years, 13 leap days
      {"1959-03-31", 1959.0 + 89.0 / 365, -3929.0},  // 31 + 28 + 30 days into 1959
      {"1959-03", 1959.0 + 59.0 / 365, -3959.0},     // a month means its first day
      {"1900-03-01", 1900.0 + 59.0 / 365, -25508.0},  // 1900 is not a leap year
  };
  for (const Case& c : cases) {
    absl::StatusOr<double> years = ParseIsoDate(c.text, DateUnit::kYears);
    absl::StatusOr<double> days = ParseIsoDate(c.text, DateUnit::kDays);
    ASSERT_TRUE(years.ok() && days.ok()) << c.text << ": " << years.status() << days.status();
    EXPECT_NEAR(*years, c.years, 1e-12) << c.text;
    EXPECT_NEAR(*days, c.days, 1e-9) << c.text;
  }
  for (const char* bad : {"2023-02-29", "2023-13-01", "2023-02-30", "2023-01-01T25:00",
                          "2023-1-1", "20230101", "1959", "-5", "2023-01-01T12", "2023-01-01x",
                          "01/02/2023", ""}) {
    EXPECT_FALSE(ParseIsoDate(bad, DateUnit::kYears).ok()) << bad;
  }
}

// The bundled weekly CO2 as it is published (data/co2_weekly_dated.csv: ISO dates, NA for the 59
// weeks without a measurement): by default the NA rows are an error naming their lines; dropped,
// the dates read back as data/co2_weekly.csv's decimal years, and as days 7 apart.
TEST(DatasetCsvOptionsTest, DatedWeeklyCo2WithMissingWeeksReadsBackAsTheBundledSeries) {
  const std::string text = ReadText(GPSEL_DATA_DIR "/co2_weekly_dated.csv");
  ASSERT_FALSE(text.empty());
  // Lines 8, 11, 12 are the first NA weeks (1958-05-10, 05-31, 06-07).
  ExpectInvalidWith(text, CsvOptions{},
                    {"missing values on lines 8, 11, 12", "and 49 more", "column 2 ('NA')",
                     "--missing drop"});
  CsvOptions drop;
  drop.missing = MissingValues::kDrop;
  CsvReadReport report;
  const Dataset dated = ParseWith(text, drop, &report);
  absl::StatusOr<Dataset> bundled = LoadCsvFile(GPSEL_DATA_DIR "/co2_weekly.csv");
  ASSERT_TRUE(bundled.ok()) << bundled.status();
  ASSERT_EQ(dated.num_points(), 2225);
  EXPECT_EQ(dated.y, bundled->y);
  EXPECT_LE((dated.x - bundled->x).cwiseAbs().maxCoeff(), 1e-11);
  EXPECT_EQ(report.dropped_lines.size(), 59u);
  EXPECT_EQ(report.dropped_lines.front(), 8);
  EXPECT_EQ(report.date_columns, std::vector<std::string>{"date"});
  EXPECT_EQ(report.y_name, "co2");
  ASSERT_EQ(report.Notes().size(), 2u);
  EXPECT_THAT(report.Notes()[0], HasSubstr("'date' holds ISO dates, read as decimal years"));
  EXPECT_THAT(report.Notes()[1], HasSubstr("dropped 59 rows with missing values (lines 8, 11, 12"));

  drop.date_unit = DateUnit::kDays;
  const Dataset days = ParseWith(text, drop);
  EXPECT_NEAR(days.x(0, 0), -4296.0, 1e-9);  // 1958-03-29: 12 years (3 leap) minus 87 days
  for (int i = 1; i < days.num_points(); ++i) {
    const double step = days.x(i, 0) - days.x(i - 1, 0);
    EXPECT_EQ(std::fmod(step, 7.0), 0.0) << i;  // whole weeks, the missing ones skipped
  }
}

// A ';'-separated export with decimal commas (a spreadsheet in a comma-decimal locale), a tab-
// separated one, and the same data given with --delimiter: the same numbers.
TEST(DatasetCsvOptionsTest, SemicolonWithDecimalCommaAndTabAreDetected) {
  const Dataset comma = Parse("Datum,Temperatur\n2024-01-01,3.5\n2024-01-02,-1.25\n2024-01-03,0\n");
  CsvReadReport report;
  const Dataset semicolon =
      ParseWith("Datum;Temperatur\n2024-01-01;3,5\n2024-01-02;-1,25\n2024-01-03;0\n", {}, &report);
  EXPECT_EQ(report.delimiter, ';');
  EXPECT_THAT(report.Notes()[0], HasSubstr("separated by ';'"));
  const Dataset tab = ParseWith("Datum\tTemperatur\n2024-01-01\t3.5\n2024-01-02\t-1.25\n2024-01-03\t0\n", {});
  ASSERT_EQ(comma.num_points(), 3);
  for (const Dataset* d : {&semicolon, &tab}) {
    EXPECT_EQ(d->x, comma.x);
    EXPECT_EQ(d->y, comma.y);
  }
  EXPECT_EQ(comma.y(1), -1.25);
  EXPECT_NEAR(comma.x(1, 0), 2024.0 + 1.0 / 366, 1e-12);
  // Given explicitly: a ';' file read with ',' is one column per line, so it fails loudly.
  CsvOptions forced;
  forced.delimiter = ',';
  ExpectInvalidWith("a;b\n1;2\n3;4\n", forced, {"need at least two columns"});
  forced.delimiter = ';';
  EXPECT_EQ(ParseWith("a;b\n1;2\n3;4\n", forced).y, Eigen::Vector2d(2, 4));
  forced.delimiter = '|';
  ExpectInvalidWith("a|b\n1|2\n", forced, {"delimiter"});
  // An unclosed quote names its line.
  ExpectInvalid("x,y\n\"1,2\n", {"line 2", "quote"});
}

// Columns picked by header name or 1-based index, the rest left unread (text allowed there).
TEST(DatasetCsvOptionsTest, ColumnsByNameOrIndex) {
  // A pandas export (an unnamed index column) of a NOAA-style monthly table.
  const std::string text =
      ",station,year,month,decimal date,average,trend\n"
      "0,\"Mauna Loa, HI\",1958,3,1958.2027,315.70,314.43\n"
      "1,\"Mauna Loa, HI\",1958,4,1958.2877,317.45,315.16\n"
      "2,\"Mauna Loa, HI\",1958,5,1958.3699,317.51,314.71\n";
  CsvOptions by_name;
  by_name.x_columns = {"decimal date"};
  by_name.y_column = "average";
  CsvReadReport report;
  const Dataset named = ParseWith(text, by_name, &report);
  ASSERT_EQ(named.num_points(), 3);
  ASSERT_EQ(named.num_dims(), 1);
  EXPECT_EQ(named.x(2, 0), 1958.3699);
  EXPECT_EQ(named.y, Eigen::Vector3d(315.70, 317.45, 317.51));
  EXPECT_EQ(report.x_names, std::vector<std::string>{"decimal date"});
  // A spreadsheet's UTF-8 byte-order mark does not become part of the first column's name.
  CsvOptions first_column;
  first_column.x_columns = {"date"};
  first_column.y_column = "co2";
  const Dataset bom = ParseWith("\xEF\xBB\xBF" "date,co2\n2024-01-01,1\n2024-07-02,2\n", first_column);
  EXPECT_EQ(bom.x, Eigen::Vector2d(2024.0, 2024.5));
  EXPECT_EQ(report.y_name, "average");
  EXPECT_TRUE(report.Notes().empty());
  CsvOptions by_index;
  by_index.x_columns = {"3", "4"};  // year, month
  by_index.y_column = "7";          // trend
  const Dataset indexed = ParseWith(text, by_index);
  ASSERT_EQ(indexed.num_dims(), 2);
  EXPECT_EQ(indexed.x.row(1), Eigen::RowVector2d(1958, 4));
  EXPECT_EQ(indexed.y(0), 314.43);
  // y alone: x is every other column, so the text column is an error naming it.
  CsvOptions y_only;
  y_only.y_column = "average";
  ExpectInvalidWith(text, y_only, {"line 2", "column 2", "Mauna Loa, HI", "not a number"});
  // Bad names and indices name the column and what there is.
  CsvOptions bad;
  bad.y_column = "co2";
  ExpectInvalidWith(text, bad, {"y column 'co2'", "no such column", "decimal date, average"});
  bad.y_column = "9";
  ExpectInvalidWith(text, bad, {"y column 9", "1 to 7"});
  bad.y_column = "average";
  bad.x_columns = {"year", "average"};
  ExpectInvalidWith(text, bad, {"'average' is the y column too"});
  bad.x_columns = {"year", "3"};
  ExpectInvalidWith(text, bad, {"'3' is given twice"});
  CsvOptions headerless;
  headerless.y_column = "co2";
  ExpectInvalidWith("1,2\n3,4\n", headerless, {"no header", "1 to 2"});
  headerless.y_column = "1";
  headerless.x_columns = {"2"};
  EXPECT_EQ(ParseWith("1,2\n3,4\n", headerless).y, Eigen::Vector2d(1, 3));
}

// Missing cells: every usual spelling; only the columns read count; drop keeps the rest in order.
TEST(DatasetCsvOptionsTest, MissingValuesErrorOrDrop) {
  const std::string text =
      "DATE,UNRATE,NOTE\n"
      "1948-01-01,3.4,\n"
      "1948-02-01,.,revised\n"   // FRED writes '.'
      "1948-03-01,NA,\n"
      "1948-04-01,3.9,\n"
      ",4.0,no date\n"
      "1948-06-01,n/a,\n"
      "1948-07-01,NaN,\n"
      "1948-08-01,null,\n"
      "1948-09-01,3.8,\n";
  CsvOptions options;
  options.x_columns = {"DATE"};
  options.y_column = "UNRATE";
  ExpectInvalidWith(text, options,
                    {"missing values on lines 3, 4, 6, 7, 8, 9", "first: line 3, column 2 ('.')"});
  options.missing = MissingValues::kDrop;
  CsvReadReport report;
  const Dataset d = ParseWith(text, options, &report);
  ASSERT_EQ(d.num_points(), 3);
  EXPECT_EQ(d.y, Eigen::Vector3d(3.4, 3.9, 3.8));
  EXPECT_NEAR(d.x(1, 0), 1948.0 + 91.0 / 366, 1e-12);  // 1948-04-01, a leap year
  EXPECT_EQ(report.dropped_lines, (std::vector<int>{3, 4, 6, 7, 8, 9}));
  // Dropping nearly everything leaves too few points: the usual error.
  CsvOptions drop;
  drop.missing = MissingValues::kDrop;
  ExpectInvalidWith("x,y\n1,NA\n2,NA\n3,4\n", drop, {"need at least 2 points, got 1"});
  // Infinity is not missing: still an error, with either policy.
  ExpectInvalidWith("x,y\n1,2\n2,inf\n3,4\n", drop, {"line 3", "not a finite number"});
}

TEST(DatasetCsvOptionsTest, DatesOnlyInXAndNotMixedWithNumbers) {
  ExpectInvalid("x,y\n1,2024-01-01\n2,2024-01-02\n", {"line 2", "is a date", "y must be a number"});
  ExpectInvalid("t,y\n2024-01-01,1\n2024.1,2\n", {"line 3", "is a number but", "dates"});
  ExpectInvalid("t,y\n2024,1\n2024-01-02,2\n", {"line 3", "is a date but", "numbers"});
  ExpectInvalid("t,y\n2024-01-01,1\n2024-02-30,2\n", {"line 3", "2024-02-30", "ISO date"});
  // Two date columns (start, end) and a number: three inputs.
  const Dataset d =
      Parse("start,end,depth,y\n2000-01-01,2000-01-02T12:00Z,3,1\n2001-01-01,2001-07-02T12:00Z,4,2\n");
  ASSERT_EQ(d.num_dims(), 3);
  EXPECT_EQ(d.x(0, 0), 2000.0);
  EXPECT_NEAR(d.x(0, 1), 2000.0 + 1.5 / 366, 1e-12);
  EXPECT_NEAR(d.x(1, 1), 2001.5, 1e-12);  // 182.5 days of 365
}

// New inputs of a prediction read with the same rules: dates in the same unit as the data.
TEST(DatasetCsvOptionsTest, InputsTakeDatesAndTheDelimiter) {
  CsvOptions days;
  days.date_unit = DateUnit::kDays;
  absl::StatusOr<Eigen::MatrixXd> x = ParseCsvInputs("date\n2000-01-01\n2000-01-03T06:00Z\n", days);
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_EQ(*x, Eigen::Vector2d(10957.0, 10959.25));
  x = ParseCsvInputs("a;b\n1,5;2\n3;4\n");
  ASSERT_TRUE(x.ok()) << x.status();
  EXPECT_EQ(x->row(0), Eigen::RowVector2d(1.5, 2));
  EXPECT_THAT(ParseCsvInputs("x\n1\nNA\n"), StatusIs(absl::StatusCode::kInvalidArgument));
}

// ---------------------------------------------------------------------------------------------
// Validation.

Dataset Small(int n, int dims) {
  Dataset d;
  d.x = Eigen::MatrixXd::Random(n, dims);
  d.y = Eigen::VectorXd::LinSpaced(n, 0.0, 1.0);
  return d;
}

void ExpectInvalidDataset(const Dataset& d, const std::string& fragment,
                          const DatasetLimits& limits = {}) {
  absl::Status s = ValidateDataset(d, limits);
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument) << s;
  EXPECT_THAT(Message(s), HasSubstr(fragment));
}

TEST(DatasetValidateTest, Limits) {
  EXPECT_TRUE(ValidateDataset(Small(2, 1)).ok());
  EXPECT_TRUE(ValidateDataset(Small(kDefaultMaxPoints, 1)).ok());
  EXPECT_TRUE(ValidateDataset(Small(3, 64)).ok());
  ExpectInvalidDataset(Small(1, 1), "y");
  ExpectInvalidDataset(Small(kDefaultMaxPoints + 1, 1),
                       absl::StrCat("exceed the limit of ", kDefaultMaxPoints));
  ExpectInvalidDataset(Small(3, 65), "x");
  ExpectInvalidDataset(Small(3, 0), "x");
  Dataset empty;
  ExpectInvalidDataset(empty, "y");
  DatasetLimits limits;
  limits.min_points = 5;
  limits.max_points = 6;
  limits.max_dims = 2;
  EXPECT_TRUE(ValidateDataset(Small(5, 2), limits).ok());
  ExpectInvalidDataset(Small(4, 2), "5", limits);
  ExpectInvalidDataset(Small(7, 2), "6", limits);
  ExpectInvalidDataset(Small(5, 3), "2", limits);
}

TEST(DatasetValidateTest, ShapeMismatchAndNonFiniteValuesNameTheField) {
  Dataset d = Small(5, 2);
  d.y.resize(4);
  ExpectInvalidDataset(d, "x");
  d = Small(5, 2);
  d.y(3) = std::nan("");
  ExpectInvalidDataset(d, "y[3]");
  d = Small(5, 2);
  d.x(2, 1) = -INFINITY;
  ExpectInvalidDataset(d, "x[2][1]");
}

TEST(DatasetValidateTest, BadLimitsAreInvalidArgument) {
  DatasetLimits limits;
  EXPECT_TRUE(limits.Validate().ok());
  limits.min_points = 0;
  EXPECT_EQ(limits.Validate().code(), absl::StatusCode::kInvalidArgument);
  limits = {};
  limits.max_points = 1;  // below min_points = 2
  EXPECT_EQ(limits.Validate().code(), absl::StatusCode::kInvalidArgument);
  limits = {};
  limits.max_dims = 0;
  EXPECT_EQ(limits.Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ValidateDataset(Small(3, 1), limits).code(), absl::StatusCode::kInvalidArgument);
}

// ---------------------------------------------------------------------------------------------
// Standardisation.

TEST(DatasetStandardizeTest, MeanZeroSampleSdOneAfterwards) {
  const Eigen::VectorXd y = (Eigen::VectorXd(4) << 1.0, 2.0, 3.0, 4.0).finished();
  absl::StatusOr<Standardization> s = ComputeStandardization(y, true);
  ASSERT_TRUE(s.ok()) << s.status();
  EXPECT_TRUE(s->applied);
  EXPECT_DOUBLE_EQ(s->mean, 2.5);
  EXPECT_DOUBLE_EQ(s->scale, std::sqrt(5.0 / 3.0));  // sample sd (n − 1)

  absl::StatusOr<Dataset> mauna = LoadCsvFile(GPSEL_DATA_DIR "/mauna_loa_monthly.csv");
  ASSERT_TRUE(mauna.ok());
  for (const Eigen::VectorXd& values : {y, mauna->y, Eigen::VectorXd(mauna->y * 1e-9),
                                        Eigen::VectorXd(mauna->y.array() * 1e6 - 3e8)}) {
    absl::StatusOr<Standardization> t = ComputeStandardization(values, true);
    ASSERT_TRUE(t.ok()) << t.status();
    const Eigen::VectorXd z = ApplyStandardization(*t, values);
    const double n = static_cast<double>(z.size());
    EXPECT_NEAR(z.mean(), 0.0, 1e-12);
    EXPECT_NEAR(std::sqrt((z.array() - z.mean()).square().sum() / (n - 1)), 1.0, 1e-12);
    // Invertible: y = z·scale + mean.
    EXPECT_LE(((z.array() * t->scale + t->mean) - values.array()).abs().maxCoeff(),
              1e-12 * values.cwiseAbs().maxCoeff());
  }
}

TEST(DatasetStandardizeTest, ConstantTargetsCannotBeStandardised) {
  const Eigen::VectorXd y = Eigen::VectorXd::Constant(6, 3.7);
  absl::StatusOr<Standardization> s = ComputeStandardization(y, true);
  ASSERT_FALSE(s.ok());
  EXPECT_THAT(s, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(Message(s.status()), HasSubstr("y"));
  EXPECT_THAT(ComputeStandardization(Eigen::VectorXd::Zero(3), true),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(ComputeStandardization(Eigen::VectorXd::Ones(1), true),
              StatusIs(absl::StatusCode::kInvalidArgument));
  // Constant y is fine when standardisation is off.
  EXPECT_TRUE(ComputeStandardization(y, false).ok());
  // Constants whose rounded mean is an ulp off give sd ≈ 1e-16·|y| rather than 0: still constant
  // (dividing by that sd would blow rounding noise up to unit variance).
  for (const auto& [value, n] : std::vector<std::pair<double, int>>{
           {3.7, 3}, {3.7, 24}, {0.1, 10}, {316.1, 521}, {1e-3, 24}, {-0.3, 10}}) {
    absl::StatusOr<Standardization> t =
        ComputeStandardization(Eigen::VectorXd::Constant(n, value), true);
    EXPECT_THAT(t, StatusIs(absl::StatusCode::kInvalidArgument))
        << value << " × " << n << ": scale " << (t.ok() ? t->scale : 0.0);
  }
  // Small but real variation is standardised, whatever the magnitude.
  for (const Eigen::VectorXd& v :
       {Eigen::VectorXd(Eigen::Vector3d(1e-100, 2e-100, 4e-100)),
        Eigen::VectorXd(Eigen::Vector3d(1000.0, 1000.0 + 1e-6, 1000.0 - 2e-6)),
        Eigen::VectorXd(Eigen::Vector3d(1e100, -1e100, 0.0))}) {
    absl::StatusOr<Standardization> t = ComputeStandardization(v, true);
    ASSERT_TRUE(t.ok()) << v.transpose() << ": " << t.status();
    const Eigen::VectorXd z = ApplyStandardization(*t, v);
    EXPECT_NEAR(z.mean(), 0.0, 1e-6);
    EXPECT_NEAR(z.squaredNorm() / 2.0, 1.0, 1e-6);
  }
}

TEST(DatasetStandardizeTest, OffIsTheIdentity) {
  const Eigen::VectorXd y = (Eigen::VectorXd(3) << 10.0, -2.0, 1e300).finished();
  absl::StatusOr<Standardization> s = ComputeStandardization(y, false);
  ASSERT_TRUE(s.ok());
  EXPECT_FALSE(s->applied);
  EXPECT_EQ(s->mean, 0.0);
  EXPECT_EQ(s->scale, 1.0);
  EXPECT_EQ(ApplyStandardization(*s, y), y);  // bit-identical
  // A default-constructed transform is the identity too.
  EXPECT_EQ(ApplyStandardization(Standardization{}, y), y);
}

}  // namespace
}  // namespace gpsel
