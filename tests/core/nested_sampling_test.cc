// Tests of core/nested_sampling.h and core/internal/ellipsoid.h against closed-form evidences (Gaussian
// likelihood x Gaussian prior in 1-8 dimensions, correlated, bimodal, truncated by -inf/NaN), the
// paper's GP example, dynamic runs, reproducibility, caps, cancellation and validation; and
// batches of replacements evaluated in parallel (batch_size): same bits on any thread count,
// oracles and honest errors.
#include "gpsel/core/nested_sampling.h"

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

NestedSamplingResult RunProblem(const EvidenceProblem& p, NestedSamplingOptions options) {
  absl::StatusOr<NestedSamplingResult> r =
      RunNestedSampling(p.loglik, p.prior_mean, p.prior_sd, options);
  EXPECT_TRUE(r.ok()) << r.status();
  return r.ok() ? *r : NestedSamplingResult{};
}

// The reported estimate within max(0.05, 3σ) of the truth, the error sane, and the classic
// nested-sampling estimate consistent with its own error bars.
void ExpectAccurate(const NestedSamplingResult& r, double exact) {
  SCOPED_TRACE(r.Summary());
  EXPECT_FALSE(r.partial);
  EXPECT_GT(r.log_evidence_error, 0.0);
  EXPECT_LT(r.log_evidence_error, 0.25);
  EXPECT_NEAR(r.log_evidence, exact, std::max(0.05, 3 * r.log_evidence_error));
  EXPECT_NEAR(r.log_evidence_nested, exact,
              std::max(0.05, 4 * std::max(r.log_evidence_nested_error, r.log_evidence_error_bootstrap)));
  // sqrt(H/n) and the thread bootstrap estimate the same spread.
  EXPECT_GT(r.log_evidence_error_bootstrap, r.log_evidence_nested_error / 3);
  EXPECT_LT(r.log_evidence_error_bootstrap, r.log_evidence_nested_error * 3);
  EXPECT_GT(r.information, 0.0);
  EXPECT_GT(r.effective_sample_size, 10.0);
}

TEST(NestedSamplingQuantileTest, MatchesKnownValuesAndInvertsTheCdf) {
  using ns_internal::NormalQuantile;
  EXPECT_NEAR(NormalQuantile(0.975), 1.959963984540054, 1e-14);
  EXPECT_NEAR(NormalQuantile(0.5), 0.0, 1e-15);
  EXPECT_NEAR(NormalQuantile(1e-10), -6.361340902404056, 1e-12);
  EXPECT_NEAR(NormalQuantile(1 - 1e-10), 6.361340889697422, 1e-6);  // 1 - 1e-10 is rounded
  for (double p : {1e-300, 1e-50, 1e-5, 0.01, 0.02425, 0.1, 0.3, 0.7, 0.9, 0.99, 0.999999}) {
    const double x = NormalQuantile(p);
    const double back = p < 0.5 ? 0.5 * std::erfc(-x / std::sqrt(2.0)) : 1 - 0.5 * std::erfc(x / std::sqrt(2.0));
    EXPECT_NEAR(back / p, 1.0, 1e-12) << p;
  }
}

TEST(NestedSamplingEllipsoidTest, BoundingEllipsoidContainsItsPoints) {
  ns_internal::Rng rng(3);
  Eigen::MatrixXd points(3, 50);
  for (int k = 0; k < 50; ++k) {
    points.col(k) << rng.Normal(), 0.1 * rng.Normal(), rng.Normal() + rng.Normal();
  }
  std::vector<int> all(50);
  for (int k = 0; k < 50; ++k) all[k] = k;
  const ns_internal::Ellipsoid e = ns_internal::Ellipsoid::Bounding(points, all);
  std::vector<double> work(3);
  double max_r2 = 0;
  for (int k = 0; k < 50; ++k) max_r2 = std::max(max_r2, e.Radius2(points.col(k).data(), work.data()));
  EXPECT_NEAR(max_r2, 1.0, 1e-9);
}

TEST(NestedSamplingEllipsoidTest, UnionSplitsSeparatedClustersAndSamplesUniformly) {
  ns_internal::Rng rng(5);
  Eigen::MatrixXd points(2, 400);
  for (int k = 0; k < 400; ++k) {
    const double c = k < 200 ? 0.3 : 0.7;
    points.col(k) << c + 0.05 * rng.Normal(), c + 0.05 * rng.Normal();
  }
  const ns_internal::EllipsoidUnion u = ns_internal::EllipsoidUnion::Fit(points, std::log(0.05), {});
  EXPECT_GE(u.size(), 2);
  // Kept proposals are uniform on the union: the share landing in any sub-box of the union's
  // bounding box is proportional to the union's area there (estimated with plain uniform points).
  std::vector<double> x(2), work(4);
  int kept = 0, kept_left = 0, hit = 0, hit_left = 0;
  for (int k = 0; k < 200000; ++k) {
    if (u.Sample(rng, x.data(), work.data())) {
      ++kept;
      kept_left += x[0] < 0.5;
    }
    x[0] = rng.Uniform();
    x[1] = rng.Uniform();
    if (u.Contains(x.data(), work.data())) {
      ++hit;
      hit_left += x[0] < 0.5;
    }
  }
  EXPECT_NEAR(static_cast<double>(kept_left) / kept, static_cast<double>(hit_left) / hit, 0.02);
}

