// Kernel expression grammar: base kernels combined with + and *, parsing, canonical form.
//
//   expr    := term ('+' term)*
//   term    := factor ('*' factor)*
//   factor  := BASE ('[' DIM ']')? | '(' expr ')'
//   BASE    := SE | RBF | MAT12 | MAT32 | MAT52 | LIN | PER | RQ | C   (case-insensitive)
//
// Example:
//   absl::StatusOr<gpsel::KernelExpr> k = gpsel::ParseKernel("(SE*LIN[1]) + se");
//   gpsel::ToString(*k) == "LIN[1]*SE+SE"   // canonical: flattened, operands sorted
#ifndef GPSEL_CORE_KERNEL_EXPR_H_
#define GPSEL_CORE_KERNEL_EXPR_H_

#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"

namespace gpsel {

enum class BaseKernel { kSE, kMAT12, kMAT32, kMAT52, kLIN, kPER, kRQ, kConst };

// Canonical upper-case name: "SE", "MAT12", ..., "C".
std::string_view BaseKernelName(BaseKernel base);
// Parses a base kernel name (case-insensitive; "RBF" is an alias of SE).
absl::StatusOr<BaseKernel> ParseBaseKernelName(std::string_view name);
// Hyperparameter names of a base kernel, in the order the numerics use:
// SE/MAT*: {lengthscale}; LIN: {variance}; PER: {lengthscale, period};
// RQ: {lengthscale, alpha}; C: {constant}.
const std::vector<std::string>& BaseKernelParameterNames(BaseKernel base);

struct KernelExpr {
  enum class Kind { kBase, kSum, kProduct };
  Kind kind = Kind::kBase;
  BaseKernel base = BaseKernel::kSE;  // meaningful when kind == kBase
  int active_dim = -1;                // input column a base kernel reads; -1 = all columns
  std::vector<KernelExpr> operands;   // kSum/kProduct: two or more

  static KernelExpr Base(BaseKernel base, int active_dim = -1);
  static KernelExpr Sum(std::vector<KernelExpr> operands);      // canonicalised
  static KernelExpr Product(std::vector<KernelExpr> operands);  // canonicalised

  bool is_base() const { return kind == Kind::kBase; }
};

// Structural equality and a strict total order; on canonical expressions equality means
// "the same kernel up to associativity and commutativity".
bool operator==(const KernelExpr& a, const KernelExpr& b);
inline bool operator!=(const KernelExpr& a, const KernelExpr& b) { return !(a == b); }
bool operator<(const KernelExpr& a, const KernelExpr& b);

struct ParseLimits {
  size_t max_length = 1000;   // characters of the expression text
  int max_depth = 16;         // nesting depth of the canonical tree (a base kernel has depth 1)
  int max_base_kernels = 32;  // leaves
  absl::Status Validate() const;
};

// Parses and canonicalises. Errors are INVALID_ARGUMENT and say what and where, e.g.
//   "kernel expression: unknown base kernel 'SQ' at position 4"
//   "kernel expression: expected ')' at position 9"
absl::StatusOr<KernelExpr> ParseKernel(std::string_view text, const ParseLimits& limits = {});

// Flattens nested sums/products of the same kind and sorts commutative operands, recursively.
// Single-operand sums/products collapse to their operand.
KernelExpr Canonicalize(KernelExpr expr);

// Text form that ParseKernel reads back to an equal expression; minimal parentheses.
std::string ToString(const KernelExpr& expr);

int NumBaseKernels(const KernelExpr& expr);
int Depth(const KernelExpr& expr);
// Largest active_dim used (or -1 when none is pinned).
int MaxActiveDim(const KernelExpr& expr);
// Whether `base` occurs anywhere in `expr` (e.g. a period: BaseKernel::kPER).
bool ContainsBaseKernel(const KernelExpr& expr, BaseKernel base);

}  // namespace gpsel

#endif  // GPSEL_CORE_KERNEL_EXPR_H_
