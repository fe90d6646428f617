// Kernel tree evaluation with exact raw-space first and second derivatives.
#include "gpsel/core/internal/kernel_evaluator.h"

#include <algorithm>
#include <cmath>

#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/internal/vector_math.h"

namespace gpsel::internal {

namespace {

using Eigen::ArrayXXd;
using Eigen::MatrixXd;

constexpr double kPi = 3.14159265358979323846;

// Natural-space value and derivatives of one base kernel: k, ∂k/∂θ_a, ∂²k/∂θ_a∂θ_b (m×m, row-major
// index a*m+b). `order` 0, 1 or 2 says how much is wanted.
void BaseKernelNatural(BaseKernel base, const PairGeometry& geometry, int active_dim,
                       const double* theta, int order, MatrixXd* k, std::vector<MatrixXd>* d1,
                       std::vector<MatrixXd>* d2) {
  const PairGeometry::ForDim& g = geometry.by_dim.at(active_dim);
  const Eigen::Index rows = geometry.rows, cols = geometry.cols;
  switch (base) {
    case BaseKernel::kSE: {
      const double l = theta[0];
      const ArrayXXd d2l = g.squared_distance.array() / (l * l);  // d²/ℓ²
      const ArrayXXd kk = (-0.5 * d2l).exp();
      *k = kk.matrix();
      if (order >= 1) d1->push_back((kk * d2l / l).matrix());  // k d²/ℓ³
      if (order >= 2) d2->push_back((kk * (d2l * d2l - 3.0 * d2l) / (l * l)).matrix());
      return;
    }
    case BaseKernel::kMAT12: {
      const double l = theta[0];
      const ArrayXXd z = g.distance.array() / l;
      const ArrayXXd kk = (-z).exp();
      *k = kk.matrix();
      if (order >= 1) d1->push_back((kk * z / l).matrix());
      if (order >= 2) d2->push_back((kk * (z * z - 2.0 * z) / (l * l)).matrix());
      return;
    }
    case BaseKernel::kMAT32: {
      const double l = theta[0];
      const ArrayXXd z = std::sqrt(3.0) * g.distance.array() / l;
      const ArrayXXd e = (-z).exp();
      *k = ((1.0 + z) * e).matrix();
      if (order >= 1) d1->push_back((z * z * e / l).matrix());
      if (order >= 2) d2->push_back((e * z * z * (z - 3.0) / (l * l)).matrix());
      return;
    }
    case BaseKernel::kMAT52: {
      const double l = theta[0];
      const ArrayXXd z = std::sqrt(5.0) * g.distance.array() / l;
      const ArrayXXd e = (-z).exp();
      const ArrayXXd z2 = z * z;
      *k = ((1.0 + z + z2 / 3.0) * e).matrix();
      if (order >= 1) d1->push_back((z2 * (1.0 + z) * e / (3.0 * l)).matrix());
      if (order >= 2) {
        d2->push_back((e * (z2 * z2 - 3.0 * z2 * z - 3.0 * z2) / (3.0 * l * l)).matrix());
      }
      return;
    }
    case BaseKernel::kLIN: {
      *k = theta[0] * g.dot;
      if (order >= 1) d1->push_back(g.dot);
      if (order >= 2) d2->push_back(MatrixXd::Zero(rows, cols));
      return;
    }
    case BaseKernel::kConst: {
      *k = MatrixXd::Constant(rows, cols, theta[0]);
      if (order >= 1) d1->push_back(MatrixXd::Ones(rows, cols));
      if (order >= 2) d2->push_back(MatrixXd::Zero(rows, cols));
      return;
    }
    case BaseKernel::kPER: {
      // k = exp(f), f = −2S/ℓ², S = sin²A, A = πd/p.  ∂k = k ∂f,  ∂²k = k (∂f ∂f + ∂²f).
      const double l = theta[0], p = theta[1];
      const ArrayXXd a = kPi * g.distance.array() / p;
      const ArrayXXd sin_a = a.sin();
      const ArrayXXd s = sin_a * sin_a;
      const ArrayXXd kk = (-2.0 * s / (l * l)).exp();
      *k = kk.matrix();
      if (order == 0) return;
      const ArrayXXd sin_2a = (2.0 * a).sin();
      const ArrayXXd s_p = -sin_2a * a / p;                 // ∂S/∂p
      const ArrayXXd f_l = 4.0 * s / (l * l * l);
      const ArrayXXd f_p = -2.0 * s_p / (l * l);
      d1->push_back((kk * f_l).matrix());
      d1->push_back((kk * f_p).matrix());
      if (order >= 2) {
        const ArrayXXd s_pp = 2.0 * (2.0 * a).cos() * a * a / (p * p) + 2.0 * sin_2a * a / (p * p);
        const ArrayXXd f_ll = -12.0 * s / (l * l * l * l);
        const ArrayXXd f_pp = -2.0 * s_pp / (l * l);
        const ArrayXXd f_lp = 4.0 * s_p / (l * l * l);
        d2->push_back((kk * (f_l * f_l + f_ll)).matrix());
        d2->push_back((kk * (f_l * f_p + f_lp)).matrix());
        d2->push_back(d2->back());
        d2->push_back((kk * (f_p * f_p + f_pp)).matrix());
      }
      return;
    }
    case BaseKernel::kRQ: {
      // k = exp(f), f = −α log B, B = 1 + q, q = d²/(2αℓ²).
      const double l = theta[0], alpha = theta[1];
      const ArrayXXd q = g.squared_distance.array() / (2.0 * alpha * l * l);
      const ArrayXXd b = 1.0 + q;
      const ArrayXXd log_b = b.log();
      const ArrayXXd kk = (-alpha * log_b).exp();
      *k = kk.matrix();
      if (order == 0) return;
      const ArrayXXd f_l = 2.0 * alpha * q / (l * b);
      const ArrayXXd f_a = -log_b + q / b;
      d1->push_back((kk * f_l).matrix());
      d1->push_back((kk * f_a).matrix());
      if (order >= 2) {
        const ArrayXXd b2 = b * b;
        const ArrayXXd f_ll = 2.0 * alpha * q * (2.0 * q - 3.0 * b) / (l * l * b2);
        const ArrayXXd f_aa = q * q / (alpha * b2);
        const ArrayXXd f_la = 2.0 * q * q / (l * b2);
        d2->push_back((kk * (f_l * f_l + f_ll)).matrix());
        d2->push_back((kk * (f_l * f_a + f_la)).matrix());
        d2->push_back(d2->back());
        d2->push_back((kk * (f_a * f_a + f_aa)).matrix());
      }
      return;
    }
  }
}

}  // namespace

KernelEvaluator::KernelEvaluator(const KernelExpr& kernel) { root_ = Build(kernel); }

KernelEvaluator::KernelEvaluator(const KernelExpr& kernel, const Eigen::MatrixXd& training_x)
    : KernelEvaluator(kernel) {
  SetInputFrame(training_x);
}

void KernelEvaluator::SetInputFrame(const Eigen::MatrixXd& training_x) {
  for (auto& [dim, frame] : frames_) {
    const Eigen::Index column = dim < 0 ? 0 : dim;
    if (column >= training_x.cols() || training_x.rows() == 0) continue;
    const double lo = training_x.col(column).minCoeff();
    const double hi = training_x.col(column).maxCoeff();
    frame.min = lo;
    frame.range = hi > lo ? hi - lo : 1.0;
  }
}

int KernelEvaluator::Build(const KernelExpr& expr) {
  Node node;
  node.kind = expr.kind;
  node.base = expr.base;
  node.active_dim = expr.active_dim;
  if (expr.is_base()) {
    node.first_param = num_parameters_;
    const int m = static_cast<int>(BaseKernelParameterNames(expr.base).size());
    for (int a = 0; a < m; ++a) node.params.push_back(num_parameters_ + a);
    num_parameters_ += m;
    GeometryUse& use = geometry_use_[expr.active_dim];
    switch (expr.base) {
      case BaseKernel::kSE:
      case BaseKernel::kRQ:
        use.squared_distance = true;
        break;
      case BaseKernel::kMAT12:
      case BaseKernel::kMAT32:
      case BaseKernel::kMAT52:
      case BaseKernel::kPER:
        use.distance = true;
        break;
      case BaseKernel::kLIN:
        use.dot = true;
        break;
      case BaseKernel::kConst:
        break;
    }
  } else {
    for (const KernelExpr& operand : expr.operands) {
      const int child = Build(operand);
      node.children.push_back(child);
      const auto& cp = nodes_[child].params;
      node.params.insert(node.params.end(), cp.begin(), cp.end());
    }
    if (expr.is_change()) {
      // Own parameters after the operands', as DescribeHyperparameters names them.
      node.first_param = num_parameters_;
      node.num_own = static_cast<int>(ChangeParameterNames(expr.kind).size());
      for (int a = 0; a < node.num_own; ++a) node.params.push_back(num_parameters_ + a);
      num_parameters_ += node.num_own;
      geometry_use_[expr.active_dim].position = true;
      frames_.emplace(expr.active_dim, InputFrame{});
    }
  }
  nodes_.push_back(std::move(node));
  return static_cast<int>(nodes_.size()) - 1;
}

PairGeometry KernelEvaluator::MakeGeometry(const Eigen::MatrixXd& x1,
                                           const Eigen::MatrixXd& x2) const {
  PairGeometry geometry;
  MakeGeometryBlock(x1, 0, x1.rows(), x2, 0, x2.rows(), &geometry);
  geometry.symmetric = &x1 == &x2 || (x1.rows() == x2.rows() && x1.cols() == x2.cols() &&
                                      (x1.array() == x2.array()).all());
  return geometry;
}

void KernelEvaluator::MakeGeometryBlock(const Eigen::MatrixXd& x1, Eigen::Index row0,
                                        Eigen::Index rows, const Eigen::MatrixXd& x2,
                                        Eigen::Index col0, Eigen::Index cols,
                                        PairGeometry* out) const {
  out->rows = rows;
  out->cols = cols;
  out->symmetric = &x1 == &x2 && row0 == col0 && rows == cols;
  out->diagonal = false;
  for (const auto& [dim, use] : geometry_use_) {
    PairGeometry::ForDim& g = out->by_dim[dim];
    const Eigen::Index first = dim < 0 ? 0 : dim;
    const Eigen::Index count = dim < 0 ? x1.cols() : 1;
    const auto a = x1.block(row0, first, rows, count);
    const auto b = x2.block(col0, first, cols, count);
    // d² summed dimension by dimension, a column at a time: directly rather than
    // |a|² + |b|² − 2a·b, which loses precision for near points.
    if (use.squared_distance || use.distance) {
      g.squared_distance.setZero(rows, cols);
      for (Eigen::Index c = 0; c < count; ++c) {
        for (Eigen::Index j = 0; j < cols; ++j) {
          g.squared_distance.col(j).array() += (a.col(c).array() - b(j, c)).square();
        }
      }
    }
    if (use.distance) g.distance = g.squared_distance.array().sqrt().matrix();
    if (use.position) {
      const Eigen::Index column = dim < 0 ? 0 : dim;
      auto frame = frames_.find(dim);
      const InputFrame f = frame == frames_.end() ? InputFrame{} : frame->second;
      g.z1 = ((x1.block(row0, column, rows, 1).array() - f.min) / f.range).matrix();
      g.z2 = ((x2.block(col0, column, cols, 1).array() - f.min) / f.range).matrix();
    }
    if (use.dot) {
      g.dot.setZero(rows, cols);
      for (Eigen::Index c = 0; c < count; ++c) {
        for (Eigen::Index j = 0; j < cols; ++j) g.dot.col(j) += a.col(c) * b(j, c);
      }
    }
  }
}

namespace {

// out = f(in) elementwise, for an Eigen array expression f. With `symmetric` (square `in`), f is
// evaluated on the upper triangle only, column by column, and mirrored: half the exp/sin calls,
// which dominate a kernel evaluation.
template <typename F>
void Elementwise(const MatrixXd& in, bool symmetric, const F& f, MatrixXd* out) {
  if (!symmetric) {
    out->noalias() = f(in.array()).matrix();
    return;
  }
  const Eigen::Index n = in.rows();
  out->resize(n, n);
  for (Eigen::Index j = 0; j < n; ++j) {
    out->col(j).head(j + 1) = f(in.col(j).head(j + 1).array()).matrix();
  }
  out->triangularView<Eigen::StrictlyLower>() = out->transpose();
}

// out = f(scale · in) elementwise for a vector routine f of core/internal/vector_math.h
// (ExpOfScaled, SinOfScaled), on the upper triangle and mirrored when `symmetric` (as
// Elementwise).
using ScaledFunction = void (*)(const double*, double, double*, Eigen::Index);
void ApplyScaled(ScaledFunction f, const MatrixXd& in, double scale, bool symmetric,
                 MatrixXd* out) {
  out->resize(in.rows(), in.cols());
  if (!symmetric) {
    f(in.data(), scale, out->data(), in.size());
    return;
  }
  for (Eigen::Index j = 0; j < in.cols(); ++j) {
    f(in.col(j).data(), scale, out->col(j).data(), j + 1);
  }
  out->triangularView<Eigen::StrictlyLower>() = out->transpose();
}

// exp, flushed below −708 only on the vectorised (sparse K_uf) blocks (PairGeometry::vectorised).
void ScaledExp(const MatrixXd& in, double scale, bool symmetric, bool vectorised,
               MatrixXd* out) {
  ApplyScaled(vectorised ? ExpOfScaled : ExpOfScaledUnflushed, in, scale, symmetric, out);
}

}  // namespace

void KernelEvaluator::EvaluateLeaf(const Node& leaf, const PairGeometry& geometry,
                                   const Eigen::VectorXd& raw, bool with_gradient,
                                   NodeValue* value) const {
  const int m = static_cast<int>(leaf.params.size());
  double theta[2], slope[2];
  for (int a = 0; a < m; ++a) {
    theta[a] = Softplus(raw(leaf.first_param + a));
    slope[a] = Sigmoid(raw(leaf.first_param + a));  // chain rule dθ/dr = σ(r)
  }
  const PairGeometry::ForDim& g = geometry.by_dim.at(leaf.active_dim);
  // Value and raw-space first derivatives written straight into `value`, one pass over the n×n
  // entries per output and no temporaries where the formula allows (this runs once per
  // likelihood evaluation; BaseKernelNatural below serves the second derivatives).
  // Same formulas as BaseKernelNatural, with σ(r) folded into the scalar factors.
  MatrixXd& k = value->k;
  std::vector<MatrixXd>& dk = value->dk;
  const bool sym = geometry.symmetric;
  const bool vec = geometry.vectorised;
  dk.resize(with_gradient ? m : 0);
  switch (leaf.base) {
    case BaseKernel::kSE: {
      const double l = theta[0];
      const double c = -0.5 / (l * l);
      ScaledExp(g.squared_distance, c, sym, vec, &k);
      if (with_gradient) {  // k d²/ℓ³
        dk[0].noalias() =
            (k.array() * g.squared_distance.array() * (slope[0] / (l * l * l))).matrix();
      }
      return;
    }
    case BaseKernel::kMAT12: {
      const double l = theta[0];
      const double c = -1.0 / l;
      ScaledExp(g.distance, c, sym, vec, &k);
      if (with_gradient) {  // k z/ℓ, z = d/ℓ
        dk[0].noalias() = (k.array() * g.distance.array() * (slope[0] / (l * l))).matrix();
      }
      return;
    }
    case BaseKernel::kMAT32: {
      const double l = theta[0], c = std::sqrt(3.0) / l;
      ScaledExp(g.distance, -c, sym, vec, &k);
      k.array() *= 1.0 + c * g.distance.array();
      if (with_gradient) {  // z² e^{−z}/ℓ = k z²/((1+z)ℓ)
        const auto z = c * g.distance.array();
        dk[0].noalias() = (k.array() * z.square() / (1.0 + z) * (slope[0] / l)).matrix();
      }
      return;
    }
    case BaseKernel::kMAT52: {
      const double l = theta[0], c = std::sqrt(5.0) / l;
      ScaledExp(g.distance, -c, sym, vec, &k);
      k.array() *= 1.0 + c * g.distance.array() + (c * g.distance.array()).square() / 3.0;
      const auto z = c * g.distance.array();
      if (with_gradient) {  // z²(1+z)e^{−z}/(3ℓ) = k z²(1+z)/((1+z+z²/3)·3ℓ)
        dk[0].noalias() = (k.array() * z.square() * (1.0 + z) / (1.0 + z + z.square() / 3.0) *
                           (slope[0] / (3.0 * l)))
                              .matrix();
      }
      return;
    }
    case BaseKernel::kLIN: {
      k.noalias() = theta[0] * g.dot;
      if (with_gradient) dk[0].noalias() = slope[0] * g.dot;
      return;
    }
    case BaseKernel::kConst: {
      k.setConstant(geometry.rows, geometry.cols, theta[0]);
      if (with_gradient) dk[0].setConstant(geometry.rows, geometry.cols, slope[0]);
      return;
    }
    case BaseKernel::kPER: {
      // k = exp(−2S/ℓ²), S = sin²A, A = πd/p; ∂k/∂ℓ = k·4S/ℓ³; ∂k/∂p = k·2 sin(2A)·A/(pℓ²).
      const double l = theta[0], p = theta[1];
      const double w = kPi / p;
      // sin through libmvec's vector routine on the sparse bounds' K_uf blocks (where it was 17 %
      // of an evaluation; PairGeometry::vectorised), std::sin elsewhere: the exact fits'
      // optimiser paths, which the optima tests pin on real series, move with a few ulps of sin,
      // and 4 ulps between K_uu and K_uf are far below the sparse jitter (10⁻¹³).
      MatrixXd s;  // sin A, then S = sin²A
      if (!vec) {
        Elementwise(g.distance, sym, [w](const auto& d) { return (w * d).sin(); }, &s);
      } else {
        ApplyScaled(SinOfScaled, g.distance, w, sym, &s);
      }
      s.array() = s.array().square();
      const double c = -2.0 / (l * l);
      ScaledExp(s, c, sym, vec, &k);
      if (with_gradient) {
        dk[0].noalias() = (k.array() * s.array() * (4.0 * slope[0] / (l * l * l))).matrix();
        MatrixXd a_sin_2a;  // sin 2A, then A·sin(2A)
        if (!vec) {
          Elementwise(g.distance, sym, [w](const auto& d) { return (2.0 * w * d).sin(); },
                      &a_sin_2a);
        } else {
          ApplyScaled(SinOfScaled, g.distance, 2.0 * w, sym, &a_sin_2a);
        }
        a_sin_2a.array() *= w * g.distance.array();
        dk[1].noalias() = (k.array() * a_sin_2a.array() * (2.0 * slope[1] / (p * l * l))).matrix();
      }
      return;
    }
    case BaseKernel::kRQ: {
      // k = B^{−α}, B = 1 + q, q = d²/(2αℓ²); ∂k/∂ℓ = k·2αq/(ℓB); ∂k/∂α = k·(q/B − log B).
      const double l = theta[0], alpha = theta[1];
      const ArrayXXd q = g.squared_distance.array() * (1.0 / (2.0 * alpha * l * l));
      MatrixXd log_b_matrix;
      Elementwise(q.matrix(), sym, [](const auto& qv) { return qv.log1p(); }, &log_b_matrix);
      const auto log_b = log_b_matrix.array();
      ScaledExp(log_b_matrix, -alpha, sym, vec, &k);
      if (with_gradient) {
        dk[0].noalias() = (k.array() * q / (1.0 + q) * (2.0 * alpha * slope[0] / l)).matrix();
        dk[1].noalias() = (k.array() * (q / (1.0 + q) - log_b) * slope[1]).matrix();
      }
      return;
    }
  }
}

void KernelEvaluator::LeafSecondDerivative(const Node& leaf, const PairGeometry& geometry,
                                           const Eigen::VectorXd& raw, int a, int b,
                                           Eigen::MatrixXd* out) const {
  const int m = static_cast<int>(leaf.params.size());
  double theta[2], slope[2];
  for (int t = 0; t < m; ++t) {
    theta[t] = Softplus(raw(leaf.first_param + t));
    slope[t] = Sigmoid(raw(leaf.first_param + t));
  }
  MatrixXd k;
  std::vector<MatrixXd> d1, d2;
  BaseKernelNatural(leaf.base, geometry, leaf.active_dim, theta, 2, &k, &d1, &d2);
  // ∂²k/∂r_a∂r_b = k_θaθb σ_a σ_b + δ_ab k_θa σ_a (1 − σ_a).
  *out = d2[a * m + b] * (slope[a] * slope[b]);
  if (a == b) *out += d1[a] * (slope[a] * (1.0 - slope[a]));
}

void KernelEvaluator::Evaluate(const PairGeometry& geometry, const Eigen::VectorXd& raw,
                               bool with_gradient, std::vector<NodeValue>* values) const {
  values->resize(nodes_.size());
  // Children are built before parents, so index order is a valid bottom-up order.
  //
  // A sum node takes its operands' matrices over by move instead of copying them: nothing reads
  // the value of a sum's direct operand afterwards (the root is never one, and SecondDerivative
  // reads only the values of product operands — a sum's second derivatives recurse into its
  // operands' own operands or recompute leaves). So after Evaluate, the entries of the direct
  // operands of sum nodes are empty; every other node's entry holds its value.
  for (size_t idx = 0; idx < nodes_.size(); ++idx) {
    const Node& node = nodes_[idx];
    NodeValue& v = (*values)[idx];
    if (node.kind == KernelExpr::Kind::kBase) {
      EvaluateLeaf(node, geometry, raw, with_gradient, &v);
      continue;
    }
    if (node.num_own > 0) {
      // Change node: its operands' values stay (its second derivatives read them).
      EvaluateChange(node, geometry, raw, with_gradient, *values, &v);
      continue;
    }
    v.dk.clear();
    if (with_gradient) v.dk.reserve(node.params.size());
    if (node.kind == KernelExpr::Kind::kSum) {
      v.k = std::move((*values)[node.children[0]].k);
      for (size_t c = 1; c < node.children.size(); ++c) v.k += (*values)[node.children[c]].k;
      for (int child : node.children) {
        NodeValue& cv = (*values)[child];
        if (with_gradient) {
          for (MatrixXd& d : cv.dk) v.dk.push_back(std::move(d));
        }
        cv.k = MatrixXd();
        cv.dk.clear();
      }
      continue;
    }
    // Product: the derivative of operand c is multiplied by the product of the other operands
    // (computed without dividing: a LIN factor can be exactly zero).
    const size_t count = node.children.size();
    auto child_k = [&](size_t c) -> const MatrixXd& { return (*values)[node.children[c]].k; };
    if (count == 1) {  // not produced by the parser, but keep non-canonical trees working
      v.k = child_k(0);
      if (with_gradient) v.dk = (*values)[node.children[0]].dk;
      continue;
    }
    if (count == 2) {
      v.k.noalias() = (child_k(0).array() * child_k(1).array()).matrix();
      if (with_gradient) {
        for (size_t c = 0; c < 2; ++c) {
          const MatrixXd& other = child_k(1 - c);
          for (const MatrixXd& d : (*values)[node.children[c]].dk) {
            v.dk.push_back((d.array() * other.array()).matrix());
          }
        }
      }
      continue;
    }
    // prefix[c] = k_0 ∘ … ∘ k_{c−1} (c ≥ 1), suffix[c] = k_c ∘ … ∘ k_{count−1} (c ≤ count−1).
    std::vector<ArrayXXd> prefix(count + 1), suffix(count + 1);
    prefix[1] = child_k(0).array();
    for (size_t c = 1; c < count; ++c) prefix[c + 1] = prefix[c] * child_k(c).array();
    if (with_gradient) {
      suffix[count - 1] = child_k(count - 1).array();
      for (size_t c = count - 1; c-- > 1;) suffix[c] = suffix[c + 1] * child_k(c).array();
      for (size_t c = 0; c < count; ++c) {
        ArrayXXd others;
        if (c == 0) {
          others = suffix[1];
        } else if (c == count - 1) {
          others = prefix[count - 1];
        } else {
          others = prefix[c] * suffix[c + 1];
        }
        for (const MatrixXd& d : (*values)[node.children[c]].dk) {
          v.dk.push_back((d.array() * others).matrix());
        }
      }
    }
    v.k = prefix[count].matrix();
  }
}

int KernelEvaluator::Position(const Node& node, int param) const {
  auto it = std::lower_bound(node.params.begin(), node.params.end(), param);
  if (it == node.params.end() || *it != param) return -1;
  return static_cast<int>(it - node.params.begin());
}

int KernelEvaluator::ChildHolding(const Node& node, int param) const {
  for (size_t c = 0; c < node.children.size(); ++c) {
    if (Position(nodes_[node.children[c]], param) >= 0) return static_cast<int>(c);
  }
  return -1;
}

bool KernelEvaluator::SecondDerivative(const PairGeometry& geometry, const Eigen::VectorXd& raw,
                                       const std::vector<NodeValue>& values, int i, int j,
                                       Eigen::MatrixXd* out) const {
  return NodeSecondDerivative(root_, geometry, raw, values, i, j, out);
}

bool KernelEvaluator::NodeSecondDerivative(int index, const PairGeometry& geometry,
                                           const Eigen::VectorXd& raw,
                                           const std::vector<NodeValue>& values, int i, int j,
                                           Eigen::MatrixXd* out) const {
  const Node& node = nodes_[index];
  if (node.kind == KernelExpr::Kind::kBase) {
    LeafSecondDerivative(node, geometry, raw, i - node.first_param, j - node.first_param, out);
    return true;
  }
  if (node.num_own > 0) return ChangeSecondDerivative(node, geometry, raw, values, i, j, out);
  const int ci = ChildHolding(node, i), cj = ChildHolding(node, j);
  if (node.kind == KernelExpr::Kind::kSum) {
    if (ci != cj) return false;
    return NodeSecondDerivative(node.children[ci], geometry, raw, values, i, j, out);
  }
  // Product rule: same operand → its second derivative times the others; different operands →
  // product of their first derivatives times the rest.
  ArrayXXd result;
  if (ci == cj) {
    MatrixXd inner;
    if (!NodeSecondDerivative(node.children[ci], geometry, raw, values, i, j, &inner)) {
      return false;
    }
    result = inner.array();
  } else {
    const NodeValue& vi = values[node.children[ci]];
    const NodeValue& vj = values[node.children[cj]];
    result = vi.dk[Position(nodes_[node.children[ci]], i)].array() *
             vj.dk[Position(nodes_[node.children[cj]], j)].array();
  }
  for (size_t c = 0; c < node.children.size(); ++c) {
    if (static_cast<int>(c) == ci || static_cast<int>(c) == cj) continue;
    result *= values[node.children[c]].k.array();
  }
  *out = result.matrix();
  return true;
}

// ---------------------------------------------------------------------------------------------
// Changepoints and changewindows (formulas in the header).

namespace {

using Eigen::ArrayXd;

// σ(u) = ½(1 + tanh u) of one sigmoid u = N/τ with N linear in the natural parameters, and its
// natural derivatives: u_a given; u_ττ = 2u/τ², u_τa = −u_a/τ (a ≠ τ), the rest 0, so that
// σ_a = σ' u_a and σ_ab = σ'' u_a u_b + σ' u_ab.
struct Sigmoid1 {
  ArrayXd s;
  std::vector<ArrayXd> d1, d2;
};
void SigmoidOf(const ArrayXd& u, const std::vector<ArrayXd>& du, double tau, int tau_index,
               int order, Sigmoid1* out) {
  const ArrayXd t = u.tanh();
  out->s = 0.5 * (1.0 + t);
  if (order == 0) return;
  const int m = static_cast<int>(du.size());
  const ArrayXd g = 0.5 * (1.0 - t * t);  // σ'
  out->d1.clear();
  for (int a = 0; a < m; ++a) out->d1.push_back(g * du[a]);
  if (order < 2) return;
  const ArrayXd gp = -2.0 * t * g;  // σ''
  out->d2.assign(m * m, ArrayXd());
  for (int a = 0; a < m; ++a) {
    for (int b = 0; b < m; ++b) {
      ArrayXd value = gp * du[a] * du[b];
      if (a == tau_index && b == tau_index) {
        value += g * (2.0 * u / (tau * tau));
      } else if (a == tau_index) {
        value -= g * du[b] / tau;
      } else if (b == tau_index) {
        value -= g * du[a] / tau;
      }
      out->d2[a * m + b] = std::move(value);
    }
  }
}

// v(z) and its natural derivatives for a CP (θ = p, τ) or CW (θ = p, τ, w) node.
void ChangeWeightNatural(KernelExpr::Kind kind, const ArrayXd& z, const double* theta, int order,
                         Sigmoid1* out) {
  const double location = theta[0] - 1.0, tau = theta[1];
  const Eigen::Index n = z.size();
  auto constant = [n](double c) { return ArrayXd::Constant(n, c); };
  if (kind == KernelExpr::Kind::kChangePoint) {
    const ArrayXd u = (z - location) / tau;
    SigmoidOf(u, {constant(-1.0 / tau), -u / tau}, tau, 1, order, out);
    return;
  }
  const double w = theta[2];
  const ArrayXd u1 = (z - location + 0.5 * w) / tau;  // rises at the window's start
  const ArrayXd u2 = (location + 0.5 * w - z) / tau;  // falls at its end
  Sigmoid1 s1, s2;
  SigmoidOf(u1, {constant(-1.0 / tau), -u1 / tau, constant(0.5 / tau)}, tau, 1, order, &s1);
  SigmoidOf(u2, {constant(1.0 / tau), -u2 / tau, constant(0.5 / tau)}, tau, 1, order, &s2);
  out->s = s1.s * s2.s;
  if (order == 0) return;
  const int m = 3;
  out->d1.clear();
  for (int a = 0; a < m; ++a) out->d1.push_back(s1.d1[a] * s2.s + s1.s * s2.d1[a]);
  if (order < 2) return;
  out->d2.assign(m * m, ArrayXd());
  for (int a = 0; a < m; ++a) {
    for (int b = 0; b < m; ++b) {
      out->d2[a * m + b] = s1.d2[a * m + b] * s2.s + s1.d1[a] * s2.d1[b] +
                           s1.d1[b] * s2.d1[a] + s1.s * s2.d2[a * m + b];
    }
  }
}

// Natural → raw derivatives through θ = softplus(r): ∂/∂r_a = σ_a ∂/∂θ_a and
// ∂²/∂r_a∂r_b = σ_a σ_b ∂²/∂θ_a∂θ_b + δ_ab σ_a (1 − σ_a) ∂/∂θ_a (σ_a the sigmoid of r_a).
void ToRaw(const double* slope, int m, int order, Sigmoid1* w) {
  if (order >= 2) {
    for (int a = 0; a < m; ++a) {
      for (int b = 0; b < m; ++b) {
        w->d2[a * m + b] *= slope[a] * slope[b];
        if (a == b) w->d2[a * m + b] += w->d1[a] * (slope[a] * (1.0 - slope[a]));
      }
    }
  }
  if (order >= 1) {
    for (int a = 0; a < m; ++a) w->d1[a] *= slope[a];
  }
}

// a bᵀ as a matrix.
MatrixXd Outer(const ArrayXd& a, const ArrayXd& b) { return a.matrix() * b.matrix().transpose(); }

// The weight matrix of the pairs a geometry holds: the outer product, or on a diagonal geometry
// (PairGeometry::diagonal) the entrywise product as a column.
MatrixXd PairWeight(const PairGeometry& geometry, const ArrayXd& a, const ArrayXd& b) {
  if (geometry.diagonal) return (a * b).matrix();
  return Outer(a, b);
}

}  // namespace

void KernelEvaluator::ComputeChangeWeights(const Node& node, const PairGeometry& geometry,
                                           const Eigen::VectorXd& raw, int order,
                                           ChangeWeights* out) const {
  const int m = node.num_own;
  double theta[3], slope[3];
  for (int a = 0; a < m; ++a) {
    theta[a] = Softplus(raw(node.first_param + a));
    slope[a] = Sigmoid(raw(node.first_param + a));
  }
  const PairGeometry::ForDim& g = geometry.by_dim.at(node.active_dim);
  Sigmoid1 w1, w2;
  ChangeWeightNatural(node.kind, g.z1.array(), theta, order, &w1);
  ToRaw(slope, m, order, &w1);
  if (geometry.symmetric) {
    w2 = w1;
  } else {
    ChangeWeightNatural(node.kind, g.z2.array(), theta, order, &w2);
    ToRaw(slope, m, order, &w2);
  }
  out->v1 = std::move(w1.s);
  out->v2 = std::move(w2.s);
  out->d1_1 = std::move(w1.d1);
  out->d1_2 = std::move(w2.d1);
  out->d2_1 = std::move(w1.d2);
  out->d2_2 = std::move(w2.d2);
}

void KernelEvaluator::EvaluateChange(const Node& node, const PairGeometry& geometry,
                                     const Eigen::VectorXd& raw, bool with_gradient,
                                     const std::vector<NodeValue>& values,
                                     NodeValue* value) const {
  ChangeWeights w;
  ComputeChangeWeights(node, geometry, raw, with_gradient ? 1 : 0, &w);
  const NodeValue& first = values[node.children[0]];
  const NodeValue& second = values[node.children[1]];
  const ArrayXd u1 = 1.0 - w.v1, u2 = 1.0 - w.v2;
  const MatrixXd weight_first = PairWeight(geometry, u1, u2),
                 weight_second = PairWeight(geometry, w.v1, w.v2);
  value->k.noalias() =
      (weight_first.array() * first.k.array() + weight_second.array() * second.k.array()).matrix();
  value->dk.clear();
  if (!with_gradient) return;
  value->dk.reserve(node.params.size());
  for (const MatrixXd& d : first.dk)
    value->dk.push_back((weight_first.array() * d.array()).matrix());
  for (const MatrixXd& d : second.dk) {
    value->dk.push_back((weight_second.array() * d.array()).matrix());
  }
  for (int a = 0; a < node.num_own; ++a) {
    // ∂U = −v_a (1 − v')ᵀ − (1 − v) v'_aᵀ,  ∂V = v_a v'ᵀ + v v'_aᵀ.
    const MatrixXd d_first =
        -(PairWeight(geometry, w.d1_1[a], u2) + PairWeight(geometry, u1, w.d1_2[a]));
    const MatrixXd d_second =
        PairWeight(geometry, w.d1_1[a], w.v2) + PairWeight(geometry, w.v1, w.d1_2[a]);
    value->dk.push_back(
        (d_first.array() * first.k.array() + d_second.array() * second.k.array()).matrix());
  }
}

bool KernelEvaluator::ChangeSecondDerivative(const Node& node, const PairGeometry& geometry,
                                             const Eigen::VectorXd& raw,
                                             const std::vector<NodeValue>& values, int i, int j,
                                             Eigen::MatrixXd* out) const {
  const int own_end = node.first_param + node.num_own;
  const bool i_own = i >= node.first_param && i < own_end;
  const bool j_own = j >= node.first_param && j < own_end;
  const int ci = i_own ? -1 : ChildHolding(node, i);
  const int cj = j_own ? -1 : ChildHolding(node, j);
  if (!i_own && !j_own && ci != cj) return false;  // the two operands do not interact
  ChangeWeights w;
  ComputeChangeWeights(node, geometry, raw, (i_own || j_own) ? 2 : 0, &w);
  const ArrayXd u1 = 1.0 - w.v1, u2 = 1.0 - w.v2;
  if (!i_own && !j_own) {
    MatrixXd inner;
    if (!NodeSecondDerivative(node.children[ci], geometry, raw, values, i, j, &inner)) {
      return false;
    }
    const MatrixXd weight =
        ci == 0 ? PairWeight(geometry, u1, u2) : PairWeight(geometry, w.v1, w.v2);
    *out = (weight.array() * inner.array()).matrix();
    return true;
  }
  if (i_own != j_own) {
    const int a = (i_own ? i : j) - node.first_param;
    const int operand_param = i_own ? j : i;
    const int c = i_own ? cj : ci;
    const Node& child = nodes_[node.children[c]];
    const MatrixXd& d_operand = values[node.children[c]].dk[Position(child, operand_param)];
    const MatrixXd d_weight =
        c == 0
            ? MatrixXd(-(PairWeight(geometry, w.d1_1[a], u2) + PairWeight(geometry, u1, w.d1_2[a])))
            : MatrixXd(PairWeight(geometry, w.d1_1[a], w.v2) +
                       PairWeight(geometry, w.v1, w.d1_2[a]));
    *out = (d_weight.array() * d_operand.array()).matrix();
    return true;
  }
  const int m = node.num_own;
  const int a = i - node.first_param, b = j - node.first_param;
  const MatrixXd cross =
      PairWeight(geometry, w.d1_1[a], w.d1_2[b]) + PairWeight(geometry, w.d1_1[b], w.d1_2[a]);
  const MatrixXd dd_first = cross - PairWeight(geometry, w.d2_1[a * m + b], u2) -
                            PairWeight(geometry, u1, w.d2_2[a * m + b]);
  const MatrixXd dd_second = cross + PairWeight(geometry, w.d2_1[a * m + b], w.v2) +
                             PairWeight(geometry, w.v1, w.d2_2[a * m + b]);
  *out = (dd_first.array() * values[node.children[0]].k.array() +
          dd_second.array() * values[node.children[1]].k.array())
             .matrix();
  return true;
}

}  // namespace gpsel::internal
