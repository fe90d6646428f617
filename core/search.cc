// Compositional Kernel Search: candidate generation, the score cache, and the search loop that
// scores each step's candidates on a thread pool.
//
// Determinism: a candidate's result is a function of (data, options, canonical kernel text,
// warm start) only. Its seed comes from CandidateSeed; its warm start from its parent, which is
// fixed by the (deterministic) ranking of the previous step; results are written into per-
// candidate slots and every decision (ranking, cache writes, the trace) is taken on the calling
// thread after the whole step finished, in candidate order. Only the order of progress messages
// depends on scheduling.
#include "gpsel/core/search.h"

#include <algorithm>
#include <atomic>
#include <bitset>
#include <chrono>
#include <cmath>
#include <condition_variable>
#include <deque>
#include <limits>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include "absl/strings/ascii.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "absl/strings/str_split.h"
#include "gpsel/core/approx_score.h"
#include "gpsel/core/evidence.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/internal/nested_embedding.h"
#include "gpsel/core/internal/thread_pool.h"
#include "gpsel/core/memory_estimate.h"
#include "gpsel/core/progress_clock.h"
#include "gpsel/core/status_macros.h"
#include "gpsel/core/time_estimate.h"

namespace gpsel {
namespace {

constexpr int kMaxDepthLimit = 10;
constexpr int kMaxBeamWidth = 64;
constexpr int kMaxThreads = 256;
// Subsets of a sum's/product's operands are offered as subexpressions up to this many operands
// (2^m subsets); wider nodes only offer themselves and their operands.
constexpr size_t kMaxSubsetOperands = 10;

constexpr uint64_t kFnvOffset = 14695981039346656037ull;
constexpr uint64_t kFnvPrime = 1099511628211ull;

uint64_t Fnv1a(const void* data, size_t size, uint64_t hash = kFnvOffset) {
  const auto* bytes = static_cast<const unsigned char*>(data);
  for (size_t i = 0; i < size; ++i) {
    hash ^= bytes[i];
    hash *= kFnvPrime;
  }
  return hash;
}

uint64_t SplitMix64(uint64_t x) {
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

// Debian's Abseil has its own string_view type; convert explicitly.
absl::string_view ToAbsl(std::string_view text) { return {text.data(), text.size()}; }

double SecondsSince(std::chrono::steady_clock::time_point start) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
}

KernelExpr Combine(KernelExpr::Kind kind, std::vector<KernelExpr> operands) {
  return kind == KernelExpr::Kind::kSum ? KernelExpr::Sum(std::move(operands))
                                        : KernelExpr::Product(std::move(operands));
}

std::string Bracketed(const KernelExpr& expr) { return absl::StrCat("[", ToString(expr), "]"); }

// Appends every kernel obtained from `node` by one rewrite somewhere inside it (not deduplicated).
void CollectRewrites(const KernelExpr& node, const std::vector<KernelExpr>& base_kernels,
                     std::vector<KernelExpansion>* out) {
  for (const KernelExpr& base : base_kernels) {
    out->push_back({KernelExpr::Sum({node, base}),
                    absl::StrCat(Bracketed(node), " + ", ToString(base))});
    out->push_back({KernelExpr::Product({node, base}),
                    absl::StrCat(Bracketed(node), " * ", ToString(base))});
  }
  if (node.is_base()) {
    for (const KernelExpr& base : base_kernels) {
      if (base != node) {
        out->push_back({base, absl::StrCat(Bracketed(node), " -> ", ToString(base))});
      }
    }
    return;
  }
  const size_t m = node.operands.size();
  for (size_t i = 0; i < m; ++i) {
    std::vector<KernelExpansion> inner;
    CollectRewrites(node.operands[i], base_kernels, &inner);
    for (KernelExpansion& rewrite : inner) {
      std::vector<KernelExpr> operands = node.operands;
      operands[i] = std::move(rewrite.kernel);
      out->push_back({Combine(node.kind, std::move(operands)), std::move(rewrite.derivation)});
    }
  }
  // A group of some operands is a subexpression too (up to associativity and commutativity).
  // Combining it with the node's own operator only reproduces "whole op B", so only the other
  // operator is tried.
  if (m < 3 || m > kMaxSubsetOperands) return;
  const bool is_sum = node.kind == KernelExpr::Kind::kSum;
  const uint32_t all = (1u << m) - 1;
  for (uint32_t mask = 1; mask < all; ++mask) {
    if (std::bitset<32>(mask).count() < 2) continue;
    std::vector<KernelExpr> group;
    std::vector<KernelExpr> rest;
    for (size_t i = 0; i < m; ++i) {
      ((mask >> i) & 1u ? group : rest).push_back(node.operands[i]);
    }
    const KernelExpr sub = Combine(node.kind, group);
    for (const KernelExpr& base : base_kernels) {
      std::vector<KernelExpr> operands = rest;
      operands.push_back(is_sum ? KernelExpr::Product({sub, base}) : KernelExpr::Sum({sub, base}));
      out->push_back({Combine(node.kind, std::move(operands)),
                      absl::StrCat(Bracketed(sub), is_sum ? " * " : " + ", ToString(base))});
    }
  }
}

// The hyperparameter settings that apply to `kernel`: entries naming parameters it lacks are
// dropped, so one set of settings serves every candidate of a search ("SE.lengthscale" only
// matters for kernels with exactly one SE).
HyperparameterSettings SettingsForKernel(const KernelExpr& kernel,
                                         const HyperparameterSettings& settings) {
  if (settings.prior_overrides.empty() && settings.fixed_values.empty()) return settings;
  absl::StatusOr<std::vector<HyperparameterInfo>> infos = DescribeHyperparameters(kernel, {});
  if (!infos.ok()) return settings;  // the scorer reports the real problem
  std::set<std::string> names;
  for (const HyperparameterInfo& info : *infos) names.insert(info.name);
  HyperparameterSettings filtered;
  for (const auto& [name, prior] : settings.prior_overrides) {
    if (names.count(name)) filtered.prior_overrides[name] = prior;
  }
  for (const auto& [name, value] : settings.fixed_values) {
    if (names.count(name)) filtered.fixed_values[name] = value;
  }
  return filtered;
}

// Every settings name must apply to some kernel the search can build: it is checked against the
// sum of one copy of each base kernel (names like "SE.lengthscale") and against the sum of
// max_depth copies ("SE#2.lengthscale").
absl::Status ValidateSettingsNames(const HyperparameterSettings& settings,
                                   const std::vector<KernelExpr>& base_kernels, int max_depth) {
  std::vector<KernelExpr> once = base_kernels;
  std::vector<KernelExpr> repeated;
  for (int copy = 0; copy < std::max(2, max_depth); ++copy) {
    repeated.insert(repeated.end(), base_kernels.begin(), base_kernels.end());
  }
  const KernelExpr probe_once = KernelExpr::Sum(once);
  const KernelExpr probe_repeated = KernelExpr::Sum(repeated);
  auto check = [&](const HyperparameterSettings& single) -> absl::Status {
    if (DescribeHyperparameters(probe_once, single).ok()) return absl::OkStatus();
    absl::Status status = DescribeHyperparameters(probe_repeated, single).status();
    if (status.ok()) return status;
    return absl::InvalidArgumentError(absl::StrCat(
        "hyperparameters: a setting names no parameter of any kernel this search can build (",
        status.message(), ")"));
  };
  for (const auto& [name, prior] : settings.prior_overrides) {
    HyperparameterSettings single;
    single.prior_overrides[name] = prior;
    GPSEL_RETURN_IF_ERROR(check(single));
  }
  for (const auto& [name, value] : settings.fixed_values) {
    HyperparameterSettings single;
    single.fixed_values[name] = value;
    GPSEL_RETURN_IF_ERROR(check(single));
  }
  return absl::OkStatus();
}

std::string FormatDouble(double value) { return absl::StrFormat("%.17g", value); }

// Everything besides the kernel and metric that determines a default-scorer result.
std::string Fingerprint(const Dataset& data, const SearchOptions& options, bool custom_scorer) {
  uint64_t hash = Fnv1a(data.x.data(), sizeof(double) * data.x.size());
  hash = Fnv1a(data.y.data(), sizeof(double) * data.y.size(), hash);
  const ScoreOptions& s = options.score;
  std::string text = absl::StrCat(
      "n=", data.num_points(), ";d=", data.num_dims(), ";data=", hash,
      ";standardize=", s.standardize, ";restarts=", s.fit.restarts,
      ";draws=", s.fit.max_draws_factor, ";seed=", s.fit.seed,
      ";iters=", s.fit.max_iterations, ";gtol=", FormatDouble(s.fit.gradient_tolerance),
      ";rtol=", FormatDouble(s.fit.relative_tolerance), ";bounds=", FormatDouble(s.fit.raw_lower_bound), ",",
      FormatDouble(s.fit.raw_upper_bound),
      ";warm=", options.warm_start, ";custom=", custom_scorer,
      ";approx=", std::string(ApproxModeName(s.approx.mode)), ",", s.approx.inducing_points, ";r=");
  for (double r : s.laplace_r) absl::StrAppend(&text, FormatDouble(r), ",");
  for (const auto& [name, prior] : s.hyperparameters.prior_overrides) {
    absl::StrAppend(&text, ";prior:", name, "=", FormatDouble(prior.mean), ",",
                    FormatDouble(prior.sd));
  }
  for (const auto& [name, value] : s.hyperparameters.fixed_values) {
    absl::StrAppend(&text, ";fixed:", name, "=", FormatDouble(value));
  }
  return text;
}

// Ranking of successful candidates: higher score, then fewer base kernels (the simpler kernel
// wins a tie), then canonical order, so that the choice never depends on candidate order.
bool RanksBefore(double score_a, const KernelExpr& a, double score_b, const KernelExpr& b) {
  if (score_a != score_b) return score_a > score_b;
  const int size_a = NumBaseKernels(a);
  const int size_b = NumBaseKernels(b);
  if (size_a != size_b) return size_a < size_b;
  return a < b;
}

}  // namespace

// ---------------------------------------------------------------------------------------------

std::vector<KernelExpansion> ExpandKernel(const KernelExpr& kernel,
                                          const std::vector<KernelExpr>& base_kernels,
                                          int max_base_kernels) {
  std::vector<KernelExpansion> all;
  CollectRewrites(kernel, base_kernels, &all);
  std::vector<KernelExpansion> unique;
  std::set<KernelExpr> seen = {kernel};
  for (KernelExpansion& expansion : all) {
    if (NumBaseKernels(expansion.kernel) > max_base_kernels) continue;
    if (!seen.insert(expansion.kernel).second) continue;
    unique.push_back(std::move(expansion));
  }
  return unique;
}

namespace {
// Every node of `node`'s canonical tree wrapped as CP(S, S) / CW(S, S), in place.
void CollectChangeRewrites(const KernelExpr& node, const SearchOperators& operators,
                           std::vector<KernelExpansion>* out) {
  // Unpinned (column 0) when no columns are listed, else one pinned move per column.
  std::vector<int> columns = operators.columns;
  if (columns.empty()) columns.push_back(-1);
  const std::string operand = ToString(node);
  for (const int column : columns) {
    const std::string pin = column >= 0 ? absl::StrCat("[", column, "]") : "";
    if (operators.change_point) {
      out->push_back({KernelExpr::ChangePoint(node, node, column),
                      absl::StrCat(Bracketed(node), " -> CP", pin, "(", operand, ",", operand,
                                   ")")});
    }
    if (operators.change_window) {
      out->push_back({KernelExpr::ChangeWindow(node, node, column),
                      absl::StrCat(Bracketed(node), " -> CW", pin, "(", operand, ",", operand,
                                   ")")});
    }
  }
  for (size_t i = 0; i < node.operands.size(); ++i) {
    std::vector<KernelExpansion> inner;
    CollectChangeRewrites(node.operands[i], operators, &inner);
    for (KernelExpansion& rewrite : inner) {
      KernelExpr copy = node;
      copy.operands[i] = std::move(rewrite.kernel);
      out->push_back({Canonicalize(std::move(copy)), std::move(rewrite.derivation)});
    }
  }
}
}  // namespace

std::vector<KernelExpansion> ExpandKernel(const KernelExpr& kernel,
                                          const std::vector<KernelExpr>& base_kernels,
                                          int max_base_kernels, const SearchOperators& operators) {
  std::vector<KernelExpansion> all = ExpandKernel(kernel, base_kernels, max_base_kernels);
  if (!operators.change_point && !operators.change_window) return all;
  std::set<KernelExpr> seen = {kernel};
  for (const KernelExpansion& expansion : all) seen.insert(expansion.kernel);
  std::vector<KernelExpansion> changes;
  CollectChangeRewrites(kernel, operators, &changes);
  for (KernelExpansion& expansion : changes) {
    if (NumBaseKernels(expansion.kernel) > max_base_kernels) continue;
    if (!seen.insert(expansion.kernel).second) continue;
    all.push_back(std::move(expansion));
  }
  return all;
}

// Besides "+,*,CP,CW", a change move may be pinned to input columns: "+,*,CP[1]" or
// "+,*,CP[0],CP[2],CW[0],CW[2]" fill SearchOperators::columns. CP and CW share that list, so
// both are pinned to the same columns or neither; a move both pinned and unpinned is refused.
absl::StatusOr<SearchOperators> ParseSearchOperators(std::string_view list) {
  SearchOperators operators;
  bool plus = false, times = false;
  // A change move is unpinned ("CP") or pinned to columns ("CP[1]", "CP[0],CP[2]"); the columns
  // are one list for both moves (SearchOperators::columns).
  struct ChangeEntries {
    bool unpinned = false;
    std::set<int> columns;
  } cp, cw;
  for (absl::string_view entry : absl::StrSplit(ToAbsl(list), ',')) {
    const std::string text = absl::AsciiStrToUpper(absl::StripAsciiWhitespace(entry));
    std::string name = text;
    std::optional<int> column;
    if (const size_t open = text.find('['); open != std::string::npos) {
      name = text.substr(0, open);
      int c = -1;
      if (text.back() != ']' ||
          !absl::SimpleAtoi(absl::string_view(text).substr(open + 1, text.size() - open - 2),
                            &c) ||
          c < 0 || (name != "CP" && name != "CW")) {
        return absl::InvalidArgumentError(absl::StrCat(
            "operators: bad entry '", text, "' in '", ToAbsl(list),
            "' (a change move is pinned to an input column as CP[c] or CW[c], c >= 0)"));
      }
      column = c;
    }
    ChangeEntries* change = name == "CP" ? &cp : name == "CW" ? &cw : nullptr;
    bool* flag = name == "+"    ? &plus
                 : name == "*"  ? &times
                 : name == "CP" ? &operators.change_point
                 : name == "CW" ? &operators.change_window
                                : nullptr;
    if (flag == nullptr) {
      return absl::InvalidArgumentError(
          absl::StrCat("operators: unknown entry '", name, "' in '", ToAbsl(list),
                       "' (known: +, *, CP, CW, CP[c], CW[c])"));
    }
    const bool twice = change == nullptr ? *flag
                       : column.has_value() ? change->unpinned || change->columns.count(*column)
                                            : *flag;
    if (twice) {
      return absl::InvalidArgumentError(absl::StrCat(
          "operators: '", name, "' is listed twice in '", ToAbsl(list),
          change != nullptr ? "' (pin every change move to columns, or none)" : "'"));
    }
    *flag = true;
    if (change != nullptr) {
      if (column.has_value()) {
        change->columns.insert(*column);
      } else {
        change->unpinned = true;
      }
    }
  }
  if (!plus || !times) {
    return absl::InvalidArgumentError(
        absl::StrCat("operators: '", ToAbsl(list), "' must include + and * (CKS's own moves)"));
  }
  if (operators.change_point && operators.change_window &&
      (cp.unpinned != cw.unpinned || cp.columns != cw.columns)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "operators: CP and CW read one list of columns: pin both to the same columns, or neither, "
        "in '", ToAbsl(list), "'"));
  }
  const std::set<int>& pinned = operators.change_point ? cp.columns : cw.columns;
  operators.columns.assign(pinned.begin(), pinned.end());
  return operators;
}

