// Kernel tree evaluation with exact raw-space first and second derivatives.
#include "core/kernel_evaluator.h"

#include <algorithm>
#include <cmath>

#include "core/hyperparameters.h"

namespace gpsel::internal {

namespace {

using Eigen::ArrayXXd;
using Eigen::MatrixXd;

constexpr double kPi = 3.14159265358979323846;

// Natural-space value and derivatives of one base kernel: k, ∂k/∂θ_a, ∂²k/∂θ_a∂θ_b (m×m, row-major
// index a*m+b). `order` 0, 1 or 2 says how much is wanted.
void BaseKernelNatural(BaseKernel base, const PairGeometry::ForDim& g, const double* theta,
                       int order, MatrixXd* k, std::vector<MatrixXd>* d1,
                       std::vector<MatrixXd>* d2) {
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
      if (order >= 2) d2->push_back(MatrixXd::Zero(g.dot.rows(), g.dot.cols()));
      return;
    }
    case BaseKernel::kConst: {
      const Eigen::Index r = g.distance.rows(), c = g.distance.cols();
      *k = MatrixXd::Constant(r, c, theta[0]);
      if (order >= 1) d1->push_back(MatrixXd::Ones(r, c));
      if (order >= 2) d2->push_back(MatrixXd::Zero(r, c));
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
  } else {
    for (const KernelExpr& operand : expr.operands) {
      const int child = Build(operand);
      node.children.push_back(child);
      const auto& cp = nodes_[child].params;
      node.params.insert(node.params.end(), cp.begin(), cp.end());
    }
  }
  nodes_.push_back(std::move(node));
  return static_cast<int>(nodes_.size()) - 1;
}

PairGeometry KernelEvaluator::MakeGeometry(const Eigen::MatrixXd& x1,
                                           const Eigen::MatrixXd& x2) const {
  PairGeometry geometry;
  for (const Node& node : nodes_) {
    if (node.kind != KernelExpr::Kind::kBase) continue;
    auto [it, inserted] = geometry.by_dim.try_emplace(node.active_dim);
    PairGeometry::ForDim& g = it->second;
    const bool all = node.active_dim < 0;
    auto column = [&](const Eigen::MatrixXd& x) -> Eigen::MatrixXd {
      return all ? x : x.col(node.active_dim);
    };
    if (g.dot.size() == 0) {
      const Eigen::MatrixXd a = column(x1), b = column(x2);
      g.dot = a * b.transpose();
      // d² directly rather than |a|² + |b|² − 2a·b, which loses precision for near points.
      g.squared_distance.resize(a.rows(), b.rows());
      for (Eigen::Index j = 0; j < b.rows(); ++j) {
        for (Eigen::Index i = 0; i < a.rows(); ++i) {
          g.squared_distance(i, j) = (a.row(i) - b.row(j)).squaredNorm();
        }
      }
      g.distance = g.squared_distance.array().sqrt().matrix();
    }
  }
  return geometry;
}

void KernelEvaluator::EvaluateLeaf(const Node& leaf, const PairGeometry& geometry,
                                   const Eigen::VectorXd& raw, bool with_gradient,
                                   NodeValue* value) const {
  const int m = static_cast<int>(leaf.params.size());
  double theta[2], slope[2];
  for (int a = 0; a < m; ++a) {
    theta[a] = Softplus(raw(leaf.first_param + a));
    slope[a] = Sigmoid(raw(leaf.first_param + a));
  }
  std::vector<MatrixXd> d1;
  BaseKernelNatural(leaf.base, geometry.by_dim.at(leaf.active_dim), theta, with_gradient ? 1 : 0,
                    &value->k, &d1, nullptr);
  value->dk.clear();
  if (with_gradient) {
    for (int a = 0; a < m; ++a) value->dk.push_back(d1[a] * slope[a]);  // chain rule dθ/dr = σ(r)
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
  BaseKernelNatural(leaf.base, geometry.by_dim.at(leaf.active_dim), theta, 2, &k, &d1, &d2);
  // ∂²k/∂r_a∂r_b = k_θaθb σ_a σ_b + δ_ab k_θa σ_a (1 − σ_a).
  *out = d2[a * m + b] * (slope[a] * slope[b]);
  if (a == b) *out += d1[a] * (slope[a] * (1.0 - slope[a]));
}

void KernelEvaluator::Evaluate(const PairGeometry& geometry, const Eigen::VectorXd& raw,
                               bool with_gradient, std::vector<NodeValue>* values) const {
  values->resize(nodes_.size());
  // Children are built before parents, so index order is a valid bottom-up order.
  for (size_t idx = 0; idx < nodes_.size(); ++idx) {
    const Node& node = nodes_[idx];
    NodeValue& v = (*values)[idx];
    if (node.kind == KernelExpr::Kind::kBase) {
      EvaluateLeaf(node, geometry, raw, with_gradient, &v);
      continue;
    }
    v.dk.clear();
    if (node.kind == KernelExpr::Kind::kSum) {
      v.k = (*values)[node.children[0]].k;
      for (size_t c = 1; c < node.children.size(); ++c) v.k += (*values)[node.children[c]].k;
      if (with_gradient) {
        for (int child : node.children) {
          for (const MatrixXd& d : (*values)[child].dk) v.dk.push_back(d);
        }
      }
      continue;
    }
    // Product: prefix/suffix products give "all operands but c" without dividing.
    const size_t count = node.children.size();
    std::vector<ArrayXXd> prefix(count + 1), suffix(count + 1);
    const MatrixXd& first = (*values)[node.children[0]].k;
    prefix[0] = ArrayXXd::Ones(first.rows(), first.cols());
    suffix[count] = prefix[0];
    for (size_t c = 0; c < count; ++c) {
      prefix[c + 1] = prefix[c] * (*values)[node.children[c]].k.array();
    }
    for (size_t c = count; c-- > 0;) {
      suffix[c] = suffix[c + 1] * (*values)[node.children[c]].k.array();
    }
    v.k = prefix[count].matrix();
    if (with_gradient) {
      for (size_t c = 0; c < count; ++c) {
        const ArrayXXd others = prefix[c] * suffix[c + 1];
        for (const MatrixXd& d : (*values)[node.children[c]].dk) {
          v.dk.push_back((d.array() * others).matrix());
        }
      }
    }
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

}  // namespace gpsel::internal