TEST(NestedSamplingEllipsoidTest, OverlapsAreNotOversampled) {
  // Two unit discs whose centres are 1 apart: kept proposals must be uniform on the union, so
  // the share in the lens (inside both) is lens area / union area (≈ 0.243), not twice that.
  using ns_internal::Ellipsoid;
  const ns_internal::EllipsoidUnion u = ns_internal::EllipsoidUnion::FromEllipsoids(
      {Ellipsoid(Eigen::Vector2d(0, 0), Eigen::Matrix2d::Identity()),
       Ellipsoid(Eigen::Vector2d(1, 0), Eigen::Matrix2d::Identity())});
  ns_internal::Rng rng(8);
  std::vector<double> x(2), work(4);
  int kept = 0, lens = 0;
  for (int k = 0; k < 100000; ++k) {
    if (!u.Sample(rng, x.data(), work.data())) continue;
    ++kept;
    lens += u.Count(x.data(), work.data()) == 2;
  }
  const double lens_area = 2 * std::acos(0.5) - 0.5 * std::sqrt(3.0);
  EXPECT_NEAR(static_cast<double>(lens) / kept, lens_area / (2 * M_PI - lens_area), 0.01);
}

TEST(NestedSamplingTest, GaussianOracles) {
  for (int d : {1, 2, 3, 6}) {
    SCOPED_TRACE(d);
    const EvidenceProblem p = IsotropicProblem(d, 0.1, 0.5);
    NestedSamplingOptions options;
    options.seed = 11 + d;
    ExpectAccurate(RunProblem(p, options), p.log_z);
  }
}

// Over 50 seeds the error of the classic nested-sampling estimate, sqrt(H/n), is the spread of
// that estimate: the z-scores (log Ẑ − log Z) / σ̂ have a root mean square near 1
// (tests/core/importance_sampling_test.cc holds importance sampling to the same standard). The
// reported importance-nested-sampling estimate's error treats the proposals as independent
// draws, which they are not (each epoch's bound stratifies the prior volume), and overstates
// its spread 1.3-2.2 times (bench/RESULTS.md): conservative, never overconfident.
TEST(NestedSamplingTest, ErrorIsHonestOverFiftySeeds) {
  const EvidenceProblem p = IsotropicProblem(3, 0.3, 0.4);
  NestedSamplingOptions options;
  options.num_bootstrap = 0;
  double classic_z2 = 0.0, reported_z2 = 0.0;
  for (int seed = 0; seed < 50; ++seed) {
    options.seed = 1000 + seed;
    const NestedSamplingResult r = RunProblem(p, options);
    ASSERT_EQ(r.log_evidence_estimator, "importance");
    classic_z2 += std::pow((r.log_evidence_nested - p.log_z) / r.log_evidence_nested_error, 2);
    reported_z2 += std::pow((r.log_evidence - p.log_z) / r.log_evidence_error, 2);
  }
  const double classic_rms = std::sqrt(classic_z2 / 50);
  EXPECT_GE(classic_rms, 0.7);
  EXPECT_LE(classic_rms, 1.4);
  const double reported_rms = std::sqrt(reported_z2 / 50);
  EXPECT_GE(reported_rms, 0.4);
  EXPECT_LE(reported_rms, 1.0);
}

