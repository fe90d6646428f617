// Changepoint CP(k1, k2) and changewindow CW(k1, k2) kernels (issue 31):
//  * the grammar: parsing, canonical text, pinned columns, errors;
//  * the covariance against the formula written here independently (σ = ½(1 + tanh)), and the
//    log likelihood's gradient and exact Hessian against finite differences (5-point stencil);
//  * the nested-kernel contract: CP(A, B) contains A and B, and the embedding of A's optimum
//    reproduces A's likelihood exactly;
//  * data-informed location starts, and fits: a synthetic series with a known break (the break
//    within the Laplace 2σ interval of the location) and the Nile (data/nile.csv), whose change
//    CP(C*SE, C*SE) places within 1895–1902 and which it explains better than C*SE by Lap0.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <iostream>
#include <memory>
#include <random>
#include <set>

#include "gpsel/core/change_summary.h"
#include "gpsel/core/evidence.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/internal/data_starts.h"
#include "gpsel/core/internal/nested_embedding.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/predict.h"
#include "gpsel/core/score.h"
#include "gpsel/core/search.h"
#include "tests/core/bundled_data.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

namespace gpsel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

KernelExpr Kernel(std::string_view text) {
  absl::StatusOr<KernelExpr> k = ParseKernel(text);
  EXPECT_TRUE(k.ok()) << text << ": " << k.status();
  return k.ok() ? *k : KernelExpr::Base(BaseKernel::kSE);
}

TEST(ChangeGrammarTest, ParsesCanonicalisesAndPrints) {
  EXPECT_EQ(ToString(Kernel("cp(se, lin*c)")), "CP(SE,C*LIN)");
  EXPECT_EQ(ToString(Kernel(" CW [1] ( SE+PER , C ) ")), "CW[1](PER+SE,C)");
  // Operands keep their order; the node sorts among a product's factors after base kernels.
  EXPECT_NE(Kernel("CP(SE,LIN)"), Kernel("CP(LIN,SE)"));
  EXPECT_EQ(ToString(Kernel("CP(SE,LIN)*C")), "C*CP(SE,LIN)");
  EXPECT_EQ(ToString(Kernel("CP(SE,LIN)+C")), "C+CP(SE,LIN)");
  EXPECT_NE(Kernel("CP[1](SE,SE)"), Kernel("CP(SE,SE)"));
  EXPECT_NE(Kernel("CW(SE,SE)"), Kernel("CP(SE,SE)"));
  EXPECT_EQ(ToString(Kernel("CP(CP(SE,C),(LIN))")), "CP(CP(SE,C),LIN)");
  for (const char* text : {"CP(C*SE,C*SE)", "CW[2](LIN,SE[0]*PER)", "C*CP(SE,CW(SE,LIN))"}) {
    EXPECT_EQ(ToString(Kernel(ToString(Kernel(text)))), ToString(Kernel(text))) << text;
  }
  EXPECT_EQ(Depth(Kernel("CP(C*SE,SE)")), 3);
  EXPECT_EQ(NumBaseKernels(Kernel("CP(C*SE,SE)")), 3);
  EXPECT_EQ(MaxActiveDim(Kernel("CP[2](SE,SE)")), 2);
  EXPECT_TRUE(ContainsChange(Kernel("C*CW(SE,SE)")));
  EXPECT_FALSE(ContainsChange(Kernel("C*SE")));
}

TEST(ChangeGrammarTest, ErrorsSayWhatAndWhere) {
  auto error = [](std::string_view text) {
    absl::StatusOr<KernelExpr> k = ParseKernel(text);
    EXPECT_FALSE(k.ok()) << text;
    EXPECT_THAT(k, StatusIs(absl::StatusCode::kInvalidArgument)) << text;
    return std::string(k.status().message());
  };
  EXPECT_THAT(error("CP(SE)"), HasSubstr("two kernels"));
  EXPECT_THAT(error("CP(SE,SE,SE)"), HasSubstr("third"));
  EXPECT_THAT(error("CP SE"), HasSubstr("expected '(' after CP"));
  EXPECT_THAT(error("SE,SE"), HasSubstr("','"));
  EXPECT_THAT(error("(SE,SE)"), HasSubstr("','"));
  EXPECT_THAT(error("CP(SE,)"), HasSubstr("missing operand"));
  EXPECT_THAT(error("CP(,SE)"), HasSubstr("missing operand"));
  EXPECT_THAT(error("CP(SE,SE"), HasSubstr("expected ')'"));
  EXPECT_THAT(error("CP[x](SE,SE)"), HasSubstr("dimension"));
}