std::string SearchOperatorsText(const SearchOperators& operators) {
  return absl::StrJoin(SearchOperatorNames(operators), ",");
}

std::vector<std::string> SearchOperatorNames(const SearchOperators& operators) {
  std::vector<std::string> names = {"+", "*"};
  if (operators.change_point) names.push_back("CP");
  if (operators.change_window) names.push_back("CW");
  return names;
}

std::vector<KernelExpr> DefaultBaseKernels() {
  return {KernelExpr::Base(BaseKernel::kSE), KernelExpr::Base(BaseKernel::kLIN),
          KernelExpr::Base(BaseKernel::kMAT32)};
}

absl::StatusOr<std::vector<KernelExpr>> ParseBaseKernelList(std::string_view list) {
  std::vector<KernelExpr> bases;
  for (absl::string_view entry : absl::StrSplit(ToAbsl(list), ',')) {
    const absl::string_view name = absl::StripAsciiWhitespace(entry);
    if (name.empty()) {
      return absl::InvalidArgumentError(
          absl::StrCat("base kernels: empty entry in '", ToAbsl(list), "'"));
    }
    absl::StatusOr<KernelExpr> kernel = ParseKernel(std::string_view(name.data(), name.size()));
    if (!kernel.ok()) {
      return absl::InvalidArgumentError(
          absl::StrCat("base kernels: '", name, "': ", kernel.status().message()));
    }
    if (!kernel->is_base()) {
      return absl::InvalidArgumentError(
          absl::StrCat("base kernels: '", name, "' is not a single base kernel"));
    }
    if (std::find(bases.begin(), bases.end(), *kernel) != bases.end()) {
      return absl::InvalidArgumentError(
          absl::StrCat("base kernels: '", name, "' is listed twice"));
    }
    bases.push_back(*std::move(kernel));
  }
  return bases;
}