// K independent runs: one run is today's run; K = 4 merges into an estimate about √K = 2 times
// more precise, whose spread error agrees with the propagated one; the result depends on the
// seed and K only (threads, and merging the runs made one by one, give the same bits).
TEST(NestedSamplingRunsTest, OneRunIsTheSingleRunAndFourRunsHalveTheError) {
  const EvidenceProblem p = IsotropicProblem(3, 0.2, 0.4);
  NestedSamplingOptions options;
  options.seed = 77;
  options.return_samples = true;
  const NestedSamplingResult single = RunProblem(p, options);
  ASSERT_EQ(single.runs.size(), 1u);
  EXPECT_EQ(single.runs.front().seed, 77u);
  EXPECT_EQ(single.log_evidence_error_spread, 0.0);
  absl::StatusOr<NestedSamplingResult> merged_one = MergeNestedSamplingRuns({single});
  ASSERT_TRUE(merged_one.ok());
  EXPECT_EQ(merged_one->log_evidence, single.log_evidence);
  EXPECT_TRUE(merged_one->samples == single.samples);

  options.num_runs = 4;
  const NestedSamplingResult four = RunProblem(p, options);
  SCOPED_TRACE(four.Summary());
  ASSERT_EQ(four.runs.size(), 4u);
  EXPECT_EQ(four.runs.front().seed, 77u);  // run 0 is the single run
  EXPECT_EQ(four.runs.front().log_evidence, single.log_evidence);
  EXPECT_NEAR(four.log_evidence, p.log_z, 3 * four.log_evidence_error);
  EXPECT_GT(four.log_evidence_error, 0.35 * single.log_evidence_error);
  EXPECT_LT(four.log_evidence_error, 0.7 * single.log_evidence_error);
  EXPECT_GT(four.log_evidence_error_spread, 0.0);
  EXPECT_LT(four.log_evidence_error_spread, 4 * four.log_evidence_error);
  int64_t calls = 0;
  for (const NestedSamplingResult::Run& run : four.runs) calls += run.likelihood_calls;
  EXPECT_EQ(four.likelihood_calls, calls);
  // Pooled samples: the posterior weights of all runs, normalised together.
  EXPECT_EQ(four.samples.rows(), four.iterations);
  EXPECT_NEAR(four.log_weights.array().exp().sum(), 1.0, 1e-9);

  options.threads = 3;
  const NestedSamplingResult threaded = RunProblem(p, options);
  EXPECT_EQ(threaded.log_evidence, four.log_evidence);
  EXPECT_EQ(threaded.log_evidence_error, four.log_evidence_error);
  EXPECT_TRUE(threaded.samples == four.samples);

  // The runs made one at a time (in reverse order, as other workers might finish them) and
  // merged give the same result.
  std::vector<NestedSamplingResult> separately;
  for (int run = 3; run >= 0; --run) {
    NestedSamplingOptions one = options;
    one.num_runs = 1;
    one.seed = NestedSamplingRunSeed(options.seed, run);
    separately.push_back(RunProblem(p, one));
  }
  absl::StatusOr<NestedSamplingResult> merged = MergeNestedSamplingRuns(separately);
  ASSERT_TRUE(merged.ok());
  EXPECT_EQ(merged->log_evidence, four.log_evidence);
  EXPECT_EQ(merged->log_evidence_error_spread, four.log_evidence_error_spread);
  EXPECT_TRUE(merged->samples == four.samples);
  EXPECT_FALSE(MergeNestedSamplingRuns({}).ok());
}

// batch_size > 1 (candidate rounds evaluated on the run's threads): the same seed and batch size
// give the same bits on 1, 2 and 3 threads, for rejection sampling (u = 3, with the importance
// estimate), slice sampling (u = 8), dynamic batches (seeded from the baseline's live set) and
// several runs sharing the threads; the batch size itself changes the numbers.
TEST(NestedSamplingBatchTest, SameBitsWhateverTheThreadCount) {
  struct Case {
    EvidenceProblem p;
    int num_live;
    bool dynamic;
    int num_runs;
  };
  const Case cases[] = {{IsotropicProblem(3, 0.2, 0.4), 0, false, 1},
                        {IsotropicProblem(8, 0.3, 0.2), 60, false, 1},
                        {BimodalProblem(2, 0.1, 1.0), 60, true, 1},
                        {IsotropicProblem(2, 0.2, 0.4), 0, false, 2}};
  for (const Case& c : cases) {
    SCOPED_TRACE(c.p.prior_mean.size());
    NestedSamplingOptions options;
    options.seed = 31;
    options.num_live = c.num_live;
    options.num_bootstrap = 10;
    options.dynamic = c.dynamic;
    options.dynamic_target_error = 0.015;
    options.num_runs = c.num_runs;
    options.return_samples = true;
    options.batch_size = 6;
    options.threads = 1;
    const NestedSamplingResult one = RunProblem(c.p, options);
    SCOPED_TRACE(one.Summary());
    EXPECT_NEAR(one.log_evidence, c.p.log_z, std::max(0.05, 3 * one.log_evidence_error));
    for (int threads : {2, 3, 4}) {
      options.threads = threads;
      const NestedSamplingResult r = RunProblem(c.p, options);
      EXPECT_EQ(r.log_evidence, one.log_evidence) << threads;
      EXPECT_EQ(r.log_evidence_error, one.log_evidence_error) << threads;
      EXPECT_EQ(r.log_evidence_nested, one.log_evidence_nested) << threads;
      EXPECT_EQ(r.log_evidence_error_bootstrap, one.log_evidence_error_bootstrap) << threads;
      EXPECT_EQ(r.likelihood_calls, one.likelihood_calls) << threads;
      EXPECT_EQ(r.num_batches, one.num_batches) << threads;
      EXPECT_TRUE(r.samples == one.samples) << threads;
    }
    options.threads = 1;
    options.batch_size = 1;
    const NestedSamplingResult serial = RunProblem(c.p, options);
    EXPECT_NE(serial.log_evidence, one.log_evidence);
  }
}

