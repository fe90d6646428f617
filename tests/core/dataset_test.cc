// Datasets: CSV parsing (optional header, comments, blank lines, quoting, multi-column x), every
// malformed input giving INVALID_ARGUMENT with the line/column in the message, files (missing →
// NOT_FOUND, the bundled data sets), validation limits and standardisation of y.
#include "gpsel/core/dataset.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"

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
  EXPECT_EQ(data.status().code(), absl::StatusCode::kInvalidArgument) << data.status();
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
  EXPECT_EQ(d.status().code(), absl::StatusCode::kNotFound);
  EXPECT_THAT(Message(d.status()), HasSubstr("gpsel_no_such_file.csv"));
  EXPECT_EQ(LoadCsvFile("").status().code(), absl::StatusCode::kNotFound);
}

TEST(DatasetFileTest, FileErrorsNameThePathAndLine) {
  const std::string path = WriteTemp("bad.csv", "x,y\n1,2\n3,four\n");
  absl::StatusOr<Dataset> d = LoadCsvFile(path);
  ASSERT_FALSE(d.ok());
  EXPECT_EQ(d.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(d.status()), HasSubstr(path));
  EXPECT_THAT(Message(d.status()), HasSubstr("line 3"));
  EXPECT_THAT(Message(d.status()), HasSubstr("column 2"));
  const std::string empty = WriteTemp("empty.csv", "");
  EXPECT_EQ(LoadCsvFile(empty).status().code(), absl::StatusCode::kInvalidArgument);
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
  EXPECT_EQ(s.status().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(Message(s.status()), HasSubstr("y"));
  EXPECT_EQ(ComputeStandardization(Eigen::VectorXd::Zero(3), true).status().code(),
            absl::StatusCode::kInvalidArgument);
  EXPECT_EQ(ComputeStandardization(Eigen::VectorXd::Ones(1), true).status().code(),
            absl::StatusCode::kInvalidArgument);
  // Constant y is fine when standardisation is off.
  EXPECT_TRUE(ComputeStandardization(y, false).ok());
  // Constants whose rounded mean is an ulp off give sd ≈ 1e-16·|y| rather than 0: still constant
  // (dividing by that sd would blow rounding noise up to unit variance).
  for (const auto& [value, n] : std::vector<std::pair<double, int>>{
           {3.7, 3}, {3.7, 24}, {0.1, 10}, {316.1, 521}, {1e-3, 24}, {-0.3, 10}}) {
    absl::StatusOr<Standardization> t =
        ComputeStandardization(Eigen::VectorXd::Constant(n, value), true);
    EXPECT_EQ(t.status().code(), absl::StatusCode::kInvalidArgument)
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