TEST(ChangeGrammarTest, ParametersFollowTheirOperandsWithRangeScaledPriors) {
  absl::StatusOr<std::vector<HyperparameterInfo>> infos =
      DescribeHyperparameters(Kernel("CP(C*SE,CW(LIN,C))"), {});
  ASSERT_TRUE(infos.ok()) << infos.status();
  std::vector<std::string> names;
  for (const HyperparameterInfo& info : *infos) names.push_back(info.name);
  EXPECT_THAT(names, ElementsAre("C#1.constant", "SE.lengthscale", "LIN.variance", "C#2.constant",
                                 "CW.location", "CW.transition", "CW.width", "CP.location",
                                 "CP.transition", "noise"));
  // The location prior's 95 % interval covers the data (1 = first input, 2 = last).
  const NormalPrior location = (*infos)[7].prior;
  EXPECT_LT(Softplus(location.mean - 1.96 * location.sd), 1.0);
  EXPECT_GT(Softplus(location.mean + 1.96 * location.sd), 2.0);
  EXPECT_NEAR(Softplus(location.mean), 1.5, 0.05);
  EXPECT_TRUE((*infos)[7].IsChange());
  EXPECT_FALSE((*infos)[0].IsChange());
}

// σ of the issue, written out independently of the evaluator.
double Sigma(double z, double location, double transition) {
  return 0.5 * (1.0 + std::tanh((z - location) / transition));
}

struct Series {
  Eigen::MatrixXd x;
  Eigen::VectorXd y;
};

// A break at `at` of size `jump` on a smooth wave, n points on [lo, hi], fixed seed.
Series BrokenSeries(int n, double lo, double hi, double at, double jump, double noise_sd,
                    uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, noise_sd);
  Series s;
  s.x.resize(n, 1);
  s.y.resize(n);
  for (int i = 0; i < n; ++i) {
    const double x = lo + (hi - lo) * i / (n - 1);
    s.x(i, 0) = x;
    s.y(i) = std::sin(6.0 * (x - lo) / (hi - lo)) + (x > at ? jump : 0.0) + normal(rng);
  }
  return s;
}

TEST(ChangeCovarianceTest, MatchesTheFormulaOnTheTrainingRange) {
  const Series s = BrokenSeries(12, 10.0, 32.0, 20.0, 1.0, 0.1, 1);
  for (const char* text : {"CP(SE,C*LIN)", "CW(C,SE)"}) {
    absl::StatusOr<GpModel> model = GpModel::Create(Kernel(text), s.x, s.y);
    ASSERT_TRUE(model.ok()) << model.status();
    const bool window = std::string(text).rfind("CW", 0) == 0;
    // Raw values: CP(SE, C*LIN): SE.l, C.c, LIN.v, location, transition, noise.
    Eigen::VectorXd raw(model->num_free());
    raw.setConstant(0.3);
    const int own = window ? 2 : 3;  // first own parameter
    raw(own) = InverseSoftplus(1.4);       // ℓ at 40 % of the range
    raw(own + 1) = InverseSoftplus(0.07);  // τ
    if (window) raw(own + 2) = InverseSoftplus(0.3);
    const Eigen::MatrixXd x2 = (Eigen::MatrixXd(3, 1) << 5.0, 19.5, 40.0).finished();
    const Eigen::MatrixXd k = model->CrossCovariance(raw, s.x, x2);
    const double se_l = Softplus(0.3), c = Softplus(0.3), lin = Softplus(0.3);
    auto z = [](double x) { return (x - 10.0) / 22.0; };
    auto weight = [&](double x) {
      if (!window) return Sigma(z(x), 0.4, 0.07);
      return Sigma(z(x), 0.4 - 0.15, 0.07) * Sigma(0.4 + 0.15, z(x), 0.07);
    };
    for (int i = 0; i < s.x.rows(); ++i) {
      for (int j = 0; j < x2.rows(); ++j) {
        const double a = s.x(i, 0), b = x2(j, 0);
        const double se = std::exp(-0.5 * (a - b) * (a - b) / (se_l * se_l));
        const double first = window ? c : se, second = window ? se : c * lin * a * b;
        const double expected = (1 - weight(a)) * first * (1 - weight(b)) +
                                weight(a) * second * weight(b);
        EXPECT_NEAR(k(i, j), expected, 1e-12 * std::max(1.0, std::abs(expected)))
            << text << " at " << a << ", " << b;
      }
    }
  }
}

// 5-point central difference.
template <typename T, typename F>
T FivePoint(const F& f, const Eigen::VectorXd& x, int k, double h) {
  auto at = [&](double step) {
    Eigen::VectorXd xs = x;
    xs(k) += step;
    return f(xs);
  };
  return (8.0 * (at(h) - at(-h)) - (at(2 * h) - at(-2 * h))) / (12.0 * h);
}

