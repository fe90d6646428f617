// Tests of core/sparse_gp.h: the VFE lower bound and Titsias' upper bound bracket the exact log
// likelihood (GpModel, an independent dense computation) on the bundled series, meet it at
// Z = X, their analytic gradients match central finite differences, the greedy selection's
// residual matches a dense tr(K_ff − Q), and the numbers are reproducible bit for bit.
#include "gpsel/core/sparse_gp.h"

#include <cmath>
#include <iostream>
#include <random>
#include <string>
#include <vector>

#include <gtest/gtest.h>

#include "gpsel/core/dataset.h"
#include "gpsel/core/fit.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/kernel_expr.h"
#include "tests/core/bundled_data.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

namespace gpsel {
namespace {

using ::gpsel::testing::LoadBundled;

// A GpModel on a bundled series: x shifted to start at 0 (years), y standardised, optionally
// every `stride`-th point only.
struct Problem {
  Dataset data;
  GpModel model;
};

Dataset Standardized(Dataset data, int stride = 1) {
  Dataset out;
  const int n = (data.num_points() + stride - 1) / stride;
  out.x.resize(n, data.x.cols());
  out.y.resize(n);
  for (int i = 0; i < n; ++i) {
    out.x.row(i) = data.x.row(i * stride);
    out.y(i) = data.y(i * stride);
  }
  out.x.col(0).array() -= out.x(0, 0);
  const Standardization s = *ComputeStandardization(out.y, true);
  out.y = ApplyStandardization(s, out.y);
  return out;
}

// Two input columns from one series: the time and the phase within the year (a real 2-D input
// whose second column repeats, as a seasonal covariate does).
Dataset WithPhaseColumn(const Dataset& data) {
  Dataset out = data;
  out.x.conservativeResize(Eigen::NoChange, 2);
  for (int i = 0; i < out.num_points(); ++i) {
    out.x(i, 1) = out.x(i, 0) - std::floor(out.x(i, 0));
  }
  return out;
}

GpModel MakeModel(const Dataset& data, const std::string& kernel_text,
                  const HyperparameterSettings& settings = {}) {
  absl::StatusOr<KernelExpr> kernel = ParseKernel(kernel_text);
  EXPECT_TRUE(kernel.ok()) << kernel.status();
  absl::StatusOr<GpModel> model = GpModel::Create(*kernel, data.x, data.y, settings);
  EXPECT_TRUE(model.ok()) << model.status();
  return *std::move(model);
}

Eigen::VectorXd PriorDraw(const GpModel& model, std::mt19937_64& rng) {
  std::normal_distribution<double> normal;
  Eigen::VectorXd raw = model.prior_mean();
  const Eigen::VectorXd sd = model.prior_sd();
  for (int k = 0; k < raw.size(); ++k) raw(k) += sd(k) * normal(rng);
  return raw;
}

SparseBounds BoundsAt(const GpModel& model, const Eigen::VectorXd& raw, int m,
                      const SparseGpOptions& options = {}, bool with_gradient = false) {
  absl::StatusOr<InducingSelection> z = SelectInducingPoints(model, raw, {.max_points = m});
  EXPECT_TRUE(z.ok()) << z.status();
  absl::StatusOr<SparseGp> sparse = SparseGp::Create(model, z->points, options);
  EXPECT_TRUE(sparse.ok()) << sparse.status();
  absl::StatusOr<SparseBounds> bounds = sparse->Bounds(raw, with_gradient);
  EXPECT_TRUE(bounds.ok()) << bounds.status();
  return bounds.ok() ? *bounds : SparseBounds{};
}

// The bracket, with room for the rounding of the exact likelihood only.
void ExpectBrackets(const SparseBounds& b, double exact, const std::string& what) {
  const double slack = 1e-9 * std::max(1.0, std::abs(exact));
  EXPECT_LE(b.lower, exact + slack) << what;
  EXPECT_GE(b.upper, exact - slack) << what;
  EXPECT_GE(b.residual_trace, -1e-9) << what;
}

const std::vector<std::string> kOneDimensionalKernels = {
    "SE", "PER", "LIN", "MAT12", "MAT32", "MAT52", "RQ", "C", "C*SE+C*PER*SE", "SE*LIN+RQ",
    "MAT32+PER*C", "LIN+SE"};

TEST(SparseGpTest, BoundsBracketExactAtPriorDrawsOnMaunaLoa) {
  const Dataset data = Standardized(LoadBundled("mauna_loa_monthly.csv"), 2);  // n = 261
  std::mt19937_64 rng(7);
  for (const std::string& kernel : kOneDimensionalKernels) {
    const GpModel model = MakeModel(data, kernel);
    for (int draw = 0; draw < 3; ++draw) {
      const Eigen::VectorXd raw = PriorDraw(model, rng);
      absl::StatusOr<double> exact = model.LogLikelihood(raw);
      ASSERT_TRUE(exact.ok()) << exact.status();
      for (int m : {5, 30, 120}) {
        const SparseBounds b = BoundsAt(model, raw, m);
        ExpectBrackets(b, *exact, kernel + " m=" + std::to_string(m));
      }
    }
  }
}

TEST(SparseGpTest, BoundsBracketExactWithTwoInputColumns) {
  const Dataset data =
      WithPhaseColumn(Standardized(LoadBundled("mauna_loa_monthly.csv"), 3));  // n = 174
  std::mt19937_64 rng(11);
  for (const char* kernel :
       {"SE", "SE[0]+SE[1]", "LIN[0]*SE[1]", "MAT52[0]*PER[1]+RQ", "C*SE[0]+C*SE[0]*MAT32[1]"}) {
    const GpModel model = MakeModel(data, kernel);
    for (int draw = 0; draw < 3; ++draw) {
      const Eigen::VectorXd raw = PriorDraw(model, rng);
      absl::StatusOr<double> exact = model.LogLikelihood(raw);
      ASSERT_TRUE(exact.ok()) << exact.status();
      for (int m : {8, 40}) ExpectBrackets(BoundsAt(model, raw, m), *exact, kernel);
    }
  }
}

// At the exact MLL optimum — where a ranking would read the bounds — and tightening with m: the
// gap shrinks as points are added and is small at m = n/2 on these smooth series.
TEST(SparseGpTest, BoundsBracketExactAtTheExactOptimum) {
  struct Case {
    const char* file;
    const char* kernel;
  };
  for (const Case& c : {Case{"nile.csv", "SE"}, Case{"nile.csv", "MAT32+LIN"},
                        Case{"sunspots_yearly.csv", "C*PER+SE"},
                        Case{"sunspots_yearly.csv", "RQ"}}) {
    const Dataset data = Standardized(LoadBundled(c.file));
    const GpModel model = MakeModel(data, c.kernel);
    FitOptions options;
    options.restarts = 1;
    absl::StatusOr<FitResult> fit =
        FitHyperparameters(model, FitObjective::kMaximumLikelihood, options);
    ASSERT_TRUE(fit.ok()) << fit.status();
    const double exact = fit->log_likelihood;
    double previous_gap = std::numeric_limits<double>::infinity();
    for (int m : {4, 16, 64}) {
      const SparseBounds b = BoundsAt(model, fit->raw, m);
      ExpectBrackets(b, exact, std::string(c.file) + " " + c.kernel);
      EXPECT_LE(b.gap(), previous_gap + 1e-9) << c.kernel << " m=" << m;
      previous_gap = b.gap();
    }
  }
}

// Z = X without jitter: Q = K_ff, t = 0 and both bounds are log p(y|θ).
TEST(SparseGpTest, AllPointsReproduceTheExactValue) {
  const Dataset nile = Standardized(LoadBundled("nile.csv"));
  const Dataset two = WithPhaseColumn(Standardized(LoadBundled("mauna_loa_monthly.csv"), 6));
  struct Case {
    const Dataset* data;
    const char* kernel;
  };
  std::mt19937_64 rng(3);
  for (const Case& c : {Case{&nile, "MAT12"}, Case{&nile, "MAT32+LIN"}, Case{&nile, "RQ"},
                        Case{&two, "MAT12[0]*SE[1]"}, Case{&two, "MAT12+PER*C"}}) {
    const GpModel model = MakeModel(*c.data, c.kernel);
    for (int draw = 0; draw < 2; ++draw) {
      const Eigen::VectorXd raw = PriorDraw(model, rng);
      absl::StatusOr<double> exact = model.LogLikelihood(raw);
      ASSERT_TRUE(exact.ok());
      absl::StatusOr<SparseGp> sparse = SparseGp::Create(model, c.data->x, {.jitter = 0.0});
      ASSERT_TRUE(sparse.ok()) << sparse.status();
      absl::StatusOr<SparseBounds> b = sparse->Bounds(raw);
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_NEAR(b->lower, *exact, 1e-6) << c.kernel;
      EXPECT_NEAR(b->upper, *exact, 1e-6) << c.kernel;
    }
  }
}

// Central differences of the bounds themselves (Z fixed), at prior draws, with a fixed parameter
// (the free-parameter mapping) and a two-column case.
TEST(SparseGpTest, GradientsMatchCentralDifferences) {
  const Dataset mauna = Standardized(LoadBundled("mauna_loa_monthly.csv"), 4);
  const Dataset two = WithPhaseColumn(mauna);
  struct Case {
    const Dataset* data;
    const char* kernel;
    HyperparameterSettings settings;
  };
  HyperparameterSettings fixed_period;
  fixed_period.fixed_values["PER.period"] = 1.0;
  std::mt19937_64 rng(5);
  for (const Case& c :
       {Case{&mauna, "SE", {}}, Case{&mauna, "C*SE+C*PER*SE", {}},
        Case{&mauna, "LIN+RQ", {}}, Case{&mauna, "MAT12*MAT52+MAT32", {}},
        Case{&mauna, "PER*SE+C", fixed_period}, Case{&two, "LIN[0]*SE[1]+RQ[0]", {}}}) {
    const GpModel model = MakeModel(*c.data, c.kernel, c.settings);
    for (int draw = 0; draw < 2; ++draw) {
      const Eigen::VectorXd raw = PriorDraw(model, rng);
      absl::StatusOr<InducingSelection> z = SelectInducingPoints(model, raw, {.max_points = 25});
      ASSERT_TRUE(z.ok());
      absl::StatusOr<SparseGp> sparse = SparseGp::Create(model, z->points);
      ASSERT_TRUE(sparse.ok());
      absl::StatusOr<SparseBounds> b = sparse->Bounds(raw, true);
      ASSERT_TRUE(b.ok()) << b.status();
      ASSERT_EQ(b->lower_gradient.size(), model.num_free());
      // The ELBO's gradient alone (what a fit asks for) is made by another product (R A_b in
      // one m×m factor): the same bounds, no upper gradient, and the same finite differences.
      absl::StatusOr<SparseBounds> lower_only = sparse->Bounds(raw, true, false);
      ASSERT_TRUE(lower_only.ok()) << lower_only.status();
      EXPECT_EQ(lower_only->lower, b->lower);
      EXPECT_EQ(lower_only->upper, b->upper);
      EXPECT_EQ(lower_only->upper_gradient.size(), 0);
      ASSERT_EQ(lower_only->lower_gradient.size(), model.num_free());
      for (int k = 0; k < model.num_free(); ++k) {
        // Five-point stencil, h = 1e-3: truncation O(h⁴); smaller steps drown in the rounding
        // of bounds of 10³–10⁴ nats (LIN's variance on x up to 43 years).
        const double h = 1e-3;
        auto at = [&](double offset) {
          Eigen::VectorXd moved = raw;
          moved(k) += offset;
          absl::StatusOr<SparseBounds> bounds = sparse->Bounds(moved);
          EXPECT_TRUE(bounds.ok()) << bounds.status();
          return bounds.ok() ? *bounds : SparseBounds{};
        };
        const SparseBounds p1 = at(h), m1 = at(-h), p2 = at(2 * h), m2 = at(-2 * h);
        const double fd_lower =
            (8 * (p1.lower - m1.lower) - (p2.lower - m2.lower)) / (12 * h);
        const double fd_upper =
            (8 * (p1.upper - m1.upper) - (p2.upper - m2.upper)) / (12 * h);
        const std::string what = std::string(c.kernel) + " " + model.free_names()[k];
        // Relative 1e-5, plus what a rounding of 1e-12 of the bound's value does to the stencil.
        const double rounding = 1e-12 * std::abs(b->lower) / h;
        EXPECT_NEAR(b->lower_gradient(k), fd_lower,
                    1e-5 * std::max(1.0, std::abs(fd_lower)) + rounding)
            << what;
        EXPECT_NEAR(lower_only->lower_gradient(k), fd_lower,
                    1e-5 * std::max(1.0, std::abs(fd_lower)) + rounding)
            << what << " (ELBO's gradient only)";
        EXPECT_NEAR(b->upper_gradient(k), fd_upper,
                    1e-5 * std::max(1.0, std::abs(fd_upper)) + rounding)
            << what;
      }
    }
  }
}

double k_ff_max(const GpModel& model, const Eigen::VectorXd& raw) {
  return KernelDiagonal(model, raw).maxCoeff();
}

// The selection's residual is tr(K_ff − K_fu K_uu⁻¹ K_uf), computed here densely; its first
// choice is the largest prior variance (LIN: the largest |x|), and its choices never repeat.
TEST(SparseGpTest, GreedySelectionMatchesDenseResidual) {
  const Dataset data = Standardized(LoadBundled("sunspots_yearly.csv"));
  for (const char* kernel : {"SE", "LIN+PER", "MAT32"}) {
    const GpModel model = MakeModel(data, kernel);
    const Eigen::VectorXd raw = model.prior_mean();
    absl::StatusOr<InducingSelection> z = SelectInducingPoints(model, raw, {.max_points = 20});
    ASSERT_TRUE(z.ok());
    // At most 20; fewer only when the conditional variances left are negligible (LIN+PER at
    // these values is numerically of low rank).
    ASSERT_LE(z->indices.size(), 20u);
    ASSERT_GE(z->indices.size(), 1u);
    if (z->indices.size() < 20u) {
      EXPECT_LE(z->max_residual,
                InducingSelectionOptions{}.relative_tolerance * k_ff_max(model, raw));
    }
    std::vector<int> sorted = z->indices;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(std::unique(sorted.begin(), sorted.end()), sorted.end());
    const Eigen::MatrixXd k_uu = model.CrossCovariance(raw, z->points, z->points);
    const Eigen::MatrixXd k_uf = model.CrossCovariance(raw, z->points, data.x);
    const Eigen::MatrixXd k_ff = model.CrossCovariance(raw, data.x, data.x);
    const double dense =
        k_ff.trace() - (k_uf.transpose() * k_uu.ldlt().solve(k_uf)).trace();
    EXPECT_NEAR(z->residual_trace, dense, 1e-6 * std::max(1.0, k_ff.trace())) << kernel;
    Eigen::Index first;
    k_ff.diagonal().maxCoeff(&first);
    EXPECT_EQ(z->indices[0], first) << kernel;
    absl::StatusOr<SparseGp> sparse = SparseGp::Create(model, z->points, {.jitter = 0.0});
    ASSERT_TRUE(sparse.ok());
    absl::StatusOr<SparseBounds> b = sparse->Bounds(raw);
    ASSERT_TRUE(b.ok());
    EXPECT_NEAR(b->residual_trace, dense, 1e-6 * std::max(1.0, k_ff.trace())) << kernel;
  }
}

TEST(SparseGpTest, SameInputsSameBits) {
  const Dataset data = Standardized(LoadBundled("mauna_loa_monthly.csv"));
  const GpModel model = MakeModel(data, "C*SE+C*PER*SE");
  const Eigen::VectorXd raw = model.prior_mean();
  const SparseBounds a = BoundsAt(model, raw, 50, {}, true);
  const SparseBounds b = BoundsAt(model, raw, 50, {}, true);
  EXPECT_EQ(a.lower, b.lower);
  EXPECT_EQ(a.upper, b.upper);
  EXPECT_EQ(a.lower_gradient, b.lower_gradient);
  EXPECT_EQ(a.upper_gradient, b.upper_gradient);
  // The block size only regroups the same sums over columns: equal to rounding.
  absl::StatusOr<InducingSelection> z = SelectInducingPoints(model, raw, {.max_points = 50});
  absl::StatusOr<SparseGp> blocked = SparseGp::Create(model, z->points, {.block_columns = 7});
  ASSERT_TRUE(blocked.ok());
  absl::StatusOr<SparseBounds> c = blocked->Bounds(raw, true);
  ASSERT_TRUE(c.ok());
  EXPECT_NEAR(c->lower, a.lower, 1e-9 * std::abs(a.lower));
  EXPECT_TRUE(c->lower_gradient.isApprox(a.lower_gradient, 1e-9));
}

// Changepoints and changewindows read x through the training inputs' frame (z = (x − min)/range,
// kernel_evaluator.h); the sparse bounds must use the same frame as the exact model: at Z = X
// without jitter both equal the exact value, and at a greedy Z they bracket it. Mauna Loa in
// decimal years (1958–2001), where a frame-less z would put the change 1958 units off.
TEST(SparseGpTest, ChangeKernelsUseTheTrainingFrame) {
  Dataset data = Standardized(LoadBundled("mauna_loa_monthly.csv"), 6);  // n = 87
  data.x.col(0).array() += 1958.0;
  std::mt19937_64 rng(13);
  // Z = X without jitter (K_uu must be numerically positive definite: rough kernels).
  for (const char* kernel : {"CP(MAT12, MAT32)", "CW(MAT32, MAT12)+C"}) {
    const GpModel model = MakeModel(data, kernel);
    for (int draw = 0; draw < 2; ++draw) {
      const Eigen::VectorXd raw = PriorDraw(model, rng);
      absl::StatusOr<double> exact = model.LogLikelihood(raw);
      ASSERT_TRUE(exact.ok()) << exact.status();
      absl::StatusOr<SparseGp> all = SparseGp::Create(model, data.x, {.jitter = 0.0});
      ASSERT_TRUE(all.ok()) << all.status();
      absl::StatusOr<SparseBounds> b = all->Bounds(raw);
      ASSERT_TRUE(b.ok()) << b.status();
      EXPECT_NEAR(b->lower, *exact, 1e-6) << kernel;
      EXPECT_NEAR(b->upper, *exact, 1e-6) << kernel;
    }
  }
  for (const char* kernel : {"CP(SE, LIN)", "CW(C, SE)+PER", "CP(MAT32, SE*PER)"}) {
    const GpModel model = MakeModel(data, kernel);
    for (int draw = 0; draw < 2; ++draw) {
      const Eigen::VectorXd raw = PriorDraw(model, rng);
      absl::StatusOr<double> exact = model.LogLikelihood(raw);
      ASSERT_TRUE(exact.ok()) << exact.status();
      for (int m : {6, 30}) ExpectBrackets(BoundsAt(model, raw, m), *exact, kernel);
    }
  }
}

// The gradients of a change kernel's bounds (its location, transition and window width move the
// diagonal too) against the five-point stencil.
TEST(SparseGpTest, ChangeKernelGradientsMatchCentralDifferences) {
  Dataset data = Standardized(LoadBundled("nile.csv"));
  data.x.col(0).array() /= 10.0;  // decades: the frame maps them onto [0, 1] all the same
  std::mt19937_64 rng(17);
  for (const char* kernel : {"CP(SE, C)", "CW(MAT32, MAT52)", "CW(LIN, SE)"}) {
    const GpModel model = MakeModel(data, kernel);
    const Eigen::VectorXd raw = PriorDraw(model, rng);
    absl::StatusOr<InducingSelection> z = SelectInducingPoints(model, raw, {.max_points = 20});
    ASSERT_TRUE(z.ok());
    absl::StatusOr<SparseGp> sparse = SparseGp::Create(model, z->points);
    ASSERT_TRUE(sparse.ok());
    absl::StatusOr<SparseBounds> b = sparse->Bounds(raw, true);
    ASSERT_TRUE(b.ok()) << b.status();
    const double h = 1e-4;
    for (int k = 0; k < model.num_free(); ++k) {
      auto at = [&](double offset) {
        Eigen::VectorXd moved = raw;
        moved(k) += offset;
        return *sparse->Bounds(moved);
      };
      const SparseBounds p1 = at(h), m1 = at(-h), p2 = at(2 * h), m2 = at(-2 * h);
      const double fd_lower = (8 * (p1.lower - m1.lower) - (p2.lower - m2.lower)) / (12 * h);
      const double fd_upper = (8 * (p1.upper - m1.upper) - (p2.upper - m2.upper)) / (12 * h);
      const double rounding = 1e-12 * std::abs(b->lower) / h;
      EXPECT_NEAR(b->lower_gradient(k), fd_lower,
                  1e-5 * std::max(1.0, std::abs(fd_lower)) + rounding)
          << kernel << " " << model.free_names()[k];
      EXPECT_NEAR(b->upper_gradient(k), fd_upper,
                  1e-5 * std::max(1.0, std::abs(fd_upper)) + rounding)
          << kernel << " " << model.free_names()[k];
    }
  }
}

// At the noise floor (σ² ≈ 1e-4 on standardised y) the jitter's share of tr(K_ff − Q) decides
// the upper bound. The bounds still bracket the exact value, and with the greedy selection run to
// its end (every point with conditional variance left above 1e-12 of the prior's) the gap is a
// fraction of a nat: the jitter is relative (1e-13 of the signal variance), not 1e-8 absolute,
// which left 6–57 nats on weekly CO₂ (bench/RESULTS.md, issue 28). The absolute ε the bounds
// used is reported and scales with y's units.
TEST(SparseGpTest, UpperBoundStaysTightAtTheNoiseFloor) {
  const Dataset data = Standardized(LoadBundled("mauna_loa_monthly.csv"), 2);  // n = 261
  const GpModel model = MakeModel(data, "C*SE+C*PER*SE");
  FitOptions fit_options;
  fit_options.restarts = 1;
  absl::StatusOr<FitResult> fit =
      FitHyperparameters(model, FitObjective::kMaximumLikelihood, fit_options);
  ASSERT_TRUE(fit.ok()) << fit.status();
  Eigen::VectorXd raw = fit->raw;
  raw(raw.size() - 1) = -20.0;  // σ² = 1e-4 + softplus(−20): the floor
  absl::StatusOr<double> exact = model.LogLikelihood(raw);
  ASSERT_TRUE(exact.ok());
  for (int m : {40, 160}) ExpectBrackets(BoundsAt(model, raw, m), *exact, "floor");
  // A smaller relative jitter tightens the upper bound (t loses less to ε) and keeps the bracket.
  SparseGpOptions coarse;
  coarse.jitter = 1e-8;  // the old 1e-8 absolute, on this standardised y
  const SparseBounds fine_all = BoundsAt(model, raw, data.num_points());
  const SparseBounds coarse_all = BoundsAt(model, raw, data.num_points(), coarse);
  ExpectBrackets(fine_all, *exact, "floor, all");
  ExpectBrackets(coarse_all, *exact, "floor, all, coarse");
  EXPECT_LT(fine_all.gap(), coarse_all.gap());
  EXPECT_GT(fine_all.jitter, 0.0);
  std::cout << "gap at the noise floor, greedy Z to its end: relative jitter 1e-13 "
            << fine_all.gap() << " nats, 1e-8 " << coarse_all.gap() << " nats\n";
  // y in other units (× 1000): C's constants scale by 10⁶ and so does ε.
  Dataset scaled = data;
  scaled.y *= 1000.0;
  const GpModel scaled_model = MakeModel(scaled, "C*SE+C*PER*SE");
  Eigen::VectorXd scaled_raw = raw;
  const std::vector<std::string> names = scaled_model.free_names();
  for (int k = 0; k < scaled_model.num_free(); ++k) {
    const std::string& name = names[k];
    if (name.rfind("C", 0) == 0 && name.find("constant") != std::string::npos) {
      scaled_raw(k) = InverseSoftplus(1e6 * Softplus(raw(k)));
    }
  }
  const SparseBounds scaled_bounds = BoundsAt(scaled_model, scaled_raw, 40);
  const SparseBounds plain_bounds = BoundsAt(model, raw, 40);
  EXPECT_NEAR(scaled_bounds.jitter / plain_bounds.jitter, 1e6, 1e-3 * 1e6);
}

// The jitter's share of the gap grows like n²ε/σ² (core/sparse_gp.h, SparseGpOptions::jitter):
// on hourly San Francisco temperatures (every 4th hour, n = 2,190, x in days) at a smooth θ
// (C*SE, ℓ = 20 days, σ² = 10⁻³, all fixed) whose greedy Z runs out of variance after a few
// dozen points, the old relative jitter and selection tolerance (10⁻¹⁰ both) left a gap of
// about a hundred nats that no further point could close; the defaults (ε = 10⁻¹³, pivots above
// 10⁻¹²) leave less than the default tolerance of 1 nat, and both bracket the exact value.
TEST(SparseGpTest, JitterLeavesLittleGapOnceZSpansALongSeries) {
  const Dataset data = Standardized(LoadBundled("sf_temps.csv"), 4);
  HyperparameterSettings settings;
  settings.fixed_values = {{"C.constant", 1.0}, {"SE.lengthscale", 20.0}, {"noise", 1e-3}};
  const GpModel model = MakeModel(data, "C*SE", settings);
  const Eigen::VectorXd raw(0);
  absl::StatusOr<double> exact = model.LogLikelihood(raw);
  ASSERT_TRUE(exact.ok()) << exact.status();
  auto spanning_bounds = [&](double jitter, double selection_tolerance) {
    absl::StatusOr<InducingSelection> z = SelectInducingPoints(
        model, raw, {.max_points = 512, .relative_tolerance = selection_tolerance});
    EXPECT_TRUE(z.ok()) << z.status();
    EXPECT_LT(z->indices.size(), 512u);  // ran out of variance: Z spans the data
    absl::StatusOr<SparseGp> sparse = SparseGp::Create(model, z->points, {.jitter = jitter});
    EXPECT_TRUE(sparse.ok()) << sparse.status();
    absl::StatusOr<SparseBounds> bounds = sparse->Bounds(raw);
    EXPECT_TRUE(bounds.ok()) << bounds.status();
    return bounds.ok() ? *bounds : SparseBounds{};
  };
  const SparseBounds old_defaults = spanning_bounds(1e-10, 1e-10);
  const SparseBounds defaults =
      spanning_bounds(SparseGpOptions{}.jitter, InducingSelectionOptions{}.relative_tolerance);
  ExpectBrackets(old_defaults, *exact, "old jitter");
  ExpectBrackets(defaults, *exact, "default jitter");
  EXPECT_LT(defaults.gap(), 1.0);
  EXPECT_GT(old_defaults.gap(), 50.0 * defaults.gap());
  std::cout << "gap once Z spans sf_temps/4: jitter 1e-10 " << old_defaults.gap()
            << " nats, default " << defaults.gap() << " nats\n";
}

// The n-sized passes split into a fixed partition of blocks: any thread count gives the same
// bits (values and gradients).
TEST(SparseGpTest, SameBitsWhateverTheThreadCountAndWhetherAIsKept) {
  const Dataset data = Standardized(LoadBundled("mauna_loa_monthly.csv"));
  const GpModel model = MakeModel(data, "C*SE+C*PER*SE");
  const Eigen::VectorXd raw = model.prior_mean();
  absl::StatusOr<InducingSelection> z = SelectInducingPoints(model, raw, {.max_points = 40});
  ASSERT_TRUE(z.ok());
  SparseGpOptions one;
  one.block_columns = 16;  // 33 blocks over 8 chunks
  const SparseBounds reference = *SparseGp::Create(model, z->points, one)->Bounds(raw, true);
  const SparseBounds reference_lower_only =
      *SparseGp::Create(model, z->points, one)->Bounds(raw, true, false);
  // threads = 1 again with A remade in pass 2 rather than kept (max_cached_factor_bytes = 0):
  // the same arithmetic, so the same bits.
  for (int threads : {1, 2, 3, 8}) {
    SparseGpOptions options = one;
    options.threads = threads;
    if (threads == 1) options.max_cached_factor_bytes = 0;
    absl::StatusOr<SparseGp> sparse = SparseGp::Create(model, z->points, options);
    ASSERT_TRUE(sparse.ok());
    absl::StatusOr<SparseBounds> b = sparse->Bounds(raw, true);
    ASSERT_TRUE(b.ok());
    EXPECT_EQ(b->lower, reference.lower) << threads;
    EXPECT_EQ(b->upper, reference.upper) << threads;
    EXPECT_EQ(b->lower_gradient, reference.lower_gradient) << threads;
    EXPECT_EQ(b->upper_gradient, reference.upper_gradient) << threads;
    absl::StatusOr<SparseBounds> lower_only = sparse->Bounds(raw, true, false);
    ASSERT_TRUE(lower_only.ok());
    EXPECT_EQ(lower_only->lower_gradient, reference_lower_only.lower_gradient) << threads;
  }
}

TEST(SparseGpTest, BadInputIsRefusedByName) {
  const Dataset data = Standardized(LoadBundled("nile.csv"));
  const GpModel model = MakeModel(data, "SE");
  EXPECT_THAT(SparseGp::Create(model, Eigen::MatrixXd(0, 1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  absl::Status cols = SparseGp::Create(model, Eigen::MatrixXd::Zero(3, 2)).status();
  EXPECT_EQ(cols.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(cols.message().find("inducing"), std::string::npos);
  EXPECT_NE(SparseGp::Create(model, data.x, {.jitter = -1.0}).status().message().find("jitter"),
            std::string::npos);
  SparseGpOptions no_threads;
  no_threads.threads = 0;
  EXPECT_NE(SparseGp::Create(model, data.x, no_threads).status().message().find("threads"),
            std::string::npos);
  SparseGpOptions negative_cache;
  negative_cache.max_cached_factor_bytes = -1;
  EXPECT_NE(SparseGp::Create(model, data.x, negative_cache)
                .status()
                .message()
                .find("max_cached_factor_bytes"),
            std::string::npos);
  absl::StatusOr<SparseGp> sparse = SparseGp::Create(model, data.x.topRows(5));
  ASSERT_TRUE(sparse.ok());
  EXPECT_THAT(sparse->Bounds(Eigen::VectorXd::Zero(5)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(SelectInducingPoints(model, model.prior_mean(), {.max_points = 0}),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

}  // namespace
}  // namespace gpsel
