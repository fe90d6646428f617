// Dense symmetric positive-definite algebra on LAPACK (OpenBLAS): Cholesky with jitter
// escalation, solves, log-determinant and the inverse from the factor (dpotri), so that no
// explicit inverse is formed where a solve does. From kPolledBlockPoints points on, the
// factorisation and the inverse run in blocks of that many columns and ask a ProgressCallback
// between blocks whether to stop (issue 33: at n = 10,000 one factorisation takes seconds, and
// a cancelled request held its worker for a whole likelihood evaluation).
#ifndef GPSEL_CORE_LINALG_H_
#define GPSEL_CORE_LINALG_H_

#include <Eigen/Dense>

#include "absl/functional/function_ref.h"
#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/progress.h"

namespace gpsel {

// Keeps freed n×n work matrices in the process heap instead of returning them to the kernel.
// A likelihood evaluation allocates a handful of n×n matrices (n = 200: 320 kB each, above
// glibc's 128 kB mmap threshold); by default each is mmap'ed, page-faulted in, zeroed by the
// kernel and unmapped again, which cost ~40 % of an evaluation at n = 200 (bench/RESULTS.md).
// Raises the mmap threshold to 64 MB and the trim threshold to 512 MB (mallopt). Process-wide,
// so it is called from the binaries' main(), not from the library; harmless to call twice.
void ConfigureAllocatorForLargeMatrices();

// Flush-to-zero / denormals-are-zero for the calling thread while in scope; restores the
// caller's floating-point mode after. Kernel entries such as exp(−d²/2ℓ²) many lengthscales
// apart (Mauna Loa: 43 years of data, ℓ of months) and the Cholesky entries computed from them
// fall below 1e-308, and every operation on such a subnormal costs a ~100-cycle microcode assist:
// a 521-point likelihood took 28 ms instead of ~5 (bench/RESULTS.md). Treating them as 0
// changes nothing the likelihood can see (the noise floor alone puts 1e-4 on the diagonal).
// Every numeric entry point of GpModel holds one; LAPACK runs in the caller's thread (one
// OpenBLAS thread per call), so it is covered too.
class FlushDenormalsScope {
 public:
  FlushDenormalsScope();
  ~FlushDenormalsScope();
  FlushDenormalsScope(const FlushDenormalsScope&) = delete;
  FlushDenormalsScope& operator=(const FlushDenormalsScope&) = delete;

 private:
  unsigned int saved_ = 0;
};

// Columns per block of the cancellable factorisation and inverse; matrices with fewer than
// 4 × this many rows (about 10 ms of work) are handed to LAPACK whole.
inline constexpr int kPolledBlockPoints = 256;
// Matrices from this many rows on are factorised, inverted and solved in polled blocks.
inline constexpr int kPolledMinPoints = 4 * kPolledBlockPoints;
// Columns per block of SolveLower at n rows: about 2^30 flops (n² per column, ~0.05 s on one
// core), at least one.
int PolledSolveColumns(int n);

class SpdFactorization {
 public:
  // Factorises the symmetric `matrix` (pass an rvalue to avoid the copy) as L Lᵀ. When it is not
  // numerically positive definite, retries with diagonal jitter 1e-10, 1e-8, 1e-6 times the mean
  // diagonal; FAILED_PRECONDITION after. `poll` is asked between blocks (see above); its error
  // is returned, and the factorisation is then unusable.
  absl::Status Compute(Eigen::MatrixXd matrix, const ProgressCallback& poll = {});
  // The same for an n×n symmetric matrix of which only the lower triangle (diagonal included)
  // is made: `fill_lower` sizes the matrix it is given to n×n (it may arrive empty, or holding
  // the previous attempt) and writes that triangle; the strict upper triangle is never read.
  // dpotrf overwrites the triangle, so each jitter retry calls `fill_lower` again: remaking the
  // matrix on the rare retry is cheaper than copying it on every call.
  absl::Status ComputeFromLower(int n, absl::FunctionRef<void(Eigen::MatrixXd*)> fill_lower,
                                const ProgressCallback& poll = {});
  double jitter() const { return jitter_; }
  double LogDeterminant() const;
  Eigen::VectorXd Solve(const Eigen::VectorXd& rhs) const;
  Eigen::MatrixXd Solve(const Eigen::MatrixXd& rhs) const;
  // L⁻¹ B, by forward substitution with the factor in place of `rhs` (n × k). From
  // kPolledMinPoints rows on, B's columns go in blocks of PolledSolveColumns(n) with `poll` asked
  // between blocks; its error is returned (issue 33: L⁻¹ K(X, x*) for 5,000 new inputs at
  // n = 8,759 is ~400 GFlop). Each column's arithmetic does not depend on the blocking.
  absl::StatusOr<Eigen::MatrixXd> SolveLower(Eigen::MatrixXd rhs,
                                             const ProgressCallback& poll = {}) const;
  // The full symmetric inverse: InverseLowerTriangle() mirrored into the upper triangle.
  Eigen::MatrixXd Inverse() const;
  // The inverse's lower triangle (diagonal included); the strict upper triangle is garbage.
  // Saves Inverse()'s transposed copy when only one triangle is read.
  Eigen::MatrixXd InverseLowerTriangle() const;
  // The same, formed in the factor's own storage: saves the n×n copy when the factorisation is
  // not needed afterwards (it is left empty).
  Eigen::MatrixXd TakeInverseLowerTriangle() &&;
  // The same, asking `poll` between blocks; its error is returned.
  absl::StatusOr<Eigen::MatrixXd> TakeInverseLowerTriangle(const ProgressCallback& poll) &&;
  // L⁻¹ (strict upper triangle zero) and K⁻¹'s lower triangle (strict upper triangle garbage),
  // both from one triangular inversion in the factor's storage (left empty): the exact Hessian
  // reads both (core/gp_model.cc).
  struct InverseParts {
    Eigen::MatrixXd inverse_factor;
    Eigen::MatrixXd inverse_lower;
  };
  InverseParts TakeInverseFactorAndInverse() &&;
  absl::StatusOr<InverseParts> TakeInverseFactorAndInverse(const ProgressCallback& poll) &&;
  // The lower triangle holds L; the strict upper triangle holds the factorised matrix's after
  // Compute, and is unspecified after ComputeFromLower.
  const Eigen::MatrixXd& lower() const { return factor_; }

 private:
  Eigen::MatrixXd factor_;
  double jitter_ = 0.0;
};

// y ← y · Lᵀ for the lower-triangular `lower` (its strict upper triangle is not read; square,
// as many rows as y has columns), in place (BLAS dtrmm).
void MultiplyByLowerTransposeOnRight(Eigen::Ref<const Eigen::MatrixXd> lower,
                                     Eigen::Ref<Eigen::MatrixXd> y);

}  // namespace gpsel

#endif  // GPSEL_CORE_LINALG_H_