namespace {
// The parent's optimum embedded into a child (WarmStartFromParent) as one more start of both
// of the child's fits.
void AddNestedStart(const std::optional<Eigen::VectorXd>& warm_start, FitOptions& fit) {
  if (!warm_start.has_value()) return;
  StartPoint start;
  start.raw = *warm_start;
  start.kind = StartKind::kNestedParent;
  start.origin = "parent's optimum";
  fit.extra_starts.push_back(std::move(start));
}
}  // namespace

uint64_t CandidateSeed(uint64_t search_seed, std::string_view canonical_kernel_text) {
  const uint64_t text_hash = Fnv1a(canonical_kernel_text.data(), canonical_kernel_text.size());
  return SplitMix64(SplitMix64(search_seed) ^ text_hash);
}

absl::StatusOr<Eigen::VectorXd> WarmStartFromParent(const KernelExpr& parent,
                                                    const KernelExpr& child,
                                                    const HyperparameterSettings& settings,
                                                    const std::vector<std::string>& parent_names,
                                                    const Eigen::VectorXd& parent_raw,
                                                    double raw_lower, double raw_upper) {
  if (static_cast<Eigen::Index>(parent_names.size()) != parent_raw.size()) {
    return absl::InvalidArgumentError(absl::StrCat("warm start: ", parent_names.size(),
                                                   " parent names but ", parent_raw.size(),
                                                   " parent values"));
  }
  absl::StatusOr<std::vector<HyperparameterInfo>> infos =
      DescribeHyperparameters(child, SettingsForKernel(child, settings));
  if (!infos.ok()) return infos.status();
  std::map<std::string, double> parent_values;
  for (size_t i = 0; i < parent_names.size(); ++i) parent_values[parent_names[i]] = parent_raw[i];
  {
    // The parent's fixed parameters complete its raw vector. A child that does not contain the
    // parent exactly (S + B with a bare stationary B) still starts from the closest embedding;
    // one that cannot be matched at all (B → B') keeps the values whose names match.
    absl::StatusOr<std::vector<HyperparameterInfo>> parent_infos =
        DescribeHyperparameters(parent, SettingsForKernel(parent, settings));
    if (!parent_infos.ok()) return parent_infos.status();
    std::map<std::string, double> full = parent_values;
    for (const HyperparameterInfo& info : *parent_infos) {
      if (info.fixed) full[info.name] = info.fixed_raw;
    }
    absl::StatusOr<NestedEmbedding> embedding =
        EmbedNestedOptimum(parent, full, child, raw_lower, raw_upper);
    if (embedding.ok()) parent_values = std::move(embedding->raw);
  }
  std::vector<double> start;
  for (const HyperparameterInfo& info : *infos) {
    if (info.fixed) continue;
    auto it = parent_values.find(info.name);
    start.push_back(it != parent_values.end() ? it->second : info.prior.mean);
  }
  return Eigen::Map<Eigen::VectorXd>(start.data(), static_cast<Eigen::Index>(start.size()));
}

absl::StatusOr<CandidateScore> CandidateScoreFromKernelScore(const KernelScore& score,
                                                             Metric metric) {
  const std::string name(MetricName(metric));
  auto value = score.metrics.find(name);
  if (value == score.metrics.end()) {
    auto undefined = score.undefined_metrics.find(name);
    if (undefined != score.undefined_metrics.end()) {
      return absl::FailedPreconditionError(
          absl::StrCat(name, " undefined: ", undefined->second));
    }
    return absl::FailedPreconditionError(absl::StrCat(name, " was not computed"));
  }
  CandidateScore candidate;
  candidate.value = value->second;
  candidate.details = score;
  const std::optional<FitResult>& fit = NeedsMllFit(metric) ? score.mll_fit : score.map_fit;
  if (fit.has_value() &&
      fit->raw.size() == static_cast<Eigen::Index>(score.parameter_names.size())) {
    candidate.parameter_names = score.parameter_names;
    candidate.raw_optimum = fit->raw;
  }
  return candidate;
}

CandidateScorer MakeMetricScorer(Metric metric, const ScoreOptions& score_options) {
  return [metric, score_options](const Dataset& data, const KernelExpr& kernel,
                                 const CandidateRequest& request)
             -> absl::StatusOr<CandidateScore> {
    ScoreOptions options = score_options;
    options.fit.seed = request.seed;
    AddNestedStart(request.warm_start, options.fit);
    options.hyperparameters = SettingsForKernel(kernel, score_options.hyperparameters);
    // An empty list means "all paper metrics" to ScoreKernel; here it means "just the one".
    if (std::find(options.metrics.begin(), options.metrics.end(), metric) ==
        options.metrics.end()) {
      options.metrics.push_back(metric);
    }
    options.compute_laplace_covariance = false;
    absl::StatusOr<KernelScore> score = ScoreKernel(data, kernel, options, request.cancellation);
    if (!score.ok()) return score.status();
    return CandidateScoreFromKernelScore(*score, metric);
  };
}

CandidateScorer MakeEvidenceScorer(const ScoreOptions& score_options,
                                   const NestedSamplingOptions& sampling) {
  return [score_options, sampling](const Dataset& data, const KernelExpr& kernel,
                                   const CandidateRequest& request)
             -> absl::StatusOr<CandidateScore> {
    EvidenceOptions options;
    options.sampling = sampling;
    options.sampling.seed = request.seed;
    options.standardize = score_options.standardize;
    options.hyperparameters = SettingsForKernel(kernel, score_options.hyperparameters);
    options.scale_x = score_options.scale_x;
    absl::StatusOr<EvidenceResult> result =
        ComputeEvidence(data, kernel, options, request.cancellation);
    if (!result.ok()) return result.status();
    const NestedSamplingResult* evidence = &*result->sampling;
    // A run cut short by a cap is not an estimate of log Z; comparing it would mislead.
    if (evidence->partial) {
      return absl::DeadlineExceededError(
          absl::StrCat("nested sampling stopped early (", evidence->partial_reason,
                       "); its log Z estimate is not usable"));
    }
    CandidateScore score;
    score.value = evidence->log_evidence;
    score.uncertainty = evidence->log_evidence_error;
    KernelScore& details = score.details;
    details.kernel = result->kernel;
    details.num_points = result->num_points;
    details.num_hyperparameters = result->num_hyperparameters;
    details.standardized = result->standardized;
    details.standardization = result->standardization;
    details.parameter_names = result->parameter_names;
    details.metrics["evidence"] = evidence->log_evidence;
    details.seconds = evidence->seconds;
    return score;
  };
}

// ---------------------------------------------------------------------------------------------
// ScoreCache

size_t ScoreCache::size() const {
  std::lock_guard<std::mutex> lock(mutex_);
  size_t count = 0;
  for (const auto& [text, entries] : entries_) count += entries.size();
  return count;
}

void ScoreCache::Clear() {
  std::lock_guard<std::mutex> lock(mutex_);
  entries_.clear();
  fingerprint_.clear();
}

absl::Status ScoreCache::Bind(const std::string& fingerprint) {
  std::lock_guard<std::mutex> lock(mutex_);
  if (fingerprint_.empty()) {
    fingerprint_ = fingerprint;
    return absl::OkStatus();
  }
  if (fingerprint_ != fingerprint) {
    return absl::InvalidArgumentError(
        "score cache: it holds scores for other data, score options or seed; use a new cache");
  }
  return absl::OkStatus();
}

