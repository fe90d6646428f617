// Kernel expression grammar: base-kernel names, the parser, canonical form, order and printing.
//
// The parser is iterative (an explicit stack of open parenthesis groups), so hostile input such
// as 100000 '(' cannot overflow the call stack; the trees it builds are flattened as they grow
// and their canonical depth is checked incrementally, which bounds the recursion of every
// tree-walking function applied to a parsed expression afterwards.
//
// Canonical order of operands (operator<): products, then base kernels, then changepoints, then
// changewindows, then sums; base kernels alphabetically by canonical name, then by active
// dimension (-1 first); composites by their column, then their operand lists, lexicographically.
// This makes canonical text read like "LIN[1]*SE+SE", "LIN*(MAT32+SE)" and "C*CP(SE,LIN)".
// A changepoint's operands keep their order (before, after): swapping them is another kernel.
#include "gpsel/core/kernel_expr.h"

#include <algorithm>
#include <cstdint>
#include <optional>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"

namespace gpsel {
namespace {

// Largest input column a base kernel may be pinned to with "[DIM]".
constexpr int kMaxActiveDim = 1000;
// Parenthesis nesting allowed while parsing is 4 * max_depth, but never more than this, so the
// canonical depth of any parsed tree (at most about twice the parenthesis nesting) stays small
// enough for the recursive tree walks whatever limits a caller passes.
constexpr int64_t kParenNestingHardCap = 1000;
// Identifiers quoted in error messages are shortened to this many characters.
constexpr size_t kMaxQuotedIdentifier = 24;

constexpr BaseKernel kAllBaseKernels[] = {
    BaseKernel::kSE,  BaseKernel::kMAT12, BaseKernel::kMAT32, BaseKernel::kMAT52,
    BaseKernel::kLIN, BaseKernel::kPER,   BaseKernel::kRQ,    BaseKernel::kConst};

// Rank of a node kind in the canonical order: products sort first, sums last.
int KindRank(KernelExpr::Kind kind) {
  switch (kind) {
    case KernelExpr::Kind::kProduct:
      return 0;
    case KernelExpr::Kind::kBase:
      return 1;
    case KernelExpr::Kind::kChangePoint:
      return 2;
    case KernelExpr::Kind::kChangeWindow:
      return 3;
    case KernelExpr::Kind::kSum:
      return 4;
  }
  return 5;
}

// Debian's Abseil is built with its own absl::string_view (not an alias of std::string_view),
// so std::string_view values are converted explicitly before reaching absl string functions.
absl::string_view ToAbsl(std::string_view text) { return {text.data(), text.size()}; }

// Three-way comparison behind operator< and operator==: negative, zero or positive.
int Compare(const KernelExpr& a, const KernelExpr& b) {
  const int rank_a = KindRank(a.kind);
  const int rank_b = KindRank(b.kind);
  if (rank_a != rank_b) return rank_a < rank_b ? -1 : 1;
  if (a.kind == KernelExpr::Kind::kBase) {
    const int by_name = BaseKernelName(a.base).compare(BaseKernelName(b.base));
    if (by_name != 0) return by_name < 0 ? -1 : 1;
    // Unknown enum values share the name "?"; order them by their numeric value.
    if (a.base != b.base) return static_cast<int>(a.base) < static_cast<int>(b.base) ? -1 : 1;
    if (a.active_dim != b.active_dim) return a.active_dim < b.active_dim ? -1 : 1;
    return 0;
  }
  if (a.active_dim != b.active_dim) return a.active_dim < b.active_dim ? -1 : 1;
  const size_t common = std::min(a.operands.size(), b.operands.size());
  for (size_t i = 0; i < common; ++i) {
    const int by_operand = Compare(a.operands[i], b.operands[i]);
    if (by_operand != 0) return by_operand;
  }
  if (a.operands.size() != b.operands.size()) {
    return a.operands.size() < b.operands.size() ? -1 : 1;
  }
  return 0;
}

void AppendText(const KernelExpr& expr, std::string* out) {
  if (expr.kind == KernelExpr::Kind::kBase) {
    absl::StrAppend(out, ToAbsl(BaseKernelName(expr.base)));
    if (expr.active_dim >= 0) absl::StrAppend(out, "[", expr.active_dim, "]");
    if (expr.active_dim == kPerColumnDim) absl::StrAppend(out, "[*]");
    return;
  }
  if (expr.is_change()) {
    absl::StrAppend(out, ToAbsl(ChangeKindName(expr.kind)));
    if (expr.active_dim >= 0) absl::StrAppend(out, "[", expr.active_dim, "]");
    out->push_back('(');
    for (size_t i = 0; i < expr.operands.size(); ++i) {
      if (i > 0) out->push_back(',');
      AppendText(expr.operands[i], out);
    }
    out->push_back(')');
    return;
  }
  const bool is_product = expr.kind == KernelExpr::Kind::kProduct;
  for (size_t i = 0; i < expr.operands.size(); ++i) {
    if (i > 0) out->push_back(is_product ? '*' : '+');
    const KernelExpr& operand = expr.operands[i];
    const bool parenthesise = is_product && operand.kind == KernelExpr::Kind::kSum;
    if (parenthesise) out->push_back('(');
    AppendText(operand, out);
    if (parenthesise) out->push_back(')');
  }
}

absl::Status ParseError(std::string_view what, size_t position) {
  return absl::InvalidArgumentError(
      absl::StrCat("kernel expression: ", ToAbsl(what), " at position ", position));
}

// A character quoted for an error message, escaped when not printable.
std::string QuoteChar(char c) {
  return absl::StrCat("'", absl::CHexEscape(std::string(1, c)), "'");
}

bool IsIdentifierStart(char c) { return absl::ascii_isalpha(static_cast<unsigned char>(c)); }
bool IsIdentifierChar(char c) {
  return absl::ascii_isalnum(static_cast<unsigned char>(c)) || c == '_';
}

// Recursive-descent grammar run with an explicit stack: one Group per open parenthesis (plus
// the whole text), each holding the finished terms of its sum and the factors of the product
// being read.
class Parser {
 public:
  Parser(std::string_view text, const ParseLimits& limits)
      : text_(text),
        limits_(limits),
        max_paren_nesting_(std::min<int64_t>(4 * static_cast<int64_t>(limits.max_depth),
                                             kParenNestingHardCap)) {}