TEST(ChangeDerivativeTest, GradientAndHessianMatchFiniteDifferences) {
  const Series s = BrokenSeries(25, 0.0, 5.0, 3.0, 1.5, 0.2, 2);
  Eigen::MatrixXd x2d(25, 2);
  x2d.col(0) = s.x.col(0);
  x2d.col(1) = (s.x.col(0).array() * 0.7).sin();
  std::mt19937_64 rng(7);
  std::normal_distribution<double> normal(0.0, 1.0);
  int checked = 0;
  for (const char* text : {"CP(SE,SE)", "CP(C*SE,C*LIN)", "CW(SE,C*PER)", "SE+CP(C,CW(LIN,SE))",
                           "CP[1](SE[0],SE[1])*RQ"}) {
    const KernelExpr kernel = Kernel(text);
    const Eigen::MatrixXd& x = MaxActiveDim(kernel) > 0 ? x2d : s.x;
    absl::StatusOr<GpModel> model = GpModel::Create(kernel, x, s.y);
    ASSERT_TRUE(model.ok()) << model.status();
    for (int draw = 0; draw < 4; ++draw) {
      Eigen::VectorXd raw = model->prior_mean();
      for (int k = 0; k < raw.size(); ++k) raw(k) += 0.7 * model->prior_sd()(k) * normal(rng);
      // A transition wide enough for the sigmoid to be resolved by the stencil's steps.
      const std::vector<std::string> names = model->free_names();
      for (int k = 0; k < raw.size(); ++k) {
        if (names[k].find(".transition") != std::string::npos) raw(k) = InverseSoftplus(0.08 + 0.05 * draw);
      }
      Eigen::VectorXd gradient;
      absl::StatusOr<double> value = model->LogLikelihood(raw, &gradient);
      ASSERT_TRUE(value.ok()) << value.status();
      absl::StatusOr<LikelihoodHessian> hessian = model->LogLikelihoodHessian(raw);
      ASSERT_TRUE(hessian.ok()) << hessian.status();
      auto value_at = [&](const Eigen::VectorXd& r) { return *model->LogLikelihood(r); };
      auto gradient_at = [&](const Eigen::VectorXd& r) {
        Eigen::VectorXd g;
        EXPECT_TRUE(model->LogLikelihood(r, &g).ok());
        return g;
      };
      for (int k = 0; k < raw.size(); ++k) {
        double gradient_error = INFINITY, hessian_error = INFINITY;
        for (double step : {1e-3, 1e-4, 1e-2}) {
          const double fd = FivePoint<double>(value_at, raw, k, step);
          gradient_error = std::min(
              gradient_error, std::abs(fd - gradient(k)) / std::max(1.0, std::abs(gradient(k))));
          const Eigen::VectorXd column = FivePoint<Eigen::VectorXd>(gradient_at, raw, k, step);
          double worst = 0.0;
          for (int i = 0; i < raw.size(); ++i) {
            const double h = hessian->hessian(i, k);
            worst = std::max(worst, std::abs(column(i) - h) / std::max(1.0, std::abs(h)));
          }
          hessian_error = std::min(hessian_error, worst);
        }
        EXPECT_LT(gradient_error, 1e-6) << text << " d/d" << names[k] << " draw " << draw;
        EXPECT_LT(hessian_error, 1e-5) << text << " d2/d" << names[k] << " draw " << draw;
        ++checked;
      }
    }
  }
  EXPECT_GT(checked, 100);
}

TEST(ChangeNestingTest, ChangeContainsItsOperandsAndTheEmbeddingIsExact) {
  EXPECT_TRUE(KernelContains(Kernel("CP(C*SE,C*SE)"), Kernel("C*SE")));
  EXPECT_TRUE(KernelContains(Kernel("CP(C*SE,LIN)"), Kernel("LIN")));
  EXPECT_TRUE(KernelContains(Kernel("CW(SE,C*PER)"), Kernel("C*PER")));
  EXPECT_TRUE(KernelContains(Kernel("C*CP(SE,PER)+LIN"), Kernel("CP(SE,PER)")));
  EXPECT_FALSE(KernelContains(Kernel("CP(SE,SE)"), Kernel("LIN")));
  const Series s = BrokenSeries(40, 0.0, 10.0, 6.0, 2.0, 0.2, 3);
  for (const char* super_text : {"CP(C*SE,LIN)", "CP(LIN,C*SE)", "CW(C*SE,LIN)", "CW(LIN,C*SE)",
                                 "C*CP(SE,SE)"}) {
    const KernelExpr sub = Kernel(std::string(super_text).find("C*CP") == 0 ? "C*SE" : "C*SE");
    const KernelExpr super = Kernel(super_text);
    absl::StatusOr<GpModel> small = GpModel::Create(sub, s.x, s.y);
    absl::StatusOr<GpModel> large = GpModel::Create(super, s.x, s.y);
    ASSERT_TRUE(small.ok() && large.ok());
    Eigen::VectorXd sub_raw(3);
    sub_raw << 0.9, 0.4, -2.0;
    std::map<std::string, double> named;
    for (int k = 0; k < 3; ++k) named[small->free_names()[k]] = sub_raw(k);
    absl::StatusOr<NestedEmbedding> embedding = EmbedNestedOptimum(sub, named, super, -30, 500);
    ASSERT_TRUE(embedding.ok()) << super_text << ": " << embedding.status();
    EXPECT_EQ(embedding->quality, EmbeddingQuality::kExact) << embedding->description;
    Eigen::VectorXd super_raw(large->num_free());
    const std::vector<std::string> names = large->free_names();
    for (size_t k = 0; k < names.size(); ++k) super_raw(k) = embedding->raw.at(names[k]);
    // C*CP(SE, SE) = C*SE only with the same SE everywhere: C*SE's C to C, SE into one operand.
    EXPECT_NEAR(*large->LogLikelihood(super_raw), *small->LogLikelihood(sub_raw), 1e-9)
        << super_text << ": " << embedding->description;
  }
}

