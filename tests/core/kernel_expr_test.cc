// Tests of the kernel expression grammar: parsing, canonical form, order, printing, limits,
// error messages (exact text and position) and a seeded random round-trip fuzz.
#include "gpsel/core/kernel_expr.h"

#include <algorithm>
#include <cctype>
#include <climits>
#include <random>
#include <string>
#include <vector>

#include "absl/strings/match.h"
#include "gmock/gmock.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

namespace gpsel {
namespace {

using ::testing::ElementsAre;

// Parses text that must be valid and returns its canonical text.
std::string Canonical(std::string_view text) {
  absl::StatusOr<KernelExpr> parsed = ParseKernel(text);
  EXPECT_TRUE(parsed.ok()) << "'" << text << "': " << parsed.status();
  return parsed.ok() ? ToString(*parsed) : std::string("<error>");
}

KernelExpr MustParse(std::string_view text, const ParseLimits& limits = {}) {
  absl::StatusOr<KernelExpr> parsed = ParseKernel(text, limits);
  EXPECT_TRUE(parsed.ok()) << "'" << text << "': " << parsed.status();
  return parsed.ok() ? *parsed : KernelExpr();
}

// The full error message of text that must fail to parse.
std::string ErrorOf(std::string_view text, const ParseLimits& limits = {}) {
  absl::StatusOr<KernelExpr> parsed = ParseKernel(text, limits);
  if (parsed.ok()) return "parsed as " + ToString(*parsed);
  EXPECT_THAT(parsed, StatusIs(absl::StatusCode::kInvalidArgument));
  return std::string(parsed.status().message());
}

TEST(KernelExprNamesTest, CanonicalNames) {
  EXPECT_EQ(BaseKernelName(BaseKernel::kSE), "SE");
  EXPECT_EQ(BaseKernelName(BaseKernel::kMAT12), "MAT12");
  EXPECT_EQ(BaseKernelName(BaseKernel::kMAT32), "MAT32");
  EXPECT_EQ(BaseKernelName(BaseKernel::kMAT52), "MAT52");
  EXPECT_EQ(BaseKernelName(BaseKernel::kLIN), "LIN");
  EXPECT_EQ(BaseKernelName(BaseKernel::kPER), "PER");
  EXPECT_EQ(BaseKernelName(BaseKernel::kRQ), "RQ");
  EXPECT_EQ(BaseKernelName(BaseKernel::kConst), "C");
}

TEST(KernelExprNamesTest, ParsesNamesCaseInsensitivelyWithRbfAlias) {
  EXPECT_EQ(*ParseBaseKernelName("se"), BaseKernel::kSE);
  EXPECT_EQ(*ParseBaseKernelName("Rbf"), BaseKernel::kSE);
  EXPECT_EQ(*ParseBaseKernelName("RBF"), BaseKernel::kSE);
  EXPECT_EQ(*ParseBaseKernelName("mat12"), BaseKernel::kMAT12);
  EXPECT_EQ(*ParseBaseKernelName("Mat32"), BaseKernel::kMAT32);
  EXPECT_EQ(*ParseBaseKernelName("MAT52"), BaseKernel::kMAT52);
  EXPECT_EQ(*ParseBaseKernelName("lin"), BaseKernel::kLIN);
  EXPECT_EQ(*ParseBaseKernelName("pEr"), BaseKernel::kPER);
  EXPECT_EQ(*ParseBaseKernelName("rq"), BaseKernel::kRQ);
  EXPECT_EQ(*ParseBaseKernelName("c"), BaseKernel::kConst);
  for (std::string_view bad : {"", "SQ", "SE ", "MAT", "CONST", "S E"}) {
    absl::StatusOr<BaseKernel> parsed = ParseBaseKernelName(bad);
    EXPECT_THAT(parsed, StatusIs(absl::StatusCode::kInvalidArgument)) << bad;
  }
  EXPECT_EQ(ParseBaseKernelName("SQ").status().message(), "unknown base kernel 'SQ'");
}

TEST(KernelExprNamesTest, ParameterNames) {
  EXPECT_THAT(BaseKernelParameterNames(BaseKernel::kSE), ElementsAre("lengthscale"));
  EXPECT_THAT(BaseKernelParameterNames(BaseKernel::kMAT12), ElementsAre("lengthscale"));
  EXPECT_THAT(BaseKernelParameterNames(BaseKernel::kMAT32), ElementsAre("lengthscale"));
  EXPECT_THAT(BaseKernelParameterNames(BaseKernel::kMAT52), ElementsAre("lengthscale"));
  EXPECT_THAT(BaseKernelParameterNames(BaseKernel::kLIN), ElementsAre("variance"));
  EXPECT_THAT(BaseKernelParameterNames(BaseKernel::kPER), ElementsAre("lengthscale", "period"));
  EXPECT_THAT(BaseKernelParameterNames(BaseKernel::kRQ), ElementsAre("lengthscale", "alpha"));
  EXPECT_THAT(BaseKernelParameterNames(BaseKernel::kConst), ElementsAre("constant"));
  // Static storage: the same object every call.
  EXPECT_EQ(&BaseKernelParameterNames(BaseKernel::kPER),
            &BaseKernelParameterNames(BaseKernel::kPER));
}

TEST(KernelExprParseTest, HeaderExample) {
  EXPECT_EQ(Canonical("(SE*LIN[1]) + se"), "LIN[1]*SE+SE");
}

TEST(KernelExprParseTest, CanonicalTextRoundTrips) {
  const char* const kCanonical[] = {
      "SE",
      "C",
      "MAT12",
      "MAT32",
      "MAT52",
      "LIN",
      "PER",
      "RQ",
      "SE[0]",
      "LIN[1000]",
      "LIN+SE",
      "LIN*SE",
      "SE+SE",
      "SE*SE",
      "LIN[1]*SE+SE",
      "LIN*(MAT32+SE)",
      "PER*(LIN+SE)",
      "C*PER*SE+C*RQ+C*SE+C*SE",
      "(C+LIN)*(PER+SE)",
      "LIN*(PER*(RQ+SE)+C)",
      "C*(LIN+PER)+SE[0]*SE[1]+RQ",
      "SE+SE[0]+SE[3]",
      "MAT12+MAT32+MAT52",
  };
  for (const char* text : kCanonical) {
    KernelExpr parsed = MustParse(text);
    EXPECT_EQ(ToString(parsed), text);
    EXPECT_EQ(MustParse(ToString(parsed)), parsed) << text;
    EXPECT_EQ(Canonicalize(parsed), parsed) << text;
  }
}

TEST(KernelExprParseTest, CanonicalisesOrderAndGrouping) {
  EXPECT_EQ(MustParse("SE+LIN"), MustParse("LIN+SE"));
  EXPECT_EQ(MustParse("(SE*LIN)*MAT32"), MustParse("SE*(LIN*MAT32)"));
  EXPECT_EQ(Canonical("(SE*LIN)*MAT32"), "LIN*MAT32*SE");
  EXPECT_EQ(MustParse("RBF"), MustParse("SE"));
  EXPECT_EQ(MustParse("rbf[2]*lin"), MustParse("LIN*SE[2]"));
  EXPECT_EQ(Canonical("((SE))"), "SE");
  EXPECT_EQ(Canonical("(SE+(LIN+(PER+C)))"), "C+LIN+PER+SE");
  EXPECT_EQ(Canonical("SE*(PER+LIN)"), "SE*(LIN+PER)");
  EXPECT_EQ(Canonical("(PER+LIN)*SE"), "SE*(LIN+PER)");
  // The Mauna Loa kernel of Rasmussen & Williams eq. 5.19.
  KernelExpr mauna_loa = MustParse("C*SE + C*SE*PER + C*RQ + C*SE");
  EXPECT_EQ(ToString(mauna_loa), "C*PER*SE+C*RQ+C*SE+C*SE");
  EXPECT_EQ(NumBaseKernels(mauna_loa), 9);
  EXPECT_EQ(Depth(mauna_loa), 3);  // sum of products of base kernels
  EXPECT_NE(MustParse("SE+LIN"), MustParse("SE*LIN"));
  EXPECT_NE(MustParse("SE"), MustParse("SE[0]"));
  EXPECT_NE(MustParse("SE[0]"), MustParse("SE[1]"));
}

TEST(KernelExprParseTest, DoesNotDeduplicateOrDistribute) {
  KernelExpr twice = MustParse("SE+SE");
  EXPECT_EQ(twice.kind, KernelExpr::Kind::kSum);
  EXPECT_EQ(twice.operands.size(), 2u);
  EXPECT_EQ(NumBaseKernels(twice), 2);
  EXPECT_NE(twice, MustParse("SE"));
  EXPECT_NE(MustParse("SE*(LIN+PER)"), MustParse("SE*LIN+SE*PER"));
  EXPECT_EQ(Canonical("SE*(LIN+PER)"), "SE*(LIN+PER)");
}

TEST(KernelExprParseTest, ProductBindsTighterThanSum) {
  KernelExpr expr = MustParse("SE+LIN*PER");
  ASSERT_EQ(expr.kind, KernelExpr::Kind::kSum);
  ASSERT_EQ(expr.operands.size(), 2u);
  EXPECT_EQ(expr.operands[0], KernelExpr::Product({KernelExpr::Base(BaseKernel::kLIN),
                                                   KernelExpr::Base(BaseKernel::kPER)}));
  EXPECT_EQ(expr.operands[1], KernelExpr::Base(BaseKernel::kSE));
  EXPECT_EQ(ToString(expr), "LIN*PER+SE");
  EXPECT_EQ(Canonical("SE*LIN+PER"), "LIN*SE+PER");
  EXPECT_EQ(Canonical("C+SE*LIN+PER*RQ"), "LIN*SE+PER*RQ+C");
  KernelExpr grouped = MustParse("(SE+LIN)*PER");
  ASSERT_EQ(grouped.kind, KernelExpr::Kind::kProduct);
  EXPECT_EQ(ToString(grouped), "PER*(LIN+SE)");
}

TEST(KernelExprParseTest, WhitespaceAnywhereBetweenTokens) {
  EXPECT_EQ(Canonical(" \t SE \n+\r lin  "), "LIN+SE");
  EXPECT_EQ(Canonical("( se [ 2 ] * Per )+ c"), "PER*SE[2]+C");
  EXPECT_EQ(Canonical("SE [1]"), "SE[1]");
  EXPECT_EQ(Canonical("SE[\t7\t]"), "SE[7]");
}

TEST(KernelExprParseTest, ActiveDimensions) {
  KernelExpr expr = MustParse("SE[0]*LIN[3]+PER");
  EXPECT_EQ(ToString(expr), "LIN[3]*SE[0]+PER");
  EXPECT_EQ(MaxActiveDim(expr), 3);
  EXPECT_EQ(MaxActiveDim(MustParse("SE+LIN")), -1);
  EXPECT_EQ(MaxActiveDim(MustParse("SE[0]")), 0);
  EXPECT_EQ(MaxActiveDim(MustParse("SE[1000]")), 1000);
  EXPECT_EQ(Canonical("SE[007]"), "SE[7]");
  KernelExpr leaf = MustParse("mat52[12]");
  EXPECT_TRUE(leaf.is_base());
  EXPECT_EQ(leaf.base, BaseKernel::kMAT52);
  EXPECT_EQ(leaf.active_dim, 12);
  EXPECT_EQ(MustParse("SE").active_dim, -1);
}

TEST(KernelExprParseTest, CountsAndDepth) {
  EXPECT_EQ(Depth(MustParse("SE")), 1);
  EXPECT_EQ(Depth(MustParse("SE+LIN")), 2);
  EXPECT_EQ(Depth(MustParse("SE+LIN*PER")), 3);
  EXPECT_EQ(Depth(MustParse("((SE+LIN)+PER)")), 2);
  EXPECT_EQ(Depth(MustParse("SE*(LIN+PER*(C+RQ))")), 5);
  EXPECT_EQ(NumBaseKernels(MustParse("SE")), 1);
  EXPECT_EQ(NumBaseKernels(MustParse("SE*(LIN+PER*(C+RQ))")), 5);
}

TEST(KernelExprBuildTest, SumAndProductCanonicalise) {
  const KernelExpr se = KernelExpr::Base(BaseKernel::kSE);
  const KernelExpr lin = KernelExpr::Base(BaseKernel::kLIN);
  const KernelExpr constant = KernelExpr::Base(BaseKernel::kConst);
  EXPECT_EQ(ToString(KernelExpr::Product({KernelExpr::Sum({se, lin}), constant})),
            "C*(LIN+SE)");
  EXPECT_EQ(ToString(KernelExpr::Sum({KernelExpr::Sum({se, lin}), constant})), "C+LIN+SE");
  EXPECT_EQ(ToString(KernelExpr::Product({KernelExpr::Product({se, lin}), se})),
            "LIN*SE*SE");
  EXPECT_EQ(KernelExpr::Sum({se}), se);
  EXPECT_EQ(KernelExpr::Product({KernelExpr::Sum({lin})}), lin);
  EXPECT_EQ(ToString(KernelExpr::Base(BaseKernel::kRQ, 4)), "RQ[4]");
  EXPECT_EQ(KernelExpr::Base(BaseKernel::kRQ, -7).active_dim, -1);
}

TEST(KernelExprBuildTest, CanonicalizeFlattensSortsAndCollapses) {
  KernelExpr single_product;
  single_product.kind = KernelExpr::Kind::kProduct;
  single_product.operands = {KernelExpr::Base(BaseKernel::kPER)};
  KernelExpr inner_sum;
  inner_sum.kind = KernelExpr::Kind::kSum;
  inner_sum.operands = {KernelExpr::Base(BaseKernel::kRQ), KernelExpr::Base(BaseKernel::kConst)};
  KernelExpr outer_sum;
  outer_sum.kind = KernelExpr::Kind::kSum;
  outer_sum.operands = {KernelExpr::Base(BaseKernel::kSE), single_product, inner_sum};
  EXPECT_EQ(Depth(outer_sum), 3);  // structural depth of the raw tree
  const KernelExpr canonical = Canonicalize(outer_sum);
  EXPECT_EQ(ToString(canonical), "C+PER+RQ+SE");
  EXPECT_EQ(Depth(canonical), 2);
  EXPECT_EQ(NumBaseKernels(canonical), 4);
  EXPECT_EQ(Canonicalize(canonical), canonical);
}

TEST(KernelExprOrderTest, ProductsThenBasesThenSums) {
  const KernelExpr product = MustParse("LIN*SE");
  const KernelExpr base = MustParse("C");
  const KernelExpr sum = MustParse("C+C");
  EXPECT_LT(product, base);
  EXPECT_LT(base, sum);
  EXPECT_LT(product, sum);
  // Base kernels alphabetically, then by active dimension with "all columns" first.
  EXPECT_LT(MustParse("C"), MustParse("LIN"));
  EXPECT_LT(MustParse("LIN"), MustParse("MAT12"));
  EXPECT_LT(MustParse("MAT52"), MustParse("PER"));
  EXPECT_LT(MustParse("RQ"), MustParse("SE"));
  EXPECT_LT(MustParse("SE"), MustParse("SE[0]"));
  EXPECT_LT(MustParse("SE[0]"), MustParse("SE[1]"));
  EXPECT_LT(MustParse("SE[9]"), MustParse("SE[10]"));
  // Composites lexicographically by operands; a prefix sorts first.
  EXPECT_LT(MustParse("C*SE"), MustParse("C*SE*SE"));
  EXPECT_LT(MustParse("C*SE*SE"), MustParse("LIN*SE"));
  EXPECT_FALSE(MustParse("SE+LIN") < MustParse("LIN+SE"));
  EXPECT_FALSE(MustParse("LIN+SE") < MustParse("SE+LIN"));
}

// Builds a random raw (non-canonical) tree: nested same-kind nodes and single-operand nodes
// occur, so canonicalisation has work to do.
class RandomTreeMaker {
 public:
  explicit RandomTreeMaker(unsigned seed) : rng_(seed) {}