  absl::StatusOr<KernelExpr> Parse() {
    groups_.emplace_back();
    // The token before the operand being expected: '\0' at the start, else '+', '*' or '('.
    char token_before_operand = '\0';
    bool expect_operand = true;
    while (true) {
      SkipWhitespace();
      if (expect_operand) {
        absl::StatusOr<bool> opened_group = ReadOperand(token_before_operand);
        if (!opened_group.ok()) return opened_group.status();
        if (*opened_group) {
          token_before_operand = '(';
        } else {
          expect_operand = false;
        }
        continue;
      }
      if (AtEnd()) {
        if (groups_.size() > 1) return ParseError("expected ')'", position_);
        break;
      }
      const char c = text_[position_];
      if (c == '+') {
        absl::Status status = CloseTerm(groups_.back());
        if (!status.ok()) return status;
        token_before_operand = '+';
        expect_operand = true;
        ++position_;
      } else if (c == '*') {
        token_before_operand = '*';
        expect_operand = true;
        ++position_;
      } else if (c == ',' && groups_.back().change) {
        Group& call = groups_.back();
        if (call.arguments.size() == 1) {
          return ParseError(absl::StrCat(ToAbsl(ChangeKindName(*call.change)),
                                         " takes two kernels, got a third"),
                            position_);
        }
        absl::StatusOr<Partial> argument = CloseGroup(call);
        if (!argument.ok()) return argument.status();
        call.arguments.push_back(*std::move(argument));
        call.terms.clear();
        call.factors.clear();
        token_before_operand = ',';
        expect_operand = true;
        ++position_;
      } else if (c == ')' && groups_.size() > 1) {
        absl::StatusOr<Partial> group_value = CloseGroup(groups_.back());
        if (!group_value.ok()) return group_value.status();
        if (groups_.back().change) {
          group_value = CloseCall(groups_.back(), *std::move(group_value));
          if (!group_value.ok()) return group_value.status();
        }
        groups_.pop_back();
        groups_.back().factors.push_back(*std::move(group_value));
        ++position_;
      } else if (c == ',') {
        return ParseError("',' outside CP(…, …) or CW(…, …)", position_);
      } else if (groups_.size() > 1) {
        return ParseError("expected ')'", position_);
      } else {
        return ParseError("unexpected trailing input", position_);
      }
    }
    absl::StatusOr<Partial> whole = CloseGroup(groups_.back());
    if (!whole.ok()) return whole.status();
    return Canonicalize(std::move(whole->expr));
  }