// The likelihood really is called from several threads at once when batch_size > 1 (and never
// from more than one while batch_size = 1): the peak number of concurrent calls.
TEST(NestedSamplingBatchTest, CallsOverlapOnlyWithBatches) {
  const EvidenceProblem p = IsotropicProblem(2, 0.2, 0.4);
  std::atomic<int> inside{0}, peak{0};
  LogLikelihoodFn slow = [&](const Eigen::VectorXd& x) {
    const int now = ++inside;
    int seen = peak.load();
    while (now > seen && !peak.compare_exchange_weak(seen, now)) {
    }
    // Long enough that two workers' calls overlap on a loaded machine.
    volatile double s = 0.0;
    for (int i = 0; i < 20000; ++i) s = s + std::sqrt(static_cast<double>(i));
    --inside;
    return p.loglik(x);
  };
  NestedSamplingOptions options;
  options.num_live = 50;
  options.max_likelihood_calls = 2000;
  options.threads = 2;
  absl::StatusOr<NestedSamplingResult> serial =
      RunNestedSampling(slow, p.prior_mean, p.prior_sd, options);
  ASSERT_TRUE(serial.ok()) << serial.status();
  EXPECT_EQ(peak.load(), 1);
  options.batch_size = 8;
  absl::StatusOr<NestedSamplingResult> batched =
      RunNestedSampling(slow, p.prior_mean, p.prior_sd, options);
  ASSERT_TRUE(batched.ok()) << batched.status();
  EXPECT_EQ(peak.load(), 2);
}

TEST(NestedSamplingBatchTest, GaussianOraclesWithBatches) {
  for (int batch : {4, 16}) {
    for (int d : {1, 2, 3, 6}) {
      SCOPED_TRACE(testing::Message() << "batch " << batch << ", u = " << d);
      const EvidenceProblem p = IsotropicProblem(d, 0.1, 0.5);
      NestedSamplingOptions options;
      options.seed = 11 + d;
      options.batch_size = batch;
      options.threads = 2;
      ExpectAccurate(RunProblem(p, options), p.log_z);
    }
  }
  // Slice sampling (u = 8) and a correlated, shifted problem.
  NestedSamplingOptions options;
  options.seed = 21;
  options.num_live = 60;
  options.num_bootstrap = 10;
  options.batch_size = 6;
  options.threads = 2;
  const EvidenceProblem slice = IsotropicProblem(8, 0.3, 0.2);
  const NestedSamplingResult r = RunProblem(slice, options);
  EXPECT_EQ(r.log_evidence_estimator, "nested");
  EXPECT_NEAR(r.log_evidence, slice.log_z, std::max(0.05, 3 * r.log_evidence_error)) << r.Summary();
}

// The honesty test of ErrorIsHonestOverFiftySeeds with batches of 8: rejection sampling (both
// estimates) and slice sampling (u = 7, the classic estimate). Batches that gave a biased or
// correlated replacement would show as z-scores off zero or too wide.
TEST(NestedSamplingBatchTest, ErrorIsHonestOverFiftySeedsWithBatches) {
  {
    const EvidenceProblem p = IsotropicProblem(3, 0.3, 0.4);
    NestedSamplingOptions options;
    options.num_bootstrap = 0;
    options.batch_size = 8;
    options.threads = 2;
    double classic_z2 = 0.0, reported_z2 = 0.0, classic_z = 0.0;
    for (int seed = 0; seed < 50; ++seed) {
      options.seed = 1000 + seed;
      const NestedSamplingResult r = RunProblem(p, options);
      ASSERT_EQ(r.log_evidence_estimator, "importance");
      const double z = (r.log_evidence_nested - p.log_z) / r.log_evidence_nested_error;
      classic_z += z;
      classic_z2 += z * z;
      reported_z2 += std::pow((r.log_evidence - p.log_z) / r.log_evidence_error, 2);
    }
    EXPECT_NEAR(classic_z / 50, 0.0, 3 / std::sqrt(50.0));
    const double classic_rms = std::sqrt(classic_z2 / 50);
    EXPECT_GE(classic_rms, 0.7);
    EXPECT_LE(classic_rms, 1.4);
    // The importance estimate's error is calibrated now (issue 27: its stratified variance, not
    // the conservative variance of independent draws), so its z-scores have rms ≈ 1 like the
    // classic estimate's (1.001 over these seeds), no longer below 1.
    const double reported_rms = std::sqrt(reported_z2 / 50);
    EXPECT_GE(reported_rms, 0.7);
    EXPECT_LE(reported_rms, 1.4);
  }
  {
    const EvidenceProblem p = IsotropicProblem(7, 0.3, 0.2);
    NestedSamplingOptions options;
    options.num_bootstrap = 0;
    options.num_live = 50;
    options.batch_size = 8;
    options.threads = 2;
    double z_sum = 0.0, z2 = 0.0;
    for (int seed = 0; seed < 50; ++seed) {
      options.seed = 2000 + seed;
      const NestedSamplingResult r = RunProblem(p, options);
      ASSERT_EQ(r.log_evidence_estimator, "nested");
      const double z = (r.log_evidence - p.log_z) / r.log_evidence_error;
      z_sum += z;
      z2 += z * z;
    }
    EXPECT_NEAR(z_sum / 50, 0.0, 3 / std::sqrt(50.0));
    const double rms = std::sqrt(z2 / 50);
    EXPECT_GE(rms, 0.7);
    EXPECT_LE(rms, 1.4);
  }
}