std::optional<ScoreCache::Entry> ScoreCache::Find(const std::string& kernel_text,
                                                  const std::string& label,
                                                  std::optional<Metric> core_metric) const {
  std::lock_guard<std::mutex> lock(mutex_);
  auto it = entries_.find(kernel_text);
  if (it == entries_.end()) return std::nullopt;
  for (const Entry& entry : it->second) {
    if (entry.label == label) return entry;
  }
  if (!core_metric.has_value()) return std::nullopt;
  const std::string name(MetricName(*core_metric));
  for (const Entry& entry : it->second) {
    if (!entry.core_scorer || !entry.score.ok()) continue;
    const KernelScore& details = entry.score->details;
    if (!details.metrics.count(name) && !details.undefined_metrics.count(name)) continue;
    Entry derived;
    derived.label = label;
    derived.core_scorer = true;
    derived.score = CandidateScoreFromKernelScore(details, *core_metric);
    derived.warm_start = entry.warm_start;
    return derived;
  }
  return std::nullopt;
}

void ScoreCache::Store(const std::string& kernel_text, Entry entry) {
  std::lock_guard<std::mutex> lock(mutex_);
  std::vector<Entry>& entries = entries_[kernel_text];
  for (Entry& existing : entries) {
    if (existing.label == entry.label) {
      existing = std::move(entry);
      return;
    }
  }
  entries.push_back(std::move(entry));
}

// ---------------------------------------------------------------------------------------------
// Options and result

absl::Status SearchOptions::Validate() const {
  for (const KernelExpr& base : base_kernels) {
    if (!base.is_base()) {
      return absl::InvalidArgumentError(
          absl::StrCat("base_kernels: '", ToString(base), "' is not a single base kernel"));
    }
    if (std::count(base_kernels.begin(), base_kernels.end(), base) > 1) {
      return absl::InvalidArgumentError(
          absl::StrCat("base_kernels: '", ToString(base), "' is listed twice"));
    }
  }
  if (max_depth < 1 || max_depth > kMaxDepthLimit) {
    return absl::InvalidArgumentError(absl::StrCat("max_depth: must be in 1..", kMaxDepthLimit,
                                                   ", got ", max_depth));
  }
  if (beam_width < 1 || beam_width > kMaxBeamWidth) {
    return absl::InvalidArgumentError(absl::StrCat("beam_width: must be in 1..", kMaxBeamWidth,
                                                   ", got ", beam_width));
  }
  if (threads < 0 || threads > kMaxThreads) {
    return absl::InvalidArgumentError(absl::StrCat(
        "threads: must be in 0..", kMaxThreads, " (0 = one per hardware thread), got ", threads));
  }
  if (scorer) {
    if (metric.empty()) {
      return absl::InvalidArgumentError("metric: a custom scorer needs a label");
    }
  } else {
    if (absl::AsciiStrToLower(metric) == "evidence") {
      return absl::InvalidArgumentError(
          "metric: 'evidence' needs a nested-sampling scorer (SearchOptions::scorer)");
    }
    absl::StatusOr<Metric> parsed = ParseMetric(metric);
    if (!parsed.ok()) return absl::InvalidArgumentError(parsed.status().message());
  }
  if (!score.fit.extra_starts.empty()) {
    return absl::InvalidArgumentError(
        "score.fit.extra_starts: set per candidate by the search; use SearchOptions::warm_start");
  }
  return score.Validate();
}

std::string SearchResult::Summary() const {
  std::string out = absl::StrFormat(
      "Compositional kernel search: metric %s, at most %d base kernels, beam %d, %d thread%s\n",
      metric, max_depth, beam_width, threads, threads == 1 ? "" : "s");
  if (operators.change_point || operators.change_window) {
    absl::StrAppend(&out, "moves: ", SearchOperatorsText(operators),
                    operators.columns.empty()
                        ? ""
                        : absl::StrCat(" (changes along column(s) ",
                                       absl::StrJoin(operators.columns, ","), ")"),
                    "\n");
  }
  absl::StrAppendFormat(&out, "best kernel: %s   %s = %.4f", ToString(best_kernel), metric,
                        best_score);
  if (best_uncertainty > 0) absl::StrAppendFormat(&out, " +- %.4f", best_uncertainty);
  out += MayNotBeGlobalNote(best);
  out += "\n";
  for (const SearchStep& step : steps) {
    absl::StrAppendFormat(&out, "step %d", step.depth);
    if (!step.expanded.empty()) {
      absl::StrAppend(&out, " (expanding ", absl::StrJoin(step.expanded, ", "), ")");
    }
    absl::StrAppendFormat(&out, ": %d candidates, %.2f s%s\n", step.candidates.size(),
                          step.seconds, step.improved ? "" : ", no improvement");
    std::vector<const CandidateRecord*> ordered;
    for (const CandidateRecord& record : step.candidates) ordered.push_back(&record);
    // Best first; failures last.
    std::stable_sort(ordered.begin(), ordered.end(),
                     [](const CandidateRecord* a, const CandidateRecord* b) {
                       if (a->ok != b->ok) return a->ok;
                       return a->ok && a->score > b->score;
                     });
    for (const CandidateRecord* record : ordered) {
      absl::StrAppendFormat(&out, "  %s %-28s ", record->chosen ? "*" : " ", record->kernel);
      if (record->ok) {
        absl::StrAppendFormat(&out, "%12.4f", record->score);
      } else {
        absl::StrAppend(&out, "      failed: ", record->error);
      }
      if (record->from_cache) out += "  (cached)";
      out += "\n";
    }
    for (const std::string& pruned : step.pruned) absl::StrAppend(&out, "  dropped ", pruned, "\n");
    if (!step.undecided.empty()) absl::StrAppend(&out, "  ", step.undecided, "\n");
  }
  absl::StrAppendFormat(&out, "stopped: %s\n", stop_reason);
  if (!approx_note.empty()) absl::StrAppend(&out, approx_note, "\n");
  if (!exact_rescore_note.empty()) absl::StrAppend(&out, exact_rescore_note, "\n");
  if (best_sparse.has_value()) {
    // The sparse interval the search ranked the best kernel by, beside the exact value that
    // replaced it: the reader sees whether the bounds held.
    auto interval = best_sparse->intervals.find(metric);
    auto exact = best.metrics.find(metric);
    if (interval != best_sparse->intervals.end() && exact != best.metrics.end()) {
      absl::StrAppendFormat(&out, "ranked by its sparse %s [%.4f, %.4f] at m = %d; exact %.4f\n",
                            metric, interval->second.lower, interval->second.upper,
                            best_sparse->num_inducing, exact->second);
    }
  }
  absl::StrAppendFormat(&out, "%d candidates fitted, %d from cache, %d failed, %.2f s\n",
                        candidates_scored, cache_hits, failures, seconds);
  // Kept kernels scored with every metric (score_kept_kernels), besides the best one below.
  for (const SearchStep& step : steps) {
    if (!step.kept_score || step.kept_score->kernel == best.kernel) continue;
    absl::StrAppendFormat(&out, "kept after step %d: %s  ", step.depth, step.kept_score->kernel);
    for (Metric m : AllMetrics()) {
      auto it = step.kept_score->metrics.find(std::string(MetricName(m)));
      if (it != step.kept_score->metrics.end()) {
        absl::StrAppendFormat(&out, " %s %.4f", it->first, it->second);
      }
    }
    out += "\n";
  }
  out += best.Summary();
  return out;
}

// ---------------------------------------------------------------------------------------------
// The search loop.

class KernelSearchRun {
 public:
  KernelSearchRun(const Dataset& data, const SearchOptions& options,
                  const ProgressCallback& progress, ScoreCache* cache)
      : data_(data), options_(options), progress_(progress), cache_(cache) {}

  absl::StatusOr<SearchResult> Run();

 private:
  // One candidate of the current step.
  struct Slot {
    KernelExpr kernel;
    CandidateRecord record;
    std::optional<Eigen::VectorXd> warm_start;
    absl::StatusOr<CandidateScore> result = absl::UnknownError("not scored");
  };