 private:
  // A parsed subexpression: flattened (no operand has its parent's kind) but not yet sorted,
  // with its canonical depth and the position of one of its deepest base kernels.
  struct Partial {
    KernelExpr expr;
    int depth = 1;
    size_t deepest_position = 0;
  };
  struct Group {
    std::vector<Partial> terms;
    std::vector<Partial> factors;
    size_t open_position = 0;
    // The parenthesis of "CP(" or "CW(": its kind, column and finished arguments.
    std::optional<KernelExpr::Kind> change;
    int change_dim = -1;
    size_t name_position = 0;
    std::vector<Partial> arguments;
  };

  // Closes "CP(a, b)" given its last argument b.
  absl::StatusOr<Partial> CloseCall(Group& call, Partial last) {
    call.arguments.push_back(std::move(last));
    const std::string_view name = ChangeKindName(*call.change);
    if (call.arguments.size() != 2) {
      return ParseError(absl::StrCat(ToAbsl(name), " takes two kernels separated by ','"),
                        position_);
    }
    Partial node;
    node.expr.kind = *call.change;
    node.expr.active_dim = call.change_dim;
    int deepest = 0;
    node.deepest_position = call.name_position;
    for (Partial& argument : call.arguments) {
      if (argument.depth > deepest) {
        deepest = argument.depth;
        node.deepest_position = argument.deepest_position;
      }
      node.expr.operands.push_back(std::move(argument.expr));
    }
    node.depth = deepest + 1;
    if (node.depth > limits_.max_depth) {
      return ParseError(absl::StrCat("expression nested too deeply (depth ", node.depth,
                                     ", limit ", limits_.max_depth, ")"),
                        node.deepest_position);
    }
    return node;
  }

  bool AtEnd() const { return position_ >= text_.size(); }

  void SkipWhitespace() {
    while (!AtEnd() && absl::ascii_isspace(static_cast<unsigned char>(text_[position_]))) {
      ++position_;
    }
  }

