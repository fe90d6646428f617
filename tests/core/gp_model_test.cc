// GpModel: the log marginal likelihood, its analytic gradient and exact Hessian in raw space.
//
//  * Gradient and Hessian against finite differences (5-point central stencil, i.e. one Richardson
//    step: of the value for the gradient, of the analytic gradient for the Hessian) for every base
//    kernel and a set of composites, at 20 raw vectors drawn from the prior per kernel, on random
//    1-D data (which contains x = 0 exactly, where LIN factors vanish) and on 2-D data with active
//    dimensions. A per-kernel table of the worst relative errors is printed and recorded.
//  * The covariance and the log likelihood against an independent implementation of the paper's Eq.
//  (1)
//    written here (closed-form base kernels, Eigen LLT), kernel algebra (k_{a+b} = k_a + k_b,
//    k_{a·b} = k_a ∘ k_b, operand order and grouping irrelevant), the noise floor, fixed
//    parameters, parameter names, argument errors and a near-singular (jitter) case.
#include "gpsel/core/gp_model.h"

#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <Eigen/Cholesky>
#include <Eigen/Eigenvalues>
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <functional>
#include <iomanip>
#include <iostream>
#include <map>
#include <random>
#include <set>
#include <sstream>
#include <string>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/kernel_expr.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