  absl::Status Prepare();
  // The candidates of step `depth`: the base kernels at depth 1, else every expansion of each
  // kernel of the beam (recorded in step->expanded), each once, with its parent's warm start.
  std::vector<Slot> Candidates(int depth, const std::vector<KernelExpr>& beam, SearchStep* step);
  // Slot `kernel`, a child of `parent_kernel` (null for a base kernel) named `parent`.
  // The parent's optimum in the raw space of `child`'s model (its x scaling may differ).
  Eigen::VectorXd ParentOptimumInChildScaling(const CandidateScore& parent,
                                              const KernelExpr& child) const;
  Slot MakeSlot(KernelExpr kernel, const KernelExpr* parent_kernel, const std::string& parent,
                std::string derivation) const;
  // The phase after the steps: the best kernel, and each kept kernel of `kept_slots` (by step
  // index), scored with every metric into `result`.
  absl::Status ScoreBestAndKept(const Slot& best, const std::map<size_t, Slot>& kept_slots,
                                SearchResult* result);
  // Scores every slot (cache or pool); returns the callback's status when cancelled.
  absl::Status ScoreStep(int depth, std::vector<Slot>& slots);
  // ScoreStep's scoring of the slots `to_score` by options_.score_candidates, in one batch;
  // `done` of `total` candidates of the step are reported already.
  absl::Status ScoreElsewhere(int depth, std::vector<Slot>& slots, const std::vector<int>& to_score,
                              int done, int total);
  // Fills a scored slot's record from its result (a non-finite value fails the candidate).
  void RecordResult(Slot& slot) const;
  absl::Status ReportCandidate(int depth, const Slot& slot, int done, int total);
  // Puts a complete step's scored slots into the cache, in slot order.
  absl::Status StoreStep(std::vector<Slot>& slots, const std::vector<int>& to_score);
  // `slot`'s kernel scored with every paper metric (plus options.score.metrics and the search
  // metric), with its candidate's seed and warm start; the default scorer's fit of it is reused,
  // so only the fits the other metrics need are made. Progress: stage "rescore", this being
  // re-score `index` of `count`.
  absl::StatusOr<KernelScore> RescoreWithEveryMetric(const Slot& slot, int index, int count);
  bool Cancelled() const { return cancelled_.load(std::memory_order_relaxed); }
  // The search metric's name (a custom scorer's label).
  std::string Label() const {
    return core_metric_ ? std::string(MetricName(*core_metric_)) : options_.metric;
  }

  const Dataset& data_;
  const SearchOptions& options_;
  const ProgressCallback& progress_;
  ScoreCache* cache_;

  std::vector<KernelExpr> base_kernels_;
  std::optional<Metric> core_metric_;
  CandidateScorer scorer_;
  std::unique_ptr<ThreadPool> pool_;
  ScoreOptions score_options_;  // options_.score, with pool_ for the fits when threads_ > 1
  SearchOperators operators_;   // options_.operators, with the columns filled in (Prepare)
  int threads_ = 1;
  std::atomic<bool> cancelled_{false};
  absl::Status cancel_status_;
  // Best so far while a step runs, only for progress messages.
  std::optional<std::pair<double, std::string>> best_for_progress_;
  // Scores of the kernels in the beam (their children's warm starts come from them).
  std::map<std::string, CandidateScore> beam_scores_;
  ApproxChoice approx_choice_;  // exact or sparse for every candidate (Prepare)
  // The sparse search's bookkeeping (Kim & Teh's SKC): drops the ranked candidates whose upper
  // bound lies below the best lower bound, and says when the best two overlap.
  void PruneByBounds(std::vector<Slot>& slots, std::vector<int>& ranked, SearchStep& step) const;
  // After a sparse search: the best kernel re-scored exactly when n and the estimate allow.
  absl::Status RescoreBestExactly(SearchResult* result);
};

namespace {
// The interval of a sparse candidate's search metric, or nullopt (exact or custom scorer).
std::optional<ScoreInterval> CandidateInterval(const CandidateScore& score,
                                               const std::string& metric) {
  if (score.details.method != "sparse") return std::nullopt;
  auto it = score.details.intervals.find(metric);
  if (it == score.details.intervals.end()) return std::nullopt;
  return it->second;
}
}  // namespace

void KernelSearchRun::PruneByBounds(std::vector<Slot>& slots, std::vector<int>& ranked,
                                    SearchStep& step) const {
  if (ranked.empty() || !approx_choice_.sparse) return;
  const std::string metric = Label();
  const Slot& best = slots[ranked.front()];
  const double best_lower = best.record.score;  // the lower end: rankings use it
  std::vector<int> kept;
  for (size_t r = 0; r < ranked.size(); ++r) {
    const Slot& slot = slots[ranked[r]];
    const std::optional<ScoreInterval> interval = CandidateInterval(*slot.result, metric);
    if (r > 0 && interval.has_value() && interval->upper < best_lower) {
      step.pruned.push_back(absl::StrFormat(
          "%s: upper bound %.4f < best lower bound %.4f (%s)", slot.record.kernel,
          interval->upper, best_lower, best.record.kernel));
      continue;
    }
    kept.push_back(ranked[r]);
  }
  if (kept.size() > 1) {
    const Slot& second = slots[kept[1]];
    const std::optional<ScoreInterval> a = CandidateInterval(*best.result, metric);
    const std::optional<ScoreInterval> b = CandidateInterval(*second.result, metric);
    if (a && b && b->upper >= a->lower) {
      step.undecided = absl::StrFormat(
          "%s vs %s: undecided at m = %d/%d (%s in [%.4f, %.4f] and [%.4f, %.4f])",
          best.record.kernel, second.record.kernel, best.result->details.num_inducing,
          second.result->details.num_inducing, metric, a->lower, a->upper, b->lower, b->upper);
    }
  }
  ranked = std::move(kept);
}

absl::Status KernelSearchRun::RescoreBestExactly(SearchResult* result) {
  if (!approx_choice_.sparse || result->best.method != "sparse") return absl::OkStatus();
  ScoreOptions exact = score_options_;
  exact.approx.mode = ApproxMode::kExact;
  exact.metrics = result->best.metrics.empty() ? PaperMetrics() : exact.metrics;
  if (core_metric_ &&
      std::find(exact.metrics.begin(), exact.metrics.end(), *core_metric_) == exact.metrics.end()) {
    exact.metrics.push_back(*core_metric_);
  }
  const double seconds = EstimateScoreTime(data_, {result->best_kernel}, exact).seconds;
  // The re-score runs alone, after the candidates: it may hold what they held together,
  // `threads` sparse fits' budgets (under gpsel-server its per-request budget, less the
  // request's own part: ApplyRequestBudget, core/memory_estimate.h), so that a search the
  // server admitted never re-scores beyond that budget.
  const int64_t bytes = EstimateScoreMemory(data_, {result->best_kernel}, exact).bytes;
  const int64_t may_hold =
      options_.score.approx.memory_budget_bytes * std::max(1, options_.threads);
  if (data_.num_points() > kDefaultMaxPoints || seconds > kExactRescoreMaxSeconds ||
      bytes > may_hold) {
    result->exact_rescore_note = absl::StrFormat(
        "%s not re-scored exactly: n = %d, exact estimated %s and %s (the limits are %d points, "
        "%.0f s and %s)",
        result->best.kernel, data_.num_points(), FormatDuration(seconds), FormatBytes(bytes),
        kDefaultMaxPoints, kExactRescoreMaxSeconds, FormatBytes(may_hold));
    return absl::OkStatus();
  }
  exact.fit.seed = CandidateSeed(options_.score.fit.seed, result->best.kernel);
  absl::StatusOr<KernelScore> rescored =
      ScoreKernel(data_, result->best_kernel, exact, [this](const Progress& inner) {
        Progress progress = inner;
        progress.stage = "rescore";
        progress.message = absl::StrCat("exact re-score: ", inner.message);
        return ReportProgress(progress_, progress);
      });
  if (!rescored.ok()) {
    if (Cancelled() || absl::IsCancelled(rescored.status())) return rescored.status();
    result->exact_rescore_note =
        absl::StrCat(result->best.kernel, " exact re-score failed: ", rescored.status().message());
    return absl::OkStatus();
  }
  result->best_sparse = std::move(result->best);
  result->best = *std::move(rescored);
  result->exact_rescored.push_back(result->best.kernel);
  result->exact_rescore_note = absl::StrFormat(
      "%s re-scored exactly (estimated %s): its metrics are exact", result->best.kernel,
      FormatDuration(seconds));
  if (core_metric_) {
    auto value = result->best.metrics.find(std::string(MetricName(*core_metric_)));
    if (value != result->best.metrics.end()) result->best_score = value->second;
  }
  return absl::OkStatus();
}

