// The report library (report/): the words' rule table (client/report/describe.h) on fitted values with
// known answers, and WriteReport on real results of the Nile data (search, scores, predictions,
// a nested-sampling run), whose files are checked for structure — figure count, axis ranges,
// series drawn in the SVG, PNG size — not pixels.
#include "gpsel/client/report/report.h"

#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <regex>
#include <sstream>
#include <string>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gmock/gmock.h"
#include "gpsel/client/report/describe.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/evidence.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/predict.h"
#include "gpsel/core/score.h"
#include "gpsel/core/search.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

namespace gpsel::report {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

KernelExpr Kernel(const std::string& text) { return *ParseKernel(text); }

// Units of x and y and the span of x (no column names).
Units XYUnits(const std::string& x, const std::string& y, double x_range) {
  Units units;
  units.x = x;
  units.y = y;
  units.x_range = x_range;
  return units;
}

std::string Describe(const std::string& kernel, const std::map<std::string, double>& values,
                     Units units = {}, double y_scale = 1.0) {
  Standardization s;
  s.applied = y_scale != 1.0;
  s.scale = y_scale;
  absl::StatusOr<KernelDescription> d = DescribeKernel(Kernel(kernel), values, s, units);
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? d->text : "";
}

TEST(DescribeKernelTest, MaunaLoaReadsAsTrendSeasonAndNoise) {
  // C*SE + C*PER*SE in canonical order: C*PER*SE (C#1, PER, SE#1) then C*SE (C#2, SE#2).
  // Standardised y with sd 15 ppm: a noise variance of 0.02² is an sd of 0.3 ppm.
  const std::map<std::string, double> values = {{"C#1.constant", 0.01}, {"PER.lengthscale", 1.3},
                                                {"PER.period", 1.002},  {"SE#1.lengthscale", 4.1},
                                                {"C#2.constant", 2.0},  {"SE#2.lengthscale", 10.7},
                                                {"noise", 0.02 * 0.02}};
  EXPECT_EQ(Describe("C*SE + C*SE*PER", values, XYUnits("years", "ppm", 45.0), 15.0),
            "a smooth trend varying over about 11 years, plus a yearly periodic component whose "
            "shape drifts over about 4.1 years, plus noise of sd 0.3 ppm");
}

// A changepoint reads as "a change at about <x> (± sd) from <before> to <after>" (issue 31): the
// location is a fraction of x's range (1 = the first x), here 1 + 27.4/99 of 1871..1970.
TEST(DescribeKernelTest, AChangepointSaysWhereAndFromWhatToWhat) {
  Units units = XYUnits("years", "", 99.0);
  units.x_min = 1871.0;
  units.change_location_sd["CP"] = 0.56;
  const std::map<std::string, double> values = {
      {"C#1.constant", 1.0},        {"SE#1.lengthscale", 50.0}, {"C#2.constant", 0.2},
      {"SE#2.lengthscale", 0.5},    {"CP.location", 1.0 + 27.4 / 99.0},
      {"CP.transition", 0.01},      {"noise", 0.3}};
  const std::string text = Describe("CP(C*SE, C*SE)", values, units);
  EXPECT_THAT(text, HasSubstr("a change at about 1898 (± 0.56 years) from a smooth trend"));
  EXPECT_THAT(text, HasSubstr(" to "));
  EXPECT_THAT(text, HasSubstr("plus noise"));
  // A change inside a sum is one summand among the others.
  const std::string sum = Describe("LIN + CP(C, C)",
                                   {{"LIN.variance", 0.1}, {"C#1.constant", 1.0},
                                    {"C#2.constant", 2.0}, {"CP.location", 1.5},
                                    {"CP.transition", 0.02}, {"noise", 0.1}},
                                   units);
  EXPECT_THAT(sum, HasSubstr("a change at about 1920"));
  // With the regimes' levels (the report passes them from predict's regimes).
  units.y = "m³/s";
  units.change_levels["CP"] = {1097.3, 849.6};
  EXPECT_THAT(Describe("CP(C, C)",
                       {{"C#1.constant", 1.0}, {"C#2.constant", 2.0}, {"CP.location", 1.277},
                        {"CP.transition", 0.01}, {"noise", 0.1}},
                       units),
              HasSubstr("a change at about 1898 (± 0.56 years) from about 1097 m³/s (a constant "
                        "offset) to about 850 m³/s (a constant offset)"));
}

TEST(DescribeKernelTest, TheSlowestSummandIsTheTrendDownToATwentiethOfTheSpan) {
  // What the depth-3 search chose for Mauna Loa (bench/RESULTS.md): PER*PER + SE with the SE
  // varying over 2.4 of 45 years, which carries the whole rise.
  const Units years = XYUnits("years", "ppm", 45.0);
  EXPECT_EQ(Describe("PER*PER + SE",
                     {{"PER#1.lengthscale", 1.0},
                      {"PER#1.period", 1.0},
                      {"PER#2.lengthscale", 2.0},
                      {"PER#2.period", 1.0},
                      {"SE.lengthscale", 2.4},
                      {"noise", 0.01}},
                     years),
            "a smooth trend varying over about 2.4 years, plus a yearly periodic component that "
            "repeats exactly, plus noise of sd 0.1 ppm");
  // Of two, only the slower is the trend; neither is, below a twentieth of the span.
  EXPECT_EQ(
      Describe("SE + SE", {{"SE#1.lengthscale", 0.5}, {"SE#2.lengthscale", 3.0}, {"noise", 0.01}},
               years),
      "a smooth trend varying over about 3 years, plus smooth variations on a scale of "
      "about 0.5 years, plus noise of sd 0.1 ppm");
  EXPECT_EQ(Describe("SE", {{"SE.lengthscale", 2.0}, {"noise", 0.01}}, years),
            "smooth variations on a scale of about 2 years, plus noise of sd 0.1 ppm");
}

TEST(DescribeKernelTest, EachRuleOfTheTable) {
  const Units days = XYUnits("days", "", 100.0);
  // LIN alone, LIN × LIN, LIN × SE (ABCD: linearly growing amplitude).
  EXPECT_EQ(Describe("LIN", {{"LIN.variance", 1.0}, {"noise", 0.25}}, days),
            "a linear trend, plus noise of sd 0.5");
  EXPECT_EQ(
      Describe("LIN*LIN", {{"LIN#1.variance", 1.0}, {"LIN#2.variance", 1.0}, {"noise", 1.0}}, days),
      "a quadratic trend, plus noise of sd 1");
  EXPECT_EQ(
      Describe("LIN*SE", {{"LIN.variance", 1.0}, {"SE.lengthscale", 3.0}, {"noise", 1.0}}, days),
      "smooth variations on a scale of about 3 days with linearly growing amplitude, plus "
      "noise of sd 1");
  // A weekly period in days; PER alone repeats exactly; an unnamed period keeps its number.
  EXPECT_EQ(Describe("PER", {{"PER.lengthscale", 1.0}, {"PER.period", 7.1}, {"noise", 1.0}}, days),
            "a weekly periodic component that repeats exactly, plus noise of sd 1");
  EXPECT_EQ(Describe("PER", {{"PER.lengthscale", 1.0}, {"PER.period", 9.5}, {"noise", 1.0}}, days),
            "a periodic component with period about 9.5 days that repeats exactly, plus noise of "
            "sd 1");
  // Roughness from the Matérn order; a trend only when the lengthscale spans a fifth of x.
  EXPECT_EQ(Describe("MAT12", {{"MAT12.lengthscale", 2.8}, {"noise", 1.0}}, days),
            "rough variations on a scale of about 2.8 days, plus noise of sd 1");
  EXPECT_EQ(Describe("MAT32", {{"MAT32.lengthscale", 30.0}, {"noise", 1.0}}, days),
            "a somewhat rough trend varying over about 30 days, plus noise of sd 1");
  // C alone; no unit of x.
  EXPECT_EQ(Describe("C + SE", {{"C.constant", 1.0}, {"SE.lengthscale", 0.5}, {"noise", 4.0}}),
            "smooth variations on a scale of about 0.5 units of x, plus a constant offset, plus "
            "noise of sd 2");
}

// Pinned base kernels say which column of x they read: its name when known, else "x<d>" with
// the index of the expression (SE[1] reads column 1).
TEST(DescribeKernelTest, PinnedKernelsNameTheirInputColumn) {
  // Pinned parameters carry their column in the name (core/hyperparameters.h).
  const std::map<std::string, double> values = {
      {"SE[1].lengthscale", 0.5}, {"LIN[0].variance", 1.0}, {"noise", 1.0}};
  EXPECT_EQ(Describe("SE[1] + LIN[0]", values),
            "a linear trend in x0, plus smooth variations on a scale of about 0.5 units of x in "
            "x1, plus noise of sd 1");
  Units named;
  named.x_columns = {"year", "temperature"};
  EXPECT_EQ(Describe("SE[1] + LIN[0]", values, named),
            "a linear trend in year, plus smooth variations on a scale of about 0.5 units of x in "
            "temperature, plus noise of sd 1");
  // A product over two columns names both, by column index; an unpinned kernel names none; an
  // empty name falls back to the index.
  named.x_columns = {"", "temperature"};
  EXPECT_EQ(Describe("SE[1] * LIN[0]", values, named),
            "smooth variations on a scale of about 0.5 units of x in x0 and temperature with "
            "linearly growing amplitude, plus noise of sd 1");
  EXPECT_THAT(Describe("SE + LIN", {{"SE.lengthscale", 0.5}, {"LIN.variance", 1.0}, {"noise", 1.0}},
                       named),
              Not(HasSubstr(" in ")));
}

// Issue 27: an ARD product (SE[*] expanded) was described by its shortest lengthscale, the
// prior-dominated one included ("smooth variations on a scale of about 0.59"). It now gives one
// lengthscale per column, in column order and each column's units, and says which are the
// prior's value rather than structure.
TEST(DescribeKernelTest, AnArdProductGivesOneLengthscalePerColumn) {
  const std::map<std::string, double> values = {{"SE[0].lengthscale", 27.5},
                                                {"SE[1].lengthscale", 0.59},
                                                {"SE[2].lengthscale", 8.0},
                                                {"noise", 1.0}};
  Units units;
  units.x_columns = {"age", "sex", "bmi"};
  EXPECT_EQ(Describe("SE[0]*SE[1]*SE[2]", values, units),
            "smooth variations with one lengthscale per input column: about 28 in age, about "
            "0.59 in sex, about 8 in bmi, plus noise of sd 1");
  units.prior_dominated = {"SE[1].lengthscale"};
  EXPECT_EQ(Describe("SE[0]*SE[1]*SE[2]", values, units),
            "smooth variations with one lengthscale per input column: about 28 in age, about 8 "
            "in bmi (not structure: about 0.59 in sex is the prior's value, which the data do "
            "not determine), plus noise of sd 1");
  // A column named for a time unit gives its lengthscale that unit.
  units.x_columns = {"age", "sex", "time (days)"};
  EXPECT_THAT(Describe("SE[0]*SE[1]*SE[2]", values, units), HasSubstr("about 8 days in time"));
}

// Amplitudes are given per summand in y's units; a constant offset gets none.
TEST(DescribeKernelTest, AmplitudesInYsUnits) {
  const std::map<std::string, double> values = {{"C#1.constant", 0.01}, {"PER.lengthscale", 1.3},
                                                {"PER.period", 1.002},  {"SE#1.lengthscale", 4.1},
                                                {"C#2.constant", 2.0},  {"SE#2.lengthscale", 10.7},
                                                {"noise", 0.02 * 0.02}};
  Standardization s;
  s.applied = true;
  s.scale = 15.0;
  absl::StatusOr<KernelDescription> d =
      DescribeKernel(Kernel("C*SE + C*SE*PER"), values, s, XYUnits("years", "ppm", 45.0),
                     {{ToString(Kernel("C*PER*SE")), 2.14}, {ToString(Kernel("C*SE")), 21.6}});
  ASSERT_TRUE(d.ok()) << d.status();
  EXPECT_EQ(d->text,
            "a smooth trend varying over about 11 years of amplitude about 22 ppm, plus a yearly "
            "periodic component of amplitude about 2.1 ppm whose shape drifts over about 4.1 "
            "years, plus noise of sd 0.3 ppm");
  absl::StatusOr<KernelDescription> offset =
      DescribeKernel(Kernel("C + SE"), {{"C.constant", 1.0}, {"SE.lengthscale", 0.5}, {"noise", 4.0}},
                     {}, {}, {{"C", 3.0}, {"SE", 0.7}});
  ASSERT_TRUE(offset.ok()) << offset.status();
  EXPECT_EQ(offset->text,
            "smooth variations on a scale of about 0.5 units of x of amplitude about 0.7, plus a "
            "constant offset, plus noise of sd 2");
}

// ComponentAmplitudes: the sd of each summand's mean over the data's range only, against the
// closed form of a sine (sd a/√2 over whole periods) and a straight line (sd of a uniform
// variable: slope·range/√12).
TEST(ComponentAmplitudesTest, SdOfEachSummandsMeanWithinTheData) {
  ReportInputs in;
  in.data.x = Eigen::VectorXd::LinSpaced(50, 0.0, 2.0);
  in.data.y = Eigen::VectorXd::Zero(50);
  in.grid = FitGrid(in.data, 2001);
  const Eigen::VectorXd x = in.grid.col(0);
  PredictionComponent sine{"PER", "", (2 * M_PI * x.array()).sin() * 3.0, Eigen::VectorXd()};
  // Outside [0, 2] the line is far off: it must not count.
  Eigen::VectorXd line = 5.0 * x;
  for (Eigen::Index i = 0; i < x.size(); ++i) {
    if (x[i] < 0 || x[i] > 2) line[i] = 1e3;
  }
  PredictionComponent linear{"LIN", "", line, Eigen::VectorXd()};
  in.on_grid.prediction.components = {sine, linear};
  const std::map<std::string, double> amplitudes = ComponentAmplitudes(in);
  ASSERT_EQ(amplitudes.size(), 2u);
  EXPECT_NEAR(amplitudes.at("PER"), 3.0 / std::sqrt(2.0), 0.01);
  EXPECT_NEAR(amplitudes.at("LIN"), 5.0 * 2.0 / std::sqrt(12.0), 0.01);
  // x with several columns: no grid, no amplitudes.
  in.data.x = Eigen::MatrixXd::Zero(50, 2);
  EXPECT_TRUE(ComponentAmplitudes(in).empty());
}

TEST(DescribeKernelTest, AMissingValueIsNamed) {
  absl::StatusOr<KernelDescription> d =
      DescribeKernel(Kernel("SE+LIN"), {{"SE.lengthscale", 1.0}, {"noise", 1.0}}, {}, {});
  EXPECT_THAT(d, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(d.status().message()), HasSubstr("LIN.variance"));
}

TEST(DescribeKernelTest, NumbersAndUnits) {
  EXPECT_EQ(About(10.7), "11");
  EXPECT_EQ(About(4.13), "4.1");
  EXPECT_EQ(About(0.287), "0.29");
  EXPECT_EQ(About(4.0), "4");
  EXPECT_EQ(About(12345.0), "1.2e+04");
  EXPECT_EQ(UnitFromColumnName("year"), "years");
  EXPECT_EQ(UnitFromColumnName("Time (days)"), "days");
  EXPECT_EQ(UnitFromColumnName("co2"), "");
}

// ---- WriteReport on real results ------------------------------------------------------------

std::string ReadAll(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  std::stringstream s;
  s << in.rdbuf();
  return s.str();
}

int Count(const std::string& text, const std::string& what) {
  int n = 0;
  for (size_t at = text.find(what); at != std::string::npos; at = text.find(what, at + 1)) ++n;
  return n;
}

// ASCII text as PLplot's svg driver writes it: one character reference per character.
std::string SvgText(const std::string& text) {
  std::string out;
  for (unsigned char c : text) absl::StrAppend(&out, absl::StrFormat("&#x%x;", c));
  return out;
}

// Text elements of the SVG drawing `glyph` (an XML character reference, as PLplot writes it) in
// `color`: the markers of a point series.
int CountGlyphs(const std::string& svg, const std::string& color, const std::string& glyph) {
  int n = 0;
  for (size_t at = svg.find("<text"); at != std::string::npos; at = svg.find("<text", at + 1)) {
    const std::string element = svg.substr(at, svg.find("</text>", at) - at);
    if (element.find(absl::StrCat("fill=\"", color, "\"")) != std::string::npos &&
        element.find(glyph) != std::string::npos) {
      ++n;
    }
  }
  return n;
}

// Filled polylines of a colour (a fill rule, the fill colour): the discs of a point series, and
// bands.
int CountFilled(const std::string& svg, const std::string& color) {
  int n = 0;
  for (size_t at = svg.find("<polyline"); at != std::string::npos;
       at = svg.find("<polyline", at + 1)) {
    const std::string element = svg.substr(at, svg.find("/>", at) - at);
    if (element.find("fill-rule=") != std::string::npos &&
        element.find(absl::StrCat("fill=\"", color, "\"")) != std::string::npos) {
      ++n;
    }
  }
  return n;
}

// Nile flow (100 years): a depth-2 search, the kernels kept at each step scored, the chosen
// kernel's predictions and a small nested-sampling run — what `gpsel report` assembles.
class ReportOnNileTest : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    absl::StatusOr<Dataset> data = LoadCsvFile(std::string(GPSEL_DATA_DIR) + "/nile.csv");
    ASSERT_TRUE(data.ok()) << data.status();
    auto* in = new ReportInputs;
    in->data = *data;
    in->title = "nile.csv";
    in->x_label = "year";
    in->y_label = "flow (10^8 m^3)";
    in->units = XYUnits("years", "10^8 m^3", 0.0);
    SearchOptions search;
    search.base_kernels = {Kernel("SE"), Kernel("LIN"), Kernel("MAT12")};
    search.max_depth = 2;
    search.score.fit.restarts = 2;
    absl::StatusOr<SearchResult> result = RunKernelSearch(*data, search);
    ASSERT_TRUE(result.ok()) << result.status();
    in->search = *result;
    ScoreOptions score;
    score.fit.restarts = 2;
    absl::StatusOr<std::vector<KernelScore>> scores =
        ScoreKernels(*data, {Kernel("SE"), Kernel("SE+LIN")}, score);
    ASSERT_TRUE(scores.ok()) << scores.status();
    in->scores = *scores;
    in->scores.push_back(result->best);
    // A two-summand kernel is the chosen one here (figure "components" needs a sum).
    in->chosen = (*scores)[1];
    const FitResult* fit = FitForMetric(in->chosen, "lap0");
    ASSERT_NE(fit, nullptr);
    PredictOptions predict;
    predict.hyperparameters = fit->values;
    predict.components = true;
    in->grid = FitGrid(*data, 120);
    absl::StatusOr<PredictResult> grid = FitAndPredict(*data, Kernel("SE+LIN"), in->grid, predict);
    ASSERT_TRUE(grid.ok()) << grid.status();
    in->on_grid = *grid;
    predict.components = false;
    absl::StatusOr<PredictResult> at = FitAndPredict(*data, Kernel("SE+LIN"), data->x, predict);
    ASSERT_TRUE(at.ok());
    in->on_data = *at;
    EvidenceOptions evidence;
    evidence.sampling.num_live = 60;
    evidence.sampling.dlogz = 0.5;
    evidence.sampling.return_samples = true;
    absl::StatusOr<EvidenceResult> ev = ComputeEvidence(*data, Kernel("SE+LIN"), evidence);
    ASSERT_TRUE(ev.ok()) << ev.status();
    in->evidence = *ev;
    inputs_ = in;
    out_dir_ = new std::string(
        (std::filesystem::temp_directory_path() / absl::StrCat("gpsel-report-test-", getpid()))
            .string());
  }
  static void TearDownTestSuite() {
    if (out_dir_ != nullptr) std::filesystem::remove_all(*out_dir_);
    delete inputs_;
    delete out_dir_;
  }
  static ReportInputs* inputs_;
  static std::string* out_dir_;
};
ReportInputs* ReportOnNileTest::inputs_ = nullptr;
std::string* ReportOnNileTest::out_dir_ = nullptr;