namespace gpsel {
namespace {

using ::testing::ElementsAre;
using ::testing::HasSubstr;

constexpr double kPi = 3.14159265358979323846;
constexpr double kLog2Pi = 1.8378770664093454836;

KernelExpr Kernel(std::string_view text) {
  absl::StatusOr<KernelExpr> k = ParseKernel(text);
  EXPECT_TRUE(k.ok()) << text << ": " << k.status();
  return *k;
}

GpModel MakeModel(const KernelExpr& kernel, const Eigen::MatrixXd& x, const Eigen::VectorXd& y,
                  const HyperparameterSettings& settings = {}) {
  absl::StatusOr<GpModel> model = GpModel::Create(kernel, x, y, settings);
  EXPECT_TRUE(model.ok()) << ToString(kernel) << ": " << model.status();
  return *std::move(model);
}

double RefSoftplus(double r) { return std::log1p(std::exp(r)); }

// ---------------------------------------------------------------------------------------------
// Data.

// 1-D: n = 22 points in [0, 3] (x = 0 included exactly), y a smooth trend plus noise.
struct Data {
  Eigen::MatrixXd x;
  Eigen::VectorXd y;
};

Data Random1D(uint64_t seed = 7, int n = 22) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unif(0.0, 3.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  Data d;
  d.x.resize(n, 1);
  d.y.resize(n);
  for (int i = 0; i < n; ++i) {
    d.x(i, 0) = i == 0 ? 0.0 : unif(rng);
    d.y(i) = std::sin(2.0 * d.x(i, 0)) + 0.4 * d.x(i, 0) + 0.2 * normal(rng);
  }
  d.y.array() -= d.y.mean();
  return d;
}

// 2-D: n = 18 points, column 0 in [0, 2], column 1 in [−1, 1].
Data Random2D(uint64_t seed = 11, int n = 18) {
  std::mt19937_64 rng(seed);
  std::uniform_real_distribution<double> unif(0.0, 1.0);
  std::normal_distribution<double> normal(0.0, 1.0);
  Data d;
  d.x.resize(n, 2);
  d.y.resize(n);
  for (int i = 0; i < n; ++i) {
    d.x(i, 0) = 2.0 * unif(rng);
    d.x(i, 1) = 2.0 * unif(rng) - 1.0;
    d.y(i) = std::cos(2.0 * d.x(i, 0)) * d.x(i, 1) + 0.1 * normal(rng);
  }
  return d;
}

// ---------------------------------------------------------------------------------------------
// Independent reference implementation of the paper's Eq. (1) (no code shared with core/).

double RefBase(BaseKernel base, const std::vector<double>& th, const Eigen::RowVectorXd& a,
               const Eigen::RowVectorXd& b) {
  const double d2 = (a - b).squaredNorm();
  const double d = std::sqrt(d2);
  switch (base) {
    case BaseKernel::kSE:
      return std::exp(-d2 / (2.0 * th[0] * th[0]));
    case BaseKernel::kMAT12:
      return std::exp(-d / th[0]);
    case BaseKernel::kMAT32:
      return (1.0 + std::sqrt(3.0) * d / th[0]) * std::exp(-std::sqrt(3.0) * d / th[0]);
    case BaseKernel::kMAT52:
      return (1.0 + std::sqrt(5.0) * d / th[0] + 5.0 * d2 / (3.0 * th[0] * th[0])) *
             std::exp(-std::sqrt(5.0) * d / th[0]);
    case BaseKernel::kLIN:
      return th[0] * a.dot(b);
    case BaseKernel::kPER: {
      const double s = std::sin(kPi * d / th[1]);
      return std::exp(-2.0 * s * s / (th[0] * th[0]));
    }
    case BaseKernel::kRQ:
      return std::pow(1.0 + d2 / (2.0 * th[1] * th[0] * th[0]), -th[1]);
    case BaseKernel::kConst:
      return th[0];
  }
  ADD_FAILURE() << "unknown base kernel";
  return 0.0;
}

// Covariance of `expr` with natural parameter values by full name; leaves are labelled in
// depth-first operand order exactly as DescribeHyperparameters documents.
Eigen::MatrixXd RefCovarianceRec(const KernelExpr& expr, const std::vector<std::string>& labels,
                                 int* leaf, const std::map<std::string, double>& natural,
                                 const Eigen::MatrixXd& x1, const Eigen::MatrixXd& x2) {
  if (expr.is_base()) {
    const std::string& label = labels[(*leaf)++];
    std::vector<double> th;
    for (const std::string& p : BaseKernelParameterNames(expr.base)) {
      auto it = natural.find(label + "." + p);
      EXPECT_TRUE(it != natural.end()) << "missing " << label << "." << p;
      th.push_back(it == natural.end() ? 1.0 : it->second);
    }
    Eigen::MatrixXd k(x1.rows(), x2.rows());
    for (Eigen::Index i = 0; i < x1.rows(); ++i) {
      for (Eigen::Index j = 0; j < x2.rows(); ++j) {
        if (expr.active_dim >= 0) {
          k(i, j) = RefBase(expr.base, th, x1.row(i).segment(expr.active_dim, 1),
                            x2.row(j).segment(expr.active_dim, 1));
        } else {
          k(i, j) = RefBase(expr.base, th, x1.row(i), x2.row(j));
        }
      }
    }
    return k;
  }
  Eigen::MatrixXd k = RefCovarianceRec(expr.operands[0], labels, leaf, natural, x1, x2);
  for (size_t c = 1; c < expr.operands.size(); ++c) {
    const Eigen::MatrixXd kc = RefCovarianceRec(expr.operands[c], labels, leaf, natural, x1, x2);
    if (expr.kind == KernelExpr::Kind::kSum) {
      k += kc;
    } else {
      k = k.cwiseProduct(kc);
    }
  }
  return k;
}

Eigen::MatrixXd RefCovariance(const KernelExpr& expr, const std::map<std::string, double>& natural,
                              const Eigen::MatrixXd& x1, const Eigen::MatrixXd& x2) {
  const std::vector<std::string> labels = LeafLabels(expr);
  int leaf = 0;
  return RefCovarianceRec(expr, labels, &leaf, natural, x1, x2);
}

// Natural values of every parameter from the free raw vector, computed here (not by the model).
std::map<std::string, double> RefNatural(const GpModel& model, const Eigen::VectorXd& raw) {
  std::map<std::string, double> natural;
  int k = 0;
  for (const HyperparameterInfo& p : model.parameters()) {
    const double r = p.fixed ? p.fixed_raw : raw(k++);
    natural[p.name] = p.name == "noise" ? 1e-4 + RefSoftplus(r) : RefSoftplus(r);
  }
  return natural;
}

// log N(y | 0, K + σ²I) by Eigen LLT.
double RefLogLikelihood(const Eigen::MatrixXd& k_noisy, const Eigen::VectorXd& y) {
  Eigen::LLT<Eigen::MatrixXd> llt(k_noisy);
  EXPECT_EQ(llt.info(), Eigen::Success);
  const Eigen::VectorXd alpha = llt.solve(y);
  const double log_det = 2.0 * llt.matrixL().toDenseMatrix().diagonal().array().log().sum();
  return -0.5 * y.dot(alpha) - 0.5 * log_det - 0.5 * static_cast<double>(y.size()) * kLog2Pi;
}

// ---------------------------------------------------------------------------------------------
// Finite differences.

// 5-point central difference (the Richardson extrapolation of two central differences):
// f'(x) ≈ [8(f(x+h) − f(x−h)) − (f(x+2h) − f(x−2h))] / 12h, error O(h⁴).
template <typename T, typename F>
T FivePoint(const F& f, const Eigen::VectorXd& x, int k, double h) {
  auto at = [&](double step) {
    Eigen::VectorXd xs = x;
    xs(k) += step;
    return f(xs);
  };
  const T fp1 = at(h), fm1 = at(-h), fp2 = at(2 * h), fm2 = at(-2 * h);
  return (8.0 * (fp1 - fm1) - (fp2 - fm2)) / (12.0 * h);
}

// Relative errors. The log likelihood can be large (|L| ~ 1e4 when a low-rank kernel such as LIN
// or C meets noise near its floor) and is then only known to ~κ·ε·|L|, which a difference
// quotient amplifies by 1/h; the denominators therefore also carry 1e-3·|L| (gradient) and
// 1e-2·‖g‖∞ (Hessian). For the typical |L| of a few tens this changes nothing.
struct FdError {
  double gradient = 0.0;  // max_k |g_fd − g_k| / max(1, |g_k|, 1e-3·|L|)
  double hessian = 0.0;   // max_ij |H_fd − H_ij| / max(1, |H_ij|, 1e-2·‖g‖∞)
  bool finite = true;
};

// Steps tried per parameter, in this order, until the error is negligible (< 1e-9); the smallest
// error counts. A wrong derivative is wrong at every step, while a correct one can need a small
// step where the likelihood oscillates fast in a parameter (a short PER period over a long input
// range: ∂/∂r_period carries factors 2πd/p ≫ 1 and the stencil's O(h⁴) truncation error grows
// with the fifth derivative) and a large one where |L| is large and roundoff dominates.
constexpr double kSteps[] = {1e-3, 1e-4, 1e-2, 1e-5, 1e-6};

FdError CheckAgainstFiniteDifferences(const GpModel& model, const Eigen::VectorXd& raw,
                                      const HessianTiling& tiling = {}) {
  FdError err;
  const int u = model.num_free();
  Eigen::VectorXd gradient;
  absl::StatusOr<double> value = model.LogLikelihood(raw, &gradient);
  EXPECT_TRUE(value.ok()) << value.status();
  absl::StatusOr<LikelihoodHessian> hess = model.LogLikelihoodHessian(raw, {}, tiling);
  EXPECT_TRUE(hess.ok()) << hess.status();
  if (!value.ok() || !hess.ok()) {
    err.finite = false;
    return err;
  }
  // The Hessian call reports the same value and gradient.
  EXPECT_NEAR(hess->value, *value, 1e-12 * std::max(1.0, std::abs(*value)));
  EXPECT_LE((hess->gradient - gradient).lpNorm<Eigen::Infinity>(),
            1e-10 * std::max(1.0, gradient.lpNorm<Eigen::Infinity>()));
  EXPECT_EQ(hess->hessian.rows(), u);
  EXPECT_EQ(hess->hessian.cols(), u);
  err.finite = std::isfinite(*value) && gradient.allFinite() && hess->hessian.allFinite();
  if (u > 0) {
    EXPECT_EQ((hess->hessian - hess->hessian.transpose()).cwiseAbs().maxCoeff(), 0.0);
  }

  auto value_at = [&](const Eigen::VectorXd& r) {
    absl::StatusOr<double> v = model.LogLikelihood(r);
    EXPECT_TRUE(v.ok()) << v.status();
    return v.ok() ? *v : std::nan("");
  };
  auto gradient_at = [&](const Eigen::VectorXd& r) {
    Eigen::VectorXd g;
    absl::StatusOr<double> v = model.LogLikelihood(r, &g);
    EXPECT_TRUE(v.ok()) << v.status();
    return g;
  };
  auto gradient_scale = [&](int k) {
    return std::max({1.0, std::abs(gradient(k)), 1e-3 * std::abs(*value)});
  };
  const double hessian_floor = 1e-2 * gradient.lpNorm<Eigen::Infinity>();
  for (int k = 0; k < u; ++k) {
    double gradient_error = INFINITY, hessian_error = INFINITY;
    for (double step : kSteps) {
      const double fd = FivePoint<double>(value_at, raw, k, step);
      gradient_error = std::min(gradient_error, std::abs(fd - gradient(k)) / gradient_scale(k));
      const Eigen::VectorXd column = FivePoint<Eigen::VectorXd>(gradient_at, raw, k, step);
      double column_error = 0.0;
      for (int i = 0; i < u; ++i) {
        const double h = hess->hessian(i, k);
        column_error = std::max(
            column_error, std::abs(column(i) - h) / std::max({1.0, std::abs(h), hessian_floor}));
      }
      hessian_error = std::min(hessian_error, column_error);
      if (gradient_error < 1e-9 && hessian_error < 1e-9) break;
    }
    err.gradient = std::max(err.gradient, gradient_error);
    err.hessian = std::max(err.hessian, hessian_error);
  }
  if (!(err.gradient >= 0) || !(err.hessian >= 0)) err.finite = false;  // NaN guard
  return err;
}

// Raw vectors drawn from the prior (fixed seed). Draws whose noisy covariance is too badly
// conditioned for a meaningful finite difference (κ > 1e9, which the noise floor makes rare) are
// redrawn; the count of redraws is reported.
std::vector<Eigen::VectorXd> PriorDraws(const GpModel& model, int count, uint64_t seed,
                                        int* redrawn) {
  std::mt19937_64 rng(seed);
  std::normal_distribution<double> normal(0.0, 1.0);
  const Eigen::VectorXd mean = model.prior_mean(), sd = model.prior_sd();
  std::vector<Eigen::VectorXd> draws;
  *redrawn = 0;
  for (int attempt = 0; attempt < 50 * count && static_cast<int>(draws.size()) < count; ++attempt) {
    Eigen::VectorXd raw(model.num_free());
    for (int k = 0; k < raw.size(); ++k) raw(k) = mean(k) + sd(k) * normal(rng);
    Eigen::MatrixXd k = model.CrossCovariance(raw, model.x(), model.x());
    k.diagonal().array() += model.NoiseVariance(raw);
    Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(k, Eigen::EigenvaluesOnly);
    const double condition = eig.eigenvalues().maxCoeff() / eig.eigenvalues().minCoeff();
    if (!(condition < 1e9)) {
      ++*redrawn;
      continue;
    }
    draws.push_back(raw);
  }
  EXPECT_EQ(static_cast<int>(draws.size()), count);
  return draws;
}

// ---------------------------------------------------------------------------------------------
// Gradient and Hessian vs finite differences, per kernel (parameterised) with a summary table.

// A fixed, portable seed per kernel text (std::hash is implementation-defined).
uint64_t Fnv1a(const std::string& text) {
  uint64_t h = 1469598103934665603ULL;
  for (unsigned char ch : text) h = (h ^ ch) * 1099511628211ULL;
  return h;
}

struct DerivativeCase {
  std::string kernel;
  bool two_d = false;
};

void PrintTo(const DerivativeCase& c, std::ostream* os) { *os << c.kernel; }

struct ReportRow {
  std::string kernel;
  int u = 0;
  int draws = 0;
  int redrawn = 0;
  double gradient = 0.0;
  double hessian = 0.0;
  double loglik = 0.0;  // vs the independent Eigen computation, relative to max(1, |L|)
};

std::vector<ReportRow>& Report() {
  static auto* rows = new std::vector<ReportRow>();
  return *rows;
}

// Observed errors of the correct code stay below ~1e-6 (roundoff in ill-conditioned draws); a
// wrong formula (checked by mutating kernel_evaluator.cc / gp_model.cc) gives errors ≥ ~1.
constexpr double kGradientTolerance = 1e-5;
constexpr double kHessianTolerance = 1e-5;

// At one raw vector: gradient and Hessian against finite differences, and the value against
// the independent implementation (Eigen LLT of RefCovariance). Returns the errors for the
// summary table; the relative value error is infinite when the model fails.
struct DrawErrors {
  FdError fd;
  double loglik = 0.0;
};

DrawErrors CheckDraw(const GpModel& model, const KernelExpr& kernel, const Data& data,
                     const Eigen::VectorXd& raw) {
  DrawErrors errors;
  errors.fd = CheckAgainstFiniteDifferences(model, raw);
  EXPECT_TRUE(errors.fd.finite);
  EXPECT_LE(errors.fd.gradient, kGradientTolerance);
  EXPECT_LE(errors.fd.hessian, kHessianTolerance);
  Eigen::MatrixXd k = RefCovariance(kernel, RefNatural(model, raw), data.x, data.x);
  k.diagonal().array() += RefNatural(model, raw).at("noise");
  const double reference = RefLogLikelihood(k, data.y);
  const absl::StatusOr<double> value = model.LogLikelihood(raw);
  EXPECT_TRUE(value.ok()) << value.status();
  if (!value.ok()) {
    errors.loglik = INFINITY;
    return errors;
  }
  errors.loglik = std::abs(*value - reference) / std::max(1.0, std::abs(reference));
  EXPECT_LE(errors.loglik, 1e-9) << *value << " vs " << reference;
  return errors;
}

class GpModelDerivativeTest : public ::testing::TestWithParam<DerivativeCase> {
 public:
  static void TearDownTestSuite() {
    std::ostringstream out;
    out << "\nMax relative FD error over 20 prior draws per kernel (5-point stencil, best of "
           "h = 1e-2 ... 1e-6;\n gradient: |fd − g| / max(1, |g|, 1e-3|L|), Hessian: "
           "|fd − H| / max(1, |H|, 1e-2‖g‖∞); loglik-ref: vs Eigen LLT)\n";
    out << std::left << std::setw(34) << "kernel" << std::right << std::setw(4) << "u"
        << std::setw(14) << "gradient" << std::setw(14) << "hessian" << std::setw(14)
        << "loglik-ref" << std::setw(9) << "redrawn"
        << "\n";
    for (const ReportRow& r : Report()) {
      out << std::left << std::setw(34) << r.kernel << std::right << std::setw(4) << r.u
          << std::scientific << std::setprecision(2) << std::setw(14) << r.gradient << std::setw(14)
          << r.hessian << std::setw(14) << r.loglik << std::defaultfloat << std::setw(9)
          << r.redrawn << "\n";
    }
    std::cout << out.str();
  }
};

TEST_P(GpModelDerivativeTest, GradientAndHessianMatchFiniteDifferencesAtPriorDraws) {
  const DerivativeCase& c = GetParam();
  const Data data = c.two_d ? Random2D() : Random1D();
  const KernelExpr kernel = Kernel(c.kernel);
  const GpModel model = MakeModel(kernel, data.x, data.y);
  ReportRow row;
  row.kernel = c.kernel + (c.two_d ? "  (2-D)" : "");
  row.u = model.num_free();
  const std::vector<Eigen::VectorXd> draws =
      PriorDraws(model, 20, 1000 + Fnv1a(c.kernel) % 1000, &row.redrawn);
  row.draws = static_cast<int>(draws.size());
  for (const Eigen::VectorXd& raw : draws) {
    SCOPED_TRACE(::testing::Message() << "raw = " << raw.transpose());
    const DrawErrors e = CheckDraw(model, kernel, data, raw);
    row.gradient = std::max(row.gradient, e.fd.gradient);
    row.hessian = std::max(row.hessian, e.fd.hessian);
    row.loglik = std::max(row.loglik, e.loglik);
  }
  RecordProperty("max_rel_err_gradient", ::testing::PrintToString(row.gradient));
  RecordProperty("max_rel_err_hessian", ::testing::PrintToString(row.hessian));
  Report().push_back(row);
}

INSTANTIATE_TEST_SUITE_P(
    GpModelKernels, GpModelDerivativeTest,
    ::testing::Values(DerivativeCase{"SE"}, DerivativeCase{"MAT12"}, DerivativeCase{"MAT32"},
                      DerivativeCase{"MAT52"}, DerivativeCase{"LIN"}, DerivativeCase{"PER"},
                      DerivativeCase{"RQ"}, DerivativeCase{"C"}, DerivativeCase{"SE+LIN"},
                      DerivativeCase{"SE*PER"}, DerivativeCase{"C*SE+C*RQ"},
                      DerivativeCase{"(SE+LIN)*MAT32"}, DerivativeCase{"LIN*LIN"},
                      DerivativeCase{"SE+SE"}, DerivativeCase{"C*SE+C*SE*PER+C*RQ+C*SE"},
                      DerivativeCase{"(C+LIN)*(PER+RQ*MAT52)"},
                      DerivativeCase{"SE[0]*LIN[1]", true}, DerivativeCase{"SE", true},
                      DerivativeCase{"MAT32[1]+RQ[0]*PER[0]", true},
                      DerivativeCase{"LIN*MAT12+C", true}),
    [](const ::testing::TestParamInfo<DerivativeCase>& info) {
      std::string name;
      for (char ch : info.param.kernel) {
        if (std::isalnum(static_cast<unsigned char>(ch))) {
          name += ch;
        } else if (ch == '+') {
          name += "Plus";
        } else if (ch == '*') {
          name += "Times";
        } else if (ch == '(' || ch == ')') {
          name += "_";
        } else {
          name += "d";
        }
      }
      return name + (info.param.two_d ? "_2D" : "");
    });

// A non-canonical tree (built by hand: nested products of products, operands unsorted) goes
// through the same recursion; its derivatives must be right too.
TEST(GpModelDerivativeExtraTest, NonCanonicalNestedTreeMatchesFiniteDifferences) {
  const Data data = Random1D(3);
  KernelExpr inner;
  inner.kind = KernelExpr::Kind::kProduct;
  inner.operands = {KernelExpr::Base(BaseKernel::kPER), KernelExpr::Base(BaseKernel::kLIN)};
  KernelExpr sum;
  sum.kind = KernelExpr::Kind::kSum;
  sum.operands = {KernelExpr::Base(BaseKernel::kRQ), KernelExpr::Base(BaseKernel::kConst)};
  KernelExpr outer;
  outer.kind = KernelExpr::Kind::kProduct;
  outer.operands = {inner, sum, KernelExpr::Base(BaseKernel::kSE)};
  const GpModel model = MakeModel(outer, data.x, data.y);
  int redrawn = 0;
  for (const Eigen::VectorXd& raw : PriorDraws(model, 10, 99, &redrawn)) {
    const FdError e = CheckAgainstFiniteDifferences(model, raw);
    EXPECT_LE(e.gradient, kGradientTolerance) << raw.transpose();
    EXPECT_LE(e.hessian, kHessianTolerance) << raw.transpose();
  }
}

// Far from the prior's centre: tiny and huge lengthscales, raw values beyond ±35 where the
// softplus switches formula, noise at its floor.
TEST(GpModelDerivativeExtraTest, ExtremeRawValuesStayFiniteAndAccurate) {
  const Data data = Random1D(5);
  const GpModel model = MakeModel(Kernel("SE*PER+RQ"), data.x, data.y);
  ASSERT_EQ(model.free_names(),
            (std::vector<std::string>{"PER.lengthscale", "PER.period", "SE.lengthscale",
                                      "RQ.lengthscale", "RQ.alpha", "noise"}));
  const std::vector<Eigen::VectorXd> points = {
      (Eigen::VectorXd(6) << -6.0, 0.5, 4.0, -5.0, 6.0, -12.0).finished(),
      (Eigen::VectorXd(6) << 3.0, 2.0, -3.0, 2.0, -6.0, 1.0).finished(),
      (Eigen::VectorXd(6) << 0.0, 0.0, 0.0, 0.0, 40.0, -40.0).finished(),
      (Eigen::VectorXd(6) << 1.0, -1.0, 2.0, 37.0, 1.0, -2.0).finished(),
  };
  for (const Eigen::VectorXd& raw : points) {
    const FdError e = CheckAgainstFiniteDifferences(model, raw);
    EXPECT_TRUE(e.finite) << raw.transpose();
    EXPECT_LE(e.gradient, 1e-5) << raw.transpose();
    EXPECT_LE(e.hessian, 1e-5) << raw.transpose();
  }
}

// ---------------------------------------------------------------------------------------------
// Prior.

TEST(GpModelPriorTest, LogPriorValueGradientAndHessian) {
  const Data data = Random1D();
  HyperparameterSettings settings;
  settings.prior_overrides["PER.period"] = {1.5, 0.25};
  const GpModel model = MakeModel(Kernel("C*SE*PER+RQ"), data.x, data.y, settings);
  const Eigen::VectorXd mean = model.prior_mean(), sd = model.prior_sd();
  std::mt19937_64 rng(3);
  std::normal_distribution<double> normal(0.0, 2.0);
  for (int t = 0; t < 10; ++t) {
    Eigen::VectorXd raw(model.num_free());
    for (int k = 0; k < raw.size(); ++k) raw(k) = mean(k) + sd(k) * normal(rng);
    double expected = 0.0;
    for (int k = 0; k < raw.size(); ++k) {
      const double z = (raw(k) - mean(k)) / sd(k);
      expected += -0.5 * z * z - std::log(sd(k) * std::sqrt(2.0 * kPi));
    }
    Eigen::VectorXd gradient;
    Eigen::MatrixXd hessian;
    const double value = model.LogPrior(raw, &gradient, &hessian);
    EXPECT_NEAR(value, expected, 1e-12 * std::max(1.0, std::abs(expected)));
    EXPECT_DOUBLE_EQ(model.LogPrior(raw), value);
    auto f = [&](const Eigen::VectorXd& r) { return model.LogPrior(r); };
    auto g = [&](const Eigen::VectorXd& r) {
      Eigen::VectorXd out;
      model.LogPrior(r, &out);
      return out;
    };
    for (int k = 0; k < raw.size(); ++k) {
      EXPECT_NEAR(FivePoint<double>(f, raw, k, 1e-3), gradient(k), 1e-8);
      const Eigen::VectorXd column = FivePoint<Eigen::VectorXd>(g, raw, k, 1e-3);
      for (int i = 0; i < raw.size(); ++i) EXPECT_NEAR(column(i), hessian(i, k), 1e-8);
    }
    // Independent parameters: the Hessian is diagonal, −1/sd².
    EXPECT_TRUE(
        hessian.isApprox(Eigen::MatrixXd((-sd.array().square().inverse()).matrix().asDiagonal())));
  }
  // The override is used.
  const std::vector<std::string> names = model.free_names();
  const int period =
      static_cast<int>(std::find(names.begin(), names.end(), "PER.period") - names.begin());
  ASSERT_LT(period, static_cast<int>(names.size()));
  EXPECT_DOUBLE_EQ(mean(period), 1.5);
  EXPECT_DOUBLE_EQ(sd(period), 0.25);
}

TEST(GpModelPriorTest, DefaultPriorsAreThePaperTable) {
  const Data data = Random1D();
  const GpModel model = MakeModel(Kernel("SE+MAT12+MAT32+MAT52+LIN+PER+RQ+C"), data.x, data.y);
  const std::map<std::string, std::pair<double, double>> expected = {
      {"SE.lengthscale", {-0.212, 1.89}},
      {"MAT12.lengthscale", {0.8, 2.15}},
      {"MAT32.lengthscale", {0.8, 2.15}},
      {"MAT52.lengthscale", {0.8, 2.15}},
      {"LIN.variance", {-0.8, 1.0}},
      {"PER.lengthscale", {0.78, 2.29}},
      {"PER.period", {0.65, 1.0}},
      {"RQ.lengthscale", {-0.05, 1.94}},
      {"RQ.alpha", {1.88, 3.1}},
      {"C.constant", {-1.63, 2.26}},
      {"noise", {-3.52, 3.58}}};
  const std::vector<std::string> names = model.free_names();
  ASSERT_EQ(names.size(), expected.size());
  EXPECT_EQ(names.back(), "noise");
  const Eigen::VectorXd mean = model.prior_mean(), sd = model.prior_sd();
  for (size_t k = 0; k < names.size(); ++k) {
    ASSERT_TRUE(expected.count(names[k])) << names[k];
    EXPECT_DOUBLE_EQ(mean(k), expected.at(names[k]).first) << names[k];
    EXPECT_DOUBLE_EQ(sd(k), expected.at(names[k]).second) << names[k];
  }
}

// Each free parameter says where it sits (leaf base kernel, pinned column, own name), matching
// its printed name; only PER's period is a period, and a fixed parameter drops out.
TEST(GpModelPriorTest, FreeParametersCarryTheirLeafAndColumn) {
  Eigen::MatrixXd x(3, 2);
  x << 0, 1, 1, 2, 2, 0;
  const Eigen::VectorXd y = Eigen::Vector3d(0.1, -0.2, 0.3);
  HyperparameterSettings settings;
  settings.fixed_values["SE.lengthscale"] = 2.0;
  absl::StatusOr<GpModel> model =
      GpModel::Create(Kernel("SE*PER[1] + PER[0]"), x, y, settings);
  ASSERT_TRUE(model.ok()) << model.status();
  const std::vector<HyperparameterInfo> free = model->free_parameters();
  ASSERT_EQ(free.size(), model->free_names().size());
  std::vector<std::string> periods;
  for (size_t k = 0; k < free.size(); ++k) {
    EXPECT_EQ(free[k].name, model->free_names()[k]);
    if (free[k].name == "noise") {
      EXPECT_FALSE(free[k].base.has_value());
      EXPECT_TRUE(free[k].parameter.empty());
      continue;
    }
    ASSERT_TRUE(free[k].base.has_value()) << free[k].name;
    EXPECT_EQ(free[k].name.substr(free[k].name.rfind('.') + 1), free[k].parameter);
    if (free[k].IsPeriod()) periods.push_back(absl::StrCat(free[k].name, "@", free[k].active_dim));
  }
  EXPECT_THAT(periods, ::testing::UnorderedElementsAre("PER[0].period@0", "PER[1].period@1"));
  EXPECT_EQ(free.size(), 4u + 1u);  // 2 PER × 2 and the noise; SE's one parameter is fixed
}

// ---------------------------------------------------------------------------------------------
// Covariance: closed forms and algebra.

TEST(GpModelCovarianceTest, BaseKernelsMatchTheClosedFormsOfDesign) {
  // Single pairs at known distances, raw values chosen so that softplus is easy to follow.
  const Eigen::MatrixXd x1 = (Eigen::MatrixXd(3, 1) << 0.0, 0.3, -1.2).finished();
  const Eigen::MatrixXd x2 = (Eigen::MatrixXd(4, 1) << 1.0, 0.3, 2.5, -0.7).finished();
  const Eigen::VectorXd y = Eigen::VectorXd::Zero(3);
  const double r1 = 0.0, r2 = 0.7;  // natural: log 2 and softplus(0.7)
  const double a = std::log(2.0), b = std::log1p(std::exp(0.7));
  EXPECT_DOUBLE_EQ(Softplus(0.0), a);

  struct Case {
    const char* kernel;
    std::function<double(double)> k;  // of d (LIN: handled separately)
  };
  const std::vector<Case> cases = {
      {"SE", [&](double d) { return std::exp(-d * d / (2 * a * a)); }},
      {"MAT12", [&](double d) { return std::exp(-d / a); }},
      {"MAT32",
       [&](double d) { return (1 + std::sqrt(3.0) * d / a) * std::exp(-std::sqrt(3.0) * d / a); }},
      {"MAT52",
       [&](double d) {
         return (1 + std::sqrt(5.0) * d / a + 5 * d * d / (3 * a * a)) *
                std::exp(-std::sqrt(5.0) * d / a);
       }},
      {"PER",
       [&](double d) { return std::exp(-2 * std::pow(std::sin(kPi * d / b), 2) / (a * a)); }},
      {"RQ", [&](double d) { return std::pow(1 + d * d / (2 * b * a * a), -b); }},
      {"C", [&](double) { return a; }},
  };
  for (const Case& c : cases) {
    const GpModel model = MakeModel(Kernel(c.kernel), x1, y);
    Eigen::VectorXd raw = Eigen::VectorXd::Constant(model.num_free(), -1.0);
    raw(0) = r1;
    if (model.num_free() == 3) raw(1) = r2;  // PER.period / RQ.alpha
    const Eigen::MatrixXd k = model.CrossCovariance(raw, x1, x2);
    ASSERT_EQ(k.rows(), 3);
    ASSERT_EQ(k.cols(), 4);
    for (int i = 0; i < 3; ++i) {
      for (int j = 0; j < 4; ++j) {
        EXPECT_NEAR(k(i, j), c.k(std::abs(x1(i, 0) - x2(j, 0))), 1e-14)
            << c.kernel << " at (" << x1(i, 0) << ", " << x2(j, 0) << ")";
      }
    }
  }
  // Literal values: SE at d = 1 with ℓ = log 2; PER at d = p/4 with ℓ = 1 (raw log(e − 1)).
  {
    const GpModel se = MakeModel(Kernel("SE"), x1, y);
    const Eigen::MatrixXd one = Eigen::MatrixXd::Zero(1, 1), two = Eigen::MatrixXd::Ones(1, 1);
    EXPECT_NEAR(se.CrossCovariance(Eigen::Vector2d(0.0, 0.0), one, two)(0, 0), 0.353212828368,
                1e-11);  // exp(−1 / (2 log² 2))
    const GpModel per = MakeModel(Kernel("PER"), x1, y);
    const double raw_one = std::log(std::exp(1.0) - 1.0);
    const Eigen::MatrixXd quarter = Eigen::MatrixXd::Constant(1, 1, 0.25);
    EXPECT_NEAR(per.CrossCovariance(Eigen::Vector3d(raw_one, raw_one, 0.0), one, quarter)(0, 0),
                std::exp(-1.0), 1e-12);  // sin²(π/4) = ½
  }
  // LIN in one and two dimensions: v·x·x'.
  {
    const GpModel lin = MakeModel(Kernel("LIN"), x1, y);
    const Eigen::MatrixXd k = lin.CrossCovariance(Eigen::Vector2d(r2, 0.0), x1, x2);
    EXPECT_TRUE(k.isApprox(b * x1 * x2.transpose(), 1e-14));
    const Eigen::MatrixXd z1 = (Eigen::MatrixXd(2, 2) << 1.0, 2.0, -0.5, 3.0).finished();
    const Eigen::MatrixXd z2 = (Eigen::MatrixXd(3, 2) << 0.0, 1.0, 2.0, -1.0, 4.0, 4.0).finished();
    const GpModel lin2 = MakeModel(Kernel("LIN"), z1, Eigen::VectorXd::Zero(2));
    EXPECT_TRUE(lin2.CrossCovariance(Eigen::Vector2d(r2, 0.0), z1, z2)
                    .isApprox(b * z1 * z2.transpose(), 1e-14));
    // Euclidean distance over all columns for a stationary kernel without a dimension.
    const GpModel se2 = MakeModel(Kernel("SE"), z1, Eigen::VectorXd::Zero(2));
    const Eigen::MatrixXd kse = se2.CrossCovariance(Eigen::Vector2d(r1, 0.0), z1, z2);
    for (int i = 0; i < 2; ++i) {
      for (int j = 0; j < 3; ++j) {
        const double d2 = (z1.row(i) - z2.row(j)).squaredNorm();
        EXPECT_NEAR(kse(i, j), std::exp(-d2 / (2 * a * a)), 1e-14);
      }
    }
    // An active dimension reads only its column.
    const GpModel lin1 = MakeModel(Kernel("LIN[1]"), z1, Eigen::VectorXd::Zero(2));
    EXPECT_TRUE(lin1.CrossCovariance(Eigen::Vector2d(r2, 0.0), z1, z2)
                    .isApprox(b * z1.col(1) * z2.col(1).transpose(), 1e-14));
  }
}

TEST(GpModelCovarianceTest, MatchesTheReferenceImplementationOnRectangularInputs) {
  const Data data = Random2D();
  const Eigen::MatrixXd x_new = Random2D(12, 7).x;
  for (const char* text : {"C*SE+C*SE*PER+C*RQ+C*SE", "(SE+LIN)*MAT32", "SE[0]*LIN[1]",
                           "MAT12[0]+MAT52[1]*RQ", "LIN*LIN+PER[1]"}) {
    const KernelExpr kernel = Kernel(text);
    const GpModel model = MakeModel(kernel, data.x, data.y);
    int redrawn = 0;
    for (const Eigen::VectorXd& raw : PriorDraws(model, 5, 17, &redrawn)) {
      const Eigen::MatrixXd k = model.CrossCovariance(raw, data.x, x_new);
      const Eigen::MatrixXd ref = RefCovariance(kernel, RefNatural(model, raw), data.x, x_new);
      EXPECT_LE((k - ref).cwiseAbs().maxCoeff(), 1e-12 * std::max(1.0, ref.cwiseAbs().maxCoeff()))
          << text;
      // k(x1, x2) = k(x2, x1)ᵀ.
      EXPECT_LE((model.CrossCovariance(raw, x_new, data.x) - k.transpose()).cwiseAbs().maxCoeff(),
                1e-13 * std::max(1.0, ref.cwiseAbs().maxCoeff()));
      // Same inputs on both sides: the evaluator computes the upper triangle and mirrors it.
      const Eigen::MatrixXd square = model.CrossCovariance(raw, data.x, data.x);
      const Eigen::MatrixXd square_ref =
          RefCovariance(kernel, RefNatural(model, raw), data.x, data.x);
      EXPECT_LE((square - square_ref).cwiseAbs().maxCoeff(),
                1e-12 * std::max(1.0, square_ref.cwiseAbs().maxCoeff()))
          << text;
    }
  }
}

// Free raw vector of `model` from raw values by parameter name.
Eigen::VectorXd RawByName(const GpModel& model, const std::map<std::string, double>& raw) {
  const std::vector<std::string> names = model.free_names();
  Eigen::VectorXd out(names.size());
  for (size_t k = 0; k < names.size(); ++k) {
    auto it = raw.find(names[k]);
    EXPECT_TRUE(it != raw.end()) << "no raw value for " << names[k];
    out(k) = it == raw.end() ? 0.0 : it->second;
  }
  return out;
}

KernelExpr Unsorted(KernelExpr::Kind kind, std::vector<KernelExpr> operands) {
  KernelExpr e;
  e.kind = kind;
  e.operands = std::move(operands);
  return e;
}

TEST(GpModelCovarianceTest, SumIsSumAndProductIsElementwiseProductInEitherOrder) {
  const Data data = Random2D();
  const Eigen::MatrixXd x2 = Random2D(5, 6).x;
  std::mt19937_64 rng(21);
  std::normal_distribution<double> normal(0.0, 1.0);
  const std::vector<std::pair<std::string, std::string>> pairs = {
      {"SE", "PER"},  {"LIN", "RQ"},       {"MAT12", "MAT52"},
      {"C", "MAT32"}, {"SE[0]", "LIN[1]"}, {"PER+C", "RQ*LIN"}};
  for (const auto& [ta, tb] : pairs) {
    SCOPED_TRACE(ta + " with " + tb);
    const KernelExpr a = Kernel(ta), b = Kernel(tb);
    const GpModel ma = MakeModel(a, data.x, data.y), mb = MakeModel(b, data.x, data.y);
    // One raw value per name; the operands have disjoint names.
    std::map<std::string, double> raw;
    for (const std::string& n : ma.free_names()) raw[n] = normal(rng);
    for (const std::string& n : mb.free_names()) raw[n] = normal(rng);
    const Eigen::MatrixXd ka = ma.CrossCovariance(RawByName(ma, raw), data.x, x2);
    const Eigen::MatrixXd kb = mb.CrossCovariance(RawByName(mb, raw), data.x, x2);
    for (KernelExpr::Kind kind : {KernelExpr::Kind::kSum, KernelExpr::Kind::kProduct}) {
      const Eigen::MatrixXd expected = kind == KernelExpr::Kind::kSum
                                           ? Eigen::MatrixXd(ka + kb)
                                           : Eigen::MatrixXd(ka.cwiseProduct(kb));
      const KernelExpr canonical =
          kind == KernelExpr::Kind::kSum ? KernelExpr::Sum({a, b}) : KernelExpr::Product({a, b});
      for (const KernelExpr& e : {canonical, Unsorted(kind, {a, b}), Unsorted(kind, {b, a})}) {
        const GpModel m = MakeModel(e, data.x, data.y);
        const Eigen::MatrixXd k = m.CrossCovariance(RawByName(m, raw), data.x, x2);
        EXPECT_LE((k - expected).cwiseAbs().maxCoeff(),
                  1e-13 * std::max(1.0, expected.cwiseAbs().maxCoeff()))
            << ToString(e);
      }
    }
  }
}

TEST(GpModelCovarianceTest, RepeatedBaseKernelsAreIndependentCopies) {
  const Data data = Random1D();
  const GpModel one = MakeModel(Kernel("SE"), data.x, data.y);
  const GpModel sum = MakeModel(Kernel("SE+SE"), data.x, data.y);
  const GpModel product = MakeModel(Kernel("SE*SE"), data.x, data.y);
  EXPECT_THAT(sum.free_names(), ElementsAre("SE#1.lengthscale", "SE#2.lengthscale", "noise"));
  const double r1 = -0.4, r2 = 1.3;
  const Eigen::MatrixXd k1 = one.CrossCovariance(Eigen::Vector2d(r1, 0.0), data.x, data.x);
  const Eigen::MatrixXd k2 = one.CrossCovariance(Eigen::Vector2d(r2, 0.0), data.x, data.x);
  EXPECT_TRUE(
      sum.CrossCovariance(Eigen::Vector3d(r1, r2, 0.0), data.x, data.x).isApprox(k1 + k2, 1e-14));
  EXPECT_TRUE(product.CrossCovariance(Eigen::Vector3d(r1, r2, 0.0), data.x, data.x)
                  .isApprox(k1.cwiseProduct(k2), 1e-14));
  // SE·SE with lengthscales ℓ₁, ℓ₂ is SE with 1/ℓ² = 1/ℓ₁² + 1/ℓ₂².
  const double l1 = Softplus(r1), l2 = Softplus(r2);
  const double l = 1.0 / std::sqrt(1.0 / (l1 * l1) + 1.0 / (l2 * l2));
  EXPECT_TRUE(
      product.CrossCovariance(Eigen::Vector3d(r1, r2, 0.0), data.x, data.x)
          .isApprox(one.CrossCovariance(Eigen::Vector2d(InverseSoftplus(l), 0.0), data.x, data.x),
                    1e-12));
}

TEST(GpModelCovarianceTest, GroupingOfProductsAndSumsIsIrrelevant) {
  const Data data = Random1D();
  const KernelExpr se = KernelExpr::Base(BaseKernel::kSE), per = KernelExpr::Base(BaseKernel::kPER),
                   lin = KernelExpr::Base(BaseKernel::kLIN);
  const std::map<std::string, double> raw = {{"SE.lengthscale", 0.3},
                                             {"PER.lengthscale", -0.2},
                                             {"PER.period", 0.9},
                                             {"LIN.variance", -1.1},
                                             {"noise", -2.0}};
  for (KernelExpr::Kind kind : {KernelExpr::Kind::kSum, KernelExpr::Kind::kProduct}) {
    const KernelExpr flat = Unsorted(kind, {se, per, lin});
    const KernelExpr left = Unsorted(kind, {Unsorted(kind, {lin, se}), per});
    const KernelExpr right = Unsorted(kind, {per, Unsorted(kind, {se, lin})});
    const GpModel m0 = MakeModel(flat, data.x, data.y);
    const Eigen::MatrixXd k0 = m0.CrossCovariance(RawByName(m0, raw), data.x, data.x);
    double l0 = *m0.LogLikelihood(RawByName(m0, raw));
    for (const KernelExpr& e : {left, right}) {
      const GpModel m = MakeModel(e, data.x, data.y);
      EXPECT_TRUE(m.CrossCovariance(RawByName(m, raw), data.x, data.x).isApprox(k0, 1e-13));
      // The Hessian, permuted into name order, is the same too.
      absl::StatusOr<LikelihoodHessian> h0 = m0.LogLikelihoodHessian(RawByName(m0, raw));
      absl::StatusOr<LikelihoodHessian> h = m.LogLikelihoodHessian(RawByName(m, raw));
      ASSERT_TRUE(h0.ok() && h.ok());
      EXPECT_NEAR(h->value, l0, 1e-11 * std::max(1.0, std::abs(l0)));
      const std::vector<std::string> n0 = m0.free_names(), n = m.free_names();
      for (size_t i = 0; i < n.size(); ++i) {
        const size_t pi = std::find(n0.begin(), n0.end(), n[i]) - n0.begin();
        ASSERT_LT(pi, n0.size());
        EXPECT_NEAR(h->gradient(i), h0->gradient(pi), 1e-9);
        for (size_t j = 0; j < n.size(); ++j) {
          const size_t pj = std::find(n0.begin(), n0.end(), n[j]) - n0.begin();
          EXPECT_NEAR(h->hessian(i, j), h0->hessian(pi, pj),
                      1e-9 * std::max(1.0, std::abs(h0->hessian(pi, pj))));
        }
      }
    }
  }
}

// ---------------------------------------------------------------------------------------------
// Likelihood value, noise floor, fixed parameters.

TEST(GpModelLikelihoodTest, ValueMatchesIndependentCholeskyForHandPickedParameters) {
  const Data data = Random1D(13, 25);
  // SE with ℓ = softplus(0.2), σ² = 1e-4 + softplus(−1.5), K written out by hand.
  const GpModel model = MakeModel(Kernel("SE"), data.x, data.y);
  const double l = std::log1p(std::exp(0.2)), s2 = 1e-4 + std::log1p(std::exp(-1.5));
  const int n = 25;
  Eigen::MatrixXd k(n, n);
  for (int i = 0; i < n; ++i) {
    for (int j = 0; j < n; ++j) {
      const double d = data.x(i, 0) - data.x(j, 0);
      k(i, j) = std::exp(-d * d / (2 * l * l)) + (i == j ? s2 : 0.0);
    }
  }
  const absl::StatusOr<double> value = model.LogLikelihood(Eigen::Vector2d(0.2, -1.5));
  ASSERT_TRUE(value.ok()) << value.status();
  EXPECT_NEAR(*value, RefLogLikelihood(k, data.y), 1e-10 * std::abs(*value));
  // Total, not divided by n: doubling the data set (y and x repeated far apart) doubles it.
  Data twice;
  twice.x.resize(2 * n, 1);
  twice.y.resize(2 * n);
  twice.x << data.x, (data.x.array() + 1000.0).matrix();
  twice.y << data.y, data.y;
  const GpModel model2 = MakeModel(Kernel("SE"), twice.x, twice.y);
  EXPECT_NEAR(*model2.LogLikelihood(Eigen::Vector2d(0.2, -1.5)), 2.0 * *value,
              1e-9 * std::abs(*value));
}

TEST(GpModelLikelihoodTest, NoiseFloorIsOneInTenThousandPlusSoftplus) {
  const Data data = Random1D();
  const GpModel model = MakeModel(Kernel("SE"), data.x, data.y);
  for (double r : {-60.0, -36.0, -30.0, -5.0, 0.0, 2.0, 34.0, 36.0, 80.0}) {
    const double expected = 1e-4 + (r > 30 ? r + std::log1p(std::exp(-r)) : RefSoftplus(r));
    EXPECT_NEAR(model.NoiseVariance(Eigen::Vector2d(0.0, r)), expected, 1e-15 * expected) << r;
    EXPECT_NEAR(model.NaturalValues(Eigen::Vector2d(0.0, r)).at("noise"), expected,
                1e-15 * expected);
  }
  EXPECT_GE(model.NoiseVariance(Eigen::Vector2d(0.0, -1000.0)), 1e-4);
  // With the kernel switched off (C → 0), the likelihood is that of white noise 1e-4 + softplus(r).
  const GpModel white = MakeModel(Kernel("C"), data.x, data.y);
  for (double r : {-40.0, -3.0, 1.0}) {
    const double s2 = 1e-4 + RefSoftplus(r);
    const double expected = -0.5 * data.y.squaredNorm() / s2 - 0.5 * data.y.size() * std::log(s2) -
                            0.5 * data.y.size() * kLog2Pi;
    EXPECT_NEAR(*white.LogLikelihood(Eigen::Vector2d(-80.0, r)), expected,
                1e-9 * std::abs(expected))
        << r;
  }
  // Natural values of the kernel parameters are plain softplus.
  EXPECT_DOUBLE_EQ(model.NaturalValues(Eigen::Vector2d(0.3, 0.0)).at("SE.lengthscale"),
                   RefSoftplus(0.3));
}

TEST(GpModelLikelihoodTest, SoftplusHelpers) {
  for (double r : {-50.0, -35.5, -34.5, -3.0, 0.0, 1.0, 34.5, 35.5, 200.0}) {
    const double expected = r > 30 ? r + std::log1p(std::exp(-r)) : RefSoftplus(r);
    EXPECT_NEAR(Softplus(r), expected, 1e-15 * expected) << r;
    EXPECT_NEAR(Sigmoid(r), 1.0 / (1.0 + std::exp(-r)), 1e-16) << r;
    if (r > -35.0) {
      EXPECT_NEAR(InverseSoftplus(Softplus(r)), r, 1e-9 * std::max(1.0, std::abs(r)));
    }
  }
  EXPECT_NEAR(InverseSoftplus(1e-12), std::log(1e-12), 1e-9);
}

TEST(GpModelFixedTest, FixedParametersReduceUAndGradientMatchesOverTheFreeOnes) {
  const Data data = Random1D();
  const KernelExpr kernel = Kernel("SE*PER+LIN");
  const GpModel full = MakeModel(kernel, data.x, data.y);
  HyperparameterSettings settings;
  settings.fixed_values = {{"PER.period", 1.3}, {"noise", 0.05}};
  const GpModel fixed = MakeModel(kernel, data.x, data.y, settings);
  EXPECT_EQ(full.num_free(), 5);
  EXPECT_EQ(fixed.num_free(), 3);
  EXPECT_THAT(fixed.free_names(), ElementsAre("PER.lengthscale", "SE.lengthscale", "LIN.variance"));
  EXPECT_EQ(fixed.prior_mean().size(), 3);
  EXPECT_EQ(fixed.parameters().size(), 5u);
  const Eigen::VectorXd free_raw = Eigen::Vector3d(-0.3, 0.4, -1.0);
  EXPECT_NEAR(fixed.NoiseVariance(free_raw), 0.05, 1e-15);
  EXPECT_NEAR(fixed.NaturalValues(free_raw).at("PER.period"), 1.3, 1e-14);
  // Same likelihood as the full model at the corresponding full raw vector.
  const Eigen::VectorXd expanded = fixed.ExpandRaw(free_raw);
  ASSERT_EQ(expanded.size(), 5);
  EXPECT_NEAR(Softplus(expanded(1)), 1.3, 1e-14);
  EXPECT_NEAR(*fixed.LogLikelihood(free_raw), *full.LogLikelihood(expanded), 1e-10);
  const FdError e = CheckAgainstFiniteDifferences(fixed, free_raw);
  EXPECT_LE(e.gradient, kGradientTolerance);
  EXPECT_LE(e.hessian, kHessianTolerance);
  // The free part of the full model's gradient equals the fixed model's gradient.
  Eigen::VectorXd g_full, g_fixed;
  ASSERT_TRUE(full.LogLikelihood(expanded, &g_full).ok());
  ASSERT_TRUE(fixed.LogLikelihood(free_raw, &g_fixed).ok());
  EXPECT_NEAR(g_fixed(0), g_full(0), 1e-10);
  EXPECT_NEAR(g_fixed(1), g_full(2), 1e-10);
  EXPECT_NEAR(g_fixed(2), g_full(3), 1e-10);
  // Fixed parameters carry no prior term.
  Eigen::VectorXd prior_gradient;
  EXPECT_EQ(fixed.LogPrior(free_raw, &prior_gradient), fixed.LogPrior(free_raw));
  EXPECT_EQ(prior_gradient.size(), 3);

  // Everything fixed: u = 0, the empty raw vector works.
  settings.fixed_values = {{"PER.period", 1.3},
                           {"PER.lengthscale", 0.8},
                           {"SE.lengthscale", 1.1},
                           {"LIN.variance", 0.4},
                           {"noise", 0.05}};
  const GpModel all = MakeModel(kernel, data.x, data.y, settings);
  EXPECT_EQ(all.num_free(), 0);
  Eigen::VectorXd g0;
  absl::StatusOr<double> v0 = all.LogLikelihood(Eigen::VectorXd(0), &g0);
  ASSERT_TRUE(v0.ok()) << v0.status();
  EXPECT_EQ(g0.size(), 0);
  EXPECT_TRUE(std::isfinite(*v0));
  absl::StatusOr<LikelihoodHessian> h0 = all.LogLikelihoodHessian(Eigen::VectorXd(0));
  ASSERT_TRUE(h0.ok()) << h0.status();
  EXPECT_EQ(h0->hessian.size(), 0);
  EXPECT_DOUBLE_EQ(h0->value, *v0);
  EXPECT_EQ(all.LogPrior(Eigen::VectorXd(0)), 0.0);
}

// ---------------------------------------------------------------------------------------------
// Names and errors.

TEST(GpModelNamesTest, ParameterNames) {
  const Data d1 = Random1D();
  const Data d2 = Random2D();
  EXPECT_THAT(MakeModel(Kernel("SE"), d1.x, d1.y).free_names(),
              ElementsAre("SE.lengthscale", "noise"));
  EXPECT_THAT(MakeModel(Kernel("SE+SE"), d1.x, d1.y).free_names(),
              ElementsAre("SE#1.lengthscale", "SE#2.lengthscale", "noise"));
  EXPECT_THAT(MakeModel(Kernel("PER"), d1.x, d1.y).free_names(),
              ElementsAre("PER.lengthscale", "PER.period", "noise"));
  EXPECT_THAT(MakeModel(Kernel("RQ"), d1.x, d1.y).free_names(),
              ElementsAre("RQ.lengthscale", "RQ.alpha", "noise"));
  EXPECT_THAT(MakeModel(Kernel("C"), d1.x, d1.y).free_names(), ElementsAre("C.constant", "noise"));
  const std::vector<std::string> names = MakeModel(Kernel("SE[0]*LIN[1]"), d2.x, d2.y).free_names();
  EXPECT_THAT(names,
              ::testing::UnorderedElementsAre("SE[0].lengthscale", "LIN[1].variance", "noise"));
  EXPECT_EQ(names.back(), "noise");
  // A dimensioned and an undimensioned copy are different labels; two LIN[1] are numbered.
  EXPECT_THAT(MakeModel(Kernel("LIN[1]+LIN[1]+LIN"), d2.x, d2.y).free_names(),
              ::testing::UnorderedElementsAre("LIN[1]#1.variance", "LIN[1]#2.variance",
                                              "LIN.variance", "noise"));
  // Mauna Loa: four constants, three squared exponentials, numbered in leaf order.
  const GpModel mauna = MakeModel(Kernel("C*SE + C*SE*PER + C*RQ + C*SE"), d1.x, d1.y);
  EXPECT_EQ(mauna.num_free(), 12);
  const std::vector<std::string> mauna_names = mauna.free_names();
  std::set<std::string> unique(mauna_names.begin(), mauna_names.end());
  EXPECT_EQ(unique.size(), 12u);
  for (const char* n : {"C#1.constant", "C#2.constant", "C#3.constant", "C#4.constant",
                        "SE#1.lengthscale", "SE#2.lengthscale", "SE#3.lengthscale",
                        "PER.lengthscale", "PER.period", "RQ.lengthscale", "RQ.alpha", "noise"}) {
    EXPECT_TRUE(unique.count(n)) << n;
  }
  // NaturalValues covers every parameter by name.
  EXPECT_EQ(mauna.NaturalValues(Eigen::VectorXd::Zero(12)).size(), 12u);
}

TEST(GpModelErrorsTest, UnknownOverrideNameIsInvalidArgument) {
  const Data data = Random1D();
  HyperparameterSettings settings;
  settings.prior_overrides["SE.lenghtscale"] = {0.0, 1.0};
  absl::StatusOr<GpModel> m = GpModel::Create(Kernel("SE"), data.x, data.y, settings);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("SE.lenghtscale"));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("SE.lengthscale"));  // lists valid