absl::Status KernelSearchRun::Prepare() {
  GPSEL_RETURN_IF_ERROR(options_.Validate());
  // A search that may run sparse takes up to the sparse limit (core/approx.h).
  DatasetLimits limits;
  if (options_.score.approx.sparse_possible()) limits.max_points = kSparseMaxPoints;
  GPSEL_RETURN_IF_ERROR(ValidateDataset(data_, limits));
  base_kernels_ = options_.base_kernels.empty() ? DefaultBaseKernels() : options_.base_kernels;
  for (const KernelExpr& base : base_kernels_) {
    if (base.active_dim >= data_.num_dims()) {
      return absl::InvalidArgumentError(absl::StrCat(
          "base_kernels: '", ToString(base), "' reads input column ", base.active_dim,
          " but the data have ", data_.num_dims(), " column(s)"));
    }
  }
  for (const int column : options_.operators.columns) {
    if (column < 0 || column >= data_.num_dims()) {
      return absl::InvalidArgumentError(
          absl::StrCat("operators: a change move reads input column ", column,
                       " but the data have ", data_.num_dims(), " column(s)"));
    }
  }
  // On several columns a change may happen along any of them: one pinned move per column.
  operators_ = options_.operators;
  if (operators_.columns.empty() && data_.num_dims() > 1 &&
      (operators_.change_point || operators_.change_window)) {
    for (int c = 0; c < data_.num_dims(); ++c) operators_.columns.push_back(c);
  }
  if (absl::StatusOr<Standardization> s =
          ComputeStandardization(data_.y, options_.score.standardize);
      !s.ok()) {
    return s.status();
  }
  GPSEL_RETURN_IF_ERROR(
      ValidateSettingsNames(options_.score.hyperparameters, base_kernels_, options_.max_depth));
  threads_ = options_.threads;
  if (threads_ == 0) threads_ = std::max(1u, std::thread::hardware_concurrency());
  pool_ = std::make_unique<ThreadPool>(threads_);
  // The candidates' optimiser starts (and their MLL and MAP fits) go onto the same pool, so
  // the last candidates of a step keep every worker busy. Results do not depend on it.
  score_options_ = options_.score;
  if (threads_ > 1) score_options_.fit.pool = pool_.get();
  // Exact or sparse, decided once for every candidate (auto: on the exact search's estimate).
  approx_choice_ =
      options_.scorer && options_.score.approx.mode == ApproxMode::kAuto
          ? ApproxChoice{false, absl::StrCat("auto: exact (", options_.metric,
                                             " runs on the exact GP only)")}
          : ChooseSearchApproximation(data_, options_);
  score_options_.approx.mode = approx_choice_.sparse ? ApproxMode::kSparse : ApproxMode::kExact;
  if (options_.scorer && approx_choice_.sparse) {
    return absl::InvalidArgumentError(absl::StrCat(
        "approx: a search by ", options_.metric, " runs on the exact GP only (no sparse "
        "scorer); use approx = exact, or a fitted metric (e.g. lap0) for the sparse search"));
  }
  if (options_.scorer) {
    scorer_ = options_.scorer;
  } else {
    core_metric_ = *ParseMetric(options_.metric);
    scorer_ = MakeMetricScorer(*core_metric_, score_options_);
  }
  if (cache_ != nullptr) {
    GPSEL_RETURN_IF_ERROR(cache_->Bind(Fingerprint(data_, options_, options_.scorer != nullptr)));
  }
  return absl::OkStatus();
}

absl::Status KernelSearchRun::ReportCandidate(int depth, const Slot& slot, int done, int total) {
  const CandidateRecord& record = slot.record;
  if (record.ok && (!best_for_progress_ || record.score > best_for_progress_->first)) {
    best_for_progress_ = {record.score, record.kernel};
  }
  if (!progress_ || Cancelled()) return absl::OkStatus();
  Progress progress;
  progress.stage = "search";
  progress.fraction = std::min(
      1.0, (depth - 1 + static_cast<double>(done) / std::max(total, 1)) / options_.max_depth);
  const std::string label = Label();
  progress.message = absl::StrFormat("step %d/%d, candidate %d/%d: %s ", depth,
                                     options_.max_depth, done, total, record.kernel);
  if (record.ok) {
    absl::StrAppendFormat(&progress.message, "%s=%.4f", label, record.score);
  } else {
    absl::StrAppend(&progress.message, "failed");
  }
  if (best_for_progress_) {
    absl::StrAppendFormat(&progress.message, " | best %s %.4f", best_for_progress_->second,
                          best_for_progress_->first);
  }
  return progress_(progress);
}

absl::StatusOr<KernelScore> KernelSearchRun::RescoreWithEveryMetric(const Slot& slot, int index,
                                                                    int count) {
  ScoreOptions final_options = score_options_;
  final_options.fit.seed = slot.record.seed;
  AddNestedStart(slot.warm_start, final_options.fit);
  final_options.hyperparameters = SettingsForKernel(slot.kernel, options_.score.hyperparameters);
  std::vector<Metric> metrics = PaperMetrics();
  for (Metric metric : options_.score.metrics) {
    if (std::find(metrics.begin(), metrics.end(), metric) == metrics.end()) {
      metrics.push_back(metric);
    }
  }
  if (core_metric_ &&
      std::find(metrics.begin(), metrics.end(), *core_metric_) == metrics.end()) {
    metrics.push_back(*core_metric_);
  }
  final_options.metrics = metrics;
  // The re-scores are a phase of their own (stage "rescore"), with the fits' own fractions from
  // 0 to 1, so that a progress display shows it moving and can time it (core/progress_clock.h)
  // instead of sitting at the candidates' 100 %.
  // Its fits report fractions per stage (MLL fit, polish, Laplace Hessian) that need not rise
  // across stages, so the phase shows their running maximum.
  double rescore_fraction = 0.0;
  const ProgressCallback final_progress =
      [this, &slot, &rescore_fraction, index, count](const Progress& inner) -> absl::Status {
    if (inner.poll_only) return ReportProgress(progress_, inner);
    Progress progress;
    progress.stage = "rescore";
    rescore_fraction = std::max(rescore_fraction, inner.fraction);
    progress.fraction = (index + rescore_fraction) / std::max(count, 1);
    progress.message = absl::StrCat("re-scoring ", slot.record.kernel, " with every metric",
                                    count > 1 ? absl::StrCat(" (", index + 1, "/", count, ")") : "",
                                    ": ", inner.stage, " ", inner.message);
    return ReportProgress(progress_, progress);
  };
  // The default scorer's fits are reused: only the fits the other metrics need are made (e.g.
  // the MLL fit after a Lap0 search).
  return !options_.scorer && slot.result.ok()
             ? ScoreKernelReusingFits(data_, slot.kernel, final_options, slot.result->details,
                                      final_progress)
             : ScoreKernel(data_, slot.kernel, final_options, final_progress);
}

void KernelSearchRun::RecordResult(Slot& slot) const {
  if (slot.result.ok() && !std::isfinite(slot.result->value)) {
    slot.result = absl::FailedPreconditionError(
        absl::StrCat(Label(), " is not finite (", slot.result->value, ")"));
  }
  if (slot.result.ok()) {
    slot.record.ok = true;
    slot.record.score = slot.result->value;
    slot.record.uncertainty = slot.result->uncertainty;
  } else {
    slot.record.error = std::string(slot.result.status().message());
  }
}

absl::Status KernelSearchRun::ScoreElsewhere(int depth, std::vector<Slot>& slots,
                                             const std::vector<int>& to_score, int done,
                                             int total) {
  if (to_score.empty()) return absl::OkStatus();
  std::vector<CandidateToScore> batch;
  batch.reserve(to_score.size());
  for (int index : to_score) {
    batch.push_back({slots[index].kernel, slots[index].record.seed, slots[index].warm_start});
  }
  // The batch's own fraction is spread over the step's candidates not yet reported.
  const int reported = done;
  const ProgressCallback batch_progress = [this, depth, reported, total,
                                           count = static_cast<int>(to_score.size())](
                                              const Progress& inner) -> absl::Status {
    if (!progress_) return absl::OkStatus();
    if (inner.poll_only) return progress_(inner);
    const double step_done =
        (reported + std::clamp(inner.fraction, 0.0, 1.0) * count) / std::max(total, 1);
    Progress progress;
    progress.stage = "search";
    progress.fraction = std::min(1.0, (depth - 1 + step_done) / options_.max_depth);
    progress.message = absl::StrFormat("step %d/%d: %d candidate(s) being scored elsewhere",
                                       depth, options_.max_depth, count);
    if (!inner.message.empty()) absl::StrAppend(&progress.message, ": ", inner.message);
    return progress_(progress);
  };
  absl::StatusOr<std::vector<absl::StatusOr<CandidateScore>>> outcomes =
      options_.score_candidates(depth, batch, threads_, batch_progress);
  if (!outcomes.ok()) return outcomes.status();
  if (outcomes->size() != to_score.size()) {
    return absl::InternalError(absl::StrCat("kernel search: ", outcomes->size(),
                                            " outcomes for ", to_score.size(), " candidates"));
  }
  for (size_t k = 0; k < to_score.size(); ++k) {
    Slot& slot = slots[to_score[k]];
    slot.result = std::move((*outcomes)[k]);
    slot.record.seconds = slot.result.ok() ? slot.result->details.seconds : 0.0;
    RecordResult(slot);
    // As on the search's own threads: a candidate that ran out of memory stops the search.
    if (absl::IsResourceExhausted(slot.result.status())) return slot.result.status();
    GPSEL_RETURN_IF_ERROR(ReportCandidate(depth, slot, ++done, total));
  }
  return StoreStep(slots, to_score);
}

