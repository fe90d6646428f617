// Internal: evaluates a kernel expression tree and its exact first and second derivatives with
// respect to the raw hyperparameters, on precomputed pairwise input geometry.
//
// Base kernels (d = |x − x'|, natural parameters θ = softplus(r)):
//   SE    exp(−d²/2ℓ²)              MAT12  exp(−d/ℓ)
//   MAT32 (1+z)e^{−z}, z=√3d/ℓ      MAT52  (1+z+z²/3)e^{−z}, z=√5d/ℓ
//   LIN   v·x·x'                    PER    exp(−2 sin²(πd/p)/ℓ²)
//   RQ    (1+d²/2αℓ²)^{−α}          C      c
// Sums add derivatives; products use the product rule with "product of the other operands"
// computed without division (a LIN factor can be exactly zero).
//
// Changepoints and changewindows (the Automatic Statistician's covChangePointMultiD.m and
// covChangeWindowMultiD.m) read one input column x (the pinned one, else column 0) through its
// position z = (x − x_min)/(x_max − x_min) on the training inputs' range (SetInputFrame; z = x
// without a frame). With θ = (p, τ[, w]) = softplus of the raw values (core/hyperparameters.h),
// ℓ = p − 1 and σ(u) = ½(1 + tanh u):
//   CP(k1, k2):  v(z) = σ((z − ℓ)/τ)
//   CW(k1, k2):  v(z) = σ((z − ℓ + w/2)/τ) · σ((ℓ + w/2 − z)/τ)
//   k = (1 − v(z)) k1 (1 − v(z')) + v(z) k2 v(z')
// Derivatives: the operands' scaled by the weight matrices U = (1 − v)(1 − v')ᵀ and V = v v'ᵀ;
// the node's own by ∂U∘k1 + ∂V∘k2, with ∂v from σ' = ½(1 − tanh²u), σ'' = −2 tanh(u) σ' and
// u linear in ℓ and w and ∝ 1/τ (kernel_evaluator.cc).
#ifndef GPSEL_CORE_KERNEL_EVALUATOR_H_
#define GPSEL_CORE_KERNEL_EVALUATOR_H_

#include <map>
#include <vector>

#include <Eigen/Dense>

#include "gpsel/core/kernel_expr.h"

namespace gpsel::internal {

// Pairwise input quantities for one (x1, x2) pair of input sets, per active dimension. Only the
// quantities some base kernel on that dimension reads are filled (the others stay empty).
struct PairGeometry {
  struct ForDim {
    Eigen::MatrixXd squared_distance;  // d²   (SE, RQ)
    Eigen::MatrixXd distance;          // d    (MAT12, MAT32, MAT52, PER)
    Eigen::MatrixXd dot;               // x·x' (LIN)
    // Positions z of x1's and x2's rows on the column a CP/CW reads (dim −1: column 0), in
    // units of the training inputs' range.
    Eigen::VectorXd z1, z2;
  };
  std::map<int, ForDim> by_dim;  // key: active_dim (−1 = all columns)
  Eigen::Index rows = 0, cols = 0;
  // The sparse bounds' K_uf blocks (core/sparse_gp.cc sets it): sin through libmvec's vector
  // routine and exp's underflow flushed to 0 (core/internal/vector_math.h). Every other matrix
  // — the exact GP's above all, whose optimiser paths tests pin on real series — takes std::sin
  // and the unflushed exp, the bits they always had.
  bool vectorised = false;
  // x1 and x2 are the same inputs: every matrix is symmetric, so the transcendental functions
  // (exp, sin, log1p) are evaluated on the upper triangle only and mirrored.
  bool symmetric = false;
  // A rows×1 "matrix" of pairs (x1_i, x2_i), one per row, e.g. the diagonal k(x_i, x_i): a
  // change node's weights multiply entrywise (v(z1_i)·v(z2_i)) instead of forming an outer
  // product; z1 and z2 both have `rows` entries. Base kernels are entrywise already.
  bool diagonal = false;
};

class KernelEvaluator {
 public:
  explicit KernelEvaluator(const KernelExpr& kernel);
  // With the training inputs, whose range on each column a CP/CW reads is its frame (below).
  KernelEvaluator(const KernelExpr& kernel, const Eigen::MatrixXd& training_x);
  // The frame of changepoints and changewindows: z = (x − min)/(max − min) over `training_x`'s
  // column (a constant column: range 1). Without one, z = x. Geometry made afterwards uses it.
  void SetInputFrame(const Eigen::MatrixXd& training_x);