  // Reads a base kernel (pushed onto the current factors) or an opening parenthesis (a new
  // group, reported by returning true); on success position_ is just past what was read.
  absl::StatusOr<bool> ReadOperand(char token_before_operand) {
    if (AtEnd()) {
      if (token_before_operand == '\0') return ParseError("empty expression", position_);
      return ParseError(
          absl::StrCat("missing operand after ", QuoteChar(token_before_operand)), position_);
    }
    const char c = text_[position_];
    if (c == '(') {
      if (static_cast<int64_t>(groups_.size()) > max_paren_nesting_) {
        return ParseError(
            absl::StrCat("parentheses nested too deeply (limit ", max_paren_nesting_, ")"),
            position_);
      }
      groups_.emplace_back();
      groups_.back().open_position = position_;
      ++position_;
      return true;
    }
    if (c == ')' && token_before_operand == '(') {
      return ParseError("empty parentheses", groups_.back().open_position);
    }
    const bool after_operator = token_before_operand == '+' || token_before_operand == '*' ||
                                token_before_operand == ',';
    if (c == '+' || c == '*' || c == ',' || (c == ')' && after_operator)) {
      return ParseError(absl::StrCat("missing operand before ", QuoteChar(c)), position_);
    }
    if (!IsIdentifierStart(c)) {
      return ParseError(absl::StrCat("unexpected character ", QuoteChar(c)), position_);
    }
    const size_t name_position = position_;
    size_t name_end = position_;
    while (name_end < text_.size() && IsIdentifierChar(text_[name_end])) ++name_end;
    const std::string upper =
        absl::AsciiStrToUpper(ToAbsl(text_.substr(name_position, name_end - name_position)));
    if (upper == "CP" || upper == "CW") {
      position_ = name_end;
      const size_t dim_position = position_;
      absl::StatusOr<int> dim = ReadOptionalDimension();
      if (!dim.ok()) return dim.status();
      if (*dim == kPerColumnDim) {
        return ParseError(absl::StrCat("'[*]' (one lengthscale per column) applies to base "
                                       "kernels, not to ", upper),
                          dim_position);
      }
      SkipWhitespace();
      if (AtEnd() || text_[position_] != '(') {
        return ParseError(absl::StrCat("expected '(' after ", upper), position_);
      }
      if (static_cast<int64_t>(groups_.size()) > max_paren_nesting_) {
        return ParseError(
            absl::StrCat("parentheses nested too deeply (limit ", max_paren_nesting_, ")"),
            position_);
      }
      groups_.emplace_back();
      Group& call = groups_.back();
      call.open_position = position_;
      call.change =
          upper == "CP" ? KernelExpr::Kind::kChangePoint : KernelExpr::Kind::kChangeWindow;
      call.change_dim = *dim;
      call.name_position = name_position;
      ++position_;
      return true;
    }
    absl::Status status = ReadBaseKernel();
    if (!status.ok()) return status;
    return false;
  }

  absl::Status ReadBaseKernel() {
    const size_t name_position = position_;
    while (!AtEnd() && IsIdentifierChar(text_[position_])) ++position_;
    const std::string_view name = text_.substr(name_position, position_ - name_position);
    absl::StatusOr<BaseKernel> base = ParseBaseKernelName(name);
    if (!base.ok()) {
      std::string quoted(name.substr(0, kMaxQuotedIdentifier));
      if (name.size() > kMaxQuotedIdentifier) quoted += "...";
      return ParseError(absl::StrCat("unknown base kernel '", quoted, "'"), name_position);
    }
    if (++num_base_kernels_ > limits_.max_base_kernels) {
      return ParseError(
          absl::StrCat("too many base kernels (limit ", limits_.max_base_kernels, ")"),
          name_position);
    }
    const size_t dim_position = position_;
    absl::StatusOr<int> active_dim = ReadOptionalDimension();
    if (!active_dim.ok()) return active_dim.status();
    if (*active_dim == kPerColumnDim && *base == BaseKernel::kConst) {
      return ParseError("'[*]' (one lengthscale per column) does not apply to C, which reads no "
                        "input",
                        dim_position);
    }
    Partial leaf;
    leaf.expr = KernelExpr::Base(*base, *active_dim);
    leaf.deepest_position = name_position;
    groups_.back().factors.push_back(std::move(leaf));
    return absl::OkStatus();
  }

  // Reads "[DIM]" or "[*]" (kPerColumnDim) if it follows (whitespace allowed around every
  // token); -1 when absent.
  absl::StatusOr<int> ReadOptionalDimension() {
    const size_t after_name = position_;
    SkipWhitespace();
    if (AtEnd() || text_[position_] != '[') {
      position_ = after_name;
      return -1;
    }
    const size_t bracket_position = position_;
    ++position_;
    SkipWhitespace();
    if (!AtEnd() && text_[position_] == ']') {
      return ParseError("empty brackets", bracket_position);
    }
    if (!AtEnd() && text_[position_] == '*') {
      ++position_;
      SkipWhitespace();
      if (AtEnd() || text_[position_] != ']') return ParseError("expected ']'", position_);
      ++position_;
      return kPerColumnDim;
    }
    const size_t digits_position = position_;
    if (AtEnd() || !absl::ascii_isdigit(static_cast<unsigned char>(text_[position_]))) {
      return ParseError("expected a non-negative integer dimension or '*'", position_);
    }
    int value = 0;
    while (!AtEnd() && absl::ascii_isdigit(static_cast<unsigned char>(text_[position_]))) {
      value = value * 10 + (text_[position_] - '0');
      if (value > kMaxActiveDim) {
        return ParseError(absl::StrCat("dimension too large (limit ", kMaxActiveDim, ")"),
                          digits_position);
      }
      ++position_;
    }
    SkipWhitespace();
    if (AtEnd() || text_[position_] != ']') return ParseError("expected ']'", position_);
    ++position_;
    return value;
  }