// Caps, +inf and cancellation behave with batches as without: a partial result within one round
// of the cap, an error naming +inf, and a cancelled run that stops within one round.
TEST(NestedSamplingBatchTest, CapsErrorsAndCancellation) {
  const EvidenceProblem p = IsotropicProblem(2, 0.01, 0.5);
  NestedSamplingOptions options;
  options.batch_size = 8;
  options.threads = 2;
  options.max_likelihood_calls = 700;
  absl::StatusOr<NestedSamplingResult> capped =
      RunNestedSampling(p.loglik, p.prior_mean, p.prior_sd, options);
  ASSERT_TRUE(capped.ok()) << capped.status();
  EXPECT_TRUE(capped->partial);
  EXPECT_THAT(capped->partial_reason, HasSubstr("max_likelihood_calls"));
  EXPECT_GE(capped->likelihood_calls, 700);
  EXPECT_LT(capped->likelihood_calls, 700 + 8);
  EXPECT_TRUE(std::isfinite(capped->log_evidence));

  absl::StatusOr<NestedSamplingResult> inf = RunNestedSampling(
      [](const Eigen::VectorXd& x) { return x[0] > 1 ? kInf : 0.0; }, Eigen::VectorXd::Zero(1),
      Eigen::VectorXd::Ones(1), options);
  EXPECT_THAT(inf, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(inf.status().message(), HasSubstr("+inf"));

  std::atomic<int64_t> calls{0};
  LogLikelihoodFn counted = [&](const Eigen::VectorXd& x) {
    ++calls;
    return p.loglik(x);
  };
  int reports = 0;
  int64_t calls_at_cancel = -1;
  ProgressCallback progress = [&](const Progress& pr) {
    if (pr.poll_only || ++reports < 3) return absl::OkStatus();
    calls_at_cancel = calls;
    return absl::CancelledError("client went away");
  };
  options.max_likelihood_calls = 5'000'000;
  absl::StatusOr<NestedSamplingResult> r =
      RunNestedSampling(counted, p.prior_mean, p.prior_sd, options, progress);
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kCancelled));
  ASSERT_GE(calls_at_cancel, 0);
  EXPECT_LE(calls - calls_at_cancel, 8);
}

TEST(NestedSamplingTest, ShiftedScaledPriorAndCorrelatedLikelihood) {
  Eigen::MatrixXd cov(3, 3);
  cov << 0.04, 0.035, 0.02, 0.035, 0.04, 0.03, 0.02, 0.03, 0.09;
  const EvidenceProblem p = GaussianProblem(Eigen::Vector3d(-1.0, 2.0, 0.3), cov, Eigen::Vector3d(-0.5, 1.0, 0.0),
                                    Eigen::Vector3d(2.0, 1.5, 3.0));
  NestedSamplingOptions options;
  options.seed = 3;
  ExpectAccurate(RunProblem(p, options), p.log_z);
}

TEST(NestedSamplingTest, BimodalLikelihood) {
  const EvidenceProblem p = BimodalProblem(2, 0.1, 1.0);
  NestedSamplingOptions options;
  options.seed = 4;
  options.return_samples = true;
  const NestedSamplingResult r = RunProblem(p, options);
  ExpectAccurate(r, p.log_z);
  // Both modes carry about half the posterior mass.
  double right = 0.0;
  for (int k = 0; k < r.samples.rows(); ++k) {
    if (r.samples(k, 0) > 0) right += std::exp(r.log_weights[k]);
  }
  EXPECT_NEAR(right, 0.5, 0.1);
}

// The banana of tests/core/evidence_oracles.h (a curved ridge, not Gaussian: its Laplace mass is
// 0.045 nats off), against its 1-D quadrature, with and without batches.
TEST(NestedSamplingTest, BananaAgainstQuadrature) {
  const EvidenceProblem p = BananaProblem();
  for (int batch : {1, 8}) {
    NestedSamplingOptions options;
    options.seed = 6;
    options.batch_size = batch;
    ExpectAccurate(RunProblem(p, options), p.log_z);
  }
}

TEST(NestedSamplingTest, InvalidRegionAndNaNAreZeroLikelihood) {
  // L = N(θ; 0.3, 0.5²) for θ > 0, -inf (or NaN) elsewhere; prior N(0, 1):
  // Z = N(0.3; 0, 1.25) Φ(μ/σ) with posterior μ = 0.24, σ = 1/√5.
  const double exact = -0.5 * 0.09 / 1.25 - 0.5 * std::log(2 * M_PI * 1.25) +
                       std::log(0.5 * std::erfc(-(0.24 * std::sqrt(5.0)) / std::sqrt(2.0)));
  for (double invalid : {-kInf, std::numeric_limits<double>::quiet_NaN()}) {
    EvidenceProblem p = IsotropicProblem(1, 0.5, 0.3);
    LogLikelihoodFn inner = p.loglik;
    p.loglik = [inner, invalid](const Eigen::VectorXd& x) { return x[0] > 0 ? inner(x) : invalid; };
    NestedSamplingOptions options;
    options.seed = 9;
    const NestedSamplingResult r = RunProblem(p, options);
    EXPECT_NEAR(r.log_evidence, exact, std::max(0.05, 3 * r.log_evidence_error)) << r.Summary();
    EXPECT_NEAR(r.log_evidence_nested, exact, std::max(0.05, 4 * r.log_evidence_nested_error));
  }
}