TEST_F(ReportOnNileTest, WritesEveryFigureWithItsSeries) {
  ASSERT_NE(inputs_, nullptr);
  ReportOptions options;
  options.out_dir = *out_dir_;
  absl::StatusOr<ReportResult> r = WriteReport(*inputs_, options);
  ASSERT_TRUE(r.ok()) << r.status();
  std::vector<std::string> ids;
  for (const FigureSummary& f : r->figures) ids.push_back(f.id);
  EXPECT_THAT(ids, ::testing::ElementsAre("fit", "components", "search", "metrics", "laplace",
                                          "residuals"));
  EXPECT_TRUE(r->omitted.empty());
  for (const FigureSummary& f : r->figures) {
    const std::string svg = ReadAll(f.svg_path);
    ASSERT_NE(svg.find("<svg"), std::string::npos) << f.id;
    // Every line series is a polyline of its colour, every point series one text glyph of its
    // colour per point (plus its legend swatch).
    for (const PanelSummary& p : f.panels) {
      EXPECT_LT(p.x_min, p.x_max) << f.id;
      EXPECT_LT(p.y_min, p.y_max) << f.id;
      for (const SeriesSummary& s : p.series) {
        if (s.kind == "line") {
          EXPECT_GE(Count(svg, absl::StrCat("stroke=\"", s.color, "\"")), 1) << f.id << s.label;
        }
        if (s.kind == "band") {
          EXPECT_GE(Count(svg, absl::StrCat("fill=\"", s.color, "\"")), 1) << f.id << s.label;
        }
      }
    }
    // A PNG of the figure's size: the signature, then IHDR's width and height (big-endian).
    const std::string png = ReadAll(f.png_path);
    ASSERT_GT(png.size(), 24u) << f.id;
    EXPECT_EQ(png.substr(1, 3), "PNG");
    auto be32 = [&png](size_t at) {
      return (static_cast<unsigned char>(png[at]) << 24) |
             (static_cast<unsigned char>(png[at + 1]) << 16) |
             (static_cast<unsigned char>(png[at + 2]) << 8) |
             static_cast<unsigned char>(png[at + 3]);
    };
    EXPECT_EQ(be32(16), f.id == "laplace" ? 640 : 960) << f.id;
  }
  // Figure "fit": its x axis spans the data's years, its points are the 100 data points.
  const FigureSummary& fit = r->figures[0];
  EXPECT_LE(fit.panels[0].x_min, 1871.0);
  EXPECT_GE(fit.panels[0].x_max, 1970.0);
  const std::string fit_svg = ReadAll(fit.svg_path);
  // 100 data points, each a black filled disc, and the legend's swatch, a bullet (U+2022).
  EXPECT_EQ(CountFilled(fit_svg, "#000000"), 100);
  EXPECT_EQ(CountGlyphs(fit_svg, "#000000", "&#x2022;"), 1);
  EXPECT_NE(fit_svg.find(SvgText("year")), std::string::npos);
  EXPECT_NE(fit_svg.find(SvgText("flow (10^8 m^3)")), std::string::npos);
  // Figure "components": one panel per summand of SE+LIN.
  EXPECT_EQ(r->figures[1].panels.size(), 2u);
  // Figure "metrics": one point series per kernel compared, the winners, log Z's error bar.
  const PanelSummary& metrics = r->figures[3].panels[0];
  int kernels = 0, error_bars = 0;
  for (const SeriesSummary& s : metrics.series) {
    if (s.kind == "points" && s.label != "best under the metric" && !s.label.empty()) ++kernels;
    if (s.kind == "error_bars") ++error_bars;
  }
  EXPECT_EQ(kernels, static_cast<int>(inputs_->scores.size()));
  EXPECT_EQ(error_bars, 1);
  // Figure "search": a candidate dot per successful candidate.
  int candidates = 0;
  for (const SearchStep& step : inputs_->search->steps) {
    for (const CandidateRecord& c : step.candidates) candidates += c.ok ? 1 : 0;
  }
  EXPECT_EQ(r->figures[2].panels[0].series[0].points, candidates);

  // The page: self-contained (no external resource), every figure inline, the kernel named.
  const std::string html = ReadAll(r->html_path);
  EXPECT_EQ(Count(html, "<figure id=\"fig-"), 6);
  EXPECT_EQ(Count(html, "<svg"), 6);
  EXPECT_THAT(html, HasSubstr("<code id=\"chosen-kernel\">LIN+SE</code>"));
  EXPECT_THAT(html, HasSubstr(r->description.text));
  // Each summand of SE+LIN with its amplitude in y's units (ComponentAmplitudes of the grid).
  const std::map<std::string, double> amplitudes = ComponentAmplitudes(*inputs_);
  ASSERT_EQ(amplitudes.size(), 2u);
  for (const auto& [summand, amplitude] : amplitudes) {
    EXPECT_THAT(r->description.text,
                HasSubstr(absl::StrCat("of amplitude about ", About(amplitude), " 10^8 m^3")))
        << summand;
  }
  EXPECT_THAT(html, Not(HasSubstr("src=\"http")));
  EXPECT_THAT(html, Not(HasSubstr("href=\"http")));
  EXPECT_THAT(html, Not(HasSubstr("<!DOCTYPE svg")));
  // Ids are unique per figure, so clip paths do not collide between inline SVGs.
  EXPECT_EQ(Count(html, "id=\"fit-text-clipping0\""), 1);
  EXPECT_EQ(Count(html, "id=\"metrics-text-clipping0\""), 1);
}