  KernelExpr Make(int max_depth) {
    if (max_depth <= 1 || Uniform(0, 2) == 0) {
      const int base_index = Uniform(0, 7);
      const int active_dim = Uniform(0, 3) == 0 ? Uniform(0, 4) : -1;
      return KernelExpr::Base(static_cast<BaseKernel>(base_index), active_dim);
    }
    KernelExpr node;
    node.kind = Uniform(0, 1) == 0 ? KernelExpr::Kind::kSum : KernelExpr::Kind::kProduct;
    const int num_operands = Uniform(1, 3);
    for (int i = 0; i < num_operands; ++i) node.operands.push_back(Make(max_depth - 1));
    return node;
  }

  // Shuffles the operands of every node, recursively.
  void Shuffle(KernelExpr& expr) {
    for (KernelExpr& operand : expr.operands) Shuffle(operand);
    std::shuffle(expr.operands.begin(), expr.operands.end(), rng_);
  }

  // Text with every composite operand parenthesised, random spacing and letter case.
  std::string PrintFullyParenthesised(const KernelExpr& expr) {
    if (expr.is_base()) return PrintBase(expr);
    std::string text;
    for (size_t i = 0; i < expr.operands.size(); ++i) {
      if (i > 0) text += Space() + (expr.kind == KernelExpr::Kind::kSum ? "+" : "*") + Space();
      const KernelExpr& operand = expr.operands[i];
      if (operand.is_base()) {
        text += PrintBase(operand);
      } else {
        text += "(" + Space() + PrintFullyParenthesised(operand) + Space() + ")";
      }
    }
    return text;
  }

