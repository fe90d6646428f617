// Tests of core/importance_sampling.h: the Pareto k̂ estimator against draws with a known tail,
// and the evidence against closed forms (Gaussian × Gaussian in 1-8 dimensions, a bimodal
// likelihood) and a one-dimensional quadrature (a banana-shaped likelihood); the honesty of the
// reported error over 50 seeds; determinism over thread counts; caps, cancellation, validation.
#include "gpsel/core/importance_sampling.h"

#include <atomic>
#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "gmock/gmock.h"
#include "gpsel/core/internal/ellipsoid.h"
#include "gtest/gtest.h"
#include "tests/core/evidence_oracles.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

namespace gpsel {
namespace {

using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

// The exact posterior of a Gaussian problem as a proposal mode: L = N(θ; mu, cov), prior
// N(mean, diag sd²) ⇒ posterior precision cov⁻¹ + diag(sd⁻²), mode from the normal equations.
ProposalMode ExactMode(const EvidenceProblem& p, const Eigen::VectorXd& mu,
                       const Eigen::MatrixXd& cov) {
  const Eigen::MatrixXd prior_precision =
      p.prior_sd.array().square().inverse().matrix().asDiagonal();
  const Eigen::MatrixXd likelihood_precision = cov.inverse();
  const Eigen::MatrixXd precision = prior_precision + likelihood_precision;
  ProposalMode mode;
  mode.covariance = precision.inverse();
  mode.mean = mode.covariance * (prior_precision * p.prior_mean + likelihood_precision * mu);
  const double log_prior =
      -0.5 * ((mode.mean - p.prior_mean).array() / p.prior_sd.array()).square().sum() -
      p.prior_sd.array().log().sum() - 0.5 * mu.size() * std::log(2 * M_PI);
  mode.log_posterior = p.loglik(mode.mean) + log_prior;
  mode.log_laplace_mass = LogLaplaceMass(mode.log_posterior, mode.covariance);
  mode.origin = "exact";
  return mode;
}

ImportanceSamplingResult RunIs(const EvidenceProblem& p, const std::vector<ProposalMode>& modes,
                               const ImportanceSamplingOptions& options) {
  absl::StatusOr<ImportanceSamplingResult> r =
      RunImportanceSampling(p.loglik, p.prior_mean, p.prior_sd, modes, options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : ImportanceSamplingResult{};
}

void ExpectAccurate(const ImportanceSamplingResult& r, double exact) {
  SCOPED_TRACE(r.Summary());
  EXPECT_TRUE(r.reliable) << r.reliability;
  EXPECT_FALSE(r.partial);
  EXPECT_GT(r.log_evidence_error, 0.0);
  EXPECT_NEAR(r.log_evidence, exact, 3 * r.log_evidence_error);
}

// ---- Pareto k̂ ----------------------------------------------------------------------------

TEST(ParetoShapeTest, RecoversTheTailIndexOfParetoWeights) {
  // w = U^(−k) has P(w > t) = t^(−1/k): a generalized Pareto tail of shape k.
  for (double k : {0.2, 0.5, 0.9, 1.2}) {
    SCOPED_TRACE(k);
    ns_internal::Rng rng(7);
    Eigen::VectorXd log_w(20000);
    for (Eigen::Index i = 0; i < log_w.size(); ++i) log_w[i] = -k * std::log(rng.OpenUniform());
    EXPECT_NEAR(is_internal::ParetoShapeOfLargestWeights(log_w), k, 0.12);
  }
}

TEST(ParetoShapeTest, LightTailsAreBelowHalfAndTooFewWeightsAreNaN) {
  ns_internal::Rng rng(3);
  Eigen::VectorXd log_w(5000);
  for (Eigen::Index i = 0; i < log_w.size(); ++i) log_w[i] = 0.3 * rng.Normal();  // lognormal
  EXPECT_LT(is_internal::ParetoShapeOfLargestWeights(log_w), 0.5);
  EXPECT_TRUE(std::isnan(is_internal::ParetoShapeOfLargestWeights(Eigen::VectorXd::Zero(3))));
  // Shifting every log weight by a constant changes nothing.
  const double k = is_internal::ParetoShapeOfLargestWeights(log_w);
  EXPECT_NEAR(is_internal::ParetoShapeOfLargestWeights((log_w.array() + 700).matrix()), k, 1e-9);
}

// ---- evidence against closed forms ---------------------------------------------------------

TEST(ImportanceSamplingTest, GaussianOraclesInOneToEightDimensions) {
  for (int d : {1, 2, 4, 8}) {
    SCOPED_TRACE(d);
    // Correlated likelihood, shifted and scaled prior.
    Eigen::MatrixXd a = Eigen::MatrixXd::Identity(d, d) * 0.2;
    for (int i = 0; i + 1 < d; ++i) a(i + 1, i) = 0.1;
    const Eigen::MatrixXd cov = a * a.transpose();
    const Eigen::VectorXd mu = Eigen::VectorXd::LinSpaced(d, -0.5, 1.0);
    const EvidenceProblem p = GaussianProblem(mu, cov, Eigen::VectorXd::Constant(d, 0.2),
                                              Eigen::VectorXd::LinSpaced(d, 1.0, 2.0));
    ImportanceSamplingOptions options;
    options.seed = 100 + d;
    ExpectAccurate(RunIs(p, {ExactMode(p, mu, cov)}, options), p.log_z);
  }
}

// Over 50 seeds the reported error is the spread of the estimate: the z-scores
// (log Ẑ − log Z) / σ̂ have a root mean square near 1. The proposal is deliberately off (a
// mode 0.3 posterior sd away with a covariance 1.5 times too wide) so that σ̂ is not tiny.
TEST(ImportanceSamplingTest, ErrorIsHonestOverFiftySeeds) {
  const int d = 3;
  const Eigen::VectorXd mu = Eigen::VectorXd::Constant(d, 0.4);
  const Eigen::MatrixXd cov = Eigen::MatrixXd::Identity(d, d) * 0.09;
  const EvidenceProblem p =
      GaussianProblem(mu, cov, Eigen::VectorXd::Zero(d), Eigen::VectorXd::Ones(d));
  ProposalMode mode = ExactMode(p, mu, cov);
  mode.mean.array() += 0.3 * std::sqrt(mode.covariance(0, 0));
  mode.covariance *= 1.5;
  ImportanceSamplingOptions options;
  options.initial_samples = 400;
  options.target_error = 0.03;
  double sum_z2 = 0.0;
  for (int seed = 0; seed < 50; ++seed) {
    options.seed = seed;
    const ImportanceSamplingResult r = RunIs(p, {mode}, options);
    const double z = (r.log_evidence - p.log_z) / r.log_evidence_error;
    sum_z2 += z * z;
  }
  const double rms = std::sqrt(sum_z2 / 50);
  EXPECT_GE(rms, 0.7);
  EXPECT_LE(rms, 1.4);
}

TEST(ImportanceSamplingTest, BimodalLikelihoodWithBothModes) {
  const EvidenceProblem p = BimodalProblem(2, 0.1, 1.0);
  // Each mode of the posterior: N(±a·1, w²I) times the N(0, I) prior.
  std::vector<ProposalMode> modes;
  for (double sign : {1.0, -1.0}) {
    ProposalMode m;
    const double precision = 1 / 0.01 + 1;
    m.mean = Eigen::VectorXd::Constant(2, sign * (1 / 0.01) / precision);
    m.covariance = Eigen::MatrixXd::Identity(2, 2) / precision;
    m.log_posterior = p.loglik(m.mean) - 0.5 * m.mean.squaredNorm() - std::log(2 * M_PI);
    m.log_laplace_mass = LogLaplaceMass(m.log_posterior, m.covariance);
    modes.push_back(m);
  }
  ImportanceSamplingOptions options;
  options.seed = 4;
  options.return_samples = true;
  const ImportanceSamplingResult r = RunIs(p, modes, options);
  ExpectAccurate(r, p.log_z);
  // Equal Laplace masses, equal mixture weights, and each mode carries about half the weight.
  ASSERT_EQ(r.mode_weights.size(), 2u);
  EXPECT_NEAR(r.mode_weights[0], 0.45, 1e-9);
  EXPECT_NEAR(r.mode_weight_shares[0], 0.5, 0.05);
  double right = 0.0;
  for (Eigen::Index k = 0; k < r.samples.rows(); ++k) {
    if (r.samples(k, 0) > 0) right += std::exp(r.log_weights[k]);
  }
  EXPECT_NEAR(right, 0.5, 0.05);
}

TEST(ImportanceSamplingTest, BananaAgainstQuadrature) {
  const Banana banana;
  const EvidenceProblem p = BananaProblem(banana);
  // The mode is the origin; the Hessian there is diagonal: 1/s₁² + 1 and 1/s₂² + 1.
  ProposalMode mode;
  mode.mean = Eigen::VectorXd::Zero(2);
  mode.covariance =
      Eigen::Vector2d(1 / (1 / (banana.s1 * banana.s1) + 1), 1 / (1 / (banana.s2 * banana.s2) + 1))
          .asDiagonal();
  mode.log_posterior = p.loglik(mode.mean) - std::log(2 * M_PI);
  mode.log_laplace_mass = LogLaplaceMass(mode.log_posterior, mode.covariance);
  ImportanceSamplingOptions options;
  options.seed = 5;
  const ImportanceSamplingResult r = RunIs(p, {mode}, options);
  ExpectAccurate(r, p.log_z);
  // The banana is not Gaussian: its Laplace mass (the paper's Lap) is off by 0.045 nats, which
  // importance sampling corrects.
  EXPECT_GT(std::abs(mode.log_laplace_mass - p.log_z), 0.03);
}

// ---- diagnostics, determinism, caps --------------------------------------------------------

// A proposal a tenth of the posterior's width: without adaptation the weights' tail is heavy and
// the estimate is flagged; with it, the adapted components repair the proposal.
TEST(ImportanceSamplingTest, FarTooNarrowProposalIsFlaggedOrRepairedByAdaptation) {
  const int d = 4;
  const Eigen::VectorXd mu = Eigen::VectorXd::Constant(d, 0.3);
  const Eigen::MatrixXd cov = Eigen::MatrixXd::Identity(d, d) * 0.04;
  const EvidenceProblem p =
      GaussianProblem(mu, cov, Eigen::VectorXd::Zero(d), Eigen::VectorXd::Ones(d));
  ProposalMode mode = ExactMode(p, mu, cov);
  mode.covariance *= 0.01;
  ImportanceSamplingOptions options;
  options.seed = 8;
  options.student_t_dof = 30;
  options.max_adaptations = 0;
  const ImportanceSamplingResult fixed = RunIs(p, {mode}, options);
  EXPECT_GT(fixed.pareto_k, 0.7) << fixed.Summary();
  EXPECT_FALSE(fixed.reliable);
  EXPECT_THAT(fixed.reliability, HasSubstr("Pareto k"));
  EXPECT_EQ(fixed.modes.size(), 1u);
  options.max_adaptations = ImportanceSamplingOptions{}.max_adaptations;
  const ImportanceSamplingResult adapted = RunIs(p, {mode}, options);
  ExpectAccurate(adapted, p.log_z);
  EXPECT_GT(adapted.modes.size(), 1u);
  EXPECT_THAT(adapted.modes.back().origin, HasSubstr("adapted"));
}

TEST(ImportanceSamplingTest, SameSeedSameBitsForAnyThreadCount) {
  const EvidenceProblem p = IsotropicProblem(3, 0.2, 0.3);
  const ProposalMode mode =
      ExactMode(p, Eigen::VectorXd::Constant(3, 0.3), Eigen::MatrixXd::Identity(3, 3) * 0.04);
  ImportanceSamplingOptions options;
  options.seed = 11;
  options.return_samples = true;
  const ImportanceSamplingResult one = RunIs(p, {mode}, options);
  options.threads = 3;
  const ImportanceSamplingResult three = RunIs(p, {mode}, options);
  EXPECT_EQ(one.log_evidence, three.log_evidence);
  EXPECT_EQ(one.log_evidence_error, three.log_evidence_error);
  EXPECT_EQ(one.num_samples, three.num_samples);
  EXPECT_TRUE(one.samples == three.samples);
  options.seed = 12;
  EXPECT_NE(RunIs(p, {mode}, options).log_evidence, one.log_evidence);
}

TEST(ImportanceSamplingTest, SampleCapGivesPartialResult) {
  const EvidenceProblem p = IsotropicProblem(2, 0.2, 0.3);
  ProposalMode mode =
      ExactMode(p, Eigen::VectorXd::Constant(2, 0.3), Eigen::MatrixXd::Identity(2, 2) * 0.04);
  ImportanceSamplingOptions options;
  options.initial_samples = 100;
  options.max_samples = 150;
  options.target_error = 1e-4;
  const ImportanceSamplingResult r = RunIs(p, {mode}, options);
  EXPECT_TRUE(r.partial);
  EXPECT_EQ(r.num_samples, 150);
  EXPECT_FALSE(r.reliable);
  EXPECT_THAT(r.partial_reason, HasSubstr("max_samples"));
}

TEST(ImportanceSamplingTest, CancellationStopsWithinOneEvaluationPerThread) {
  const EvidenceProblem p = IsotropicProblem(2, 0.2, 0.3);
  const ProposalMode mode =
      ExactMode(p, Eigen::VectorXd::Constant(2, 0.3), Eigen::MatrixXd::Identity(2, 2) * 0.04);
  for (int threads : {1, 2}) {
    std::atomic<int> calls{0}, calls_at_cancel{-1};
    std::atomic<int> polls{0};
    const LogLikelihoodFn counting = [&](const Eigen::VectorXd& x) {
      ++calls;
      return p.loglik(x);
    };
    ImportanceSamplingOptions options;
    options.threads = threads;
    const ProgressCallback cancel_after_100 = [&](const Progress&) {
      if (++polls < 100) return absl::OkStatus();
      if (calls_at_cancel < 0) calls_at_cancel = calls.load();
      return absl::CancelledError("client went away");
    };
    absl::StatusOr<ImportanceSamplingResult> r = RunImportanceSampling(
        counting, p.prior_mean, p.prior_sd, {mode}, options, cancel_after_100);
    EXPECT_THAT(r, StatusIs(absl::StatusCode::kCancelled));
    EXPECT_LE(calls.load() - calls_at_cancel.load(), threads);
  }
}

TEST(ImportanceSamplingTest, RejectsInvalidInputNamingTheField) {
  const EvidenceProblem p = IsotropicProblem(2, 0.2, 0.3);
  const ProposalMode good =
      ExactMode(p, Eigen::VectorXd::Constant(2, 0.3), Eigen::MatrixXd::Identity(2, 2) * 0.04);
  auto error = [&](const std::vector<ProposalMode>& modes, const ImportanceSamplingOptions& o,
                   const Eigen::VectorXd& sd) {
    return std::string(
        RunImportanceSampling(p.loglik, p.prior_mean, sd, modes, o).status().message());
  };
  const ImportanceSamplingOptions ok;
  EXPECT_THAT(error({}, ok, p.prior_sd), HasSubstr("modes"));
  ProposalMode bad = good;
  bad.covariance(0, 0) = -1;
  EXPECT_THAT(error({bad}, ok, p.prior_sd), HasSubstr("modes[0].covariance"));
  bad = good;
  bad.mean = Eigen::VectorXd::Zero(3);
  EXPECT_THAT(error({bad}, ok, p.prior_sd), HasSubstr("modes[0].mean"));
  EXPECT_THAT(error({good}, ok, Eigen::Vector2d(1, 0)), HasSubstr("prior_sd"));
  ImportanceSamplingOptions o;
  o.prior_share = 1;
  EXPECT_THAT(error({good}, o, p.prior_sd), HasSubstr("prior_share"));
  o = ok;
  o.student_t_dof = 0;
  EXPECT_THAT(error({good}, o, p.prior_sd), HasSubstr("student_t_dof"));
  o = ok;
  o.target_error = std::nan("");
  EXPECT_THAT(error({good}, o, p.prior_sd), HasSubstr("target_error"));
  o = ok;
  o.max_adaptations = -1;
  EXPECT_THAT(error({good}, o, p.prior_sd), HasSubstr("max_adaptations"));
  o = ok;
  o.max_samples = 5;
  EXPECT_THAT(error({good}, o, p.prior_sd), HasSubstr("max_samples"));
  // A likelihood returning +inf is an error; one returning NaN or -inf is zero likelihood.
  const LogLikelihoodFn plus_inf = [](const Eigen::VectorXd&) { return kInf; };
  EXPECT_THAT(RunImportanceSampling(plus_inf, p.prior_mean, p.prior_sd, {good}, ok),
              StatusIs(absl::StatusCode::kInvalidArgument));
  const LogLikelihoodFn nowhere = [](const Eigen::VectorXd&) { return std::nan(""); };
  EXPECT_THAT(RunImportanceSampling(nowhere, p.prior_mean, p.prior_sd, {good}, ok),
              StatusIs(absl::StatusCode::kFailedPrecondition));
}

}  // namespace
}  // namespace gpsel
