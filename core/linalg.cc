// LAPACK-backed SPD factorisation (dpotrf/dpotrs, and dtrmm/dtrtri/dlauum for the inverse) from
// OpenBLAS (Debian's pthread build, pinned to one thread per call); for large matrices the
// factorisation and the inverse run in blocks of columns, asking whether to stop between them.
#include "gpsel/core/linalg.h"

#include <malloc.h>

#include <algorithm>
#include <cmath>
#include <cstddef>
#include <cstdint>
#include <cstdio>
#include <cstdlib>
#include <utility>

#if defined(__SSE2__)
#include <xmmintrin.h>
#endif

#include "absl/strings/str_cat.h"
#include "gpsel/core/status_macros.h"

extern "C" {
// Fortran LAPACK; the trailing size_t is gfortran's hidden length of the character argument.
void dpotrf_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t);
void dpotrs_(const char* uplo, const int* n, const int* nrhs, const double* a, const int* lda,
             double* b, const int* ldb, int* info, size_t);
void dtrtri_(const char* uplo, const char* diag, const int* n, double* a, const int* lda, int* info,
             size_t, size_t);
void dlauum_(const char* uplo, const int* n, double* a, const int* lda, int* info, size_t);
// OpenBLAS extensions.
void openblas_set_num_threads(int num_threads);
int openblas_get_parallel(void);  // 0: built single-threaded (no locking), 1: pthreads, 2: OpenMP
}
// dtrmm_ is declared by Eigen's BLAS header (EIGEN_USE_BLAS) without the hidden length arguments;
// OpenBLAS implements the BLAS level 3 in C and does not read them.

