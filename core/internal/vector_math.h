// Vectorised elementary functions for the kernel matrices: exp and sin through glibc's vector
// math library (libmvec) when the build targets AVX2, else the scalar std::exp / std::sin.
#ifndef GPSEL_CORE_VECTOR_MATH_H_
#define GPSEL_CORE_VECTOR_MATH_H_

#include <Eigen/Core>

namespace gpsel::internal {

// out[i] = exp(scale · in[i]) for i < count; `in` and `out` may be the same array. Every entry is
// computed the same way whatever its position (no scalar tail), so equal inputs give equal bits.
// Arguments below kExpFlushBelow give exactly 0 (see vector_math.cc for why).
void ExpOfScaled(const double* in, double scale, double* out, Eigen::Index count);

// ExpOfScaled without the flush: subnormal results as libmvec (or std::exp) gives them, through
// its scalar path below −709.8 (what every matrix but the sparse K_uf blocks takes).
void ExpOfScaledUnflushed(const double* in, double scale, double* out, Eigen::Index count);

// out[i] = sin(scale · in[i]) for i < count, with the same promises as ExpOfScaled.
void SinOfScaled(const double* in, double scale, double* out, Eigen::Index count);

// exp(x) for x below this is < 3.3·10⁻³⁰⁸ and ExpOfScaled returns 0 for it.
inline constexpr double kExpFlushBelow = -708.0;

}  // namespace gpsel::internal

#endif  // GPSEL_CORE_VECTOR_MATH_H_
