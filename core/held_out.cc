// HeldOutLikelihoodAt; see held_out.h. Everything is computed on the model's (standardised) y
// scale and moved to the user's by the Jacobian of y = m + s·y_model: −n* log s.
#include "gpsel/core/held_out.h"

#include <cmath>
#include <utility>

#include "absl/strings/str_cat.h"
#include "gpsel/core/internal/prepared_model.h"
#include "gpsel/core/linalg.h"
#include "gpsel/core/status_macros.h"

namespace gpsel {
namespace {

// log N(r | 0, C) from C's factorisation: −½ rᵀC⁻¹r − ½ log|C| − (n/2) log 2π.
double GaussianLogDensity(const Eigen::VectorXd& residual, const SpdFactorization& cholesky) {
  const Eigen::VectorXd w =
      cholesky.lower().triangularView<Eigen::Lower>().solve(residual);
  return -0.5 * w.squaredNorm() - 0.5 * cholesky.LogDeterminant() -
         0.5 * static_cast<double>(residual.size()) * std::log(2.0 * M_PI);
}

}  // namespace

absl::Status ValidateTestData(const Dataset& test) {
  if (test.num_points() < 1) return absl::InvalidArgumentError("test: has no point");
  if (test.x.rows() != test.y.size()) {
    return absl::InvalidArgumentError(absl::StrCat("test: x has ", test.x.rows(),
                                                   " rows but y has ", test.y.size(), " values"));
  }
  if (!test.x.allFinite()) return absl::InvalidArgumentError("test.x: values must be finite");
  if (!test.y.allFinite()) return absl::InvalidArgumentError("test.y: values must be finite");
  return absl::OkStatus();
}

absl::Status ValidateTestData(const Dataset& test, const Dataset& train) {
  GPSEL_RETURN_IF_ERROR(ValidateTestData(test));
  if (test.num_dims() != train.num_dims()) {
    return absl::InvalidArgumentError(absl::StrCat("test: has ", test.num_dims(),
                                                   " input column(s), the training data has ",
                                                   train.num_dims()));
  }
  return absl::OkStatus();
}

absl::StatusOr<HeldOutLikelihood> HeldOutLikelihoodAt(
    const Dataset& train, const Dataset& test, const KernelExpr& kernel,
    const std::map<std::string, double>& natural_values, bool standardize) {
  GPSEL_RETURN_IF_ERROR(ValidateTestData(test, train));
  absl::StatusOr<PreparedModel> prepared =
      PrepareFixedModel(train, kernel, natural_values, standardize);
  if (!prepared.ok()) return prepared.status();
  const GpModel& model = prepared->model;
  const Standardization& standardization = prepared->standardization;
  const double scale = standardization.applied ? standardization.scale : 1.0;
  const double shift = standardization.applied ? standardization.mean : 0.0;
  const Eigen::VectorXd none(0);
  const double noise = model.NoiseVariance(none);
  const Eigen::Index m = test.num_points();
  const Eigen::VectorXd y_star = (test.y.array() - shift) / scale;
  const double jacobian = -static_cast<double>(m) * std::log(scale);

  HeldOutLikelihood out;
  out.num_test_points = static_cast<int>(m);

  // The prior at the test inputs: K̂** + σ̂²I.
  Eigen::MatrixXd k_test = model.CrossCovariance(none, test.x, test.x);
  k_test.diagonal().array() += noise;
  {
    SpdFactorization prior;
    GPSEL_RETURN_IF_ERROR(prior.Compute(k_test));
    out.test_log_likelihood = (GaussianLogDensity(y_star, prior) + jacobian) / m;
  }

  // The joint posterior predictive: Σ* + σ̂²I = (K̂** + σ̂²I) − K*ᵀ K⁻¹ K*.
  Eigen::MatrixXd k_train = model.CrossCovariance(none, train.x, train.x);
  k_train.diagonal().array() += noise;
  SpdFactorization cholesky;
  GPSEL_RETURN_IF_ERROR(cholesky.Compute(std::move(k_train)));
  const Eigen::MatrixXd k_cross = model.CrossCovariance(none, train.x, test.x);  // n × m
  const Eigen::MatrixXd v = cholesky.lower().triangularView<Eigen::Lower>().solve(k_cross);
  const Eigen::VectorXd mean = k_cross.transpose() * cholesky.Solve(model.y());
  Eigen::MatrixXd covariance = k_test;
  covariance.noalias() -= v.transpose() * v;
  SpdFactorization predictive;
  GPSEL_RETURN_IF_ERROR(predictive.Compute(std::move(covariance)));
  out.predictive_log_density = GaussianLogDensity(y_star - mean, predictive) + jacobian;
  return out;
}

}  // namespace gpsel