TEST(NestedSamplingTest, SliceSamplingInEightDimensions) {
  const EvidenceProblem p = IsotropicProblem(8, 0.3, 0.2);
  NestedSamplingOptions options;
  options.seed = 21;
  options.num_live = 60;
  options.num_bootstrap = 10;
  const NestedSamplingResult r = RunProblem(p, options);
  SCOPED_TRACE(r.Summary());
  EXPECT_EQ(r.log_evidence_estimator, "nested");
  EXPECT_NEAR(r.log_evidence, p.log_z, std::max(0.05, 3 * r.log_evidence_error));
}

// The paper's appendix example (the paper's Sec. 4.1): SE kernel, 10 points, no standardisation;
// exact log Z = -8.032.
TEST(NestedSamplingTest, PaperGpExample) {
  static const double xs[] = {0, 1.0 / 9, 2.0 / 9, 3.0 / 9, 4.0 / 9, 5.0 / 9, 6.0 / 9, 7.0 / 9, 8.0 / 9, 1};
  static const double ys[] = {0.106470838606225, 0.151844221539413, 0.296365731603068,
                              0.406171032190665, 0.0893660808707719, 0.496633373724801,
                              1.3649612419355,   0.576025393790963, 1.03487772075105,
                              1.08454376768281};
  auto softplus = [](double r) { return r > 30 ? r : std::log1p(std::exp(r)); };
  LogLikelihoodFn loglik = [&](const Eigen::VectorXd& raw) {
    const double ell = softplus(raw[0]), noise = 1e-4 + softplus(raw[1]);
    Eigen::Matrix<double, 10, 10> k;
    Eigen::Matrix<double, 10, 1> y;
    for (int i = 0; i < 10; ++i) {
      y[i] = ys[i];
      for (int j = 0; j < 10; ++j) {
        const double d = xs[i] - xs[j];
        k(i, j) = std::exp(-0.5 * d * d / (ell * ell)) + (i == j ? noise : 0.0);
      }
    }
    Eigen::LLT<Eigen::Matrix<double, 10, 10>> llt(k);
    if (llt.info() != Eigen::Success) return -kInf;
    const Eigen::Matrix<double, 10, 1> a = llt.matrixL().solve(y);
    return -0.5 * a.squaredNorm() - Eigen::Matrix<double, 10, 10>(llt.matrixL()).diagonal().array().log().sum() -
           5 * std::log(2 * M_PI);
  };
  NestedSamplingOptions options;
  options.seed = 1;
  absl::StatusOr<NestedSamplingResult> r =
      RunNestedSampling(loglik, Eigen::Vector2d(-0.212, -3.52), Eigen::Vector2d(1.89, 3.58), options);
  ASSERT_TRUE(r.ok()) << r.status();
  SCOPED_TRACE(r->Summary());
  EXPECT_NEAR(r->log_evidence, -8.032, 0.05);
  EXPECT_LT(r->log_evidence_error, 0.05);
  EXPECT_LT(r->likelihood_calls, 10000);
}

TEST(NestedSamplingTest, DynamicReachesTargetError) {
  for (const EvidenceProblem& p : {IsotropicProblem(2, 0.1, 0.5), BimodalProblem(2, 0.1, 1.0)}) {
    NestedSamplingOptions options;
    options.seed = 5;
    options.num_live = 60;
    NestedSamplingResult static_run = RunProblem(p, options);
    options.dynamic = true;
    options.dynamic_target_error = 0.015;
    const NestedSamplingResult r = RunProblem(p, options);
    ExpectAccurate(r, p.log_z);
    EXPECT_LE(r.log_evidence_error, 0.015);
    EXPECT_GE(r.num_batches, 1);
    EXPECT_GT(r.likelihood_calls, static_run.likelihood_calls);
  }
}