namespace gpsel {

namespace {

// Concurrency. gpsel parallelises over restarts, candidates and RPCs, so every BLAS/LAPACK call
// (ours here, and Eigen's products through EIGEN_USE_BLAS) must run in its caller's thread and be
// safe next to other calls. Debian's pthread OpenBLAS (linked with an rpath, see CMakeLists.txt)
// allocates its work buffers under a lock and, pinned to one thread, never hands work to its own
// pool: calls are independent and results do not depend on how many run at once
// (tests/core/search_test.cc compares 1- and 4-thread searches bit for bit). Debian's *serial*
// build shares its buffers without locks and silently corrupts concurrent calls — including
// Eigen's, which no lock of ours could cover — so a process that has loaded it (a binary copied
// to a host with only libopenblas0-serial, or LD_LIBRARY_PATH) stops at start-up with a message
// instead of computing wrong numbers. Both checks run when this library loads, before any call.
const bool kOpenBlasReady = [] {
  if (openblas_get_parallel() == 0) {
    std::fprintf(stderr,
                 "gpsel: the OpenBLAS loaded is a single-threaded build without locking, which "
                 "gives wrong results when called from several threads; install Debian's "
                 "libopenblas0-pthread (scripts/install-deps.sh) and do not override the "
                 "library path\n");
    std::_Exit(70);  // EX_SOFTWARE
  }
  openblas_set_num_threads(1);
  return true;
}();

// In-place inverse of the lower-triangular n×n matrix at `a` (column-major, leading dimension
// lda), by recursive halving: with L = [L11 0; L21 L22],
//   L⁻¹ = [L11⁻¹ 0; −L22⁻¹ L21 L11⁻¹  L22⁻¹],
// inverting the diagonal blocks first and then forming the off-diagonal block with two
// triangular matrix products (dtrmm). Same n³/3 flops as LAPACK dtrtri, but OpenBLAS 0.3.21's
// dtrtri is slow here: it runs the unblocked level-2 dtrti2 (dtrmv) below its blocking size and
// is no better above it — measured (bench/RESULTS.md, issue 2) 3× slower than dpotrf on the same
// matrix at n = 200 and 9× at n = 500, where this recursion is 0.7× dpotrf.
// From kPolledMinPoints rows on the work is split into blocks of kPolledBlockPoints with a poll
// between them; below it one LAPACK/BLAS call takes at most ~10 ms.

absl::Status Poll(const ProgressCallback& poll) {
  static const Progress kPoll = CancellationPoll();
  return ReportProgress(poll, kPoll);
}

double* At(double* a, int lda, int row, int col) {
  return a + row + static_cast<std::ptrdiff_t>(col) * lda;
}

// L Lᵀ = A in the lower triangle of the n×n column-major `a`, with dpotrf's `info` (k > 0: the
// leading minor of order k is not positive definite). From kPolledMinPoints rows on it is
// left-looking in block columns J = [j, j + b) of kPolledBlockPoints: first the update by the
// columns left of it, A[j:, J] −= A[j:, :j] A[J, :j]ᵀ (dsyrk on the diagonal block, dgemm below
// it), then dpotrf on the diagonal block and dtrsm for the rows below, polling after each
// block. The same n³/3 flops as dpotrf and, measured at n = 3,000 (bench/RESULTS.md, issue 33),
// within 4–8 % of its time; at most ~0.5 s between polls at n = 10,000.
absl::Status CholeskyLower(int n, double* a, int lda, const ProgressCallback& poll, int* info) {
  *info = 0;
  if (n < kPolledMinPoints) {
    dpotrf_("L", &n, a, &lda, info, 1);
    return absl::OkStatus();
  }
  const double one = 1.0, minus_one = -1.0;
  for (int j = 0; j < n; j += kPolledBlockPoints) {
    int b = std::min(kPolledBlockPoints, n - j);
    int below = n - j - b;
    double* diagonal = At(a, lda, j, j);
    if (j > 0) {
      dsyrk_("L", "N", &b, &j, &minus_one, At(a, lda, j, 0), &lda, &one, diagonal, &lda);
      if (below > 0) {
        dgemm_("N", "T", &below, &b, &j, &minus_one, At(a, lda, j + b, 0), &lda,
               At(a, lda, j, 0), &lda, &one, At(a, lda, j + b, j), &lda);
      }
    }
    dpotrf_("L", &b, diagonal, &lda, info, 1);
    if (*info != 0) {
      if (*info > 0) *info += j;
      return absl::OkStatus();
    }
    if (below > 0) {
      dtrsm_("R", "L", "T", "N", &below, &b, &one, diagonal, &lda, At(a, lda, j + b, j), &lda);
    }
    GPSEL_RETURN_IF_ERROR(Poll(poll));
  }
  return absl::OkStatus();
}

absl::Status InvertLowerTriangular(int n, double* a, int lda, const ProgressCallback& poll) {
  constexpr int kBase = 16;  // small blocks: dtrti2's level-2 loop is fine there
  if (n <= kBase) {
    int info = 0;
    dtrtri_("L", "N", &n, a, &lda, &info, 1, 1);
    return absl::OkStatus();
  }
  const int n1 = n / 2, n2 = n - n1;
  double* a11 = a;
  double* a21 = a + n1;
  double* a22 = a + n1 + static_cast<std::ptrdiff_t>(n1) * lda;
  GPSEL_RETURN_IF_ERROR(InvertLowerTriangular(n1, a11, lda, poll));
  GPSEL_RETURN_IF_ERROR(InvertLowerTriangular(n2, a22, lda, poll));
  const double one = 1.0, minus_one = -1.0;
  // A21 ← A21 L11⁻¹, then A21 ← −L22⁻¹ A21. Large ones in blocks, with polls between: the first
  // product treats A21's rows independently, the second its columns.
  if (n < kPolledMinPoints) {
    dtrmm_("R", "L", "N", "N", &n2, &n1, &one, a11, &lda, a21, &lda);
    dtrmm_("L", "L", "N", "N", &n2, &n1, &minus_one, a22, &lda, a21, &lda);
    return absl::OkStatus();
  }
  for (int row = 0; row < n2; row += kPolledBlockPoints) {
    int rows = std::min(kPolledBlockPoints, n2 - row);
    dtrmm_("R", "L", "N", "N", &rows, &n1, &one, a11, &lda, a21 + row, &lda);
    GPSEL_RETURN_IF_ERROR(Poll(poll));
  }
  for (int col = 0; col < n1; col += kPolledBlockPoints) {
    int cols = std::min(kPolledBlockPoints, n1 - col);
    dtrmm_("L", "L", "N", "N", &n2, &cols, &minus_one, a22, &lda, At(a21, lda, 0, col), &lda);
    GPSEL_RETURN_IF_ERROR(Poll(poll));
  }
  return absl::OkStatus();
}

// The lower triangle of Lᵀ L in place of the lower-triangular n×n `a` (LAPACK dlauum "L"). From
// kPolledMinPoints rows on, dlauum's own blocked algorithm with blocks of kPolledBlockPoints
// and a poll after each: for the block rows I = [i, i + b),
//   A[I, :i] ← L[I, I]ᵀ A[I, :i] + A[i+b:, I]ᵀ A[i+b:, :i]   (dtrmm, dgemm)
//   A[I, I]  ← L[I, I]ᵀ L[I, I]  + A[i+b:, I]ᵀ A[i+b:, I]     (dlauum, dsyrk).
absl::Status LowerTransposeTimesLower(int n, double* a, int lda, const ProgressCallback& poll) {
  int info = 0;
  if (n < kPolledMinPoints) {
    dlauum_("L", &n, a, &lda, &info, 1);
    return absl::OkStatus();
  }
  const double one = 1.0;
  for (int i = 0; i < n; i += kPolledBlockPoints) {
    int b = std::min(kPolledBlockPoints, n - i);
    int below = n - i - b;
    int left = i;
    double* diagonal = At(a, lda, i, i);
    if (left > 0) dtrmm_("L", "L", "T", "N", &b, &left, &one, diagonal, &lda, At(a, lda, i, 0), &lda);
    dlauum_("L", &b, diagonal, &lda, &info, 1);
    if (below > 0) {
      if (left > 0) {
        dgemm_("T", "N", &b, &left, &below, &one, At(a, lda, i + b, i), &lda,
               At(a, lda, i + b, 0), &lda, &one, At(a, lda, i, 0), &lda);
      }
      dsyrk_("L", "T", &b, &below, &one, At(a, lda, i + b, i), &lda, &one, diagonal, &lda);
    }
    GPSEL_RETURN_IF_ERROR(Poll(poll));
  }
  return absl::OkStatus();
}

}  // namespace

#if defined(__SSE2__)
FlushDenormalsScope::FlushDenormalsScope() : saved_(_mm_getcsr()) {
  _mm_setcsr(saved_ | 0x8040u);  // FTZ (bit 15) | DAZ (bit 6)
}
FlushDenormalsScope::~FlushDenormalsScope() { _mm_setcsr(saved_); }
#else
FlushDenormalsScope::FlushDenormalsScope() = default;
FlushDenormalsScope::~FlushDenormalsScope() = default;
#endif

void ConfigureAllocatorForLargeMatrices() {
  mallopt(M_MMAP_THRESHOLD, 64 << 20);
  mallopt(M_TRIM_THRESHOLD, 512 << 20);
}

absl::Status SpdFactorization::Compute(Eigen::MatrixXd matrix, const ProgressCallback& poll) {
  // Factorised in place: OpenBLAS's dpotrf("L") overwrites only the lower triangle and diagonal,
  // so the strict upper triangle still holds the matrix for a retry with more jitter (no second
  // copy). LAPACK itself only promises not to *read* it; other implementations may use it as
  // scratch — tests/core/linalg_test.cc (JitterRescuesASingularMatrix) checks the retry.
  const Eigen::VectorXd diagonal = matrix.diagonal();
  bool first = true;
  return ComputeFromLower(static_cast<int>(matrix.rows()), [&](Eigen::MatrixXd* out) {
    if (first) {
      *out = std::move(matrix);
      first = false;
      return;
    }
    out->triangularView<Eigen::StrictlyLower>() = out->transpose();
    out->diagonal() = diagonal;
  }, poll);
}

absl::Status SpdFactorization::ComputeFromLower(
    int n, absl::FunctionRef<void(Eigen::MatrixXd*)> fill_lower, const ProgressCallback& poll) {
  static constexpr double kJitters[] = {0.0, 1e-10, 1e-8, 1e-6};
  double mean_diagonal = 0.0;
  for (double relative : kJitters) {
    fill_lower(&factor_);
    if (factor_.rows() != n || factor_.cols() != n) {
      return absl::InternalError(absl::StrCat("fill_lower made a ", factor_.rows(), "×",
                                              factor_.cols(), " matrix, expected ", n, "×", n));
    }
    if (relative == 0.0) {
      mean_diagonal = factor_.diagonal().mean();
      if (!std::isfinite(mean_diagonal)) {
        return absl::FailedPreconditionError("covariance matrix has non-finite entries");
      }
    }
    jitter_ = relative * std::abs(mean_diagonal);
    if (relative > 0) factor_.diagonal().array() += jitter_;
    int info = 0;
    if (absl::Status stopped = CholeskyLower(n, factor_.data(), n, poll, &info); !stopped.ok()) {
      factor_ = Eigen::MatrixXd();
      return stopped;
    }
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

int PolledSolveColumns(int n) {
  const int64_t rows = std::max(n, 1);
  return static_cast<int>(std::max<int64_t>(1, (int64_t{1} << 30) / (rows * rows)));
}

absl::StatusOr<Eigen::MatrixXd> SpdFactorization::SolveLower(Eigen::MatrixXd rhs,
                                                             const ProgressCallback& poll) const {
  const int n = static_cast<int>(factor_.rows());
  if (rhs.rows() != n) {
    return absl::InvalidArgumentError(
        absl::StrCat("SolveLower: the right-hand side has ", rhs.rows(), " rows, the factor ", n));
  }
  const auto lower = factor_.triangularView<Eigen::Lower>();
  const Eigen::Index k = rhs.cols();
  if (n < kPolledMinPoints) {
    lower.solveInPlace(rhs);
    return rhs;
  }
  const Eigen::Index block = PolledSolveColumns(n);
  for (Eigen::Index start = 0; start < k; start += block) {
    GPSEL_RETURN_IF_ERROR(Poll(poll));
    auto columns = rhs.middleCols(start, std::min(block, k - start));
    lower.solveInPlace(columns);
  }
  return rhs;
}

Eigen::VectorXd SpdFactorization::Solve(const Eigen::VectorXd& rhs) const {
  return Solve(Eigen::MatrixXd(rhs)).col(0);
}

absl::StatusOr<Eigen::MatrixXd> SpdFactorization::TakeInverseLowerTriangle(
    const ProgressCallback& poll) && {
  // K⁻¹ = L⁻ᵀ L⁻¹: invert the factor (see InvertLowerTriangular), then form the product in
  // place (LowerTransposeTimesLower, dlauum) — what dpotri does, with a faster triangular
  // inverse.
  Eigen::MatrixXd inverse = std::move(factor_);
  factor_ = Eigen::MatrixXd();
  const int n = static_cast<int>(inverse.rows());
  GPSEL_RETURN_IF_ERROR(InvertLowerTriangular(n, inverse.data(), n, poll));
  GPSEL_RETURN_IF_ERROR(LowerTransposeTimesLower(n, inverse.data(), n, poll));
  return inverse;
}

Eigen::MatrixXd SpdFactorization::TakeInverseLowerTriangle() && {
  return *std::move(*this).TakeInverseLowerTriangle(ProgressCallback());  // never stops
}

absl::StatusOr<SpdFactorization::InverseParts> SpdFactorization::TakeInverseFactorAndInverse(
    const ProgressCallback& poll) && {
  InverseParts parts;
  parts.inverse_factor = std::move(factor_);
  factor_ = Eigen::MatrixXd();
  const int n = static_cast<int>(parts.inverse_factor.rows());
  GPSEL_RETURN_IF_ERROR(InvertLowerTriangular(n, parts.inverse_factor.data(), n, poll));
  parts.inverse_factor.triangularView<Eigen::StrictlyUpper>().setZero();
  parts.inverse_lower = parts.inverse_factor;
  GPSEL_RETURN_IF_ERROR(LowerTransposeTimesLower(n, parts.inverse_lower.data(), n, poll));
  return parts;
}

SpdFactorization::InverseParts SpdFactorization::TakeInverseFactorAndInverse() && {
  return *std::move(*this).TakeInverseFactorAndInverse(ProgressCallback());  // never stops
}

void MultiplyByLowerTransposeOnRight(Eigen::Ref<const Eigen::MatrixXd> lower,
                                     Eigen::Ref<Eigen::MatrixXd> y) {
  const int rows = static_cast<int>(y.rows()), cols = static_cast<int>(y.cols());
  if (rows == 0 || cols == 0) return;
  const int lda = static_cast<int>(lower.outerStride()), ldy = static_cast<int>(y.outerStride());
  const double one = 1.0;
  dtrmm_("R", "L", "T", "N", &rows, &cols, &one, lower.data(), &lda, y.data(), &ldy);
}

Eigen::MatrixXd SpdFactorization::InverseLowerTriangle() const {
  return SpdFactorization(*this).TakeInverseLowerTriangle();
}

Eigen::MatrixXd SpdFactorization::Inverse() const {
  Eigen::MatrixXd inverse = InverseLowerTriangle();
  inverse.triangularView<Eigen::StrictlyUpper>() = inverse.transpose();
  return inverse;
}

}  // namespace gpsel
