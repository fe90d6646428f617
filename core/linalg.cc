// LAPACK-backed SPD factorisation (dpotrf/dpotrs/dpotri from serial OpenBLAS).
#include "core/linalg.h"

#include <cmath>
#include <cstddef>

#include "absl/strings/str_cat.h"

extern "C" {
// Fortran LAPACK; the trailing size_t is gfortran's hidden length of the character argument.
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t);
void dpotrs_(const char* uplo, const int* n, const int* nrhs, const double* a, const int* lda,
             double* b, const int* ldb, int* info, size_t);
void dpotri_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t);
}

namespace gpsel {

absl::Status SpdFactorization::Compute(const Eigen::MatrixXd& matrix) {
  const int n = static_cast<int>(matrix.rows());
  const double mean_diagonal = matrix.diagonal().mean();
  if (!std::isfinite(mean_diagonal)) {
    return absl::FailedPreconditionError("covariance matrix has non-finite entries");
  }
  static constexpr double kJitters[] = {0.0, 1e-10, 1e-8, 1e-6};
  for (double relative : kJitters) {
    factor_ = matrix;
    jitter_ = relative * std::abs(mean_diagonal);
    if (jitter_ > 0) factor_.diagonal().array() += jitter_;
    int info = 0;
    dpotrf_("L", &n, factor_.data(), &n, &info, 1);
    if (info == 0) return absl::OkStatus();
    if (info < 0) return absl::InternalError(absl::StrCat("dpotrf: bad argument ", -info));
  }
  return absl::FailedPreconditionError(
      "covariance matrix is not positive definite even with jitter 1e-6 × mean diagonal");
}

double SpdFactorization::LogDeterminant() const {
  return 2.0 * factor_.diagonal().array().log().sum();
}

Eigen::MatrixXd SpdFactorization::Solve(const Eigen::MatrixXd& rhs) const {
  Eigen::MatrixXd x = rhs;
  const int n = static_cast<int>(factor_.rows());
  const int nrhs = static_cast<int>(rhs.cols());
  int info = 0;
  dpotrs_("L", &n, &nrhs, factor_.data(), &n, x.data(), &n, &info, 1);
  return x;
}

Eigen::VectorXd SpdFactorization::Solve(const Eigen::VectorXd& rhs) const {
  return Solve(Eigen::MatrixXd(rhs)).col(0);
}

Eigen::MatrixXd SpdFactorization::Inverse() const {
  Eigen::MatrixXd inverse = factor_;
  const int n = static_cast<int>(factor_.rows());
  int info = 0;
  dpotri_("L", &n, inverse.data(), &n, &info, 1);
  inverse.triangularView<Eigen::StrictlyUpper>() = inverse.transpose();
  return inverse;
}

}  // namespace gpsel