TEST(ChangeStartsTest, DataInformedLocationIsTheBestTwoLineSplit) {
  const Series s = BrokenSeries(80, 100.0, 180.0, 150.0, 2.5, 0.15, 4);
  absl::StatusOr<GpModel> model = GpModel::Create(Kernel("CP(SE,SE)"), s.x, s.y);
  ASSERT_TRUE(model.ok());
  const std::vector<StartPoint> starts = DataInformedStarts(*model);
  ASSERT_FALSE(starts.empty());
  const std::vector<std::string> names = model->free_names();
  const int location = static_cast<int>(
      std::find(names.begin(), names.end(), "CP.location") - names.begin());
  ASSERT_LT(location, static_cast<int>(names.size()));
  for (const StartPoint& start : starts) {
    const double at = 100.0 + (Softplus(start.raw(location)) - 1.0) * 80.0;
    EXPECT_NEAR(at, 150.0, 1.5) << start.origin;
    EXPECT_THAT(start.origin, HasSubstr("change of level, trend or roughness"));
  }
}

// x scaled automatically, as for any series in years: the paper's lengthscale priors are on a
// unit scale (README).
ScoreOptions QuickOptions() {
  ScoreOptions options;
  options.fit.restarts = 3;
  options.metrics = {Metric::kMll, Metric::kLap0};
  options.scale_x.mode = XScaling::Mode::kAuto;
  return options;
}

TEST(ChangeFitTest, SyntheticBreakIsRecoveredWithinTheLaplaceTwoSigma) {
  const Series s = BrokenSeries(60, 0.0, 30.0, 17.3, 2.0, 0.15, 5);
  Dataset data{s.x, s.y};
  absl::StatusOr<KernelScore> score = ScoreKernel(data, Kernel("CP(C*SE,C*SE)"), QuickOptions());
  ASSERT_TRUE(score.ok()) << score.status();
  absl::StatusOr<std::vector<ChangeSummary>> changes = SummarizeChanges(data, *score);
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_EQ(changes->size(), 1u);
  const ChangeSummary& change = changes->front();
  ASSERT_TRUE(change.location_sd.has_value());
  std::cout << "synthetic break at 17.3: located at " << change.location << " ± "
            << *change.location_sd << ", transition " << change.transition << "\n";
  // The break lies between the samples at 17.288 and 17.797: anywhere in that gap fits the data
  // equally, so half a spacing (0.25) is added to the Laplace interval.
  EXPECT_LE(std::abs(change.location - 17.3), 2.0 * *change.location_sd + 0.25);
  EXPECT_LT(*change.location_sd, 1.5);
  EXPECT_TRUE(change.inside_data);
}

