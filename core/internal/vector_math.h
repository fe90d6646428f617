// Vectorised elementary functions for the kernel matrices: exp through glibc's vector math
// library (libmvec) when the build targets AVX2, else the scalar std::exp.
#ifndef GPSEL_CORE_VECTOR_MATH_H_
#define GPSEL_CORE_VECTOR_MATH_H_

#include <Eigen/Core>

namespace gpsel::internal {

// out[i] = exp(scale · in[i]) for i < count; `in` and `out` may be the same array. Every entry is
// computed the same way whatever its position (no scalar tail), so equal inputs give equal bits.
void ExpOfScaled(const double* in, double scale, double* out, Eigen::Index count);

}  // namespace gpsel::internal

#endif  // GPSEL_CORE_VECTOR_MATH_H_