  // Builds a flattened sum or product of parts, checking its canonical depth.
  absl::StatusOr<Partial> Combine(KernelExpr::Kind kind, std::vector<Partial> parts) {
    if (parts.size() == 1) return std::move(parts.front());
    Partial combined;
    combined.expr.kind = kind;
    int deepest_operand = 0;
    for (Partial& part : parts) {
      // An operand of the same kind is flattened: its operands sit one level higher.
      int operand_depth = part.depth;
      if (part.expr.kind == kind) {
        --operand_depth;
        for (KernelExpr& operand : part.expr.operands) {
          combined.expr.operands.push_back(std::move(operand));
        }
      } else {
        combined.expr.operands.push_back(std::move(part.expr));
      }
      if (operand_depth > deepest_operand) {
        deepest_operand = operand_depth;
        combined.deepest_position = part.deepest_position;
      }
    }
    combined.depth = deepest_operand + 1;
    if (combined.depth > limits_.max_depth) {
      return ParseError(absl::StrCat("expression nested too deeply (depth ", combined.depth,
                                     ", limit ", limits_.max_depth, ")"),
                        combined.deepest_position);
    }
    return combined;
  }

  // Turns the factors read so far into one more term of the group's sum.
  absl::Status CloseTerm(Group& group) {
    absl::StatusOr<Partial> term = Combine(KernelExpr::Kind::kProduct, std::move(group.factors));
    group.factors.clear();
    if (!term.ok()) return term.status();
    group.terms.push_back(*std::move(term));
    return absl::OkStatus();
  }

  absl::StatusOr<Partial> CloseGroup(Group& group) {
    absl::Status status = CloseTerm(group);
    if (!status.ok()) return status;
    return Combine(KernelExpr::Kind::kSum, std::move(group.terms));
  }

