// No hidden bounds (issue 27 item 4): the fit's bounds follow the scale of y and x whether they
// are standardised or not, so that a kernel's likelihood on y × 1e12 (not standardised) or on
// x × 1e9 is that on the original data moved by the exact change of variables; and a score whose
// likelihood is absurd for its data (far below white noise on the same y) is an error naming why.
#include <cmath>
#include <string>

#include "absl/status/statusor.h"
#include "gmock/gmock.h"
#include "gpsel/core/fit_bounds.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/score.h"
#include "gtest/gtest.h"
#include "tests/core/bundled_data.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

namespace gpsel {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;

KernelScore Score(const Dataset& data, const std::string& kernel, bool standardize) {
  absl::StatusOr<KernelExpr> parsed = ParseKernel(kernel);
  EXPECT_TRUE(parsed.ok());
  ScoreOptions options;
  options.metrics = {Metric::kMll};
  options.standardize = standardize;
  absl::StatusOr<KernelScore> score = ScoreKernel(data, *parsed, options);
  EXPECT_TRUE(score.ok()) << score.status();
  return score.ok() ? *score : KernelScore{};
}

// The Nile flow standardised by hand (z), and the same z times 1e12: an unstandardised model of
// 1e12 z with C·1e24 and noise·1e24 is the model of z, so its MLL is z's less n·log(1e12) (the
// 1e-4 noise floor aside, which the Nile's noise variance of ~0.5 dwarfs).
TEST(ScaleBoundsTest, MllOnYTimes1e12WithoutStandardisingIsTheChangeOfVariables) {
  const Dataset nile = testing::LoadBundled("nile.csv");
  Dataset z = nile;
  const double mean = z.y.mean();
  const double sd = std::sqrt((z.y.array() - mean).square().sum() / (z.y.size() - 1));
  z.y = (z.y.array() - mean) / sd;
  Dataset big = z;
  big.y = z.y * 1e12;
  const KernelScore reference = Score(z, "C*SE", /*standardize=*/false);
  const KernelScore scaled = Score(big, "C*SE", /*standardize=*/false);
  SCOPED_TRACE(scaled.mll_fit ? scaled.mll_fit->Summary() : "no fit");
  const double n = static_cast<double>(nile.num_points());
  EXPECT_NEAR(scaled.metrics.at("mll"), reference.metrics.at("mll") - n * std::log(1e12), 1e-3);
  EXPECT_NEAR(scaled.mll_fit->values.at("C.constant"),
              reference.mll_fit->values.at("C.constant") * 1e24,
              1e-3 * reference.mll_fit->values.at("C.constant") * 1e24);
  for (const std::string& warning : scaled.warnings) {
    EXPECT_THAT(warning, Not(HasSubstr("bound"))) << warning;
  }
}

// x in nanoseconds-like units (× 1e9): the lengthscale is 1e9 times larger, the MLL the same.
TEST(ScaleBoundsTest, MllOnXTimes1e9IsTheSame) {
  const Dataset nile = testing::LoadBundled("nile.csv");
  Dataset wide = nile;
  wide.x = nile.x * 1e9;
  const KernelScore reference = Score(nile, "C*SE", /*standardize=*/true);
  const KernelScore scaled = Score(wide, "C*SE", /*standardize=*/true);
  SCOPED_TRACE(scaled.mll_fit ? scaled.mll_fit->Summary() : "no fit");
  EXPECT_NEAR(scaled.metrics.at("mll"), reference.metrics.at("mll"), 1e-3);
  EXPECT_NEAR(scaled.mll_fit->values.at("SE.lengthscale"),
              reference.mll_fit->values.at("SE.lengthscale") * 1e9,
              1e-3 * reference.mll_fit->values.at("SE.lengthscale") * 1e9);
}

TEST(ScaleBoundsTest, BoundsFollowTheDataOnlyWhereItsScaleExceedsThem) {
  const Dataset nile = testing::LoadBundled("nile.csv");
  absl::StatusOr<KernelExpr> kernel = ParseKernel("C*SE + LIN");
  ASSERT_TRUE(kernel.ok());
  // Standardised y and x spanning 99 years: the bound of every parameter is the default.
  {
    const Eigen::VectorXd z = (nile.y.array() - nile.y.mean()) /
                              std::sqrt((nile.y.array() - nile.y.mean()).square().mean());
    absl::StatusOr<GpModel> model = GpModel::Create(*kernel, nile.x, z);
    ASSERT_TRUE(model.ok()) << model.status();
    const ParameterBounds bounds = FitParameterBounds(*model, FitOptions{});
    EXPECT_TRUE((bounds.upper.array() == FitOptions{}.raw_upper_bound).all()) << bounds.upper;
    EXPECT_TRUE((bounds.scale.array() == 1.0).all());
  }
  // y in the 1000s, x × 1e9: C and noise follow mean(y²), the lengthscale 2 × the range of x.
  {
    absl::StatusOr<GpModel> model = GpModel::Create(*kernel, nile.x * 1e9, nile.y);
    ASSERT_TRUE(model.ok()) << model.status();
    const ParameterBounds bounds = FitParameterBounds(*model, FitOptions{});
    const double y2 = nile.y.squaredNorm() / nile.num_points();
    const std::vector<std::string> names = model->free_names();
    for (size_t k = 0; k < names.size(); ++k) {
      SCOPED_TRACE(names[k]);
      if (names[k] == "C.constant" || names[k] == "noise") {
        EXPECT_NEAR(Softplus(bounds.upper(k)), 500 * y2, 1e-9 * 500 * y2);
      } else if (names[k] == "SE.lengthscale") {
        EXPECT_NEAR(Softplus(bounds.upper(k)), 2 * 99e9, 1e-3 * 2 * 99e9);
      }
      EXPECT_GE(bounds.upper(k), FitOptions{}.raw_upper_bound);
    }
  }
}

// A fit far below white noise is an error, not a score: SE has unit variance, and the noise
// fixed at 1e-3 cannot take y's scale of 1e24.
TEST(ScaleBoundsTest, LikelihoodFarBelowWhiteNoiseIsAnErrorThatSaysWhy) {
  Dataset big = testing::LoadBundled("nile.csv");
  big.y *= 1e9;
  absl::StatusOr<KernelExpr> kernel = ParseKernel("SE");
  ASSERT_TRUE(kernel.ok());
  ScoreOptions options;
  options.metrics = {Metric::kMll};
  options.standardize = false;
  options.hyperparameters.fixed_values["noise"] = 1e-3;
  absl::StatusOr<KernelScore> score = ScoreKernel(big, *kernel, options);
  ASSERT_FALSE(score.ok());
  EXPECT_THAT(score, StatusIs(absl::StatusCode::kFailedPrecondition));
  EXPECT_THAT(score.status().message(), HasSubstr("below that of white noise"));
  EXPECT_THAT(score.status().message(), HasSubstr("--no-standardize"));
  EXPECT_THAT(score.status().message(), HasSubstr("--fix"));
  // The same kernel with a free noise reaches white noise and is a score.
  options.hyperparameters.fixed_values.clear();
  EXPECT_TRUE(ScoreKernel(big, *kernel, options).ok());
}

}  // namespace
}  // namespace gpsel
