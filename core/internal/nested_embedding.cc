// Nested kernels: a matcher over canonical expression trees that places every leaf of the
// smaller kernel at a leaf of the larger one and switches the rest off (rules in the header).
#include "gpsel/core/internal/nested_embedding.h"

#include <optional>
#include <vector>

#include "absl/strings/str_cat.h"
#include "gpsel/core/hyperparameters.h"

namespace gpsel {

namespace {

// What a leaf of the larger kernel gets.
enum class LeafMode {
  kCopy,       // the matched leaf's values of the smaller kernel
  kZeroScale,  // C or LIN: the scale on the lower bound (the leaf's summand → 0)
  kOne,        // C = 1
  kFlat,       // lengthscale on the upper bound (≈ 1), other parameters at the prior mean
  kPriorMean,  // every parameter at its prior mean (the value does not matter, or cannot help)
};

struct LeafAssignment {
  const KernelExpr* leaf = nullptr;      // in the larger kernel
  LeafMode mode = LeafMode::kPriorMean;
  const KernelExpr* source = nullptr;    // kCopy: the leaf of the smaller kernel
};

// Lexicographic: fewest parts that cannot be switched off, then fewest limits, then fewest
// switched-off leaves.
struct Cost {
  int approximate = 0;
  int limit = 0;
  int switched = 0;
  bool operator<(const Cost& o) const {
    if (approximate != o.approximate) return approximate < o.approximate;
    if (limit != o.limit) return limit < o.limit;
    return switched < o.switched;
  }
};

// What a changepoint's or changewindow's own parameters get (unassigned ones: prior means).
enum class ChangeMode {
  kCopy,    // the matched change node's values of the smaller kernel
  kFirst,   // the first operand everywhere: the change (CP) or the window (CW) beyond the data
  kSecond,  // the second operand everywhere: the change before the data, the window over it
};

struct ChangeAssignment {
  const KernelExpr* node = nullptr;    // in the larger kernel
  ChangeMode mode = ChangeMode::kFirst;
  const KernelExpr* source = nullptr;  // kCopy: the node of the smaller kernel
};

struct Plan {
  Cost cost;
  std::vector<LeafAssignment> leaves;
  std::vector<ChangeAssignment> changes;
  void Append(const Plan& other) {
    cost.approximate += other.cost.approximate;
    cost.limit += other.cost.limit;
    cost.switched += other.cost.switched;
    leaves.insert(leaves.end(), other.leaves.begin(), other.leaves.end());
    changes.insert(changes.end(), other.changes.begin(), other.changes.end());
  }
};

bool IsStationary(BaseKernel base) {
  return base == BaseKernel::kSE || base == BaseKernel::kMAT12 || base == BaseKernel::kMAT32 ||
         base == BaseKernel::kMAT52 || base == BaseKernel::kRQ || base == BaseKernel::kPER;
}

void CollectLeaves(const KernelExpr& expr, std::vector<const KernelExpr*>* leaves) {
  if (expr.is_base()) {
    leaves->push_back(&expr);
    return;
  }
  for (const KernelExpr& operand : expr.operands) CollectLeaves(operand, leaves);
}

// Every leaf of `expr` at its prior mean.
Plan PriorMeans(const KernelExpr& expr) {
  Plan plan;
  std::vector<const KernelExpr*> leaves;
  CollectLeaves(expr, &leaves);
  for (const KernelExpr* leaf : leaves) plan.leaves.push_back({leaf, LeafMode::kPriorMean});
  plan.cost.switched = static_cast<int>(leaves.size());
  return plan;
}

Plan SwitchToOne(const KernelExpr& expr);

// `expr` → 0 (as a summand).
Plan SwitchToZero(const KernelExpr& expr) {
  Plan plan;
  if (expr.is_base()) {
    plan.cost.switched = 1;
    if (expr.base == BaseKernel::kConst || expr.base == BaseKernel::kLIN) {
      plan.leaves.push_back({&expr, LeafMode::kZeroScale});
    } else {
      plan.leaves.push_back({&expr, LeafMode::kFlat});
      plan.cost.approximate = 1;
    }
    return plan;
  }
  if (expr.kind == KernelExpr::Kind::kSum || expr.is_change()) {
    // A change node is 0 when both its operands are, whatever its weights.
    for (const KernelExpr& summand : expr.operands) plan.Append(SwitchToZero(summand));
    return plan;
  }
  // A product is 0 when one factor is; the others then do not matter.
  std::optional<Plan> best;
  for (size_t i = 0; i < expr.operands.size(); ++i) {
    Plan candidate = SwitchToZero(expr.operands[i]);
    for (size_t j = 0; j < expr.operands.size(); ++j) {
      if (j != i) candidate.Append(PriorMeans(expr.operands[j]));
    }
    if (!best || candidate.cost < best->cost) best = std::move(candidate);
  }
  return *best;
}

// `expr` → 1 (as a factor).
Plan SwitchToOne(const KernelExpr& expr) {
  Plan plan;
  if (expr.is_base()) {
    plan.cost.switched = 1;
    if (expr.base == BaseKernel::kConst) {
      plan.leaves.push_back({&expr, LeafMode::kOne});
    } else if (IsStationary(expr.base)) {
      plan.leaves.push_back({&expr, LeafMode::kFlat});
      plan.cost.limit = 1;
    } else {  // LIN
      plan.leaves.push_back({&expr, LeafMode::kPriorMean});
      plan.cost.approximate = 1;
    }
    return plan;
  }
  if (expr.kind == KernelExpr::Kind::kProduct) {
    for (const KernelExpr& factor : expr.operands) plan.Append(SwitchToOne(factor));
    return plan;
  }
  if (expr.is_change()) {
    // The first operand everywhere, and it 1.
    plan = SwitchToOne(expr.operands[0]);
    plan.Append(PriorMeans(expr.operands[1]));
    plan.changes.push_back({&expr, ChangeMode::kFirst});
    return plan;
  }
  // A sum is 1 when one summand is and the others are 0.
  std::optional<Plan> best;
  for (size_t i = 0; i < expr.operands.size(); ++i) {
    Plan candidate = SwitchToOne(expr.operands[i]);
    for (size_t j = 0; j < expr.operands.size(); ++j) {
      if (j != i) candidate.Append(SwitchToZero(expr.operands[j]));
    }
    if (!best || candidate.cost < best->cost) best = std::move(candidate);
  }
  return *best;
}

// Bounded search: a pathological pair of wide sums must not make the matcher explode.
struct Budget {
  int remaining = 200000;
};

std::optional<Plan> Embed(const KernelExpr& sub, const KernelExpr& super, Budget& budget);

// The best injective matching of sub's operands into super's operands (of the same kind), with
// super's unmatched operands switched off by `off`.
template <typename SwitchOff>
std::optional<Plan> MatchOperands(const KernelExpr& sub, const KernelExpr& super,
                                  SwitchOff off, Budget& budget) {
  const size_t k = sub.operands.size(), m = super.operands.size();
  if (k > m) return std::nullopt;
  // Pairwise embeddings and switch-offs, computed once.
  std::vector<std::vector<std::optional<Plan>>> pair(k, std::vector<std::optional<Plan>>(m));
  for (size_t a = 0; a < k; ++a) {
    for (size_t t = 0; t < m; ++t) pair[a][t] = Embed(sub.operands[a], super.operands[t], budget);
  }
  std::vector<Plan> offs;
  for (size_t t = 0; t < m; ++t) offs.push_back(off(super.operands[t]));
  std::optional<Plan> best;
  std::vector<int> assigned(k, -1);
  std::vector<bool> used(m, false);
  // Depth-first over sub's operands in order; super's operands tried in order, so the first
  // best matching in canonical order wins ties.
  auto search = [&](auto&& self, size_t a) -> void {
    if (--budget.remaining < 0) return;
    if (a == k) {
      Plan plan;
      for (size_t i = 0; i < k; ++i) plan.Append(*pair[i][assigned[i]]);
      for (size_t t = 0; t < m; ++t) {
        if (!used[t]) plan.Append(offs[t]);
      }
      if (!best || plan.cost < best->cost) best = std::move(plan);
      return;
    }
    for (size_t t = 0; t < m; ++t) {
      if (used[t] || !pair[a][t]) continue;
      used[t] = true;
      assigned[a] = static_cast<int>(t);
      self(self, a + 1);
      used[t] = false;
    }
  };
  search(search, 0);
  return best;
}

// `sub` as a whole inside one operand of `super`, the others switched off by `off`.
template <typename SwitchOff>
std::optional<Plan> EmbedInOneOperand(const KernelExpr& sub, const KernelExpr& super,
                                      SwitchOff off, Budget& budget) {
  std::optional<Plan> best;
  for (size_t t = 0; t < super.operands.size(); ++t) {
    std::optional<Plan> inside = Embed(sub, super.operands[t], budget);
    if (!inside) continue;
    Plan plan = *std::move(inside);
    for (size_t j = 0; j < super.operands.size(); ++j) {
      if (j != t) plan.Append(off(super.operands[j]));
    }
    if (!best || plan.cost < best->cost) best = std::move(plan);
  }
  return best;
}

std::optional<Plan> Embed(const KernelExpr& sub, const KernelExpr& super, Budget& budget) {
  if (--budget.remaining < 0) return std::nullopt;
  if (super.is_base()) {
    if (!sub.is_base() || sub.base != super.base || sub.active_dim != super.active_dim) {
      return std::nullopt;
    }
    Plan plan;
    plan.leaves.push_back({&super, LeafMode::kCopy, &sub});
    return plan;
  }
  if (super.is_change()) {
    // Inside one operand with the weights giving it the whole data (exact: tanh saturates to ±1
    // in double precision), the other at its prior means; or operand by operand into a change
    // node of the same kind and column, its weights copied.
    std::optional<Plan> best;
    for (size_t t = 0; t < 2; ++t) {
      std::optional<Plan> inside = Embed(sub, super.operands[t], budget);
      if (!inside) continue;
      Plan plan = *std::move(inside);
      plan.Append(PriorMeans(super.operands[1 - t]));
      plan.changes.push_back({&super, t == 0 ? ChangeMode::kFirst : ChangeMode::kSecond});
      if (!best || plan.cost < best->cost) best = std::move(plan);
    }
    if (sub.kind == super.kind && sub.active_dim == super.active_dim) {
      std::optional<Plan> first = Embed(sub.operands[0], super.operands[0], budget);
      std::optional<Plan> second =
          first ? Embed(sub.operands[1], super.operands[1], budget) : std::nullopt;
      if (first && second) {
        Plan plan = *std::move(first);
        plan.Append(*second);
        plan.changes.push_back({&super, ChangeMode::kCopy, &sub});
        if (!best || plan.cost < best->cost) best = std::move(plan);
      }
    }
    return best;
  }
  const bool sum = super.kind == KernelExpr::Kind::kSum;
  auto off = sum ? SwitchToZero : SwitchToOne;
  std::optional<Plan> best = EmbedInOneOperand(sub, super, off, budget);
  if (sub.kind == super.kind && !sub.is_change()) {
    std::optional<Plan> matched = MatchOperands(sub, super, off, budget);
    if (matched && (!best || matched->cost < best->cost)) best = std::move(matched);
  }
  return best;
}

std::optional<Plan> BestPlan(const KernelExpr& sub, const KernelExpr& super) {
  Budget budget;
  return Embed(sub, super, budget);
}

// Parameter names of every leaf, in DescribeHyperparameters order.
std::map<const KernelExpr*, std::vector<std::string>> LeafParameterNames(
    const KernelExpr& kernel) {
  std::vector<const KernelExpr*> leaves;
  CollectLeaves(kernel, &leaves);
  const std::vector<std::string> labels = LeafLabels(kernel);
  std::map<const KernelExpr*, std::vector<std::string>> names;
  for (size_t i = 0; i < leaves.size(); ++i) {
    for (const std::string& parameter : BaseKernelParameterNames(leaves[i]->base)) {
      names[leaves[i]].push_back(absl::StrCat(labels[i], ".", parameter));
    }
  }
  return names;
}

// The same for change nodes' own parameters ("CP.location", ...).
void CollectChangeNodes(const KernelExpr& expr, std::vector<const KernelExpr*>* nodes) {
  for (const KernelExpr& operand : expr.operands) CollectChangeNodes(operand, nodes);
  if (expr.is_change()) nodes->push_back(&expr);
}

std::map<const KernelExpr*, std::vector<std::string>> ChangeParameterFullNames(
    const KernelExpr& kernel) {
  std::vector<const KernelExpr*> nodes;
  CollectChangeNodes(kernel, &nodes);
  const std::vector<std::string> labels = ChangeLabels(kernel);
  std::map<const KernelExpr*, std::vector<std::string>> names;
  for (size_t i = 0; i < nodes.size(); ++i) {
    for (const std::string& parameter : ChangeParameterNames(nodes[i]->kind)) {
      names[nodes[i]].push_back(absl::StrCat(labels[i], ".", parameter));
    }
  }
  return names;
}

// Natural values (core/hyperparameters.h units) that give one operand the whole data [0, 1]
// exactly in double precision: a transition of 1 % of the range puts every input at least 100
// transitions from the change, where tanh rounds to ±1.
constexpr double kSwitchTransition = 0.01;
constexpr double kLocationBeyondData = 4.0;  // ℓ three ranges after the last input
constexpr double kWindowOverData = 10.0;     // a window of ten ranges around the middle

}  // namespace

bool KernelContains(const KernelExpr& super, const KernelExpr& sub) {
  std::optional<Plan> plan = BestPlan(sub, super);
  return plan.has_value() && plan->cost.approximate == 0;
}

absl::StatusOr<NestedEmbedding> EmbedNestedOptimum(const KernelExpr& sub,
                                                   const std::map<std::string, double>& sub_raw,
                                                   const KernelExpr& super, double raw_lower,
                                                   double raw_upper) {
  std::optional<Plan> plan = BestPlan(sub, super);
  if (!plan) {
    return absl::NotFoundError(
        absl::StrCat("kernel ", ToString(sub), " is not contained in ", ToString(super)));
  }
  const auto sub_names = LeafParameterNames(sub);
  const auto super_names = LeafParameterNames(super);
  NestedEmbedding embedding;
  std::string off;
  for (const LeafAssignment& assignment : plan->leaves) {
    const KernelExpr& leaf = *assignment.leaf;
    const std::vector<std::string>& names = super_names.at(&leaf);
    for (size_t p = 0; p < names.size(); ++p) {
      double value = DefaultPrior(leaf.base, static_cast<int>(p)).mean;
      switch (assignment.mode) {
        case LeafMode::kCopy: {
          const std::string& source = sub_names.at(assignment.source)[p];
          auto it = sub_raw.find(source);
          if (it == sub_raw.end()) {
            return absl::InvalidArgumentError(
                absl::StrCat("nested embedding: no value for ", source, " of ", ToString(sub)));
          }
          value = it->second;
          break;
        }
        case LeafMode::kZeroScale: value = raw_lower; break;
        case LeafMode::kOne: value = InverseSoftplus(1.0); break;
        case LeafMode::kFlat:
          if (BaseKernelParameterNames(leaf.base)[p] == "lengthscale") value = raw_upper;
          break;
        case LeafMode::kPriorMean: break;
      }
      embedding.raw[names[p]] = value;
    }
    if (assignment.mode != LeafMode::kCopy) {
      static constexpr const char* kModeNames[] = {"copy", "→0", "=1", "flat", "prior mean"};
      absl::StrAppend(&off, off.empty() ? "" : ", ", names.front().substr(0, names.front().find('.')),
                      " ", kModeNames[static_cast<int>(assignment.mode)]);
    }
  }
  const auto sub_changes = ChangeParameterFullNames(sub);
  const auto super_changes = ChangeParameterFullNames(super);
  for (const auto& [node, names] : super_changes) {
    for (size_t p = 0; p < names.size(); ++p) {
      embedding.raw[names[p]] = DefaultChangePrior(node->kind, static_cast<int>(p)).mean;
    }
  }
  for (const ChangeAssignment& assignment : plan->changes) {
    const std::vector<std::string>& names = super_changes.at(assignment.node);
    const bool window = assignment.node->kind == KernelExpr::Kind::kChangeWindow;
    for (size_t p = 0; p < names.size(); ++p) {
      double value = embedding.raw[names[p]];
      if (assignment.mode == ChangeMode::kCopy) {
        const std::string& source = sub_changes.at(assignment.source)[p];
        auto it = sub_raw.find(source);
        if (it == sub_raw.end()) {
          return absl::InvalidArgumentError(
              absl::StrCat("nested embedding: no value for ", source, " of ", ToString(sub)));
        }
        value = it->second;
      } else if (p == 1) {
        value = InverseSoftplus(kSwitchTransition);
      } else if (p == 0) {
        // CP: the change after the data (first) or at the lower bound, a range before it
        // (second); CW: the window after the data (first) or centred on it (second).
        value = assignment.mode == ChangeMode::kFirst ? InverseSoftplus(kLocationBeyondData)
                : window                              ? InverseSoftplus(1.5)
                                                      : raw_lower;
      } else {  // CW width
        value = InverseSoftplus(assignment.mode == ChangeMode::kFirst ? 0.2 : kWindowOverData);
      }
      embedding.raw[names[p]] = value;
    }
    if (assignment.mode != ChangeMode::kCopy) {
      absl::StrAppend(&off, off.empty() ? "" : ", ",
                      names.front().substr(0, names.front().find('.')),
                      assignment.mode == ChangeMode::kFirst ? " first operand" : " second operand");
    }
  }
  auto noise = sub_raw.find(kNoiseName);
  if (noise == sub_raw.end()) {
    return absl::InvalidArgumentError(
        absl::StrCat("nested embedding: no value for noise of ", ToString(sub)));
  }
  embedding.raw[kNoiseName] = noise->second;
  embedding.quality = plan->cost.approximate > 0 ? EmbeddingQuality::kApproximate
                      : plan->cost.limit > 0     ? EmbeddingQuality::kLimit
                                                 : EmbeddingQuality::kExact;
  embedding.description = absl::StrCat(ToString(sub), " in ", ToString(super),
                                       off.empty() ? "" : "; switched off: ", off);
  return embedding;
}

}  // namespace gpsel
