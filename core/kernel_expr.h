// Kernel expression grammar: base kernels combined with + and *, changepoints and
// changewindows, parsing, canonical form.
//
//   expr    := term ('+' term)*
//   term    := factor ('*' factor)*
//   factor  := BASE ('[' DIM ']' | '[*]')? | CHANGE ('[' DIM ']')? '(' expr ',' expr ')'
//            | '(' expr ')'
//   BASE    := SE | RBF | MAT12 | MAT32 | MAT52 | LIN | PER | RQ | C   (case-insensitive)
//   CHANGE  := CP | CW                                                 (case-insensitive)
//
// CP(k1, k2) = (1 − σ(x)) k1 (1 − σ(x')) + σ(x) k2 σ(x'): k1 before the change, k2 after it.
// CW(k1, k2) = (1 − a(x)) k1 (1 − a(x')) + a(x) k2 a(x'): k2 inside a window, k1 outside it.
// σ and a read one input column: DIM when pinned, else column 0 (core/internal/kernel_evaluator.h has the
// formulas and parameters). Their two operands are ordered (not sorted) and never flattened.
//
// BASE[*] is the ARD shorthand: the kernel once per input column, each with its own lengthscale
// (period, variance) and its own prior, in that column's units. It stays "SE[*]" in text and
// canonical form (the grammar does not know the data); ExpandPerColumn turns it into pinned
// kernels once the number of columns is known, and every workflow (score, search, evidence,
// predict) models the expanded kernel: SE[*] on 3 columns is SE[0]*SE[1]*SE[2], exactly the ARD
// SE exp(−Σ_c d_c²/2ℓ_c²); MAT*, RQ and PER take the same product over columns (the separable
// form); LIN[*] is LIN[0]+LIN[1]+LIN[2], the linear kernel with one variance per column. C[*]
// and CP[*]/CW[*] are errors. (`SE[*]` rather than `ARD(SE)`: it extends the `[DIM]` pin a
// user already knows, "SE on column 2" / "SE on every column, each its own", composes inside
// any expression without a new call syntax, and ARD(SE+PER) would have no single meaning.)
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

// KernelExpr::active_dim of a base kernel written BASE[*] (one copy per column, see above).
inline constexpr int kPerColumnDim = -2;

struct KernelExpr {
  enum class Kind { kBase, kSum, kProduct, kChangePoint, kChangeWindow };
  Kind kind = Kind::kBase;
  BaseKernel base = BaseKernel::kSE;  // meaningful when kind == kBase
  // Input column a base kernel reads (-1 = all columns with one lengthscale, kPerColumnDim =
  // BASE[*], one copy per column), or the column a changepoint's or
  // changewindow's σ reads (-1 = column 0).
  int active_dim = -1;
  // kSum/kProduct: two or more; kChangePoint: {before, after}; kChangeWindow: {outside, inside}.
  std::vector<KernelExpr> operands;

  static KernelExpr Base(BaseKernel base, int active_dim = -1);
  static KernelExpr Sum(std::vector<KernelExpr> operands);      // canonicalised
  static KernelExpr Product(std::vector<KernelExpr> operands);  // canonicalised
  static KernelExpr ChangePoint(KernelExpr before, KernelExpr after, int active_dim = -1);
  static KernelExpr ChangeWindow(KernelExpr outside, KernelExpr inside, int active_dim = -1);

  bool is_base() const { return kind == Kind::kBase; }
  bool is_change() const { return kind == Kind::kChangePoint || kind == Kind::kChangeWindow; }
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
// Whether a changepoint or changewindow occurs anywhere in `expr`.
bool ContainsChange(const KernelExpr& expr);
// Whether some base kernel is written BASE[*].
bool ContainsPerColumn(const KernelExpr& expr);
// Replaces every BASE[*] by its copies pinned to columns 0..num_columns−1 (a product, or a sum
// for LIN; the base itself for one column) and canonicalises; `expr` unchanged without [*].
// INVALID_ARGUMENT for num_columns < 1.
absl::StatusOr<KernelExpr> ExpandPerColumn(const KernelExpr& expr, int num_columns);
// "CP" or "CW" for a change node's kind.
std::string_view ChangeKindName(KernelExpr::Kind kind);

}  // namespace gpsel

#endif  // GPSEL_CORE_KERNEL_EXPR_H_