// The Nile's annual flow (1871–1970) drops with the Aswan dam's first works around 1898. Both
// changepoint kernels place the change there; CP(C, C) (two levels) beats C*SE (which explains
// the drop with 2.6-year wiggles) by Lap0; CP(C*SE, C*SE) beats it by 8 nats of MLL but not by
// Lap0 (the priors charge its four extra parameters more than the fit gains; bench/RESULTS.md).
TEST(ChangeFitTest, NileChangesBetween1895And1902AndBeatsCTimesSEByLap0) {
  const Dataset nile = testing::LoadBundled("nile.csv");
  ScoreOptions options = QuickOptions();
  absl::StatusOr<KernelScore> plain = ScoreKernel(nile, Kernel("C*SE"), options);
  ASSERT_TRUE(plain.ok()) << plain.status();
  // C*SE's optima, embedded (each operand in turn over all of the data), start the larger fits.
  options.nested_parents = {{Kernel("C*SE"), std::make_shared<const KernelScore>(*plain)}};
  for (const char* text : {"CP(C*SE,C*SE)", "CP(C,C)"}) {
    absl::StatusOr<KernelScore> change = ScoreKernel(nile, Kernel(text), options);
    ASSERT_TRUE(change.ok()) << change.status();
    absl::StatusOr<std::vector<ChangeSummary>> changes = SummarizeChanges(nile, *change);
    ASSERT_TRUE(changes.ok()) << changes.status();
    ASSERT_EQ(changes->size(), 1u);
    const ChangeSummary& at = changes->front();
    std::cout << "Nile: C*SE lap0 " << plain->metrics.at("lap0") << ", mll "
              << plain->metrics.at("mll") << "; " << text << " lap0 " << change->metrics.at("lap0")
              << ", mll " << change->metrics.at("mll") << "; change at " << at.location << " ± "
              << at.location_sd.value_or(-1) << "\n";
    EXPECT_GE(at.location, 1895.0) << text;
    EXPECT_LE(at.location, 1902.0) << text;
    ASSERT_TRUE(at.location_sd.has_value());
    EXPECT_LT(*at.location_sd, 3.0) << text;
    EXPECT_GT(change->metrics.at("mll"), plain->metrics.at("mll") + 5.0) << text;
    if (std::string(text) == "CP(C,C)") {
      EXPECT_GT(change->metrics.at("lap0"), plain->metrics.at("lap0")) << text;
    }
  }
}


TEST(ChangeSearchTest, OperatorsAddOneCandidatePerSubexpressionAndMove) {
  const std::vector<KernelExpr> bases = {Kernel("SE"), Kernel("C")};
  absl::StatusOr<SearchOperators> both = ParseSearchOperators("+, *, cp, CW");
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_EQ(SearchOperatorsText(*both), "+,*,CP,CW");
  auto texts = [](const std::vector<KernelExpansion>& expansions) {
    std::set<std::string> out;
    for (const KernelExpansion& e : expansions) out.insert(ToString(e.kernel));
    return out;
  };
  // C*SE has three subexpressions (C*SE, C, SE): three CP and three CW candidates more.
  const std::vector<KernelExpansion> plain = ExpandKernel(Kernel("C*SE"), bases, 4);
  const std::vector<KernelExpansion> with = ExpandKernel(Kernel("C*SE"), bases, 4, *both);
  EXPECT_EQ(with.size(), plain.size() + 6);
  const std::set<std::string> added = texts(with);
  for (const char* k : {"CP(C*SE,C*SE)", "CW(C*SE,C*SE)", "C*CP(SE,SE)", "SE*CP(C,C)",
                        "C*CW(SE,SE)", "SE*CW(C,C)"}) {
    EXPECT_TRUE(added.count(k)) << k;
  }
  // The depth limit counts base kernels: CP(C*SE, C*SE) has four.
  EXPECT_FALSE(texts(ExpandKernel(Kernel("C*SE"), bases, 3, *both)).count("CP(C*SE,C*SE)"));
  for (const char* bad : {"+,*,XX", "+,CP", "+,*,CP,CP", ""}) {
    absl::StatusOr<SearchOperators> parsed = ParseSearchOperators(bad);
    EXPECT_FALSE(parsed.ok()) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr("operators")) << bad;
  }
}

