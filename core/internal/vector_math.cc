// ExpOfScaled and SinOfScaled on libmvec's 4-lane AVX2 exp and sin (glibc ≥ 2.22;
// _ZGVdN4v_exp/_ZGVdN4v_sin are their vector-ABI names). The exp evaluates a kernel matrix's
// exponentials ~1.6× faster than Eigen's packet exp here (bench/RESULTS.md, issue 2): Eigen's
// double exp is a Padé approximant with a division per packet, and Eigen 3.4 has no packet sin
// for doubles at all (std::sin per entry). glibc documents both to within 4 ulp; the tests
// (tests/core/internal/vector_math_test.cc) measure them against the scalar functions.
//
// Underflow. libmvec's exp hands every lane whose argument is below about −709.8 (where exp
// leaves the normal range) to the scalar exp, one lane at a time, with its errno and
// underflow handling: on a long series most of a short-lengthscale SE's cross-covariance is
// there (d²/2ℓ² ≈ 1,850 for a year's lag at ℓ = 6 days), and those lanes cost ~10 % of a sparse
// bound evaluation (bench/RESULTS.md, issue 28, twenty-first session). Arguments below
// kExpFlushBelow (−708, exp = 3.3·10⁻³⁰⁸) are therefore flushed to exactly 0: the value is
// below any kernel entry that matters (it is summed with entries of order 1) and a zero, unlike
// a subnormal, costs nothing in the products that follow. NaN arguments still give NaN.
//
// Without AVX2 (the baseline x86-64 build, other architectures) the scalar std::exp / std::sin.
#include "gpsel/core/internal/vector_math.h"

#include <cmath>

#if defined(__AVX2__) && defined(GPSEL_HAVE_LIBMVEC)
#include <immintrin.h>
extern "C" __m256d _ZGVdN4v_exp(__m256d);
extern "C" __m256d _ZGVdN4v_sin(__m256d);
#endif

namespace gpsel::internal {

#if defined(__AVX2__) && defined(GPSEL_HAVE_LIBMVEC)
namespace {

// exp of four lanes, those below kExpFlushBelow set to 0 (a NaN lane stays NaN: the comparison
// "not less than" is true for it, and max_pd returns its second operand, the NaN).
inline __m256d FlushedExp(__m256d x) {
  const __m256d lowest = _mm256_set1_pd(kExpFlushBelow);
  const __m256d keep = _mm256_cmp_pd(x, lowest, _CMP_NLT_UQ);
  return _mm256_and_pd(_ZGVdN4v_exp(_mm256_max_pd(lowest, x)), keep);
}

inline __m256d Sin(__m256d x) { return _ZGVdN4v_sin(x); }

// out[i] = f(scale · in[i]) four lanes at a time; the last 1–3 entries through the same vector
// routine, padded with zeros, so that an entry's bits do not depend on its position.
template <__m256d (*F)(__m256d)>
void ApplyToScaled(const double* in, double scale, double* out, Eigen::Index count) {
  const __m256d factor = _mm256_set1_pd(scale);
  Eigen::Index i = 0;
  for (; i + 4 <= count; i += 4) {
    _mm256_storeu_pd(out + i, F(_mm256_mul_pd(_mm256_loadu_pd(in + i), factor)));
  }
  if (i < count) {
    alignas(32) double tail[4] = {0.0, 0.0, 0.0, 0.0};
    for (Eigen::Index t = 0; t < count - i; ++t) tail[t] = in[i + t];
    _mm256_store_pd(tail, F(_mm256_mul_pd(_mm256_load_pd(tail), factor)));
    for (Eigen::Index t = 0; t < count - i; ++t) out[i + t] = tail[t];
  }
}

}  // namespace

void ExpOfScaled(const double* in, double scale, double* out, Eigen::Index count) {
  ApplyToScaled<FlushedExp>(in, scale, out, count);
}

void ExpOfScaledUnflushed(const double* in, double scale, double* out, Eigen::Index count) {
  ApplyToScaled<_ZGVdN4v_exp>(in, scale, out, count);
}

void SinOfScaled(const double* in, double scale, double* out, Eigen::Index count) {
  ApplyToScaled<Sin>(in, scale, out, count);
}
#else
// Scalar std::exp / std::sin per entry: Eigen's array exp would mix its packet and scalar paths
// by position (breaking the equal-bits promise) and clamps large negative inputs above zero.
void ExpOfScaled(const double* in, double scale, double* out, Eigen::Index count) {
  for (Eigen::Index i = 0; i < count; ++i) {
    const double x = in[i] * scale;
    out[i] = x < kExpFlushBelow ? 0.0 : std::exp(x);
  }
}

void ExpOfScaledUnflushed(const double* in, double scale, double* out, Eigen::Index count) {
  for (Eigen::Index i = 0; i < count; ++i) out[i] = std::exp(in[i] * scale);
}

void SinOfScaled(const double* in, double scale, double* out, Eigen::Index count) {
  for (Eigen::Index i = 0; i < count; ++i) out[i] = std::sin(in[i] * scale);
}
#endif

}  // namespace gpsel::internal