TEST(NestedSamplingTest, DynamicMergesRunsWithoutBias) {
  // The classic estimate of merged dynamic runs, averaged over seeds, stays on the truth, for
  // evidence-weighted batches (placed from the prior on) and posterior-weighted ones (mid-run).
  // An unreachable target with a call cap makes every run merge several batches.
  const EvidenceProblem p = IsotropicProblem(2, 0.2, 0.5);
  for (double posterior_weight : {0.0, 1.0}) {
    double sum = 0.0, sum_var = 0.0;
    const int runs = 8;
    for (int s = 0; s < runs; ++s) {
      NestedSamplingOptions options;
      options.seed = 100 + s;
      options.num_live = 50;
      options.dynamic = true;
      options.dynamic_target_error = 1e-6;
      options.dynamic_posterior_weight = posterior_weight;
      options.max_likelihood_calls = 5000;
      const NestedSamplingResult r = RunProblem(p, options);
      EXPECT_GE(r.num_batches, 2);
      EXPECT_TRUE(r.partial);
      sum += r.log_evidence_nested - p.log_z;
      sum_var += std::pow(std::max(r.log_evidence_nested_error, r.log_evidence_error_bootstrap), 2);
    }
    EXPECT_NEAR(sum / runs, 0.0, std::max(0.03, 3 * std::sqrt(sum_var) / runs)) << posterior_weight;
  }
}

TEST(NestedSamplingTest, SameSeedSameBitsOtherSeedOtherResult) {
  const EvidenceProblem p = BimodalProblem(3, 0.2, 1.0);
  NestedSamplingOptions options;
  options.seed = 77;
  options.num_live = 80;
  options.return_samples = true;
  const NestedSamplingResult a = RunProblem(p, options);
  const NestedSamplingResult b = RunProblem(p, options);
  EXPECT_EQ(a.log_evidence, b.log_evidence);
  EXPECT_EQ(a.log_evidence_nested, b.log_evidence_nested);
  EXPECT_EQ(a.log_evidence_error_bootstrap, b.log_evidence_error_bootstrap);
  EXPECT_EQ(a.likelihood_calls, b.likelihood_calls);
  EXPECT_EQ(a.samples, b.samples);
  options.seed = 78;
  const NestedSamplingResult c = RunProblem(p, options);
  EXPECT_NE(a.log_evidence, c.log_evidence);
  EXPECT_NE(a.likelihood_calls, c.likelihood_calls);
}

TEST(NestedSamplingTest, CallCapGivesPartialResult) {
  const EvidenceProblem p = IsotropicProblem(2, 0.01, 0.5);
  NestedSamplingOptions options;
  options.max_likelihood_calls = 700;
  options.return_samples = true;
  absl::StatusOr<NestedSamplingResult> r =
      RunNestedSampling(p.loglik, p.prior_mean, p.prior_sd, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->partial);
  EXPECT_THAT(r->partial_reason, HasSubstr("max_likelihood_calls"));
  EXPECT_LE(r->likelihood_calls, 700);
  EXPECT_TRUE(std::isfinite(r->log_evidence));
  EXPECT_EQ(r->samples.rows(), r->iterations);
  EXPECT_THAT(r->Summary(), HasSubstr("PARTIAL"));
}

TEST(NestedSamplingTest, TimeCapGivesPartialResult) {
  const EvidenceProblem p = IsotropicProblem(2, 0.001, 0.5);
  NestedSamplingOptions options;
  options.max_seconds = 0.05;
  options.dynamic = true;
  options.dynamic_target_error = 1e-4;
  absl::StatusOr<NestedSamplingResult> r =
      RunNestedSampling(p.loglik, p.prior_mean, p.prior_sd, options);
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_TRUE(r->partial);
  EXPECT_THAT(r->partial_reason, HasSubstr("max_seconds"));
  EXPECT_LT(r->seconds, 2.0);
}

TEST(NestedSamplingTest, CancellationStopsPromptly) {
  const EvidenceProblem p = IsotropicProblem(2, 0.01, 0.5);
  int64_t calls = 0;
  LogLikelihoodFn counted = [&](const Eigen::VectorXd& x) {
    ++calls;
    return p.loglik(x);
  };
  int reports = 0;
  int64_t calls_at_cancel = -1;
  ProgressCallback progress = [&](const Progress& pr) {
    if (pr.poll_only) return absl::OkStatus();
    EXPECT_EQ(pr.stage, "nested_sampling");
    EXPECT_GE(pr.fraction, 0.0);
    EXPECT_LE(pr.fraction, 1.0);
    if (++reports < 3) return absl::OkStatus();
    calls_at_cancel = calls;
    return absl::CancelledError("client went away");
  };
  NestedSamplingOptions options;
  absl::StatusOr<NestedSamplingResult> r =
      RunNestedSampling(counted, p.prior_mean, p.prior_sd, options, progress);
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kCancelled));
  EXPECT_THAT(r.status().message(), HasSubstr("client went away"));
  ASSERT_GE(calls_at_cancel, 0);
  EXPECT_LE(calls - calls_at_cancel, 10);
}

