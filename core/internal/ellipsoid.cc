// Bounding ellipsoids (single and recursive multi-ellipsoid) and the portable RNG used by the
// nested sampler. See ellipsoid.h for the conventions.
#include "gpsel/core/internal/ellipsoid.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <utility>

#include "Eigen/Cholesky"

namespace gpsel {
namespace ns_internal {

namespace {

double LogAddExp(double a, double b) {
  if (a < b) std::swap(a, b);
  if (b == -std::numeric_limits<double>::infinity()) return a;
  return a + std::log1p(std::exp(b - a));
}

}  // namespace

Rng::Rng(uint64_t seed) {
  // Spread the 64-bit seed over the whole Mersenne-Twister state through seed_seq, whose
  // algorithm the standard specifies exactly.
  std::seed_seq seq{static_cast<uint32_t>(seed), static_cast<uint32_t>(seed >> 32),
                    static_cast<uint32_t>(0x9e3779b9u)};
  engine_.seed(seq);
}

double Rng::Normal() {
  if (has_spare_) {
    has_spare_ = false;
    return spare_;
  }
  double u, v, s;
  do {
    u = 2.0 * Uniform() - 1.0;
    v = 2.0 * Uniform() - 1.0;
    s = u * u + v * v;
  } while (s >= 1.0 || s == 0.0);
  const double f = std::sqrt(-2.0 * std::log(s) / s);
  spare_ = v * f;
  has_spare_ = true;
  return u * f;
}

double LogUnitBallVolume(int dim) {
  const double d = dim;
  return 0.5 * d * std::log(M_PI) - std::lgamma(0.5 * d + 1.0);
}

Ellipsoid::Ellipsoid(Eigen::VectorXd center, Eigen::MatrixXd chol)
    : center_(std::move(center)), chol_(std::move(chol)) {
  log_volume_ = LogUnitBallVolume(dim());
  for (int i = 0; i < dim(); ++i) log_volume_ += std::log(chol_(i, i));
}

Ellipsoid Ellipsoid::Bounding(const Eigen::MatrixXd& points, const std::vector<int>& columns) {
  const int d = static_cast<int>(points.rows());
  const int n = static_cast<int>(columns.size());
  Eigen::VectorXd mean = Eigen::VectorXd::Zero(d);
  for (int j : columns) mean += points.col(j);
  mean /= std::max(n, 1);
  Eigen::MatrixXd centred(d, n);
  for (int k = 0; k < n; ++k) centred.col(k) = points.col(columns[k]) - mean;
  Eigen::MatrixXd cov = centred * centred.transpose() / std::max(n - 1, 1);
  // A ridge keeps the factorisation well defined when the points are (nearly) degenerate. With
  // fewer points than dimensions the covariance is singular for sure, so the ridge is larger.
  const double scale = cov.trace() / d;
  double ridge = (n <= d ? 1e-2 : 1e-10) * scale + 1e-300;
  Eigen::LLT<Eigen::MatrixXd> llt;
  for (int attempt = 0; attempt < 20; ++attempt) {
    Eigen::MatrixXd c = cov;
    c.diagonal().array() += ridge;
    llt.compute(c);
    if (llt.info() == Eigen::Success && (llt.matrixL().toDenseMatrix().diagonal().array() > 0).all()) break;
    ridge *= 100.0;
  }
  Eigen::MatrixXd chol = llt.matrixL();
  // Scale so that the farthest point lies on the surface.
  chol.triangularView<Eigen::Lower>().solveInPlace(centred);
  double r2max = n > 0 ? centred.colwise().squaredNorm().maxCoeff() : 1.0;
  if (!(r2max > 0.0) || !std::isfinite(r2max)) r2max = 1.0;
  chol *= std::sqrt(r2max);
  return Ellipsoid(std::move(mean), std::move(chol));
}

double Ellipsoid::Radius2(const double* x, double* work) const {
  // Forward substitution L z = x - c.
  const int d = dim();
  const double* L = chol_.data();  // column-major: L(i, j) = L[i + j * d]
  double r2 = 0.0;
  for (int i = 0; i < d; ++i) {
    double s = x[i] - center_[i];
    for (int j = 0; j < i; ++j) s -= L[i + j * d] * work[j];
    s /= L[i + i * d];
    work[i] = s;
    r2 += s * s;
  }
  return r2;
}

void Ellipsoid::Whiten(const double* x, double* z) const { Radius2(x, z); }

void Ellipsoid::ScaleVolume(double factor) {
  chol_ *= std::pow(factor, 1.0 / dim());
  log_volume_ += std::log(factor);
}

void Ellipsoid::SampleUniform(Rng& rng, double* out, double* work) const {
  // Direction uniform on the sphere (normalised Gaussian), radius with density ∝ r^(d-1).
  const int d = dim();
  double norm2 = 0.0;
  do {
    norm2 = 0.0;
    for (int i = 0; i < d; ++i) {
      work[i] = rng.Normal();
      norm2 += work[i] * work[i];
    }
  } while (norm2 == 0.0);
  const double r = (d == 1 ? rng.Uniform() : std::pow(rng.Uniform(), 1.0 / d)) / std::sqrt(norm2);
  const double* L = chol_.data();
  for (int i = 0; i < d; ++i) {
    double s = 0.0;
    for (int j = 0; j <= i; ++j) s += L[i + j * d] * work[j];
    out[i] = center_[i] + r * s;
  }
}

namespace {

// Splits `idx` in two with Lloyd's 2-means (Euclidean distance in the unit cube, as MultiNest:
// whitening by the parent's covariance would blow the within-mode spread up to the size of the
// gap between modes). Initial centres: the point farthest from the parent's centre and the point
// farthest from that one — deterministic, and far apart modes are separated at once.
bool TwoMeans(const Eigen::MatrixXd& points, const std::vector<int>& idx, const Ellipsoid& parent,
              std::vector<int>* a, std::vector<int>* b) {
  const int d = static_cast<int>(points.rows());
  const int n = static_cast<int>(idx.size());
  Eigen::MatrixXd w(d, n);
  for (int k = 0; k < n; ++k) w.col(k) = points.col(idx[k]) - parent.center();
  int first = 0;
  w.colwise().squaredNorm().maxCoeff(&first);
  int second = 0;
  (w.colwise() - w.col(first)).colwise().squaredNorm().maxCoeff(&second);
  if (first == second) return false;
  Eigen::VectorXd c1 = w.col(first), c2 = w.col(second);
  Eigen::VectorXd s1(d), s2(d);
  std::vector<char> in_second(n, 0);
  for (int iter = 0; iter < 30; ++iter) {
    bool changed = false;
    s1.setZero();
    s2.setZero();
    int n1 = 0, n2 = 0;
    for (int k = 0; k < n; ++k) {
      const double* x = w.col(k).data();
      double d1 = 0.0, d2 = 0.0;
      for (int i = 0; i < d; ++i) {
        d1 += (x[i] - c1[i]) * (x[i] - c1[i]);
        d2 += (x[i] - c2[i]) * (x[i] - c2[i]);
      }
      const char second_closer = d2 < d1;
      changed |= second_closer != in_second[k];
      in_second[k] = second_closer;
      Eigen::VectorXd& s = second_closer ? s2 : s1;
      for (int i = 0; i < d; ++i) s[i] += x[i];
      ++(second_closer ? n2 : n1);
    }
    if (n1 == 0 || n2 == 0) return false;
    c1 = s1 / n1;
    c2 = s2 / n2;
    if (!changed && iter > 0) break;
  }
  a->clear();
  b->clear();
  for (int k = 0; k < n; ++k) (in_second[k] ? b : a)->push_back(idx[k]);
  return true;
}

struct Cluster {
  Ellipsoid ellipsoid;
  int points;
};

void SplitRecursively(const Eigen::MatrixXd& points, const std::vector<int>& idx, Ellipsoid parent,
                      double log_expected_volume, const EllipsoidFitOptions& options,
                      int min_points, std::vector<Cluster>* out, int* budget) {
  const int n = static_cast<int>(idx.size());
  std::vector<int> a, b;
  if (*budget <= 1 || n < 2 * min_points || !TwoMeans(points, idx, parent, &a, &b) ||
      static_cast<int>(a.size()) < min_points || static_cast<int>(b.size()) < min_points) {
    out->push_back({std::move(parent), n});
    return;
  }
  Ellipsoid ea = Ellipsoid::Bounding(points, a);
  Ellipsoid eb = Ellipsoid::Bounding(points, b);
  const double log_children = LogAddExp(ea.log_volume(), eb.log_volume());
  const bool much_smaller = log_children < std::log(options.split_volume_ratio) + parent.log_volume();
  const bool too_big = parent.log_volume() > std::log(options.expected_volume_ratio) + log_expected_volume &&
                       log_children < parent.log_volume();
  if (!much_smaller && !too_big) {
    out->push_back({std::move(parent), n});
    return;
  }
  --*budget;  // one ellipsoid becomes two
  const double log_n = std::log(static_cast<double>(n));
  const double la = log_expected_volume + std::log(static_cast<double>(a.size())) - log_n;
  const double lb = log_expected_volume + std::log(static_cast<double>(b.size())) - log_n;
  SplitRecursively(points, a, std::move(ea), la, options, min_points, out, budget);
  SplitRecursively(points, b, std::move(eb), lb, options, min_points, out, budget);
}

}  // namespace

EllipsoidUnion EllipsoidUnion::Fit(const Eigen::MatrixXd& points, double log_expected_volume,
                                   const EllipsoidFitOptions& options) {
  const int d = static_cast<int>(points.rows());
  const int n = static_cast<int>(points.cols());
  if (n < 2 || d < 1) return EllipsoidUnion();
  std::vector<int> all(n);
  for (int j = 0; j < n; ++j) all[j] = j;
  const int min_points = std::max(options.min_cluster_points, 2 * (d + 1));
  std::vector<Cluster> clusters;
  int budget = std::max(1, options.max_ellipsoids);
  SplitRecursively(points, all, Ellipsoid::Bounding(points, all), log_expected_volume, options,
                   min_points, &clusters, &budget);
  std::vector<Ellipsoid> ellipsoids;
  for (Cluster& c : clusters) {
    const double factor =
        1.0 + (options.volume_enlargement - 1.0) * std::sqrt(static_cast<double>(n) / c.points);
    c.ellipsoid.ScaleVolume(factor);
    ellipsoids.push_back(std::move(c.ellipsoid));
  }
  return FromEllipsoids(std::move(ellipsoids));
}

EllipsoidUnion EllipsoidUnion::FromEllipsoids(std::vector<Ellipsoid> ellipsoids) {
  EllipsoidUnion result;
  if (ellipsoids.empty()) return result;
  const int d = ellipsoids.front().dim();
  result.ellipsoids_ = std::move(ellipsoids);
  result.log_total_volume_ = -std::numeric_limits<double>::infinity();
  for (const Ellipsoid& e : result.ellipsoids_) {
    result.log_total_volume_ = LogAddExp(result.log_total_volume_, e.log_volume());
  }
  double acc = 0.0;
  for (const Ellipsoid& e : result.ellipsoids_) {
    acc += std::exp(e.log_volume() - result.log_total_volume_);
    result.cumulative_.push_back(acc);
  }
  result.cumulative_.back() = 1.0;
  // Bounding box: along axis i an ellipsoid extends |row i of L| from its centre.
  result.box_lo_.assign(d, std::numeric_limits<double>::infinity());
  result.box_hi_.assign(d, -std::numeric_limits<double>::infinity());
  for (const Ellipsoid& e : result.ellipsoids_) {
    for (int i = 0; i < d; ++i) {
      const double half = e.chol().row(i).norm();
      result.box_lo_[i] = std::min(result.box_lo_[i], e.center()[i] - half);
      result.box_hi_[i] = std::max(result.box_hi_[i], e.center()[i] + half);
    }
  }
  return result;
}

int EllipsoidUnion::Count(const double* x, double* work) const {
  int m = 0;
  for (const Ellipsoid& e : ellipsoids_) m += e.Contains(x, work);
  return m;
}

bool EllipsoidUnion::Contains(const double* x, double* work) const {
  if (!InBox(x)) return false;
  for (const Ellipsoid& e : ellipsoids_) {
    if (e.Contains(x, work)) return true;
  }
  return false;
}

int EllipsoidUnion::Nearest(const double* x, double* work) const {
  int best = 0;
  double best_r2 = std::numeric_limits<double>::infinity();
  for (int k = 0; k < size(); ++k) {
    const double r2 = ellipsoids_[k].Radius2(x, work);
    if (r2 < best_r2) {
      best_r2 = r2;
      best = k;
    }
  }
  return best;
}

bool EllipsoidUnion::Sample(Rng& rng, double* out, double* work) const {
  int j = 0;
  if (ellipsoids_.size() > 1) {
    const double u = rng.Uniform();
    while (j + 1 < size() && cumulative_[j] <= u) ++j;
  }
  ellipsoids_[j].SampleUniform(rng, out, work);
  if (ellipsoids_.size() == 1) return true;
  const int m = Count(out, work);
  return m <= 1 || rng.Uniform() * m < 1.0;
}

}  // namespace ns_internal
}  // namespace gpsel