TEST_F(ReportOnNileTest, InconsistentInputsAreNamed) {
  ASSERT_NE(inputs_, nullptr);
  ReportOptions options;
  options.out_dir = *out_dir_;
  ReportInputs bad = *inputs_;
  bad.on_data.prediction.mean.resize(3);
  EXPECT_THAT(std::string(WriteReport(bad, options).status().message()), HasSubstr("on_data"));
  bad = *inputs_;
  bad.pair = {"SE.lengthscale", "PER.period"};
  absl::Status s = WriteReport(bad, options).status();
  EXPECT_EQ(s.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(std::string(s.message()), HasSubstr("pair: 'PER.period'"));
  options.out_dir = "";
  EXPECT_THAT(std::string(WriteReport(*inputs_, options).status().message()), HasSubstr("out_dir"));
}

// ---- Several input columns, and the residual figure's layout (issue 27) ----------------------

// The diabetes regression (data/diabetes.csv, raw units), 60 patients, age, BMI and blood
// pressure, under C*SE[*]: the report draws each observation against its prediction with ±2σ.
ReportInputs DiabetesInputs() {
  absl::StatusOr<Dataset> all = LoadCsvFile(std::string(GPSEL_DATA_DIR) + "/diabetes.csv");
  EXPECT_TRUE(all.ok()) << all.status();
  ReportInputs in;
  if (!all.ok()) return in;
  in.data.x.resize(60, 3);
  const int columns[3] = {0, 2, 3};
  for (int c = 0; c < 3; ++c) in.data.x.col(c) = all->x.col(columns[c]).head(60);
  in.data.y = all->y.head(60);
  in.title = "diabetes.csv";
  in.x_label = "x";
  in.y_label = "disease progression one year after baseline";
  in.metric = "lap0";
  ScoreOptions score;
  score.fit.restarts = 2;
  score.metrics = {Metric::kLap0};
  score.scale_x.mode = XScaling::Mode::kAuto;
  absl::StatusOr<KernelScore> chosen = ScoreKernel(in.data, Kernel("C*SE[*]"), score);
  EXPECT_TRUE(chosen.ok()) << chosen.status();
  if (!chosen.ok()) return in;
  in.chosen = *chosen;
  in.scores = {*chosen};
  PredictOptions predict;
  predict.hyperparameters = chosen->map_fit->values;
  absl::StatusOr<PredictResult> at = FitAndPredict(in.data, Kernel("C*SE[*]"), in.data.x, predict);
  EXPECT_TRUE(at.ok()) << at.status();
  if (at.ok()) in.on_data = *at;
  return in;
}

TEST(ReportSeveralColumnsTest, DrawsObservedAgainstPredictedWithTwoSigmaBars) {
  ReportInputs in = DiabetesInputs();
  ASSERT_EQ(in.on_data.prediction.mean.size(), 60);
  std::vector<std::string> omitted;
  absl::StatusOr<std::vector<FigureSpec>> figures = BuildFigures(in, &omitted);
  ASSERT_TRUE(figures.ok()) << figures.status();
  const FigureSpec* scatter = nullptr;
  for (const FigureSpec& f : *figures) {
    if (f.id == "observed_vs_predicted") scatter = &f;
  }
  ASSERT_NE(scatter, nullptr);
  const Panel& panel = scatter->panels.at(0);
  const Prediction& p = in.on_data.prediction;
  int bars = 0, points = 0, diagonals = 0;
  for (const Series& s : panel.series) {
    if (s.kind == Series::Kind::kErrorBars) {
      ++bars;
      ASSERT_EQ(s.x.size(), 60u);
      for (int i = 0; i < 60; ++i) {
        const double sd = std::sqrt(p.variance(i) + p.noise_variance(i));
        EXPECT_DOUBLE_EQ(s.x[i], p.mean(i));
        EXPECT_NEAR(s.y_high[i] - s.y_low[i], 4 * sd, 1e-9 * sd);
      }
    }
    if (s.kind == Series::Kind::kPoints) {
      ++points;
      ASSERT_EQ(s.y.size(), 60u);
      for (int i = 0; i < 60; ++i) EXPECT_EQ(s.y[i], in.data.y(i));
    }
    if (s.kind == Series::Kind::kLine) {
      ++diagonals;
      EXPECT_EQ(s.x, s.y);  // observed = predicted
    }
  }
  EXPECT_EQ(bars, 1);
  EXPECT_EQ(points, 1);
  EXPECT_EQ(diagonals, 1);
  EXPECT_THAT(scatter->caption, HasSubstr("of 60 bars"));
}

// Every axis title fits along its axis (the residuals' "residual of <y>" ran past the panel), and
// the eigenvalue labels keep clear of the Laplace floors and of each other, also when the
// eigenvalues sit right on the floors.
TEST(ReportSeveralColumnsTest, AxisTitlesFitAndEigenvalueLabelsKeepClearOfTheFloors) {
  ReportInputs in = DiabetesInputs();
  ASSERT_TRUE(in.chosen.laplace.has_value());
  LaplaceDiagnostics& lap = *in.chosen.laplace;
  const int u = static_cast<int>(lap.eigenvalues.size());
  ASSERT_EQ(u, 5);
  const double n = in.chosen.num_points;
  // λ on (or within a hair of) the Lap0, LapAIC and LapBIC floors and between them.
  const double on_floors[5] = {2 * M_PI * 0.98, 2 * M_PI * 1.03, 2 * M_PI * std::exp(2.0) * 1.01,
                               2 * M_PI * std::exp(2.0) * 1.2, 2 * M_PI * n * n * 0.99};
  for (int i = 0; i < u; ++i) lap.eigenvalues(i) = on_floors[i];
  lap.eigenvectors = Eigen::MatrixXd::Identity(u, u) * 0.8 + Eigen::MatrixXd::Constant(u, u, 0.35);
  std::vector<std::string> omitted;
  absl::StatusOr<std::vector<FigureSpec>> figures = BuildFigures(in, &omitted);
  ASSERT_TRUE(figures.ok()) << figures.status();
  for (const FigureSpec& f : *figures) {
    for (size_t k = 0; k < f.panels.size(); ++k) {
      const PlotArea area = PanelPlotArea(f, k);
      EXPECT_LE(TextWidthPixels(f.panels[k].y_label, 0.95), area.height)
          << f.id << " panel " << k << ": " << f.panels[k].y_label;
      EXPECT_LE(TextWidthPixels(f.panels[k].x_label, 0.95), area.width) << f.id;
    }
  }
  const FigureSpec& residuals = figures->back();
  ASSERT_EQ(residuals.id, "residuals");
  const Panel& bottom = residuals.panels.at(1);
  ASSERT_EQ(bottom.notes.size(), 5u);  // every λ is under the LapBIC floor
  const double y_per_px = (bottom.y_max - bottom.y_min) / PanelPlotArea(residuals, 1).height;
  std::vector<double> floors;
  for (const Series& s : bottom.series) {
    if (s.kind == Series::Kind::kLine && s.dashed) floors.push_back(s.y[0]);
  }
  ASSERT_EQ(floors.size(), 3u);
  for (size_t a = 0; a < bottom.notes.size(); ++a) {
    const Note& note = bottom.notes[a];
    const double half = 0.5 * TextHeightPixels(note.scale) * y_per_px;
    for (double level : floors) {
      EXPECT_GE(std::abs(note.y - level), half) << note.text << " crosses a floor";
    }
    for (size_t b = 0; b < a; ++b) {
      const Note& other = bottom.notes[b];
      const double x_per_px = (bottom.x_max - bottom.x_min) / PanelPlotArea(residuals, 1).width;
      const bool side_by_side =
          note.x < other.x + TextWidthPixels(other.text, other.scale) * x_per_px &&
          other.x < note.x + TextWidthPixels(note.text, note.scale) * x_per_px;
      if (side_by_side) EXPECT_GE(std::abs(note.y - other.y), 2 * half) << note.text;
    }
  }
}

// Issue 27: the report's "try --metric lap0" hint came even after --metric lap0. The choice
// says why no kernel has the metric, and suggests lap0 only when another metric was asked for.
TEST(BestByMetricTest, NamesWhyAndSuggestsLap0OnlyWhenItWasNotAskedFor) {
  KernelScore a, b;
  a.kernel = "SE";
  b.kernel = "SE+LIN";
  a.metrics["lap0"] = -3.0;
  b.metrics["lap0"] = -1.0;
  absl::StatusOr<KernelScore> best = BestByMetric({a, b}, "lap0");
  ASSERT_TRUE(best.ok()) << best.status();
  EXPECT_EQ(best->kernel, "SE+LIN");
  for (KernelScore* s : {&a, &b}) {
    s->metrics.clear();
    s->undefined_metrics["lap"] = "Hessian at the MAP optimum is not positive definite";
    s->undefined_metrics["lap0"] = "no Hessian";
  }
  EXPECT_THAT(BestByMetric({a, b}, "lap").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("no kernel has a defined lap (SE: Hessian at the MAP"),
                             HasSubstr("try --metric lap0"))));
  EXPECT_THAT(BestByMetric({a, b}, "lap0").status(),
              StatusIs(absl::StatusCode::kFailedPrecondition,
                       AllOf(HasSubstr("no kernel has a defined lap0 (SE: no Hessian)"),
                             Not(HasSubstr("try --metric")))));
}

}  // namespace
}  // namespace gpsel::report