TEST(NestedSamplingTest, RejectsInvalidInputNamingTheField) {
  const EvidenceProblem p = IsotropicProblem(2, 0.1, 0.5);
  NestedSamplingOptions ok;
  auto code_and_message = [&](const LogLikelihoodFn& f, const Eigen::VectorXd& mean,
                              const Eigen::VectorXd& sd, const NestedSamplingOptions& o) {
    absl::StatusOr<NestedSamplingResult> r = RunNestedSampling(f, mean, sd, o);
    EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument));
    return std::string(r.status().message());
  };
  EXPECT_THAT(code_and_message(p.loglik, p.prior_mean, Eigen::VectorXd::Ones(3), ok), HasSubstr("prior_sd"));
  EXPECT_THAT(code_and_message(p.loglik, Eigen::VectorXd(), Eigen::VectorXd(), ok), HasSubstr("prior_mean"));
  EXPECT_THAT(code_and_message(p.loglik, p.prior_mean, Eigen::Vector2d(1.0, 0.0), ok), HasSubstr("prior_sd[1]"));
  EXPECT_THAT(code_and_message(p.loglik, p.prior_mean, Eigen::Vector2d(1.0, -2.0), ok), HasSubstr("prior_sd[1]"));
  EXPECT_THAT(code_and_message(p.loglik, Eigen::Vector2d(0.0, std::nan("")), p.prior_sd, ok),
              HasSubstr("prior_mean[1]"));
  EXPECT_THAT(code_and_message(p.loglik, Eigen::Vector2d(kInf, 0.0), p.prior_sd, ok), HasSubstr("prior_mean[0]"));
  EXPECT_THAT(code_and_message(nullptr, p.prior_mean, p.prior_sd, ok), HasSubstr("log_likelihood"));
  struct Case {
    void (*mutate)(NestedSamplingOptions*);
    const char* field;
  };
  const Case cases[] = {
      {[](NestedSamplingOptions* o) { o->num_live = -1; }, "num_live"},
      {[](NestedSamplingOptions* o) { o->num_live = 3; }, "num_live"},
      {[](NestedSamplingOptions* o) { o->dlogz = 0; }, "dlogz"},
      {[](NestedSamplingOptions* o) { o->dlogz = std::nan(""); }, "dlogz"},
      {[](NestedSamplingOptions* o) { o->dynamic_target_error = -1; }, "dynamic_target_error"},
      {[](NestedSamplingOptions* o) { o->dynamic_posterior_weight = 2; }, "dynamic_posterior_weight"},
      {[](NestedSamplingOptions* o) { o->num_runs = 0; }, "num_runs"},
      {[](NestedSamplingOptions* o) { o->threads = 0; }, "threads"},
      {[](NestedSamplingOptions* o) { o->batch_size = 0; }, "batch_size"},
      {[](NestedSamplingOptions* o) { o->batch_size = 1025; }, "batch_size"},
      {[](NestedSamplingOptions* o) { o->max_likelihood_calls = 0; }, "max_likelihood_calls"},
      {[](NestedSamplingOptions* o) { o->max_seconds = -1; }, "max_seconds"},
      {[](NestedSamplingOptions* o) { o->max_seconds = kInf; }, "max_seconds"},
      {[](NestedSamplingOptions* o) { o->num_bootstrap = -1; }, "num_bootstrap"},
      {[](NestedSamplingOptions* o) { o->dynamic = true; o->num_bootstrap = 1; }, "num_bootstrap"},
  };
  for (const Case& c : cases) {
    NestedSamplingOptions o;
    c.mutate(&o);
    EXPECT_THAT(code_and_message(p.loglik, p.prior_mean, p.prior_sd, o), HasSubstr(c.field));
  }
  EXPECT_TRUE(NestedSamplingOptions().Validate().ok());
}

TEST(NestedSamplingTest, PlusInfinityLikelihoodIsAnError) {
  const Eigen::VectorXd mean = Eigen::VectorXd::Zero(1), sd = Eigen::VectorXd::Ones(1);
  absl::StatusOr<NestedSamplingResult> r = RunNestedSampling(
      [](const Eigen::VectorXd& x) { return x[0] > 1 ? kInf : 0.0; }, mean, sd, NestedSamplingOptions());
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(r.status().message(), HasSubstr("+inf"));
}

TEST(NestedSamplingTest, EverywhereInvalidLikelihoodFails) {
  const Eigen::VectorXd mean = Eigen::VectorXd::Zero(2), sd = Eigen::VectorXd::Ones(2);
  absl::StatusOr<NestedSamplingResult> r = RunNestedSampling(
      [](const Eigen::VectorXd&) { return -kInf; }, mean, sd, NestedSamplingOptions());
  EXPECT_THAT(r, StatusIs(absl::StatusCode::kFailedPrecondition));
}

TEST(NestedSamplingTest, ConstantLikelihoodIsExact) {
  const Eigen::VectorXd mean = Eigen::VectorXd::Zero(2), sd = Eigen::VectorXd::Ones(2);
  absl::StatusOr<NestedSamplingResult> r = RunNestedSampling(
      [](const Eigen::VectorXd&) { return -1.5; }, mean, sd, NestedSamplingOptions());
  ASSERT_TRUE(r.ok()) << r.status();
  EXPECT_NEAR(r->log_evidence, -1.5, 1e-12);
  EXPECT_NEAR(r->log_evidence_nested, -1.5, 1e-12);
}

}  // namespace
}  // namespace gpsel