absl::Status KernelSearchRun::ScoreStep(int depth, std::vector<Slot>& slots) {
  const std::string label = Label();
  const int total = static_cast<int>(slots.size());
  int done = 0;
  auto cancel = [this](const absl::Status& status) {
    if (!Cancelled()) {
      cancel_status_ = status;
      cancelled_.store(true);
    }
  };

  // Cache hits first (reported at once), then the rest on the pool.
  std::vector<int> to_score;
  for (int i = 0; i < total; ++i) {
    Slot& slot = slots[i];
    std::optional<ScoreCache::Entry> hit = cache_->Find(slot.record.kernel, label, core_metric_);
    if (!hit.has_value()) {
      to_score.push_back(i);
      continue;
    }
    slot.result = hit->score;
    slot.record.from_cache = true;
    slot.record.warm_started = hit->warm_start.has_value();
    slot.warm_start = hit->warm_start;
    ++done;
    RecordResult(slot);
    if (absl::Status s = ReportCandidate(depth, slot, done, total); !s.ok()) cancel(s);
  }
  if (Cancelled()) return cancel_status_;
  if (options_.score_candidates) return ScoreElsewhere(depth, slots, to_score, done, total);

  // Workers put the index of each finished slot here; this thread reports and records them.
  std::mutex finished_mutex;
  std::condition_variable finished_changed;
  std::deque<int> finished;
  const ProgressCallback cancellation = [this](const Progress&) -> absl::Status {
    if (Cancelled()) return absl::CancelledError("kernel search cancelled");
    return absl::OkStatus();
  };
  for (int index : to_score) {
    pool_->Schedule([&, index] {
      Slot& slot = slots[index];
      if (Cancelled()) {
        // Never started: pending candidates are dropped once the search is cancelled.
        slot.result = absl::CancelledError("kernel search cancelled");
      } else {
        CandidateRequest request;
        request.seed = slot.record.seed;
        request.warm_start = slot.warm_start;
        request.cancellation = cancellation;
        const auto start = std::chrono::steady_clock::now();
        try {
          slot.result = scorer_(data_, slot.kernel, request);
        } catch (const std::bad_alloc&) {
          // Candidates are plain pool tasks, which must not throw; the search stops on it.
          slot.result = absl::ResourceExhaustedError(absl::StrCat(
              "out of memory while fitting candidate ", slot.record.kernel));
        }
        slot.record.seconds = SecondsSince(start);
      }
      // Notified under the lock: once the last index is visible this thread may return and
      // destroy finished_changed (it is on its stack), so no worker may touch it afterwards.
      std::lock_guard<std::mutex> lock(finished_mutex);
      finished.push_back(index);
      finished_changed.notify_one();
    });
  }
  for (size_t received = 0; received < to_score.size(); ++received) {
    int index;
    {
      std::unique_lock<std::mutex> lock(finished_mutex);
      // While no candidate finishes (a fit at n = 2,000 takes tens of seconds), the caller is
      // polled every 100 ms, so its cancel or deadline reaches the running fits, which check
      // this run's flag on every likelihood evaluation.
      while (!finished_changed.wait_for(lock, std::chrono::milliseconds(100),
                                        [&] { return !finished.empty(); })) {
        if (progress_ && !Cancelled()) {
          lock.unlock();
          if (absl::Status s = progress_(CancellationPoll()); !s.ok()) cancel(s);
          lock.lock();
        }
      }
      index = finished.front();
      finished.pop_front();
    }
    Slot& slot = slots[index];
    ++done;
    RecordResult(slot);
    if (absl::IsResourceExhausted(slot.result.status())) cancel(slot.result.status());
    if (Cancelled()) continue;
    if (absl::Status s = ReportCandidate(depth, slot, done, total); !s.ok()) cancel(s);
  }
  if (Cancelled()) return cancel_status_;
  return StoreStep(slots, to_score);
}

absl::Status KernelSearchRun::StoreStep(std::vector<Slot>& slots, const std::vector<int>& to_score) {
  const std::string label = Label();
  // Results are stored only for a complete step, in slot order.
  for (int index : to_score) {
    Slot& slot = slots[index];
    ScoreCache::Entry entry;
    entry.label = label;
    entry.core_scorer = !options_.scorer;
    entry.score = slot.result;
    entry.warm_start = slot.warm_start;
    cache_->Store(slot.record.kernel, std::move(entry));
  }
  return absl::OkStatus();
}

Eigen::VectorXd KernelSearchRun::ParentOptimumInChildScaling(const CandidateScore& parent,
                                                             const KernelExpr& child) const {
  // Under --scale-x auto on several columns the scaling depends on the kernel (per column for
  // SE[*], one factor once a leaf reads every column), so the parent's raw optimum is a point of
  // another model's x: it is carried through its natural values (user units) into the child's
  // scaling instead (ModelRawValues), else SE[*] + LIN would start far from SE[*]'s optimum.
  if (options_.score.scale_x.mode != XScaling::Mode::kAuto) return parent.raw_optimum;
  const KernelScore& details = parent.details;
  const FitResult* fit = nullptr;
  for (const std::optional<FitResult>* f : {&details.mll_fit, &details.map_fit}) {
    if (f->has_value() && (*f)->raw.size() == parent.raw_optimum.size() &&
        (*f)->raw == parent.raw_optimum) {
      fit = &**f;
    }
  }
  absl::StatusOr<ScaledInputs> scaled =
      ScaleInputs(data_, options_.score.scale_x, options_.score.hyperparameters, &child);
  if (fit == nullptr || !scaled.ok()) return parent.raw_optimum;
  const std::map<std::string, double> raw =
      ModelRawValues(details, *fit, scaled->factor, scaled->column_factors);
  Eigen::VectorXd out = parent.raw_optimum;
  for (size_t k = 0; k < parent.parameter_names.size(); ++k) {
    auto it = raw.find(parent.parameter_names[k]);
    if (it != raw.end()) out(static_cast<Eigen::Index>(k)) = it->second;
  }
  return out;
}

KernelSearchRun::Slot KernelSearchRun::MakeSlot(KernelExpr kernel,
                                                const KernelExpr* parent_kernel,
                                                const std::string& parent,
                                                std::string derivation) const {
  Slot slot;
  slot.record.kernel = ToString(kernel);
  slot.record.parent = parent;
  slot.record.derivation = std::move(derivation);
  slot.record.num_base_kernels = NumBaseKernels(kernel);
  slot.record.seed = CandidateSeed(options_.score.fit.seed, slot.record.kernel);
  slot.kernel = std::move(kernel);
  if (options_.warm_start && parent_kernel != nullptr) {
    auto parent_score = beam_scores_.find(parent);
    // BASE[*] expanded as the scores expand it (core/score.cc), so that the parent's parameter
    // names (SE[3].lengthscale) and the child's model see the same per-column kernels.
    const int columns = static_cast<int>(data_.x.cols());
    absl::StatusOr<KernelExpr> parent_expanded = ExpandPerColumn(*parent_kernel, columns);
    absl::StatusOr<KernelExpr> child_expanded = ExpandPerColumn(slot.kernel, columns);
    if (parent_score != beam_scores_.end() && !parent_score->second.parameter_names.empty() &&
        parent_expanded.ok() && child_expanded.ok()) {
      absl::StatusOr<Eigen::VectorXd> warm = WarmStartFromParent(
          *parent_expanded, *child_expanded, options_.score.hyperparameters,
          parent_score->second.parameter_names,
          ParentOptimumInChildScaling(parent_score->second, *child_expanded),
          options_.score.fit.raw_lower_bound, options_.score.fit.raw_upper_bound);
      if (warm.ok()) {
        slot.warm_start = *std::move(warm);
        slot.record.warm_started = true;
      }
    }
  }
  return slot;
}