  settings = {};
  settings.fixed_values["SE.lengthscale"] = 1.0;  // the model is SE+SE: needs SE#1/SE#2
  m = GpModel::Create(Kernel("SE+SE"), data.x, data.y, settings);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("SE#1.lengthscale"));

  settings = {};
  settings.fixed_values["noise"] = 1e-4;  // not above the floor
  m = GpModel::Create(Kernel("SE"), data.x, data.y, settings);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m, StatusIs(absl::StatusCode::kInvalidArgument));
  settings = {};
  settings.fixed_values["SE.lengthscale"] = -1.0;
  EXPECT_THAT(GpModel::Create(Kernel("SE"), data.x, data.y, settings),
              StatusIs(absl::StatusCode::kInvalidArgument));
  settings = {};
  settings.prior_overrides["noise"] = {0.0, 0.0};
  EXPECT_THAT(GpModel::Create(Kernel("SE"), data.x, data.y, settings),
              StatusIs(absl::StatusCode::kInvalidArgument));
  settings = {};
  settings.prior_overrides["noise"] = {std::nan(""), 1.0};
  EXPECT_THAT(GpModel::Create(Kernel("SE"), data.x, data.y, settings),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

TEST(GpModelErrorsTest, KernelDimensionBeyondDataAndShapeMismatch) {
  const Data d1 = Random1D();
  absl::StatusOr<GpModel> m = GpModel::Create(Kernel("SE[0]*LIN[1]"), d1.x, d1.y);
  ASSERT_FALSE(m.ok());
  EXPECT_THAT(m, StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(std::string(m.status().message()), HasSubstr("1"));
  EXPECT_TRUE(GpModel::Create(Kernel("SE[0]"), d1.x, d1.y).ok());
  const Data d2 = Random2D();
  EXPECT_THAT(GpModel::Create(Kernel("PER[2]"), d2.x, d2.y),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(GpModel::Create(Kernel("SE"), d1.x, d1.y.head(5)),
              StatusIs(absl::StatusCode::kInvalidArgument));

  const GpModel model = MakeModel(Kernel("SE"), d1.x, d1.y);
  EXPECT_THAT(model.LogLikelihood(Eigen::VectorXd::Zero(3)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(model.LogLikelihoodHessian(Eigen::VectorXd::Zero(1)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(model.LogLikelihood(Eigen::Vector2d(std::nan(""), 0.0)),
              StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_THAT(model.LogLikelihood(Eigen::Vector2d(0.0, INFINITY)),
              StatusIs(absl::StatusCode::kInvalidArgument));
}

// ---------------------------------------------------------------------------------------------
// Near-singular covariances: duplicated inputs, noise fixed just above the floor, a huge constant.
// The covariance is then numerically rank-deficient; the model must either succeed (possibly with
// jitter, reported) with finite numbers or say FAILED_PRECONDITION — never produce NaN.

TEST(GpModelJitterTest, DuplicatePointsWithTinyNoiseNeverGiveNaN) {
  const int n = 16;
  Eigen::MatrixXd x(n, 1);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    x(i, 0) = static_cast<double>(i / 4);  // each input four times
    y(i) = std::sin(x(i, 0)) + 1e-3 * (i % 4);
  }
  HyperparameterSettings settings;
  settings.fixed_values["noise"] = 1.0001e-4;
  int jittered = 0, ok = 0;
  for (const char* text : {"C", "C*SE", "C*SE+C*LIN"}) {
    const GpModel model = MakeModel(Kernel(text), x, y, settings);
    for (double constant : {1.0, 1e4, 1e8, 1e12, 1e14, 1e16, 1e18}) {
      SCOPED_TRACE(::testing::Message() << text << " with C = " << constant);
      Eigen::VectorXd raw = Eigen::VectorXd::Constant(model.num_free(), 2.0);
      for (int k = 0; k < model.num_free(); ++k) {
        if (model.free_names()[k].rfind("C", 0) == 0) raw(k) = InverseSoftplus(constant);
      }
      Eigen::VectorXd gradient;
      absl::StatusOr<double> value = model.LogLikelihood(raw, &gradient);
      absl::StatusOr<LikelihoodHessian> hess = model.LogLikelihoodHessian(raw);
      EXPECT_EQ(value.ok(), hess.ok());
      if (value.ok()) {
        ++ok;
        EXPECT_TRUE(std::isfinite(*value));
        EXPECT_TRUE(gradient.allFinite());
        ASSERT_TRUE(hess.ok());
        EXPECT_TRUE(hess->hessian.allFinite());
        EXPECT_TRUE(hess->gradient.allFinite());
        EXPECT_GE(hess->jitter, 0.0);
        if (hess->jitter > 0) ++jittered;
      } else {
        EXPECT_THAT(value, StatusIs(absl::StatusCode::kFailedPrecondition)) << value.status();
        EXPECT_THAT(hess, StatusIs(absl::StatusCode::kFailedPrecondition)) << hess.status();
      }
    }
  }
  EXPECT_GT(ok, 0);
  std::cout << "jitter case: " << ok << " of 21 evaluations succeeded, " << jittered
            << " of them needed jitter\n";
  // Moderate constants need no jitter at all.
  const GpModel model = MakeModel(Kernel("C*SE"), x, y, settings);
  absl::StatusOr<LikelihoodHessian> h = model.LogLikelihoodHessian(Eigen::Vector2d(0.0, 0.5));
  ASSERT_TRUE(h.ok()) << h.status();
  EXPECT_EQ(h->jitter, 0.0);
}

// ---------------------------------------------------------------------------------------------
// More than 256 points: K and ∂K/∂r are evaluated in 64×64 tiles of the lower triangle (the
// small-n tests above all take the whole-matrix path). 300 points give full tiles, a 44-row
// edge tile and diagonal tiles of both sizes.

TEST(GpModelTiledTest, ValueGradientAndHessianMatchTheReferenceAndFiniteDifferences) {
  struct Case {
    const char* kernel;
    bool two_dimensional;
  };
  HyperparameterSettings fixed_period;  // a fixed parameter inside the tiles' kernel tree
  fixed_period.fixed_values["PER.period"] = 0.7;
  for (const Case& c : {Case{"SE+LIN", false}, Case{"C*SE*PER+C*MAT32", false},
                        Case{"SE[0]*LIN[1]+RQ", true}, Case{"C*MAT12+MAT52[1]", true}}) {
    SCOPED_TRACE(c.kernel);
    const Data data = c.two_dimensional ? Random2D(31, 300) : Random1D(29, 300);
    const KernelExpr kernel = Kernel(c.kernel);
    const bool has_period = std::string_view(c.kernel).find("PER") != std::string_view::npos;
    const GpModel model =
        MakeModel(kernel, data.x, data.y, has_period ? fixed_period : HyperparameterSettings{});
    if (has_period) {
      ASSERT_EQ(model.num_free() + 1, static_cast<int>(model.parameters().size()));
    }
    int redrawn = 0;
    const std::vector<Eigen::VectorXd> draws =
        PriorDraws(model, 2, 4000 + Fnv1a(c.kernel) % 1000, &redrawn);
    for (const Eigen::VectorXd& raw : draws) {
      SCOPED_TRACE(::testing::Message() << "raw = " << raw.transpose());
      CheckDraw(model, kernel, data, raw);
    }
  }
}

// The Hessian in pieces (gp_model.cc LogLikelihoodHessian): small forced tiles and panels split
// a 150-point problem into 16×16 kernel tiles, row blocks of one or a few tiles (at most
// n/(2k) rows for k kernel parameters) and panels of 40 rows (the last one 30, not a multiple
// of the tile), so every code path of the pieces runs: panels left of the diagonal, partial
// edge tiles and blocks, the W terms of the last panel. The result must match finite differences of
// the gradient, and the Hessian made as one piece (the whole matrix as one tile and one panel) to
// rounding.
void CheckHessianInPieces(const char* kernel_text, int min_parameters, uint64_t seed) {
  SCOPED_TRACE(kernel_text);
  const Data data = Random1D(seed, 150);
  const KernelExpr kernel = Kernel(kernel_text);
  const GpModel model = MakeModel(kernel, data.x, data.y);
  ASSERT_GE(model.num_free(), min_parameters);
  HessianTiling pieces;
  pieces.tile = 16;
  pieces.panel_rows = 40;
  HessianTiling one_piece;
  one_piece.tile = 150;
  one_piece.panel_rows = 150;
  int redrawn = 0;
  for (const Eigen::VectorXd& raw : PriorDraws(model, 3, seed, &redrawn)) {
    SCOPED_TRACE(::testing::Message() << "raw = " << raw.transpose());
    const FdError e = CheckAgainstFiniteDifferences(model, raw, pieces);
    EXPECT_TRUE(e.finite);
    EXPECT_LE(e.gradient, kGradientTolerance);
    EXPECT_LE(e.hessian, kHessianTolerance);
    const absl::StatusOr<LikelihoodHessian> split = model.LogLikelihoodHessian(raw, {}, pieces);
    const absl::StatusOr<LikelihoodHessian> whole = model.LogLikelihoodHessian(raw, {}, one_piece);
    ASSERT_TRUE(split.ok() && whole.ok());
    const double scale = std::max(1.0, whole->hessian.cwiseAbs().maxCoeff());
    EXPECT_LE((split->hessian - whole->hessian).cwiseAbs().maxCoeff(), 1e-9 * scale)
        << "split\n"
        << split->hessian << "\nwhole\n"
        << whole->hessian;
    EXPECT_LE((split->gradient - whole->gradient).cwiseAbs().maxCoeff(),
              1e-10 * std::max(1.0, whole->gradient.cwiseAbs().maxCoeff()));
    EXPECT_EQ(split->value, whole->value);
  }
}

TEST(GpModelTiledHessianTest, ProductWithAPeriodicFactorMatchesFiniteDifferencesInPieces) {
  CheckHessianInPieces("C*SE*PER", 5, 41);
}

TEST(GpModelTiledHessianTest, SumOfTenParametersMatchesFiniteDifferencesInPieces) {
  CheckHessianInPieces("C*SE + C*SE*PER + C*RQ", 7, 43);
}

TEST(GpModelTiledHessianTest, DefaultPiecesAtSixHundredPointsMatchOnePiece) {
  // Above 256 points the defaults take 64×64 tiles and panels of a quarter of the rows (SE+LIN:
  // u = 3, so the 2 n² budget allows more): four panels, 256-row blocks.
  const Data data = Random1D(47, 600);
  const GpModel model = MakeModel(Kernel("C*SE + LIN"), data.x, data.y);
  HessianTiling one_piece;
  one_piece.tile = 600;
  one_piece.panel_rows = 600;
  int redrawn = 0;
  for (const Eigen::VectorXd& raw : PriorDraws(model, 1, 47, &redrawn)) {
    const absl::StatusOr<LikelihoodHessian> split = model.LogLikelihoodHessian(raw);
    const absl::StatusOr<LikelihoodHessian> whole = model.LogLikelihoodHessian(raw, {}, one_piece);
    ASSERT_TRUE(split.ok() && whole.ok());
    const double scale = std::max(1.0, whole->hessian.cwiseAbs().maxCoeff());
    EXPECT_LE((split->hessian - whole->hessian).cwiseAbs().maxCoeff(), 1e-9 * scale);
  }
}

TEST(GpModelTiledHessianTest, NegativeSizesAreInvalidArguments) {
  const Data data = Random1D(3);
  const GpModel model = MakeModel(Kernel("SE"), data.x, data.y);
  HessianTiling tiling;
  tiling.tile = -1;
  EXPECT_THAT(model.LogLikelihoodHessian(Eigen::Vector2d(0.0, 0.0), {}, tiling),
              StatusIs(absl::StatusCode::kInvalidArgument));
  tiling = {};
  tiling.panel_rows = -5;
  const absl::Status status =
      model.LogLikelihoodHessian(Eigen::Vector2d(0.0, 0.0), {}, tiling).status();
  EXPECT_EQ(status.code(), absl::StatusCode::kInvalidArgument);
  EXPECT_NE(status.message().find("panel_rows"), std::string::npos) << status;
}

TEST(GpModelTiledTest, JitterRetryRemakesTheMatrixFromItsTiles) {
  // 300 points on 75 distinct inputs with the noise pinned to its floor: C*SE with a large
  // constant is singular to rounding and needs jitter, which the tiled path adds after making
  // K again from its tiles (dpotrf destroyed the first attempt). The value must be that of
  // K + (σ² + jitter)·I, computed independently.
  const int n = 300;
  Eigen::MatrixXd x(n, 1);
  Eigen::VectorXd y(n);
  for (int i = 0; i < n; ++i) {
    x(i, 0) = 0.04 * static_cast<double>(i / 4);
    y(i) = std::sin(3.0 * x(i, 0)) + 1e-3 * (i % 4);
  }
  HyperparameterSettings settings;
  settings.fixed_values["noise"] = 1.0001e-4;
  const KernelExpr kernel = Kernel("C*SE");
  const GpModel model = MakeModel(kernel, x, y, settings);
  int jittered = 0;
  for (double constant : {1.0, 1e6, 1e8, 1e10, 1e12}) {
    SCOPED_TRACE(::testing::Message() << "C = " << constant);
    Eigen::VectorXd raw(model.num_free());
    for (int k = 0; k < model.num_free(); ++k) {
      raw(k) = model.free_names()[k] == "C.constant" ? InverseSoftplus(constant) : 0.5;
    }
    Eigen::VectorXd gradient;
    const absl::StatusOr<double> value = model.LogLikelihood(raw, &gradient);
    const absl::StatusOr<LikelihoodHessian> hess = model.LogLikelihoodHessian(raw);
    ASSERT_EQ(value.ok(), hess.ok());
    if (!value.ok()) {
      EXPECT_THAT(value, StatusIs(absl::StatusCode::kFailedPrecondition)) << value.status();
      continue;
    }
    EXPECT_TRUE(std::isfinite(*value));
    EXPECT_TRUE(gradient.allFinite());
    EXPECT_EQ(hess->value, *value);
    if (hess->jitter > 0) ++jittered;
    std::map<std::string, double> natural = RefNatural(model, raw);
    natural["C.constant"] = constant;  // softplus(r) = r here; the reference's log1p(e^r) overflows
    Eigen::MatrixXd k = RefCovariance(kernel, natural, x, x);
    k.diagonal().array() += natural.at("noise") + hess->jitter;
    // Eigen's LLT of the same matrix can fail where dpotrf did not; the eigendecomposition
    // gives log det and yᵀK⁻¹y of a matrix this close to singular reliably.
    const Eigen::SelfAdjointEigenSolver<Eigen::MatrixXd> eig(k);
    ASSERT_GT(eig.eigenvalues().minCoeff(), 0.0);
    const Eigen::VectorXd projected = eig.eigenvectors().transpose() * y;
    const double reference = -0.5 * (projected.array().square() / eig.eigenvalues().array()).sum() -
                             0.5 * eig.eigenvalues().array().log().sum() -
                             0.5 * n * std::log(2.0 * M_PI);
    // Condition numbers up to ~1e12 here: the two computations agree to ~1e-5 relative.
    EXPECT_LE(std::abs(*value - reference) / std::max(1.0, std::abs(reference)), 1e-4)
        << *value << " vs " << reference << " (jitter " << hess->jitter << ")";
  }
  EXPECT_GT(jittered, 0);
}

// The likelihood asks its poll between the blocks of the factorisation and the inverse and
// between columns of the gradient's tiles (issue 33: at n = 10,000 a cancelled fit held its
// worker for a whole evaluation). A poll that never stops changes nothing, bit for bit; one that
// stops ends the evaluation with its error.
TEST(GpModelCancellationTest, LikelihoodStopsWhenItsPollDoes) {
  absl::StatusOr<Dataset> weekly = LoadCsvFile(std::string(GPSEL_DATA_DIR) + "/co2_weekly.csv");
  ASSERT_TRUE(weekly.ok()) << weekly.status();
  const int n = 1100;  // above the blocked size (core/linalg.h), tiled gradient
  const Eigen::VectorXd y = weekly->y.head(n).array() - weekly->y.head(n).mean();
  const GpModel model = MakeModel(Kernel("C*SE + C*PER"), weekly->x.topRows(n), y);
  const Eigen::VectorXd raw = model.prior_mean();
  Eigen::VectorXd plain_gradient;
  absl::StatusOr<double> plain = model.LogLikelihood(raw, &plain_gradient);
  ASSERT_TRUE(plain.ok()) << plain.status();
  int polls = 0;
  Eigen::VectorXd polled_gradient;
  absl::StatusOr<double> polled =
      model.LogLikelihood(raw, &polled_gradient, [&](const Progress& p) {
        EXPECT_TRUE(p.poll_only);
        ++polls;
        return absl::OkStatus();
      });
  ASSERT_TRUE(polled.ok()) << polled.status();
  EXPECT_EQ(*polled, *plain);
  EXPECT_EQ(polled_gradient, plain_gradient);
  // 5 blocks of the factorisation, the inverse's blocks, 18 columns of tiles.
  EXPECT_GE(polls, 5 + 10 + 18);
  for (int stop_at : {1, 5, polls - 3}) {
    int seen = 0;
    Eigen::VectorXd gradient;
    absl::StatusOr<double> stopped = model.LogLikelihood(raw, &gradient, [&](const Progress&) {
      return ++seen >= stop_at ? absl::DeadlineExceededError("late") : absl::OkStatus();
    });
    EXPECT_THAT(stopped, StatusIs(absl::StatusCode::kDeadlineExceeded)) << "stop at " << stop_at;
    EXPECT_EQ(seen, stop_at) << "asked again after it said stop";
  }
}

}  // namespace
}  // namespace gpsel
