// Dense symmetric positive-definite algebra on LAPACK (OpenBLAS): Cholesky with jitter
// escalation, solves, log-determinant and the inverse from the factor (dpotri), so that no
// explicit inverse is formed where a solve does.
#ifndef GPSEL_CORE_LINALG_H_
#define GPSEL_CORE_LINALG_H_

#include <Eigen/Dense>

#include "absl/status/status.h"

namespace gpsel {

class SpdFactorization {
 public:
  // Factorises `matrix` (copied) as L Lᵀ. When it is not numerically positive definite, retries
  // with diagonal jitter 1e-10, 1e-8, 1e-6 times the mean diagonal; FAILED_PRECONDITION after.
  absl::Status Compute(const Eigen::MatrixXd& matrix);
  double jitter() const { return jitter_; }
  double LogDeterminant() const;
  Eigen::VectorXd Solve(const Eigen::VectorXd& rhs) const;
  Eigen::MatrixXd Solve(const Eigen::MatrixXd& rhs) const;
  // The full symmetric inverse (LAPACK dpotri on a copy of the factor).
  Eigen::MatrixXd Inverse() const;
  const Eigen::MatrixXd& lower() const { return factor_; }  // lower triangle holds L

 private:
  Eigen::MatrixXd factor_;
  double jitter_ = 0.0;
};

}  // namespace gpsel

#endif  // GPSEL_CORE_LINALG_H_
