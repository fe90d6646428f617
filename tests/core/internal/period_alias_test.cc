// Period aliases on a sampling grid (core/internal/period_alias.h): the grid step, the resolved alias in
// closed form, the likelihood's invariance on the real yearly sunspot series (a fresh GpModel
// evaluation at both periods), and a fit that ends at an alias reporting the resolved period.
#include "gpsel/core/internal/period_alias.h"

#include <cmath>
#include <string>

#include <gtest/gtest.h>

#include "gpsel/core/dataset.h"
#include "gpsel/core/fit.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/kernel_expr.h"
#include "tests/core/bundled_data.h"

namespace gpsel {
namespace {

using ::gpsel::testing::LoadBundled;

// The model a score fits: y standardised as scoring does (core/dataset.h), x as given.
GpModel Model(const Dataset& data, const std::string& kernel) {
  absl::StatusOr<KernelExpr> k = ParseKernel(kernel);
  EXPECT_TRUE(k.ok()) << k.status();
  absl::StatusOr<Standardization> standardization = ComputeStandardization(data.y, true);
  EXPECT_TRUE(standardization.ok()) << standardization.status();
  absl::StatusOr<GpModel> model =
      GpModel::Create(*k, data.x, ApplyStandardization(*standardization, data.y));
  EXPECT_TRUE(model.ok()) << model.status();
  return *std::move(model);
}

TEST(GridStepTest, FindsTheStepOfRegularAndGappedGridsAndNothingElse) {
  Eigen::VectorXd years(5);
  years << 1700, 1701, 1702, 1705, 1703;  // unsorted, one gap of two steps
  ASSERT_TRUE(GridStep(years).has_value());
  EXPECT_DOUBLE_EQ(*GridStep(years), 1.0);

  // Monthly dates written to six decimals, as data/mauna_loa_monthly.csv has them.
  Eigen::VectorXd months(480);
  for (int k = 0; k < months.size(); ++k) {
    months(k) = std::round((1958.0 + (k + 2.5) / 12.0) * 1e6) / 1e6;
  }
  ASSERT_TRUE(GridStep(months).has_value());
  EXPECT_NEAR(*GridStep(months), 1.0 / 12.0, 1e-9);

  Eigen::VectorXd repeated(4);
  repeated << 2.0, 2.0, 2.5, 3.0;  // two points at one x
  ASSERT_TRUE(GridStep(repeated).has_value());
  EXPECT_DOUBLE_EQ(*GridStep(repeated), 0.5);

  Eigen::VectorXd irregular(4);
  irregular << 0.0, 1.0, 2.3, 3.0;
  EXPECT_FALSE(GridStep(irregular).has_value());
  EXPECT_FALSE(GridStep(Eigen::VectorXd::Constant(3, 4.0)).has_value());
  EXPECT_FALSE(GridStep(Eigen::VectorXd()).has_value());
}

TEST(ResolvedPeriodTest, FoldsTheFrequencyBelowHalfTheSamplingRate) {
  // f = 1/p folds to |f − round(fΔ)/Δ|: 1/(1 + 1/10.33) and 1/(1 − 1/10.33) → 10.33.
  const double cycle = 10.33;
  EXPECT_NEAR(ResolvedPeriod(1.0 / (1.0 + 1.0 / cycle), 1.0), cycle, 1e-9);
  EXPECT_NEAR(ResolvedPeriod(1.0 / (1.0 - 1.0 / cycle), 1.0), cycle, 1e-9);
  EXPECT_NEAR(ResolvedPeriod(1.0 / (3.0 + 1.0 / cycle), 1.0), cycle, 1e-9);
  EXPECT_NEAR(ResolvedPeriod(1.0 / (12.0 - 1.0), 1.0 / 12.0), 1.0, 1e-12);  // monthly: a year
  EXPECT_DOUBLE_EQ(ResolvedPeriod(cycle, 1.0), cycle);  // already resolved
  EXPECT_DOUBLE_EQ(ResolvedPeriod(2.0, 1.0), 2.0);      // exactly two steps: resolved
  EXPECT_DOUBLE_EQ(ResolvedPeriod(0.5, 1.0), 0.5);      // f a multiple of 1/Δ: nothing to resolve
}

// The sunspot cycle's two shortest aliases on yearly data give the same likelihood, and
// ResolvePeriodAliases maps both to the cycle, leaving the other parameters as they were.
TEST(ResolvePeriodAliasesTest, AliasesOfTheSunspotCycleHaveOneLikelihood) {
  const Dataset data = LoadBundled("sunspots_yearly.csv");
  const GpModel model = Model(data, "C*PER*SE");
  ASSERT_EQ(model.free_names()[2], "PER.period");
  const double cycle = 10.33;
  ASSERT_EQ(model.num_free(), 5);  // C, PER lengthscale and period, SE lengthscale, noise
  Eigen::VectorXd at_cycle(5);
  at_cycle << InverseSoftplus(1.06), InverseSoftplus(1.35), InverseSoftplus(cycle),
      InverseSoftplus(9.6), InverseSoftplus(0.027 - 1e-4);
  absl::StatusOr<double> reference = model.LogLikelihood(at_cycle);
  ASSERT_TRUE(reference.ok()) << reference.status();
  EXPECT_FALSE(ResolvePeriodAliases(model, at_cycle).has_value());
  for (double alias : {1.0 / (1.0 + 1.0 / cycle), 1.0 / (1.0 - 1.0 / cycle)}) {
    Eigen::VectorXd at_alias = at_cycle;
    at_alias(2) = InverseSoftplus(alias);
    absl::StatusOr<double> value = model.LogLikelihood(at_alias);
    ASSERT_TRUE(value.ok()) << value.status();
    EXPECT_NEAR(*value, *reference, 1e-8) << "alias " << alias;
    const std::optional<Eigen::VectorXd> resolved = ResolvePeriodAliases(model, at_alias);
    ASSERT_TRUE(resolved.has_value()) << "alias " << alias;
    EXPECT_NEAR(Softplus((*resolved)(2)), cycle, 1e-9);
    EXPECT_EQ((*resolved).head(2), at_alias.head(2));
    EXPECT_EQ((*resolved).tail(2), at_alias.tail(2));
  }
}

// A fit whose winning start ends at an alias reports the resolved period, at the same
// likelihood. The given start sits at the alias 0.912 of the C*PER*SE optimum; the one prior
// draw (seed chosen for it) ends lower, so the alias start wins.
TEST(ResolvePeriodAliasesTest, FitEndingAtAnAliasReportsTheResolvedPeriod) {
  const Dataset data = LoadBundled("sunspots_yearly.csv");
  const GpModel model = Model(data, "C*PER*SE");
  FitOptions options;
  options.restarts = 1;
  options.seed = 4;
  options.max_draws_factor = 1;  // the one prior draw and the alias start, nothing added
  StartPoint alias_start;
  alias_start.raw = Eigen::VectorXd(model.num_free());
  alias_start.raw << InverseSoftplus(1.06), InverseSoftplus(1.35),
      InverseSoftplus(1.0 / (1.0 + 1.0 / 10.33)), InverseSoftplus(9.6),
      InverseSoftplus(0.027 - 1e-4);
  alias_start.origin = "alias 0.912";
  options.extra_starts = {alias_start};
  absl::StatusOr<FitResult> fit =
      FitHyperparameters(model, FitObjective::kMaximumLikelihood, options);
  ASSERT_TRUE(fit.ok()) << fit.status();
  ASSERT_EQ(fit->best_start_kind, StartKind::kGiven) << fit->Summary();
  const double period = fit->values.at("PER.period");
  EXPECT_GT(period, 9.5) << fit->Summary();
  EXPECT_LT(period, 11.5) << fit->Summary();
  EXPECT_NE(fit->best_start_origin.find("alias the grid resolves"), std::string::npos);
  // Same likelihood as at the alias the start ended at, evaluated afresh.
  ASSERT_EQ(fit->start_ends.size(), 2u);
  Eigen::VectorXd end = fit->start_ends[1].raw;
  absl::StatusOr<double> at_end = model.LogLikelihood(end);
  ASSERT_TRUE(at_end.ok());
  absl::StatusOr<double> at_result = model.LogLikelihood(fit->raw);
  ASSERT_TRUE(at_result.ok());
  EXPECT_GE(*at_result, *at_end - 1e-6);
  EXPECT_NEAR(fit->log_likelihood, *at_result, 1e-9);
}

}  // namespace
}  // namespace gpsel