// CP[c] / CW[c] pin the change moves to input columns (SearchOperators::columns, one list for
// both moves); a list that says two things about one move, or pins CP and CW differently, is
// refused naming the entry.
TEST(ChangeSearchTest, OperatorsPinnedToColumns) {
  absl::StatusOr<SearchOperators> one = ParseSearchOperators("+,*,CP[1]");
  ASSERT_TRUE(one.ok()) << one.status();
  EXPECT_TRUE(one->change_point);
  EXPECT_FALSE(one->change_window);
  EXPECT_THAT(one->columns, ElementsAre(1));
  absl::StatusOr<SearchOperators> both = ParseSearchOperators(" cw[2], +, CP[2], *, CP[0],CW[0]");
  ASSERT_TRUE(both.ok()) << both.status();
  EXPECT_TRUE(both->change_point && both->change_window);
  EXPECT_THAT(both->columns, ElementsAre(0, 2));
  absl::StatusOr<SearchOperators> unpinned = ParseSearchOperators("+,*,CP,CW");
  ASSERT_TRUE(unpinned.ok());
  EXPECT_TRUE(unpinned->columns.empty());
  // Pinned to column 1 of two: only CP[1] candidates, where the unpinned move offers both.
  std::set<std::string> texts;
  for (const KernelExpansion& e : ExpandKernel(Kernel("C"), {Kernel("C")}, 2, *one)) {
    texts.insert(ToString(e.kernel));
  }
  EXPECT_TRUE(texts.count("CP[1](C,C)"));
  EXPECT_FALSE(texts.count("CP[0](C,C)"));
  EXPECT_FALSE(texts.count("CP(C,C)"));
  for (const auto& [bad, says] : std::vector<std::pair<const char*, const char*>>{
           {"+,*,CP,CP[1]", "listed twice"},
           {"+,*,CP[1],CP", "listed twice"},
           {"+,*,CP[1],CP[1]", "listed twice"},
           {"+,*,CP[0],CW[1]", "same columns"},
           {"+,*,CP[0],CW", "same columns"},
           {"+,*,CP[x]", "CP[c]"},
           {"+,*,CP[-1]", "CP[c]"},
           {"+,*,CP[1", "CP[c]"},
           {"+,*,SE[1]", "CP[c]"},
           {"+[0],*", "CP[c]"}}) {
    absl::StatusOr<SearchOperators> parsed = ParseSearchOperators(bad);
    EXPECT_THAT(parsed, StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr("operators")) << bad;
    EXPECT_THAT(parsed.status().message(), HasSubstr(says)) << bad;
  }
}

// On data with several columns the change moves are pinned, one per column: the search finds a
// level shift along column 1 (column 0 is noise) as CP[1](C, C), and records the columns.
TEST(ChangeSearchTest, MovesOnSeveralColumnsArePinnedAndFindTheColumnThatChanges) {
  const std::vector<KernelExpr> bases = {Kernel("C")};
  SearchOperators operators;
  operators.change_point = true;
  operators.columns = {0, 1};
  std::set<std::string> texts;
  for (const KernelExpansion& e : ExpandKernel(Kernel("C"), bases, 2, operators)) {
    texts.insert(ToString(e.kernel));
  }
  EXPECT_TRUE(texts.count("CP[0](C,C)"));
  EXPECT_TRUE(texts.count("CP[1](C,C)"));
  EXPECT_FALSE(texts.count("CP(C,C)"));

  std::mt19937_64 rng(11);
  std::uniform_real_distribution<double> uniform(0.0, 10.0);
  std::normal_distribution<double> normal(0.0, 0.3);
  Eigen::MatrixXd x(50, 2);
  Eigen::VectorXd y(50);
  for (int i = 0; i < 50; ++i) {
    x(i, 0) = uniform(rng);
    x(i, 1) = i;
    y(i) = (i > 30 ? 2.0 : 0.0) + normal(rng);
  }
  const Dataset data{x, y};
  SearchOptions options;
  options.base_kernels = bases;
  options.max_depth = 2;
  options.score.fit.restarts = 1;
  options.operators.change_point = true;  // columns filled in by the search
  absl::StatusOr<SearchResult> result = RunKernelSearch(data, options);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(ToString(result->best_kernel), "CP[1](C,C)");
  EXPECT_THAT(result->operators.columns, ElementsAre(0, 1));
  EXPECT_THAT(result->Summary(), HasSubstr("changes along column(s) 0,1"));
  options.operators.columns = {2};
  EXPECT_THAT(RunKernelSearch(data, options), StatusIs(absl::StatusCode::kInvalidArgument));
}

// A level shift on noise: CKS over C and SE finds a changepoint only with the CP move.
TEST(ChangeSearchTest, SearchWithTheChangepointMoveRecognisesALevelShift) {
  Series s = BrokenSeries(50, 0.0, 49.0, 30.5, 2.0, 0.3, 6);
  s.y = s.y.array() - (6.0 * s.x.col(0).array() / 49.0).sin();  // the level shift alone
  const Dataset data{s.x, s.y};
  SearchOptions options;
  options.base_kernels = {Kernel("C"), Kernel("SE")};
  options.max_depth = 2;
  options.score.fit.restarts = 2;
  options.score.scale_x.mode = XScaling::Mode::kAuto;
  options.operators.change_point = true;
  absl::StatusOr<SearchResult> with = RunKernelSearch(data, options);
  ASSERT_TRUE(with.ok()) << with.status();
  options.operators.change_point = false;
  absl::StatusOr<SearchResult> without = RunKernelSearch(data, options);
  ASSERT_TRUE(without.ok()) << without.status();
  std::cout << "level shift: with CP " << ToString(with->best_kernel) << " lap0 "
            << with->best_score << "; without " << ToString(without->best_kernel) << " lap0 "
            << without->best_score << "\n";
  EXPECT_TRUE(ContainsChange(with->best_kernel)) << ToString(with->best_kernel);
  EXPECT_GT(with->best_score, without->best_score);
  absl::StatusOr<std::vector<ChangeSummary>> changes = SummarizeChanges(data, with->best);
  ASSERT_TRUE(changes.ok()) << changes.status();
  ASSERT_FALSE(changes->empty());
  EXPECT_NEAR(changes->front().location, 30.5, 1.0);
}