  // Text relying on precedence: only a sum directly inside a product gets parentheses.
  std::string PrintMinimal(const KernelExpr& expr) {
    if (expr.is_base()) return PrintBase(expr);
    if (expr.operands.size() == 1) return PrintMinimal(expr.operands[0]);
    std::string text;
    for (size_t i = 0; i < expr.operands.size(); ++i) {
      if (i > 0) text += expr.kind == KernelExpr::Kind::kSum ? "+" : "*";
      const KernelExpr& operand = expr.operands[i];
      const bool needs_parentheses = expr.kind == KernelExpr::Kind::kProduct &&
                                     EffectiveKind(operand) == KernelExpr::Kind::kSum;
      text += needs_parentheses ? "(" + PrintMinimal(operand) + ")" : PrintMinimal(operand);
    }
    return text;
  }

 private:
  static KernelExpr::Kind EffectiveKind(const KernelExpr& expr) {
    if (!expr.is_base() && expr.operands.size() == 1) return EffectiveKind(expr.operands[0]);
    return expr.kind;
  }

  std::string PrintBase(const KernelExpr& expr) {
    std::string name(BaseKernelName(expr.base));
    if (expr.base == BaseKernel::kSE && Uniform(0, 1) == 0) name = "RBF";
    for (char& c : name) {
      if (Uniform(0, 1) == 0) c = static_cast<char>(std::tolower(static_cast<unsigned char>(c)));
    }
    if (expr.active_dim >= 0) {
      name += Space() + "[" + Space() + std::to_string(expr.active_dim) + Space() + "]";
    }
    return name;
  }