  int num_parameters() const { return num_parameters_; }
  PairGeometry MakeGeometry(const Eigen::MatrixXd& x1, const Eigen::MatrixXd& x2) const;
  // The geometry between rows [row0, row0 + rows) of x1 and [col0, col0 + cols) of x2 into `out`
  // (its storage reused when the sizes match): a tile small enough for the kernel tree to be
  // evaluated in cache. Symmetric when it is a diagonal block of one input set. Entry for entry
  // the same numbers as MakeGeometry's.
  void MakeGeometryBlock(const Eigen::MatrixXd& x1, Eigen::Index row0, Eigen::Index rows,
                         const Eigen::MatrixXd& x2, Eigen::Index col0, Eigen::Index cols,
                         PairGeometry* out) const;

  // Per-node value and first derivatives for the parameters in the node's subtree.
  struct NodeValue {
    Eigen::MatrixXd k;
    std::vector<Eigen::MatrixXd> dk;  // aligned with Node::params
  };
  // Evaluates every node bottom-up (root last). `raw` holds the kernel parameters.
  void Evaluate(const PairGeometry& geometry, const Eigen::VectorXd& raw, bool with_gradient,
                std::vector<NodeValue>* values) const;
  const NodeValue& Root(const std::vector<NodeValue>& values) const { return values[root_]; }
  NodeValue& Root(std::vector<NodeValue>& values) const { return values[root_]; }

  // ∂²K/∂r_i∂r_j of the root; false when identically zero (then `out` is untouched).
  bool SecondDerivative(const PairGeometry& geometry, const Eigen::VectorXd& raw,
                        const std::vector<NodeValue>& values, int i, int j,
                        Eigen::MatrixXd* out) const;

 private:
  struct Node {
    KernelExpr::Kind kind;
    BaseKernel base;
    int active_dim;
    std::vector<int> children;
    int first_param = 0;      // leaves and change nodes: index of their first own parameter
    int num_own = 0;          // change nodes: their own parameters (after the operands')
    std::vector<int> params;  // all parameters in the subtree, ascending
  };
  // A change node's weight v of its second operand on x1's (`z1`) and x2's (`z2`) rows, with raw
  // derivatives (order 1: d1; order 2: also d2, index a*m+b).
  struct ChangeWeights {
    Eigen::ArrayXd v1, v2;
    std::vector<Eigen::ArrayXd> d1_1, d1_2, d2_1, d2_2;
  };
  void ComputeChangeWeights(const Node& node, const PairGeometry& geometry,
                            const Eigen::VectorXd& raw, int order, ChangeWeights* out) const;
  void EvaluateChange(const Node& node, const PairGeometry& geometry, const Eigen::VectorXd& raw,
                      bool with_gradient, const std::vector<NodeValue>& values,
                      NodeValue* value) const;
  bool ChangeSecondDerivative(const Node& node, const PairGeometry& geometry,
                              const Eigen::VectorXd& raw, const std::vector<NodeValue>& values,
                              int i, int j, Eigen::MatrixXd* out) const;
  int Build(const KernelExpr& expr);
  int Position(const Node& node, int param) const;  // index in node.params or −1
  int ChildHolding(const Node& node, int param) const;
  void EvaluateLeaf(const Node& leaf, const PairGeometry& geometry, const Eigen::VectorXd& raw,
                    bool with_gradient, NodeValue* value) const;
  void LeafSecondDerivative(const Node& leaf, const PairGeometry& geometry,
                            const Eigen::VectorXd& raw, int a, int b, Eigen::MatrixXd* out) const;
  bool NodeSecondDerivative(int node, const PairGeometry& geometry, const Eigen::VectorXd& raw,
                            const std::vector<NodeValue>& values, int i, int j,
                            Eigen::MatrixXd* out) const;

  // Which pairwise quantities the base kernels on each active dimension read.
  struct GeometryUse {
    bool squared_distance = false;
    bool distance = false;
    bool dot = false;
    bool position = false;  // a CP/CW reads the column
  };
  struct InputFrame {
    double min = 0.0;
    double range = 1.0;
  };
  std::map<int, InputFrame> frames_;  // by the change nodes' active_dim
  std::map<int, GeometryUse> geometry_use_;
  std::vector<Node> nodes_;
  int root_ = 0;
  int num_parameters_ = 0;
};

}  // namespace gpsel::internal

#endif  // GPSEL_CORE_KERNEL_EVALUATOR_H_