// Prediction and evidence go through the same evaluator: the predictive mean follows each
// regime, and the evidence of CP(C, C) and of CP(C*SE, C*SE) on the Nile beats C*SE's.
TEST(ChangePathsTest, PredictFollowsTheRegimesAndEvidenceRanksTheNile) {
  const Dataset nile = testing::LoadBundled("nile.csv");
  PredictOptions predict;
  predict.fit = QuickOptions();
  const Eigen::MatrixXd at = (Eigen::MatrixXd(2, 1) << 1880.0, 1940.0).finished();
  absl::StatusOr<PredictResult> p = FitAndPredict(nile, Kernel("CP(C,C)"), at, predict);
  ASSERT_TRUE(p.ok()) << p.status();
  double before = 0, after = 0;
  int n_before = 0, n_after = 0;
  for (int i = 0; i < nile.num_points(); ++i) {
    (nile.x(i, 0) < 1898 ? before : after) += nile.y(i);
    ++(nile.x(i, 0) < 1898 ? n_before : n_after);
  }
  before /= n_before;
  after /= n_after;
  std::cout << "Nile CP(C,C) predicts " << p->prediction.mean(0) << " (mean before " << before
            << "), " << p->prediction.mean(1) << " (after " << after << ")\n";
  EXPECT_NEAR(p->prediction.mean(0), before, 30.0);
  EXPECT_NEAR(p->prediction.mean(1), after, 30.0);

  EvidenceOptions evidence;
  evidence.method = EvidenceMethod::kImportance;
  evidence.scale_x.mode = XScaling::Mode::kAuto;
  // A 4-nat gap needs no 0.02-nat error: fewer samples keep the test to seconds.
  evidence.importance.initial_samples = 500;
  evidence.importance.target_error = 0.1;
  absl::StatusOr<EvidenceResult> change = ComputeEvidence(nile, Kernel("CP(C,C)"), evidence);
  ASSERT_TRUE(change.ok()) << change.status();
  absl::StatusOr<EvidenceResult> plain = ComputeEvidence(nile, Kernel("C*SE"), evidence);
  ASSERT_TRUE(plain.ok()) << plain.status();
  std::cout << "Nile log Z: CP(C,C) " << change->log_evidence << " ± "
            << change->log_evidence_error << ", C*SE " << plain->log_evidence << " ± "
            << plain->log_evidence_error << "\n";
  EXPECT_GT(change->log_evidence - 3 * change->log_evidence_error,
            plain->log_evidence + 3 * plain->log_evidence_error);
  // CP(C*SE, C*SE) loses to C*SE by Lap0 (ChangeFitTest above) but its evidence is the higher
  // (−130.0 against −131.1, bench/RESULTS.md): Laplace misses its non-Gaussian posterior.
  absl::StatusOr<EvidenceResult> smooth = ComputeEvidence(nile, Kernel("CP(C*SE,C*SE)"), evidence);
  ASSERT_TRUE(smooth.ok()) << smooth.status();
  std::cout << "Nile log Z: CP(C*SE,C*SE) " << smooth->log_evidence << " ± "
            << smooth->log_evidence_error << "\n";
  EXPECT_GT(smooth->log_evidence - 3 * smooth->log_evidence_error,
            plain->log_evidence + 3 * plain->log_evidence_error);
}