std::vector<KernelSearchRun::Slot> KernelSearchRun::Candidates(int depth,
                                                               const std::vector<KernelExpr>& beam,
                                                               SearchStep* step) {
  std::vector<Slot> slots;
  std::set<KernelExpr> in_step;
  if (depth == 1) {
    for (const KernelExpr& base : base_kernels_) {
      if (in_step.insert(base).second) slots.push_back(MakeSlot(base, nullptr, "", "base"));
    }
    return slots;
  }
  for (const KernelExpr& parent : beam) {
    const std::string parent_text = ToString(parent);
    step->expanded.push_back(parent_text);
    for (KernelExpansion& expansion :
         ExpandKernel(parent, base_kernels_, options_.max_depth, operators_)) {
      // A kernel already in the beam is not its own competitor.
      if (std::find(beam.begin(), beam.end(), expansion.kernel) != beam.end()) continue;
      if (!in_step.insert(expansion.kernel).second) continue;
      slots.push_back(MakeSlot(std::move(expansion.kernel), &parent, parent_text,
                               std::move(expansion.derivation)));
    }
  }
  return slots;
}

absl::Status KernelSearchRun::ScoreBestAndKept(const Slot& best,
                                               const std::map<size_t, Slot>& kept_slots,
                                               SearchResult* result) {
  // The best kernel with every metric, fitted exactly as in the search (same seed and warm
  // start, hence the same optima); with score_kept_kernels, each step's kept kernel too.
  result->best_kernel = best.kernel;
  result->best_score = best.record.score;
  result->best_uncertainty = best.record.uncertainty;
  std::vector<std::pair<size_t, const Slot*>> kept_to_score;  // (step index, its kept slot)
  for (const auto& [step_index, slot] : kept_slots) {
    if (slot.kernel != best.kernel) kept_to_score.emplace_back(step_index, &slot);
  }
  const int rescores = 1 + static_cast<int>(kept_to_score.size());
  absl::StatusOr<KernelScore> final_score = RescoreWithEveryMetric(best, 0, rescores);
  if (final_score.ok()) {
    result->best = *std::move(final_score);
  } else if (absl::IsInvalidArgument(final_score.status()) ||
             absl::IsFailedPrecondition(final_score.status())) {
    // Cannot happen with the default scorer (it just fitted this kernel); keep what we have.
    result->best = best.result->details;
  } else {
    return final_score.status();
  }
  for (size_t k = 0; k < kept_to_score.size(); ++k) {
    const auto& [step_index, slot] = kept_to_score[k];
    absl::StatusOr<KernelScore> kept =
        RescoreWithEveryMetric(*slot, static_cast<int>(k) + 1, rescores);
    if (kept.ok()) {
      if (!core_metric_) kept->metrics[options_.metric] = slot->record.score;
      result->steps[step_index].kept_score = *std::move(kept);
    } else if (!absl::IsInvalidArgument(kept.status()) &&
               !absl::IsFailedPrecondition(kept.status())) {
      return kept.status();
    }
    // Otherwise (a custom scorer's kernel that ScoreKernel cannot fit) the step has no
    // kept_score, and a caller that needs one scores the kernel itself.
  }
  if (!core_metric_) result->best.metrics[options_.metric] = result->best_score;
  // The re-score makes both fits together (cross-seeded, and from the candidate's own optimum),
  // so its value is at least the candidate's: report the best kernel's score from it.
  if (core_metric_) {
    auto value = result->best.metrics.find(std::string(MetricName(*core_metric_)));
    if (value != result->best.metrics.end()) result->best_score = value->second;
  }
  for (const auto& [step_index, slot] : kept_slots) {
    if (slot.kernel == best.kernel) result->steps[step_index].kept_score = result->best;
  }

  return absl::OkStatus();
}

absl::StatusOr<SearchResult> KernelSearchRun::Run() {
  const auto start = std::chrono::steady_clock::now();
  GPSEL_RETURN_IF_ERROR(Prepare());
  ScoreCache local_cache;
  if (cache_ == nullptr) cache_ = &local_cache;

  SearchResult result;
  result.metric = Label();
  result.max_depth = options_.max_depth;
  result.beam_width = options_.beam_width;
  result.threads = threads_;
  result.operators = operators_;

  std::vector<KernelExpr> beam;
  std::optional<Slot> best;
  // With score_kept_kernels: each improving step's kept kernel (its best candidate), by the
  // index its step will have in result.steps; scored with every metric after the search.
  std::map<size_t, Slot> kept_slots;
  for (int depth = 1; depth <= options_.max_depth; ++depth) {
    const auto step_start = std::chrono::steady_clock::now();
    SearchStep step;
    step.depth = depth;
    std::vector<Slot> slots = Candidates(depth, beam, &step);
    if (slots.empty()) {
      result.stop_reason = absl::StrCat("no candidates within the depth limit at step ", depth);
      break;
    }

    GPSEL_RETURN_IF_ERROR(ScoreStep(depth, slots));

    std::vector<int> ranked;
    for (int i = 0; i < static_cast<int>(slots.size()); ++i) {
      const CandidateRecord& record = slots[i].record;
      if (record.from_cache) {
        ++result.cache_hits;
      } else {
        ++result.candidates_scored;
      }
      if (record.ok) {
        ranked.push_back(i);
      } else {
        ++result.failures;
      }
    }
    std::sort(ranked.begin(), ranked.end(), [&](int a, int b) {
      return RanksBefore(slots[a].record.score, slots[a].kernel, slots[b].record.score,
                         slots[b].kernel);
    });
    PruneByBounds(slots, ranked, step);
    step.seconds = SecondsSince(step_start);
    if (ranked.empty()) {
      for (Slot& slot : slots) step.candidates.push_back(std::move(slot.record));
      result.steps.push_back(std::move(step));
      if (depth == 1) {
        std::string reasons;
        for (const CandidateRecord& record : result.steps.back().candidates) {
          absl::StrAppend(&reasons, reasons.empty() ? "" : "; ", record.kernel, ": ",
                          record.error);
        }
        return absl::FailedPreconditionError(
            absl::StrCat("kernel search: no base kernel could be scored (", reasons, ")"));
      }
      result.stop_reason = absl::StrCat("every candidate of step ", depth, " failed");
      break;
    }
    const Slot& step_best = slots[ranked.front()];
    step.best_score = step_best.record.score;
    step.improved = !best.has_value() || step_best.record.score > best->record.score;
    if (step.improved) {
      best = step_best;
      if (options_.score_kept_kernels) kept_slots.emplace(result.steps.size(), step_best);
      beam.clear();
      beam_scores_.clear();
      for (size_t r = 0; r < ranked.size() && static_cast<int>(r) < options_.beam_width; ++r) {
        Slot& chosen = slots[ranked[r]];
        chosen.record.chosen = true;
        beam.push_back(chosen.kernel);
        step.chosen.push_back(chosen.record.kernel);
        beam_scores_.emplace(chosen.record.kernel, *chosen.result);
      }
    }
    for (Slot& slot : slots) step.candidates.push_back(std::move(slot.record));
    result.steps.push_back(std::move(step));
    if (!result.steps.back().improved) {
      result.stop_reason = absl::StrFormat(
          "no candidate of step %d beat %s (%s = %.4f)", depth, best->record.kernel,
          result.metric, best->record.score);
      break;
    }
    if (depth == options_.max_depth) {
      result.stop_reason = absl::StrCat("depth limit reached (", options_.max_depth,
                                        " base kernels)");
    }
  }

  GPSEL_RETURN_IF_ERROR(ScoreBestAndKept(*best, kept_slots, &result));
  result.approx_note = approx_choice_.note;
  GPSEL_RETURN_IF_ERROR(RescoreBestExactly(&result));

  result.seconds = SecondsSince(start);
  if (progress_) {
    Progress progress;
    progress.stage = "search";
    progress.fraction = 1.0;
    progress.message = absl::StrFormat("done: %s %s = %.4f", ToString(result.best_kernel),
                                       result.metric, result.best_score);
    // The search is complete; a late cancellation changes nothing any more.
    progress_(progress).IgnoreError();
  }
  return result;
}

absl::StatusOr<SearchResult> RunKernelSearch(const Dataset& data, const SearchOptions& options,
                                             const ProgressCallback& progress,
                                             ScoreCache* cache) {
  KernelSearchRun run(data, options, progress, cache);
  return run.Run();
}

}  // namespace gpsel