  std::string Space() {
    static const char* const kSpaces[] = {"", "", "", " ", "\t", "  ", "\n"};
    return kSpaces[Uniform(0, 6)];
  }

  int Uniform(int low, int high) { return std::uniform_int_distribution<int>(low, high)(rng_); }

  std::mt19937 rng_;
};

TEST(KernelExprFuzzTest, RandomTreesRoundTrip) {
  RandomTreeMaker maker(20240611);
  ParseLimits roomy;
  roomy.max_length = 1 << 20;
  roomy.max_base_kernels = 1 << 20;
  for (int trial = 0; trial < 2000; ++trial) {
    const KernelExpr raw = maker.Make(6);
    const KernelExpr canonical = Canonicalize(raw);
    const std::string canonical_text = ToString(canonical);
    SCOPED_TRACE(canonical_text);
    EXPECT_EQ(NumBaseKernels(canonical), NumBaseKernels(raw));
    EXPECT_LE(Depth(canonical), Depth(raw));
    EXPECT_EQ(MaxActiveDim(canonical), MaxActiveDim(raw));
    EXPECT_EQ(Canonicalize(canonical), canonical);
    EXPECT_EQ(canonical_text.find(' '), std::string::npos);

    absl::StatusOr<KernelExpr> reparsed = ParseKernel(canonical_text, roomy);
    ASSERT_TRUE(reparsed.ok()) << reparsed.status();
    EXPECT_EQ(*reparsed, canonical);
    EXPECT_EQ(ToString(*reparsed), canonical_text);

    const std::string full = maker.PrintFullyParenthesised(raw);
    absl::StatusOr<KernelExpr> from_full = ParseKernel(full, roomy);
    ASSERT_TRUE(from_full.ok()) << full << ": " << from_full.status();
    EXPECT_EQ(*from_full, canonical) << full;

    const std::string minimal = maker.PrintMinimal(raw);
    absl::StatusOr<KernelExpr> from_minimal = ParseKernel(minimal, roomy);
    ASSERT_TRUE(from_minimal.ok()) << minimal << ": " << from_minimal.status();
    EXPECT_EQ(*from_minimal, canonical) << minimal;

    KernelExpr shuffled = raw;
    maker.Shuffle(shuffled);
    EXPECT_EQ(Canonicalize(shuffled), canonical);
    EXPECT_EQ(ToString(Canonicalize(shuffled)), canonical_text);
  }
}

TEST(KernelExprFuzzTest, OrderIsAStrictTotalOrderConsistentWithEquality) {
  RandomTreeMaker maker(7);
  std::vector<KernelExpr> samples;
  for (int i = 0; i < 60; ++i) samples.push_back(Canonicalize(maker.Make(4)));
  // Duplicates on purpose, so equal pairs are exercised too.
  for (int i = 0; i < 10; ++i) samples.push_back(samples[static_cast<size_t>(i) * 3]);
  for (const KernelExpr& a : samples) {
    EXPECT_FALSE(a < a);
    for (const KernelExpr& b : samples) {
      const int relations = (a < b ? 1 : 0) + (b < a ? 1 : 0) + (a == b ? 1 : 0);
      EXPECT_EQ(relations, 1) << ToString(a) << " vs " << ToString(b);
      // Canonical text identifies a canonical expression.
      EXPECT_EQ(a == b, ToString(a) == ToString(b)) << ToString(a) << " vs " << ToString(b);
      for (const KernelExpr& c : samples) {
        if (a < b && b < c) {
          EXPECT_LT(a, c);
        }
      }
    }
  }
}

TEST(KernelExprFuzzTest, ArbitraryTextNeverCrashes) {
  std::mt19937 rng(12345);
  const std::string alphabet = "SELINPRQMATC1235rbfse+*()[] \t-x0$";
  std::uniform_int_distribution<size_t> pick(0, alphabet.size() - 1);
  std::uniform_int_distribution<int> length(0, 40);
  int accepted = 0;
  for (int trial = 0; trial < 20000; ++trial) {
    std::string text;
    const int n = length(rng);
    for (int i = 0; i < n; ++i) text += alphabet[pick(rng)];
    absl::StatusOr<KernelExpr> parsed = ParseKernel(text);
    if (parsed.ok()) {
      ++accepted;
      EXPECT_EQ(MustParse(ToString(*parsed)), *parsed) << text;
      EXPECT_LE(Depth(*parsed), 16);
    } else {
      EXPECT_THAT(parsed, StatusIs(absl::StatusCode::kInvalidArgument));
      EXPECT_TRUE(absl::StartsWith(parsed.status().message(),
                                   "kernel expression: "))
          << parsed.status();
    }
  }
  EXPECT_GT(accepted, 0);
}

TEST(KernelExprErrorTest, MessagesAndPositions) {
  EXPECT_EQ(ErrorOf(""), "kernel expression: empty expression at position 0");
  EXPECT_EQ(ErrorOf("   "), "kernel expression: empty expression at position 3");
  EXPECT_EQ(ErrorOf("LIN+SQ"), "kernel expression: unknown base kernel 'SQ' at position 4");
  EXPECT_EQ(ErrorOf("SE2"), "kernel expression: unknown base kernel 'SE2' at position 0");
  EXPECT_EQ(ErrorOf("SE+$"), "kernel expression: unexpected character '$' at position 3");
  EXPECT_EQ(ErrorOf("2*SE"), "kernel expression: unexpected character '2' at position 0");
  EXPECT_EQ(ErrorOf(")"), "kernel expression: unexpected character ')' at position 0");
  EXPECT_EQ(ErrorOf(std::string("SE+\x01", 4)),
            "kernel expression: unexpected character '\\x01' at position 3");
  EXPECT_EQ(ErrorOf("(SE+LIN"), "kernel expression: expected ')' at position 7");
  EXPECT_EQ(ErrorOf("(SE LIN)"), "kernel expression: expected ')' at position 4");
  EXPECT_EQ(ErrorOf("((SE)"), "kernel expression: expected ')' at position 5");
  EXPECT_EQ(ErrorOf("SE LIN"), "kernel expression: unexpected trailing input at position 3");
  EXPECT_EQ(ErrorOf("SE)"), "kernel expression: unexpected trailing input at position 2");
  EXPECT_EQ(ErrorOf("(SE)(LIN)"), "kernel expression: unexpected trailing input at position 4");
  EXPECT_EQ(ErrorOf("SE+"), "kernel expression: missing operand after '+' at position 3");
  EXPECT_EQ(ErrorOf("SE * "), "kernel expression: missing operand after '*' at position 5");
  EXPECT_EQ(ErrorOf("("), "kernel expression: missing operand after '(' at position 1");
  EXPECT_EQ(ErrorOf("+SE"), "kernel expression: missing operand before '+' at position 0");
  EXPECT_EQ(ErrorOf("SE*+LIN"), "kernel expression: missing operand before '+' at position 3");
  EXPECT_EQ(ErrorOf("SE++LIN"), "kernel expression: missing operand before '+' at position 3");
  EXPECT_EQ(ErrorOf("(SE+)"), "kernel expression: missing operand before ')' at position 4");
  EXPECT_EQ(ErrorOf("()"), "kernel expression: empty parentheses at position 0");
  EXPECT_EQ(ErrorOf("SE*( )"), "kernel expression: empty parentheses at position 3");
  EXPECT_EQ(ErrorOf("SE[]"), "kernel expression: empty brackets at position 2");
  EXPECT_EQ(ErrorOf("SE [ ]"), "kernel expression: empty brackets at position 3");
  EXPECT_EQ(ErrorOf("SE[-1]"),
            "kernel expression: expected a non-negative integer dimension or '*' at position 3");
  EXPECT_EQ(ErrorOf("SE[x]"),
            "kernel expression: expected a non-negative integer dimension or '*' at position 3");
  EXPECT_EQ(ErrorOf("SE["),
            "kernel expression: expected a non-negative integer dimension or '*' at position 3");
  EXPECT_EQ(ErrorOf("SE[1001]"),
            "kernel expression: dimension too large (limit 1000) at position 3");
  EXPECT_EQ(ErrorOf("SE[99999999999999999999999999]"),
            "kernel expression: dimension too large (limit 1000) at position 3");
  EXPECT_EQ(ErrorOf("SE[1"), "kernel expression: expected ']' at position 4");
  EXPECT_EQ(ErrorOf("SE[1 2]"), "kernel expression: expected ']' at position 5");
  EXPECT_EQ(ErrorOf("SE[1.5]"), "kernel expression: expected ']' at position 4");
  EXPECT_EQ(ErrorOf("(SE)[1]"), "kernel expression: unexpected trailing input at position 4");
}

TEST(KernelExprErrorTest, LongUnknownNameIsShortenedInMessage) {
  const std::string name(200, 'Q');
  EXPECT_EQ(ErrorOf("SE+" + name), "kernel expression: unknown base kernel '" +
                                       std::string(24, 'Q') + "...' at position 3");
}

TEST(KernelExprLimitsTest, Validate) {
  EXPECT_TRUE(ParseLimits().Validate().ok());
  ParseLimits limits;
  limits.max_length = 0;
  EXPECT_EQ(limits.Validate().code(), absl::StatusCode::kInvalidArgument);
  limits = ParseLimits();
  limits.max_depth = 0;
  EXPECT_EQ(limits.Validate().code(), absl::StatusCode::kInvalidArgument);
  limits.max_depth = -3;
  EXPECT_EQ(limits.Validate().code(), absl::StatusCode::kInvalidArgument);
  limits = ParseLimits();
  limits.max_base_kernels = 0;
  EXPECT_EQ(limits.Validate().code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(ParseKernel("SE", limits), StatusIs(absl::StatusCode::kInvalidArgument));
  EXPECT_EQ(ParseKernel("SE", limits).status().message(),
            "kernel expression limits: max_base_kernels must be positive, got 0");
}

TEST(KernelExprLimitsTest, MaxLengthIsCheckedBeforeParsing) {
  std::string exactly_limit = "SE" + std::string(998, ' ');
  EXPECT_TRUE(ParseKernel(exactly_limit).ok());
  EXPECT_EQ(ErrorOf(exactly_limit + " "),
            "kernel expression: expression too long (1001 characters, limit 1000) at position "
            "1000");
  ParseLimits short_limits;
  short_limits.max_length = 5;
  EXPECT_TRUE(ParseKernel("SE+SE", short_limits).ok());
  // Too long wins over the syntax error that follows.
  EXPECT_EQ(ErrorOf("SE+SE)", short_limits),
            "kernel expression: expression too long (6 characters, limit 5) at position 5");
}

std::string JoinedSum(int num_terms) {
  std::string text = "SE";
  for (int i = 1; i < num_terms; ++i) text += "+SE";
  return text;
}

TEST(KernelExprLimitsTest, MaxBaseKernels) {
  EXPECT_EQ(NumBaseKernels(MustParse(JoinedSum(32))), 32);
  EXPECT_EQ(ErrorOf(JoinedSum(33)),
            "kernel expression: too many base kernels (limit 32) at position 96");
  ParseLimits limits;
  limits.max_base_kernels = 2;
  EXPECT_TRUE(ParseKernel("SE*(LIN)", limits).ok());
  EXPECT_EQ(ErrorOf("SE*(LIN+ PER)", limits),
            "kernel expression: too many base kernels (limit 2) at position 9");
}

// SE*(SE+SE*(SE+...)) with `levels` alternations: canonical depth 2 * levels + 1.
std::string Alternating(int levels) {
  std::string text;
  for (int i = 0; i < levels; ++i) text += "SE*(SE+";
  text += "SE";
  text += std::string(static_cast<size_t>(levels), ')');
  return text;
}

TEST(KernelExprLimitsTest, MaxDepthOfCanonicalTree) {
  EXPECT_EQ(Depth(MustParse(Alternating(7))), 15);
  EXPECT_EQ(ErrorOf(Alternating(8)),
            "kernel expression: expression nested too deeply (depth 17, limit 16) at position 53");
  ParseLimits limits;
  limits.max_depth = 2;
  EXPECT_TRUE(ParseKernel("SE+LIN+PER", limits).ok());
  // Redundant grouping flattens away and does not count.
  EXPECT_TRUE(ParseKernel("((SE+LIN)+(PER+(C)))", limits).ok());
  EXPECT_EQ(ErrorOf("SE+LIN*PER", limits),
            "kernel expression: expression nested too deeply (depth 3, limit 2) at position 3");
  limits.max_depth = 1;
  EXPECT_TRUE(ParseKernel("(SE[4])", limits).ok());
  EXPECT_EQ(ErrorOf("SE*LIN", limits),
            "kernel expression: expression nested too deeply (depth 2, limit 1) at position 0");
}

TEST(KernelExprLimitsTest, ParenthesisNestingIsBounded) {
  // 4 * max_depth levels of redundant parentheses are fine; one more is not.
  const std::string ok_text = std::string(64, '(') + "SE" + std::string(64, ')');
  EXPECT_EQ(Canonical(ok_text), "SE");
  const std::string deep_text = std::string(65, '(') + "SE" + std::string(65, ')');
  EXPECT_EQ(ErrorOf(deep_text),
            "kernel expression: parentheses nested too deeply (limit 64) at position 64");
}

TEST(KernelExprLimitsTest, HundredThousandOpenParenthesesFailCleanly) {
  const std::string opens(100000, '(');
  EXPECT_EQ(ErrorOf(opens), "kernel expression: expression too long (100000 characters, limit "
                            "1000) at position 1000");
  ParseLimits huge;
  huge.max_length = 1 << 22;
  huge.max_depth = INT_MAX;
  huge.max_base_kernels = INT_MAX;
  EXPECT_EQ(ErrorOf(opens, huge),
            "kernel expression: parentheses nested too deeply (limit 1000) at position 1000");
  const std::string balanced = opens + "SE" + std::string(100000, ')');
  EXPECT_EQ(ErrorOf(balanced, huge),
            "kernel expression: parentheses nested too deeply (limit 1000) at position 1000");
  huge.max_depth = 16;
  EXPECT_EQ(ErrorOf(balanced, huge),
            "kernel expression: parentheses nested too deeply (limit 64) at position 64");
}

TEST(KernelExprLimitsTest, LongFlatExpressionsNeedNoDeepRecursion) {
  ParseLimits huge;
  huge.max_length = 1 << 22;
  huge.max_base_kernels = 1 << 20;
  const KernelExpr wide = MustParse(JoinedSum(100000), huge);
  EXPECT_EQ(NumBaseKernels(wide), 100000);
  EXPECT_EQ(Depth(wide), 2);
  // Right-nested sums flatten as they are read.
  std::string right_nested;
  for (int i = 0; i < 500; ++i) right_nested += "SE+(";
  right_nested += "SE" + std::string(500, ')');
  huge.max_depth = 1000;
  const KernelExpr flattened = MustParse(right_nested, huge);
  EXPECT_EQ(Depth(flattened), 2);
  EXPECT_EQ(NumBaseKernels(flattened), 501);
}

}  // namespace
}  // namespace gpsel