// predict --components splits a change into its regimes, (1 − σ)k1(1 − σ') and σk2σ': on a
// small case their means and variances equal the closed form written out here (K⁻¹ by a dense
// solve, σ on x's range as the kernel reads it), and with other summands beside the change the
// parts still add up to the whole mean.
TEST(ChangePathsTest, ComponentsSplitAChangeIntoRegimesThatAddUpToTheWhole) {
  Eigen::MatrixXd x(7, 1);
  x << 0.0, 1.0, 2.0, 3.0, 4.0, 5.0, 6.0;
  Eigen::VectorXd y(7);
  y << 1.0, 1.2, 0.9, 3.1, 2.8, 3.0, 3.2;
  const Dataset data{x, y};
  PredictOptions options;
  options.fit.standardize = false;
  options.components = true;
  options.hyperparameters = {{"C#1.constant", 2.0}, {"C#2.constant", 0.5},
                             {"CP.location", 1.45}, {"CP.transition", 0.08},
                             {"noise", 0.1}};
  const Eigen::MatrixXd at = (Eigen::MatrixXd(3, 1) << 0.5, 2.7, 5.5).finished();
  absl::StatusOr<PredictResult> p = FitAndPredict(data, Kernel("CP(C,C)"), at, options);
  ASSERT_TRUE(p.ok()) << p.status();
  const auto& parts = p->prediction.components;
  ASSERT_EQ(parts.size(), 2u);
  EXPECT_EQ(parts[0].Name(), "CP before: C");
  EXPECT_EQ(parts[1].Name(), "CP after: C");

  // Closed form: σ(x) = ½(1 + tanh((x − ℓ)/τ)) with ℓ = min x + (location − 1)·range and
  // τ = transition·range; K = (1−σ)(1−σ)ᵀ c1 + σσᵀ c2 + noise·I.
  const double range = 6.0, location = (1.45 - 1.0) * range, tau = 0.08 * range;
  auto sigma = [&](const Eigen::MatrixXd& points) {
    Eigen::VectorXd v(points.rows());
    for (Eigen::Index i = 0; i < points.rows(); ++i) {
      v(i) = 0.5 * (1.0 + std::tanh((points(i, 0) - location) / tau));
    }
    return v;
  };
  const Eigen::VectorXd s = sigma(x), s_new = sigma(at);
  const Eigen::VectorXd one = Eigen::VectorXd::Ones(7), one_new = Eigen::VectorXd::Ones(3);
  const double noise = p->prediction.noise_variance(0);
  Eigen::MatrixXd k = 2.0 * (one - s) * (one - s).transpose() + 0.5 * s * s.transpose();
  k.diagonal().array() += noise;
  const Eigen::MatrixXd k_before = 2.0 * (one - s) * (one_new - s_new).transpose();  // 7 × 3
  const Eigen::MatrixXd k_after = 0.5 * s * s_new.transpose();
  const Eigen::VectorXd alpha = k.ldlt().solve(y);
  const Eigen::VectorXd mean_before = k_before.transpose() * alpha;
  const Eigen::VectorXd mean_after = k_after.transpose() * alpha;
  const Eigen::MatrixXd var_before = k_before.transpose() * k.ldlt().solve(k_before);
  const Eigen::MatrixXd var_after = k_after.transpose() * k.ldlt().solve(k_after);
  for (int j = 0; j < 3; ++j) {
    SCOPED_TRACE(j);
    EXPECT_NEAR(parts[0].mean(j), mean_before(j), 1e-10);
    EXPECT_NEAR(parts[1].mean(j), mean_after(j), 1e-10);
    const double prior_before = 2.0 * (1 - s_new(j)) * (1 - s_new(j));
    const double prior_after = 0.5 * s_new(j) * s_new(j);
    EXPECT_NEAR(parts[0].variance(j), prior_before - var_before(j, j), 1e-10);
    EXPECT_NEAR(parts[1].variance(j), prior_after - var_after(j, j), 1e-10);
    EXPECT_NEAR(p->prediction.mean(j), mean_before(j) + mean_after(j), 1e-10);
  }
  // Before the change the first regime carries the level, after it the second.
  EXPECT_GT(std::abs(parts[0].mean(0)), 10 * std::abs(parts[1].mean(0)));
  EXPECT_GT(std::abs(parts[1].mean(2)), 10 * std::abs(parts[0].mean(2)));

  // The Nile fitted with wiggles beside the change: C*SE, then CP's two regimes, adding up
  // (with y's mean) to the whole prediction.
  const Dataset nile = testing::LoadBundled("nile.csv");
  PredictOptions fitted;
  fitted.fit = QuickOptions();
  fitted.fit.fit.restarts = 1;
  fitted.components = true;
  const Eigen::MatrixXd years = (Eigen::MatrixXd(4, 1) << 1871.0, 1890.0, 1910.0, 1970.0).finished();
  absl::StatusOr<PredictResult> q = FitAndPredict(nile, Kernel("CP[0](C,C)+C*SE"), years, fitted);
  ASSERT_TRUE(q.ok()) << q.status();
  ASSERT_EQ(q->prediction.components.size(), 3u);  // canonical order: C*SE first
  EXPECT_EQ(q->prediction.components[0].Name(), "C*SE");
  EXPECT_EQ(q->prediction.components[1].Name(), "CP[0] before: C");
  EXPECT_EQ(q->prediction.components[2].Name(), "CP[0] after: C");
  for (int j = 0; j < 4; ++j) {
    double sum = q->standardization.mean;
    for (const PredictionComponent& c : q->prediction.components) sum += c.mean(j);
    EXPECT_NEAR(sum, q->prediction.mean(j), 1e-8 * std::abs(q->prediction.mean(j)));
  }
}

}  // namespace
}  // namespace gpsel
