// Bounding ellipsoids and a portable random-number source for the nested sampler
// (core/nested_sampling.cc). Internal to gpsel_core; exposed in a header only so that tests can
// check the geometry directly.
//
// An Ellipsoid is {x : (x - c)^T (L L^T)^{-1} (x - c) <= 1} with L lower triangular: a point of
// the unit ball z maps to x = c + L z, so the volume is V_d * det L (V_d = unit-ball volume).
// An EllipsoidUnion is the multi-ellipsoid bound of MultiNest (Feroz, Hobson & Bridges 2009) and
// dynesty's "multi" bound (Speagle 2020): the live points are split recursively with 2-means
// while splitting shrinks the bounding volume, and each ellipsoid is enlarged a little so the
// union covers the true iso-likelihood contour with high probability.
//
//   gpsel::ns_internal::Rng rng(42);
//   gpsel::ns_internal::EllipsoidUnion bound =
//       gpsel::ns_internal::EllipsoidUnion::Fit(points, /*log_expected_volume=*/-3.0, {});
//   Eigen::VectorXd x(points.rows());
//   std::vector<double> work(2 * points.rows());
//   while (!bound.Sample(rng, x.data(), work.data())) {}   // x is uniform in the union
#ifndef GPSEL_CORE_ELLIPSOID_H_
#define GPSEL_CORE_ELLIPSOID_H_

#include <cstdint>
#include <random>
#include <vector>

#include "Eigen/Core"

namespace gpsel {
namespace ns_internal {

// Seeded random numbers built only from the raw 64-bit output of std::mt19937_64 (whose sequence
// the C++ standard fixes), so a seed gives the same numbers with every standard library. The
// std:: distributions are implementation-defined and are deliberately not used.
class Rng {
 public:
  explicit Rng(uint64_t seed);
  uint64_t Bits() { return engine_(); }
  // Uniform on [0, 1) with 53 random bits.
  double Uniform() { return static_cast<double>(engine_() >> 11) * 0x1.0p-53; }
  // Uniform on the open interval (0, 1).
  double OpenUniform() { return (static_cast<double>(engine_() >> 12) + 0.5) * 0x1.0p-52; }
  // Standard normal (Marsaglia polar method).
  double Normal();
  // Uniform integer in [0, n), n >= 1 (multiply-shift; bias < n / 2^64).
  int64_t Index(int64_t n) {
    return static_cast<int64_t>((static_cast<unsigned __int128>(engine_()) * static_cast<uint64_t>(n)) >> 64);
  }

 private:
  std::mt19937_64 engine_;
  bool has_spare_ = false;
  double spare_ = 0.0;
};

// log of the volume of the unit d-ball: (d/2) log(pi) - lgamma(d/2 + 1).
double LogUnitBallVolume(int dim);

class Ellipsoid {
 public:
  Ellipsoid() = default;
  // Centre c and Cholesky factor L of the shape matrix (L lower triangular, positive diagonal).
  Ellipsoid(Eigen::VectorXd center, Eigen::MatrixXd chol);

  // Smallest ellipsoid of the shape of the sample covariance of the chosen columns of `points`
  // (centred at their mean) that contains all of them. Needs at least 2 columns; a (near-)singular
  // covariance is regularised with a small ridge so the result always has positive volume.
  static Ellipsoid Bounding(const Eigen::MatrixXd& points, const std::vector<int>& columns);

  int dim() const { return static_cast<int>(center_.size()); }
  const Eigen::VectorXd& center() const { return center_; }
  const Eigen::MatrixXd& chol() const { return chol_; }
  double log_volume() const { return log_volume_; }

  // Squared Mahalanobis radius |L^{-1}(x - c)|^2 (1 on the surface); `work` has dim() doubles.
  double Radius2(const double* x, double* work) const;
  bool Contains(const double* x, double* work) const { return Radius2(x, work) <= 1.0; }
  // z = L^{-1}(x - c).
  void Whiten(const double* x, double* z) const;
  // Multiplies the volume by `factor` (> 0), keeping the centre.
  void ScaleVolume(double factor);
  // Writes a point drawn uniformly from the ellipsoid to `out`; `work` has dim() doubles.
  void SampleUniform(Rng& rng, double* out, double* work) const;

 private:
  Eigen::VectorXd center_;
  Eigen::MatrixXd chol_;
  double log_volume_ = 0.0;
};

struct EllipsoidFitOptions {
  // Volume enlargement of an ellipsoid bounding all N live points; an ellipsoid bounding a
  // cluster of n points is enlarged by 1 + (volume_enlargement - 1) * sqrt(N / n), as in
  // MultiNest, since a smaller cluster's shape is known less precisely.
  double volume_enlargement = 1.25;
  // Smallest cluster that may get its own ellipsoid (raised to 2 * (dim + 1) if smaller).
  int min_cluster_points = 0;
  // A split is kept when the two child ellipsoids together have at most this fraction of the
  // parent's volume ...
  double split_volume_ratio = 0.6;
  // ... or when the parent is this many times larger than the prior volume its points are
  // expected to occupy and splitting shrinks it at all.
  double expected_volume_ratio = 2.0;
  int max_ellipsoids = 64;
};

class EllipsoidUnion {
 public:
  EllipsoidUnion() = default;

  // Union of the given ellipsoids (non-empty, same dimension).
  static EllipsoidUnion FromEllipsoids(std::vector<Ellipsoid> ellipsoids);
  // Multi-ellipsoid bound of the columns of `points` (d x N). `log_expected_volume` is the
  // nested-sampling estimate log X of the volume the points fill (use 0 when unknown).
  static EllipsoidUnion Fit(const Eigen::MatrixXd& points, double log_expected_volume,
                            const EllipsoidFitOptions& options);

  bool empty() const { return ellipsoids_.empty(); }
  int size() const { return static_cast<int>(ellipsoids_.size()); }
  const std::vector<Ellipsoid>& ellipsoids() const { return ellipsoids_; }
  // log of the summed (not union) volume of the ellipsoids.
  double log_total_volume() const { return log_total_volume_; }

  // Cheap pre-test: false when x is outside the axis-aligned box around the union.
  bool InBox(const double* x) const {
    for (int i = 0; i < static_cast<int>(box_lo_.size()); ++i) {
      if (x[i] < box_lo_[i] || x[i] > box_hi_[i]) return false;
    }
    return true;
  }
  // Number of ellipsoids containing x.
  int Count(const double* x, double* work) const;
  bool Contains(const double* x, double* work) const;
  // Index of the ellipsoid whose Mahalanobis radius at x is smallest.
  int Nearest(const double* x, double* work) const;

  // One proposal: picks ellipsoid j with probability V_j / sum V, draws x uniformly in it, and
  // keeps x with probability 1/m(x) (m = number of ellipsoids containing x), which makes kept
  // points uniform on the union however the ellipsoids overlap. Returns false when x was thinned
  // out (the caller simply draws again); `out` then still holds the raw proposal. `work` has
  // 2 * dim doubles.
  bool Sample(Rng& rng, double* out, double* work) const;

 private:
  std::vector<Ellipsoid> ellipsoids_;
  std::vector<double> cumulative_;  // cumulative volume fractions, last == 1
  std::vector<double> box_lo_, box_hi_;  // axis-aligned bounding box of the union
  double log_total_volume_ = 0.0;
};

}  // namespace ns_internal
}  // namespace gpsel

#endif  // GPSEL_CORE_ELLIPSOID_H_