  std::string_view text_;
  const ParseLimits& limits_;
  int64_t max_paren_nesting_;
  size_t position_ = 0;
  int num_base_kernels_ = 0;
  std::vector<Group> groups_;
};

}  // namespace

std::string_view BaseKernelName(BaseKernel base) {
  switch (base) {
    case BaseKernel::kSE:
      return "SE";
    case BaseKernel::kMAT12:
      return "MAT12";
    case BaseKernel::kMAT32:
      return "MAT32";
    case BaseKernel::kMAT52:
      return "MAT52";
    case BaseKernel::kLIN:
      return "LIN";
    case BaseKernel::kPER:
      return "PER";
    case BaseKernel::kRQ:
      return "RQ";
    case BaseKernel::kConst:
      return "C";
  }
  return "?";
}

absl::StatusOr<BaseKernel> ParseBaseKernelName(std::string_view name) {
  const std::string upper = absl::AsciiStrToUpper(ToAbsl(name));
  if (upper == "RBF") return BaseKernel::kSE;
  for (BaseKernel base : kAllBaseKernels) {
    if (upper == BaseKernelName(base)) return base;
  }
  return absl::InvalidArgumentError(
      absl::StrCat("unknown base kernel '", absl::CHexEscape(ToAbsl(name)), "'"));
}

const std::vector<std::string>& BaseKernelParameterNames(BaseKernel base) {
  static const auto* const kLengthscale = new std::vector<std::string>{"lengthscale"};
  static const auto* const kVariance = new std::vector<std::string>{"variance"};
  static const auto* const kPeriodic = new std::vector<std::string>{"lengthscale", "period"};
  static const auto* const kRationalQuadratic =
      new std::vector<std::string>{"lengthscale", "alpha"};
  static const auto* const kConstant = new std::vector<std::string>{"constant"};
  static const auto* const kNone = new std::vector<std::string>{};
  switch (base) {
    case BaseKernel::kSE:
    case BaseKernel::kMAT12:
    case BaseKernel::kMAT32:
    case BaseKernel::kMAT52:
      return *kLengthscale;
    case BaseKernel::kLIN:
      return *kVariance;
    case BaseKernel::kPER:
      return *kPeriodic;
    case BaseKernel::kRQ:
      return *kRationalQuadratic;
    case BaseKernel::kConst:
      return *kConstant;
  }
  return *kNone;
}

KernelExpr KernelExpr::Base(BaseKernel base, int active_dim) {
  KernelExpr expr;
  expr.kind = Kind::kBase;
  expr.base = base;
  expr.active_dim = active_dim == kPerColumnDim ? kPerColumnDim : active_dim < 0 ? -1 : active_dim;
  return expr;
}

KernelExpr KernelExpr::ChangePoint(KernelExpr before, KernelExpr after, int active_dim) {
  KernelExpr expr;
  expr.kind = Kind::kChangePoint;
  expr.active_dim = active_dim < 0 ? -1 : active_dim;
  expr.operands = {std::move(before), std::move(after)};
  return Canonicalize(std::move(expr));
}

KernelExpr KernelExpr::ChangeWindow(KernelExpr outside, KernelExpr inside, int active_dim) {
  KernelExpr expr;
  expr.kind = Kind::kChangeWindow;
  expr.active_dim = active_dim < 0 ? -1 : active_dim;
  expr.operands = {std::move(outside), std::move(inside)};
  return Canonicalize(std::move(expr));
}

KernelExpr KernelExpr::Sum(std::vector<KernelExpr> operands) {
  KernelExpr expr;
  expr.kind = Kind::kSum;
  expr.operands = std::move(operands);
  return Canonicalize(std::move(expr));
}

KernelExpr KernelExpr::Product(std::vector<KernelExpr> operands) {
  KernelExpr expr;
  expr.kind = Kind::kProduct;
  expr.operands = std::move(operands);
  return Canonicalize(std::move(expr));
}

bool operator==(const KernelExpr& a, const KernelExpr& b) { return Compare(a, b) == 0; }

bool operator<(const KernelExpr& a, const KernelExpr& b) { return Compare(a, b) < 0; }

absl::Status ParseLimits::Validate() const {
  if (max_length == 0) {
    return absl::InvalidArgumentError("kernel expression limits: max_length must be positive");
  }
  if (max_depth <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel expression limits: max_depth must be positive, got ", max_depth));
  }
  if (max_base_kernels <= 0) {
    return absl::InvalidArgumentError(absl::StrCat(
        "kernel expression limits: max_base_kernels must be positive, got ", max_base_kernels));
  }
  return absl::OkStatus();
}

absl::StatusOr<KernelExpr> ParseKernel(std::string_view text, const ParseLimits& limits) {
  absl::Status limits_status = limits.Validate();
  if (!limits_status.ok()) return limits_status;
  if (text.size() > limits.max_length) {
    return ParseError(absl::StrCat("expression too long (", text.size(), " characters, limit ",
                                   limits.max_length, ")"),
                      limits.max_length);
  }
  return Parser(text, limits).Parse();
}

KernelExpr Canonicalize(KernelExpr expr) {
  if (expr.kind == KernelExpr::Kind::kBase) return KernelExpr::Base(expr.base, expr.active_dim);
  if (expr.is_change()) {
    // Ordered operands: each canonicalised in place, never sorted or flattened.
    KernelExpr result;
    result.kind = expr.kind;
    result.active_dim = expr.active_dim < 0 ? -1 : expr.active_dim;
    for (KernelExpr& operand : expr.operands) {
      result.operands.push_back(Canonicalize(std::move(operand)));
    }
    return result;
  }
  std::vector<KernelExpr> flattened;
  flattened.reserve(expr.operands.size());
  for (KernelExpr& operand : expr.operands) {
    KernelExpr canonical = Canonicalize(std::move(operand));
    if (canonical.kind == expr.kind) {
      for (KernelExpr& inner : canonical.operands) flattened.push_back(std::move(inner));
    } else {
      flattened.push_back(std::move(canonical));
    }
  }
  std::sort(flattened.begin(), flattened.end());
  if (flattened.size() == 1) return std::move(flattened.front());
  // An empty sum or product is not a kernel; it is kept as it is rather than invented.
  KernelExpr result;
  result.kind = expr.kind;
  result.operands = std::move(flattened);
  return result;
}

std::string ToString(const KernelExpr& expr) {
  std::string text;
  AppendText(expr, &text);
  return text;
}

int NumBaseKernels(const KernelExpr& expr) {
  if (expr.kind == KernelExpr::Kind::kBase) return 1;
  int count = 0;
  for (const KernelExpr& operand : expr.operands) count += NumBaseKernels(operand);
  return count;
}

int Depth(const KernelExpr& expr) {
  if (expr.kind == KernelExpr::Kind::kBase) return 1;
  int deepest_operand = 0;
  for (const KernelExpr& operand : expr.operands) {
    deepest_operand = std::max(deepest_operand, Depth(operand));
  }
  return deepest_operand + 1;
}

int MaxActiveDim(const KernelExpr& expr) {
  if (expr.kind == KernelExpr::Kind::kBase) return expr.active_dim < 0 ? -1 : expr.active_dim;
  int largest = expr.is_change() ? std::max(expr.active_dim, 0) : -1;
  for (const KernelExpr& operand : expr.operands) {
    largest = std::max(largest, MaxActiveDim(operand));
  }
  return largest;
}

bool ContainsBaseKernel(const KernelExpr& expr, BaseKernel base) {
  if (expr.kind == KernelExpr::Kind::kBase) return expr.base == base;
  for (const KernelExpr& operand : expr.operands) {
    if (ContainsBaseKernel(operand, base)) return true;
  }
  return false;
}

}  // namespace gpsel

