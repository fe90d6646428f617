// Tests of core/evidence.h (ComputeEvidence) against an independent quadrature oracle:
//   log Z = log ∫ p(y | θ) Π_i N(θ_i; μ_i, σ_i²) dθ
// over the free raw hyperparameters, with p(y|θ) from GpModel and a tensor-product trapezoid
// rule on the prior box (see PriorBoxLogEvidence). Kernels with 1-2 parameters on the
// paper's example and on small synthetic datasets (fixed seeds); reproducibility, cancellation,
// caps and validation.
#include "core/evidence.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "Eigen/Dense"
#include "absl/status/status.h"
#include "core/dataset.h"
#include "core/gp_model.h"
#include "core/kernel_expr.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"

namespace gpsel {
namespace {

using ::testing::HasSubstr;

constexpr double kInf = std::numeric_limits<double>::infinity();

Dataset PaperData() {
  absl::StatusOr<Dataset> d = LoadCsvFile(std::string(GPSEL_DATA_DIR) + "/interpretable_linear.csv");
  EXPECT_TRUE(d.ok()) << d.status();
  return d.ok() ? *d : Dataset{};
}

KernelExpr Kernel(const char* text) {
  absl::StatusOr<KernelExpr> k = ParseKernel(text);
  EXPECT_TRUE(k.ok()) << k.status();
  return k.ok() ? *k : KernelExpr{};
}

// n points on [0, span] of f(x) plus N(0, noise²) (fixed seed).
template <typename F>
Dataset Synthetic(int n, double span, F f, double noise, uint64_t seed) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  Dataset d;
  d.x.resize(n, 1);
  d.y.resize(n);
  for (int i = 0; i < n; ++i) {
    d.x(i, 0) = span * i / (n - 1);
    d.y[i] = f(d.x(i, 0)) + noise * normal(rng);
  }
  return d;
}

double LogSumExp(const std::vector<double>& v) {
  double m = -kInf;
  for (double x : v) m = std::max(m, x);
  if (m == -kInf) return -kInf;
  double s = 0;
  for (double x : v) s += std::exp(x - m);
  return m + std::log(s);
}

// log(p(y|θ) p(θ)) over the free raw parameters; -inf where the likelihood fails.
double LogIntegrand(const GpModel& model, const Eigen::VectorXd& raw) {
  absl::StatusOr<double> ll = model.LogLikelihood(raw);
  if (!ll.ok() || !std::isfinite(*ll)) return -kInf;
  return *ll + model.LogPrior(raw);
}

// Trapezoid rule over the grid θ = center + A z, z_i ∈ [lo_i, hi_i] uniformly with step ≤ h.
// Returns log ∫ and, in *edge_gap, how far (nats) the integrand on the grid's faces stays below
// its largest value (the truncation check).
double GridLogIntegral(const GpModel& model, const Eigen::VectorXd& center,
                       const Eigen::MatrixXd& a, const Eigen::VectorXd& lo,
                       const Eigen::VectorXd& hi, double h, double* edge_gap, int* evaluations) {
  const int d = static_cast<int>(center.size());
  std::vector<int> m(d);
  Eigen::VectorXd step(d);
  double log_cell = std::log(std::abs(a.determinant()));
  for (int i = 0; i < d; ++i) {
    m[i] = static_cast<int>(std::ceil((hi[i] - lo[i]) / h)) + 1;
    step[i] = (hi[i] - lo[i]) / (m[i] - 1);
    log_cell += std::log(step[i]);
  }
  std::vector<double> terms;
  double top = -kInf, edge = -kInf;
  std::vector<int> k(d, 0);
  Eigen::VectorXd z(d);
  while (true) {
    bool on_face = false;
    double log_w = log_cell;
    for (int i = 0; i < d; ++i) {
      z[i] = lo[i] + k[i] * step[i];
      if (k[i] == 0 || k[i] == m[i] - 1) {
        on_face = true;
        log_w += std::log(0.5);
      }
    }
    const double v = LogIntegrand(model, center + a * z);
    ++*evaluations;
    top = std::max(top, v);
    if (on_face) edge = std::max(edge, v);
    terms.push_back(v + log_w);
    int i = 0;
    while (i < d && ++k[i] == m[i]) k[i++] = 0;
    if (i == d) break;
  }
  *edge_gap = top - edge;
  return LogSumExp(terms);
}

// The oracle: log Z = log ∫ p(y|θ) N(θ; μ, diag σ²) dθ by the tensor-product trapezoid rule on
// the prior box μ ± 8σ (prior mass outside it < 1e-14 per axis) with m nodes per axis. The
// integrand is smooth and negligible at the box's faces, so the rule converges faster than any
// power of the step once the step resolves the posterior (~0.1 prior sd for these datasets);
// ConvergedOracle compares two node counts. (A grid in the Laplace frame would need far fewer
// nodes if GP posteriors were Gaussian; they are not — flat along lengthscale and noise until
// the prior cuts them off — and such grids missed mass by several nats.)
double PriorBoxLogEvidence(const GpModel& model, int m) {
  const Eigen::VectorXd mu = model.prior_mean(), sd = model.prior_sd();
  double gap = 0;
  int evaluations = 0;
  const Eigen::VectorXd ones = Eigen::VectorXd::Ones(mu.size());
  const double log_z = GridLogIntegral(model, mu, Eigen::MatrixXd(sd.asDiagonal()), -8 * ones,
                                       8 * ones, 16.0 / (m - 1), &gap, &evaluations);
  EXPECT_GT(gap, 25) << "integrand not negligible on the prior box's faces";
  return log_z;
}

GpModel MakeModel(const Dataset& data, const KernelExpr& kernel, bool standardize,
                  const HyperparameterSettings& settings = {}) {
  absl::StatusOr<Standardization> s = ComputeStandardization(data.y, standardize);
  EXPECT_TRUE(s.ok()) << s.status();
  absl::StatusOr<GpModel> m =
      GpModel::Create(kernel, data.x, ApplyStandardization(*s, data.y), settings);
  EXPECT_TRUE(m.ok()) << m.status();
  return *std::move(m);
}

// Oracle at two node counts per axis (151 and 227 by default), asserting that they agree.
double ConvergedOracle(const GpModel& model, double tol = 1e-3, int m = 151) {
  const double a = PriorBoxLogEvidence(model, m);
  const double b = PriorBoxLogEvidence(model, m + m / 2);
  EXPECT_NEAR(a, b, tol) << "quadrature not converged: " << m << " vs " << m + m / 2 << " nodes";
  return b;
}

EvidenceResult Evidence(const Dataset& data, const KernelExpr& kernel, bool standardize,
                        bool dynamic, uint64_t seed, const HyperparameterSettings& settings = {}) {
  EvidenceOptions options;
  options.standardize = standardize;
  options.sampling.dynamic = dynamic;
  options.sampling.seed = seed;
  options.hyperparameters = settings;
  absl::StatusOr<EvidenceResult> e = ComputeEvidence(data, kernel, options);
  EXPECT_TRUE(e.ok()) << e.status();
  return e.ok() ? *e : EvidenceResult{};
}

// Within 0.05 nats of the exact value and within 2 reported standard errors.
void ExpectMatchesOracle(const EvidenceResult& e, double exact) {
  SCOPED_TRACE(e.Summary());
  const NestedSamplingResult& r = e.sampling;
  EXPECT_FALSE(r.partial);
  EXPECT_TRUE(std::isfinite(r.log_evidence));
  EXPECT_GT(r.log_evidence_error, 0.0);
  const double miss = std::abs(r.log_evidence - exact);
  EXPECT_LE(miss, 0.05) << "log Z " << r.log_evidence << " vs exact " << exact;
  EXPECT_LE(miss, 2 * r.log_evidence_error)
      << "log Z " << r.log_evidence << " ± " << r.log_evidence_error << " vs exact " << exact;
}

// ---------------------------------------------------------------------------------------------
// The oracle itself.

TEST(EvidenceOracleTest, MatchesOneDimensionalIntegralWhenLikelihoodIgnoresAnAxis) {
  // LIN with x = 0 has K = σ²I: the likelihood N(y; 0, σ²I) depends on the noise only, the LIN
  // axis integrates the prior to 1, and the evidence is a 1-D integral over the noise that an
  // independent fine midpoint rule computes.
  Dataset d;
  d.x = Eigen::MatrixXd::Zero(3, 1);
  d.y = Eigen::Vector3d(0.3, -0.5, 0.9);
  const GpModel model = MakeModel(d, Kernel("LIN"), false);
  ASSERT_EQ(model.num_free(), 2);
  const double oracle = PriorBoxLogEvidence(model, 241);
  const double mu = model.prior_mean()[1], sd = model.prior_sd()[1];
  std::vector<double> terms;
  const int m = 400000;
  const double a = mu - 9 * sd, h = 18 * sd / m;
  for (int k = 0; k < m; ++k) {
    const double r = a + (k + 0.5) * h;
    const double s2 = 1e-4 + std::log1p(std::exp(r));
    const double z = (r - mu) / sd;
    terms.push_back(-0.5 * d.y.squaredNorm() / s2 - 1.5 * std::log(2 * M_PI * s2) - 0.5 * z * z -
                    std::log(sd * std::sqrt(2 * M_PI)) + std::log(h));
  }
  EXPECT_NEAR(oracle, LogSumExp(terms), 1e-5);
}

TEST(EvidenceOracleTest, PaperExampleIsMinus8032) {
  const GpModel model = MakeModel(PaperData(), Kernel("SE"), false);
  const double exact = ConvergedOracle(model, 5e-4, 201);
  EXPECT_NEAR(exact, -8.032, 0.005);
}

// ---------------------------------------------------------------------------------------------
// ComputeEvidence against the oracle.

TEST(EvidenceTest, PaperExampleStaticAndDynamic) {
  const Dataset data = PaperData();
  const KernelExpr se = Kernel("SE");
  const double exact = ConvergedOracle(MakeModel(data, se, false));
  for (bool dynamic : {false, true}) {
    for (uint64_t seed : {1u, 2u}) {
      SCOPED_TRACE(testing::Message() << (dynamic ? "dynamic" : "static") << " seed " << seed);
      const EvidenceResult e = Evidence(data, se, false, dynamic, seed);
      EXPECT_FALSE(e.standardized);
      EXPECT_EQ(e.num_hyperparameters, 2);
      EXPECT_EQ(e.num_points, 10);
      ExpectMatchesOracle(e, exact);
    }
  }
}

// --scale-x: the paper's x given in tenths and divided by 10 again before modelling is the
// paper's model, so its evidence is the paper's exact −8.032; unscaled it is another model.
TEST(EvidenceTest, ScaledXIsTheModelOfTheScaledData) {
  const Dataset paper = PaperData();
  Dataset tenths = paper;
  tenths.x *= 10.0;
  const double exact = ConvergedOracle(MakeModel(paper, Kernel("SE"), false));
  EvidenceOptions options;
  options.standardize = false;
  options.sampling.seed = 1;
  options.scale_x.mode = XScaling::Mode::kFactor;
  options.scale_x.factor = 10.0;
  absl::StatusOr<EvidenceResult> scaled = ComputeEvidence(tenths, Kernel("SE"), options);
  ASSERT_TRUE(scaled.ok()) << scaled.status();
  ExpectMatchesOracle(*scaled, exact);
  options.scale_x = XScaling{};
  absl::StatusOr<EvidenceResult> unscaled = ComputeEvidence(tenths, Kernel("SE"), options);
  ASSERT_TRUE(unscaled.ok());
  EXPECT_GT(std::abs(unscaled->sampling.log_evidence - exact), 0.2);
  options.scale_x.mode = XScaling::Mode::kFactor;
  options.scale_x.factor = -1.0;
  EXPECT_EQ(ComputeEvidence(tenths, Kernel("SE"), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EvidenceTest, LinAndMat32OnPaperData) {
  const Dataset data = PaperData();
  for (const char* text : {"LIN", "MAT32"}) {
    SCOPED_TRACE(text);
    const KernelExpr k = Kernel(text);
    const GpModel model = MakeModel(data, k, false);
    ASSERT_EQ(model.num_free(), 2);
    const double exact = ConvergedOracle(model);
    for (bool dynamic : {false, true}) {
      SCOPED_TRACE(dynamic ? "dynamic" : "static");
      ExpectMatchesOracle(Evidence(data, k, false, dynamic, 3), exact);
    }
  }
}

TEST(EvidenceTest, PeriodicWithFixedPeriodOnStandardisedData) {
  const Dataset data =
      Synthetic(15, 3.0, [](double x) { return 2.0 + 1.5 * std::sin(2 * M_PI * x); }, 0.3, 11);
  const KernelExpr per = Kernel("PER");
  HyperparameterSettings settings;
  settings.fixed_values["PER.period"] = 1.0;
  const GpModel model = MakeModel(data, per, true, settings);
  ASSERT_EQ(model.num_free(), 2);
  const double exact = ConvergedOracle(model);
  for (bool dynamic : {false, true}) {
    SCOPED_TRACE(dynamic ? "dynamic" : "static");
    const EvidenceResult e = Evidence(data, per, true, dynamic, 4, settings);
    EXPECT_TRUE(e.standardized);
    EXPECT_EQ(e.num_hyperparameters, 2);
    ExpectMatchesOracle(e, exact);
  }
}

TEST(EvidenceTest, SquaredExponentialWithFixedNoise) {
  // SE with the noise fixed leaves one parameter; C*SE with fixed noise leaves two.
  const Dataset data = Synthetic(15, 4.0, [](double x) { return std::cos(2.0 * x); }, 0.2, 9);
  HyperparameterSettings settings;
  settings.fixed_values["noise"] = 0.05;
  for (const char* text : {"SE", "C*SE"}) {
    SCOPED_TRACE(text);
    const KernelExpr k = Kernel(text);
    const GpModel model = MakeModel(data, k, true, settings);
    const double exact = ConvergedOracle(model);
    const EvidenceResult e = Evidence(data, k, true, false, 6, settings);
    EXPECT_EQ(e.num_hyperparameters, model.num_free());
    ExpectMatchesOracle(e, exact);
  }
}

// ---------------------------------------------------------------------------------------------
// Behaviour.

TEST(EvidenceTest, SameSeedGivesIdenticalBits) {
  const Dataset data = PaperData();
  const KernelExpr se = Kernel("SE");
  for (bool dynamic : {false, true}) {
    EvidenceOptions options;
    options.standardize = false;
    options.sampling.dynamic = dynamic;
    options.sampling.seed = 42;
    options.sampling.return_samples = true;
    absl::StatusOr<EvidenceResult> a = ComputeEvidence(data, se, options);
    absl::StatusOr<EvidenceResult> b = ComputeEvidence(data, se, options);
    ASSERT_TRUE(a.ok() && b.ok());
    const NestedSamplingResult &ra = a->sampling, &rb = b->sampling;
    EXPECT_EQ(std::memcmp(&ra.log_evidence, &rb.log_evidence, sizeof(double)), 0);
    EXPECT_EQ(std::memcmp(&ra.log_evidence_error, &rb.log_evidence_error, sizeof(double)), 0);
    EXPECT_EQ(std::memcmp(&ra.log_evidence_nested, &rb.log_evidence_nested, sizeof(double)), 0);
    EXPECT_EQ(std::memcmp(&ra.log_evidence_error_bootstrap, &rb.log_evidence_error_bootstrap,
                          sizeof(double)), 0);
    EXPECT_EQ(ra.likelihood_calls, rb.likelihood_calls);
    EXPECT_EQ(ra.iterations, rb.iterations);
    ASSERT_EQ(ra.samples.rows(), rb.samples.rows());
    ASSERT_GT(ra.samples.rows(), 0);
    EXPECT_EQ(ra.samples.cols(), 2);
    EXPECT_EQ(std::memcmp(ra.samples.data(), rb.samples.data(), sizeof(double) * ra.samples.size()), 0);
    EXPECT_EQ(std::memcmp(ra.log_weights.data(), rb.log_weights.data(),
                          sizeof(double) * ra.log_weights.size()), 0);
    // A different seed gives a different run.
    options.sampling.seed = 43;
    absl::StatusOr<EvidenceResult> c = ComputeEvidence(data, se, options);
    ASSERT_TRUE(c.ok());
    EXPECT_NE(c->sampling.log_evidence, ra.log_evidence);
  }
}

TEST(EvidenceTest, CallbackCancels) {
  const Dataset data = PaperData();
  EvidenceOptions options;
  options.standardize = false;
  int calls = 0;
  absl::StatusOr<EvidenceResult> e =
      ComputeEvidence(data, Kernel("SE"), options, [&](const Progress& p) -> absl::Status {
        if (p.poll_only) return absl::OkStatus();  // a cancellation poll: no progress
        EXPECT_EQ(p.stage, "nested_sampling");
        EXPECT_GE(p.fraction, 0.0);
        EXPECT_LE(p.fraction, 1.0);
        return ++calls >= 2 ? absl::CancelledError("stop now") : absl::OkStatus();
      });
  EXPECT_EQ(e.status().code(), absl::StatusCode::kCancelled);
  EXPECT_THAT(e.status().message(), HasSubstr("stop now"));
  EXPECT_EQ(calls, 2);  // not called again after cancelling
}

TEST(EvidenceTest, TinyCallCapGivesPartialResult) {
  const Dataset data = PaperData();
  for (int64_t cap : {10, 400, 1500}) {
    SCOPED_TRACE(cap);
    EvidenceOptions options;
    options.standardize = false;
    options.sampling.max_likelihood_calls = cap;
    absl::StatusOr<EvidenceResult> e = ComputeEvidence(data, Kernel("SE"), options);
    ASSERT_TRUE(e.ok()) << e.status();
    const NestedSamplingResult& r = e->sampling;
    EXPECT_TRUE(r.partial);
    EXPECT_THAT(r.partial_reason, HasSubstr("max_likelihood_calls"));
    EXPECT_LE(r.likelihood_calls, cap);
    EXPECT_FALSE(std::isnan(r.log_evidence));
    EXPECT_FALSE(std::isnan(r.log_evidence_error));
  }
}

TEST(EvidenceTest, ValidationErrors) {
  const Dataset data = PaperData();  // one input column
  EvidenceOptions options;
  options.standardize = false;
  absl::StatusOr<EvidenceResult> e = ComputeEvidence(data, Kernel("SE[2]"), options);
  EXPECT_EQ(e.status().code(), absl::StatusCode::kInvalidArgument) << e.status();

  EvidenceOptions bad = options;
  bad.sampling.dlogz = -1;
  EXPECT_EQ(ComputeEvidence(data, Kernel("SE"), bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = options;
  bad.sampling.max_likelihood_calls = 0;
  EXPECT_EQ(ComputeEvidence(data, Kernel("SE"), bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = options;
  bad.hyperparameters.fixed_values["SE.nonsense"] = 1.0;
  EXPECT_EQ(ComputeEvidence(data, Kernel("SE"), bad).status().code(),
            absl::StatusCode::kInvalidArgument);
  bad = options;
  bad.hyperparameters.prior_overrides["SE.lengthscale"] = NormalPrior{0.0, -1.0};
  EXPECT_EQ(ComputeEvidence(data, Kernel("SE"), bad).status().code(),
            absl::StatusCode::kInvalidArgument);

  Dataset nan_data = data;
  nan_data.y[3] = std::nan("");
  EXPECT_EQ(ComputeEvidence(nan_data, Kernel("SE"), options).status().code(),
            absl::StatusCode::kInvalidArgument);
}

}  // namespace
}  // namespace gpsel
