// ExpOfScaled on libmvec's 4-lane AVX2 exp (glibc ≥ 2.22; _ZGVdN4v_exp is its vector-ABI name),
// which evaluates a kernel matrix's exponentials ~1.6× faster than Eigen's packet exp here
// (bench/RESULTS.md, issue 2): Eigen's double exp is a Padé approximant with a division per
// packet. glibc documents libmvec's exp to within 4 ulp; measured ≤ 3 ulp against the scalar
// exp on this machine. Without AVX2 (the baseline x86-64 build, other architectures) the scalar
// std::exp.
#include "gpsel/core/internal/vector_math.h"

#include <cmath>

#if defined(__AVX2__) && defined(GPSEL_HAVE_LIBMVEC)
#include <immintrin.h>
extern "C" __m256d _ZGVdN4v_exp(__m256d);
#endif

namespace gpsel::internal {

#if defined(__AVX2__) && defined(GPSEL_HAVE_LIBMVEC)
void ExpOfScaled(const double* in, double scale, double* out, Eigen::Index count) {
  const __m256d factor = _mm256_set1_pd(scale);
  Eigen::Index i = 0;
  for (; i + 4 <= count; i += 4) {
    _mm256_storeu_pd(out + i, _ZGVdN4v_exp(_mm256_mul_pd(_mm256_loadu_pd(in + i), factor)));
  }
  if (i < count) {  // the last 1–3 entries through the same vector routine, padded with zeros
    alignas(32) double tail[4] = {0.0, 0.0, 0.0, 0.0};
    for (Eigen::Index t = 0; t < count - i; ++t) tail[t] = in[i + t];
    _mm256_store_pd(tail, _ZGVdN4v_exp(_mm256_mul_pd(_mm256_load_pd(tail), factor)));
    for (Eigen::Index t = 0; t < count - i; ++t) out[i + t] = tail[t];
  }
}
#else
// Scalar std::exp per entry: Eigen's array exp would mix its packet and scalar paths by
// position (breaking the equal-bits promise) and clamps large negative inputs above zero.
void ExpOfScaled(const double* in, double scale, double* out, Eigen::Index count) {
  for (Eigen::Index i = 0; i < count; ++i) out[i] = std::exp(in[i] * scale);
}
#endif

}  // namespace gpsel::internal