namespace gpsel {

bool ContainsChange(const KernelExpr& expr) {
  if (expr.is_change()) return true;
  for (const KernelExpr& operand : expr.operands) {
    if (ContainsChange(operand)) return true;
  }
  return false;
}

std::string_view ChangeKindName(KernelExpr::Kind kind) {
  switch (kind) {
    case KernelExpr::Kind::kChangePoint:
      return "CP";
    case KernelExpr::Kind::kChangeWindow:
      return "CW";
    default:
      return "?";
  }
}

}  // namespace gpsel

namespace gpsel {

bool ContainsPerColumn(const KernelExpr& expr) {
  if (expr.is_base()) return expr.active_dim == kPerColumnDim;
  for (const KernelExpr& operand : expr.operands) {
    if (ContainsPerColumn(operand)) return true;
  }
  return false;
}

absl::StatusOr<KernelExpr> ExpandPerColumn(const KernelExpr& expr, int num_columns) {
  if (!ContainsPerColumn(expr)) return expr;
  if (num_columns < 1) {
    return absl::InvalidArgumentError("kernel: '[*]' needs data with at least one input column");
  }
  if (expr.is_base()) {
    std::vector<KernelExpr> per_column;
    for (int c = 0; c < num_columns; ++c) per_column.push_back(KernelExpr::Base(expr.base, c));
    if (num_columns == 1) return per_column.front();
    // LIN's variance multiplies x·x' = Σ_c x_c x'_c: one variance per column is the sum. The
    // stationary kernels take a product: Π_c exp(−d_c²/2ℓ_c²) = exp(−Σ_c d_c²/2ℓ_c²), the ARD SE.
    return expr.base == BaseKernel::kLIN ? KernelExpr::Sum(std::move(per_column))
                                         : KernelExpr::Product(std::move(per_column));
  }
  KernelExpr out = expr;
  for (KernelExpr& operand : out.operands) {
    absl::StatusOr<KernelExpr> expanded = ExpandPerColumn(operand, num_columns);
    if (!expanded.ok()) return expanded.status();
    operand = *std::move(expanded);
  }
  // Change nodes keep their operands' order; sums and products flatten and sort again.
  return out.is_change() ? out : Canonicalize(std::move(out));
}

}  // namespace gpsel
