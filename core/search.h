// Compositional Kernel Search (CKS; Duvenaud et al. 2013) driven by any metric of the scoring
// core (default Lap0), or by a pluggable scorer such as nested-sampling evidence.
//
// The search starts from every base kernel (default SE, LIN, MAT32). Each further step expands
// the current kernel(s) into candidates — every subexpression S combined with every base kernel B
// as S + B and S * B, and every base-kernel leaf replaced by another base kernel — scores the
// candidates that stay within the depth limit (at most `max_depth` base kernels), and moves to the
// best. It stops when no candidate beats the best kernel found so far, or after `max_depth` steps.
// Every metric is "higher is better" (log-evidence scale, core/score.h).
//
// Beyond the paper: a beam of width k (1 = greedy CKS); candidates deduplicated canonically and
// cached, so an equal kernel is fitted once; candidates fitted in parallel with results that do
// not depend on the thread count (each candidate's seed is a function of the search seed and its
// canonical text only); optional warm starts from the parent's optimum; progress after every
// candidate and prompt cancellation through the ProgressCallback.
//
//   gpsel::SearchOptions options;          // SE, LIN, MAT32; depth 3; Lap0; greedy
//   options.threads = 4;
//   absl::StatusOr<gpsel::SearchResult> result = gpsel::RunKernelSearch(data, options);
//   if (result.ok()) std::cout << result->Summary();   // best kernel, metrics and the trace
#ifndef GPSEL_CORE_SEARCH_H_
#define GPSEL_CORE_SEARCH_H_

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Dense>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/nested_sampling.h"
#include "gpsel/core/progress.h"
#include "gpsel/core/score.h"

namespace gpsel {

// ---------------------------------------------------------------------------------------------
// Candidate generation.

// One kernel derived from another by a single CKS rewrite.
struct KernelExpansion {
  KernelExpr kernel;       // canonical
  std::string derivation;  // e.g. "[SE] + LIN", "[LIN+SE] * MAT32", "[SE] -> LIN"
};

// Every kernel one CKS rewrite away from `kernel` (which should be canonical), canonical and
// deduplicated (first derivation kept), without `kernel` itself and without kernels of more than
// `max_base_kernels` base kernels. Rewrites: S + B and S * B for every subexpression S and every
// base kernel B, and B' -> B for every leaf B' and every base kernel B != B'. Subexpressions are
// taken up to associativity and commutativity: every node of the canonical tree and, for a sum or
// product of three or more operands, every proper subset of two or more of its operands (so
// A+B+C also offers (A+B)*D). The order is deterministic: whole-kernel combinations first, then
// rewrites inside operands in canonical operand order.
std::vector<KernelExpansion> ExpandKernel(const KernelExpr& kernel,
                                          const std::vector<KernelExpr>& base_kernels,
                                          int max_base_kernels);

// The rewrites a search may use besides S + B and S * B (always on): the Automatic
// Statistician's changepoint and changewindow moves S -> CP(S, S) and S -> CW(S, S) for every
// subexpression S (both operands start as copies of S; the location is the first column's, see
// core/kernel_expr.h). Each adds one candidate per subexpression S whose doubled size stays
// within the depth limit (CP(S, S) has twice S's base kernels): for a kernel with s
// subexpressions, up to s more candidates per operator next to the 2·|B|·s of + and *.
// On data with several input columns the moves are pinned, one candidate per column the change
// may read (CP[c](S, S) for c in `columns`): up to s·|columns| per operator.
struct SearchOperators {
  bool change_point = false;
  bool change_window = false;
  // Columns a change move's σ reads: empty = unpinned (column 0). RunKernelSearch fills in
  // every column of data with two or more columns when it is empty.
  std::vector<int> columns;
};
// Parses "+,*" (the default), "+,*,CP", "+,*,CP,CW" (case-insensitive for CP/CW, any order).
// INVALID_ARGUMENT naming "operators" for an unknown entry, a duplicate or a missing + or *.
absl::StatusOr<SearchOperators> ParseSearchOperators(std::string_view list);
std::string SearchOperatorsText(const SearchOperators& operators);  // "+,*,CP"
// The entries of SearchOperatorsText: {"+", "*", "CP"}.
std::vector<std::string> SearchOperatorNames(const SearchOperators& operators);
// ExpandKernel with the change moves of `operators` appended (after the + and * rewrites, the
// same deduplication and depth limit).
std::vector<KernelExpansion> ExpandKernel(const KernelExpr& kernel,
                                          const std::vector<KernelExpr>& base_kernels,
                                          int max_base_kernels, const SearchOperators& operators);

// SE, LIN, MAT32 (the paper's base set).
std::vector<KernelExpr> DefaultBaseKernels();
// Parses "SE,LIN,MAT32" (any base kernel of the grammar, optionally pinned: "SE[0]");
// INVALID_ARGUMENT naming the bad entry, a composite entry or a duplicate.
absl::StatusOr<std::vector<KernelExpr>> ParseBaseKernelList(std::string_view list);

// The seed a candidate's fits use: a fixed 64-bit mix of the search seed and the canonical text
// (FNV-1a, then SplitMix64), so it never depends on scheduling, thread count or visiting order.
uint64_t CandidateSeed(uint64_t search_seed, std::string_view canonical_kernel_text);

// Warm start for `child` from its parent's optimum: the child's free raw vector (order of
// GpModel::free_names). When the child contains the parent (S → S + B, S → S * B), the parent's
// optimum embedded with B switched off as far as the bounds [raw_lower, raw_upper] allow
// (EmbedNestedOptimum, core/internal/nested_embedding.h), so the child's fit starts at the parent's
// likelihood; otherwise (B → B') the parent's raw value wherever a parameter name matches and the
// prior mean elsewhere. INVALID_ARGUMENT when sizes differ or the settings do not fit the kernels.
absl::StatusOr<Eigen::VectorXd> WarmStartFromParent(const KernelExpr& parent,
                                                    const KernelExpr& child,
                                                    const HyperparameterSettings& settings,
                                                    const std::vector<std::string>& parent_names,
                                                    const Eigen::VectorXd& parent_raw,
                                                    double raw_lower = -30.0,
                                                    double raw_upper = 500.0);

// ---------------------------------------------------------------------------------------------
// Scoring candidates.

// What scoring one candidate produced.
struct CandidateScore {
  double value = 0.0;        // the search metric, higher is better (finite)
  double uncertainty = 0.0;  // standard error of `value` when it is an estimate (nested sampling)
  KernelScore details;       // fitted hyperparameters and whatever metrics were computed
  // Optimum that children start from when warm starts are on: free parameter names and raw
  // values in the same order. Empty when the scorer has none to offer.
  std::vector<std::string> parameter_names;
  Eigen::VectorXd raw_optimum;
};

// Inputs the search hands to a scorer for one candidate.
struct CandidateRequest {
  // Seed for every random choice of this candidate; see CandidateSeed.
  uint64_t seed = 0;
  // Extra optimiser start in the candidate's free raw space (never a replacement for random
  // starts, see FitOptions::warm_start); nullopt when warm starts are off or there is no parent.
  std::optional<Eigen::VectorXd> warm_start;
  // Returns non-OK once the search is cancelled; pass it to long loops (ScoreKernel, samplers)
  // so that running candidates stop promptly.
  ProgressCallback cancellation;
};

// Scores one candidate kernel on `data`. May be called concurrently from several threads; must
// be deterministic given (data, kernel, request). A non-OK status marks the candidate as failed
// (its message is kept in the trace) unless the search was cancelled.
using CandidateScorer = std::function<absl::StatusOr<CandidateScore>(
    const Dataset& data, const KernelExpr& kernel, const CandidateRequest& request)>;

// One candidate of a step handed to a CandidateBatchScorer: what the search would pass to its
// scorer for it (the request's cancellation aside).
struct CandidateToScore {
  KernelExpr kernel;                        // canonical
  uint64_t seed = 0;                        // CandidateSeed(search seed, kernel text)
  std::optional<Eigen::VectorXd> warm_start;  // see CandidateRequest::warm_start
};

// Scores the candidates of one step (`step` is its 1-based number) somewhere else than on the
// search's own threads, e.g. as tasks of a job that any replica may run (server/jobs/search_job.h).
// Returns one outcome per candidate, in order, each exactly what SearchOptions::scorer (or the
// default scorer) returns for it, so that the search's result does not depend on where its
// candidates ran; a failed outcome is a failed candidate, as with the scorer. A non-OK return
// stops the search with that status (cancellation, a lost job lease, a broken store).
// `threads` is the search's own thread count (SearchOptions::threads, 0 resolved to the
// hardware's): how many candidates the search would fit at once itself. `progress` takes the
// step's fraction done and, through its answer, cancellation.
using CandidateBatchScorer =
    std::function<absl::StatusOr<std::vector<absl::StatusOr<CandidateScore>>>(
        int step, const std::vector<CandidateToScore>& candidates, int threads,
        const ProgressCallback& progress)>;

// The default scorer: ScoreKernel with `score_options` (its seed and warm start replaced by the
// request's), computing `metric` plus score_options.metrics; the candidate's value is `metric`.
// A metric that is undefined for the kernel (plain Lap with a non-positive-definite Hessian)
// fails the candidate with FAILED_PRECONDITION and the reason.
CandidateScorer MakeMetricScorer(Metric metric, const ScoreOptions& score_options);

// Nested-sampling log evidence log Z as the search metric (the paper's ground truth; slow): the
// kernel's GP with the priors of `score_options.hyperparameters` (paper defaults otherwise), on y
// standardised as ScoreKernel would. value = log Z, uncertainty = its standard error; details
// carry no fits (and children get no warm start). The request's seed replaces `sampling.seed`.
// A run stopped by one of the sampler's caps (partial result) fails the candidate
// (DEADLINE_EXCEEDED): it is not an estimate of log Z.
CandidateScorer MakeEvidenceScorer(const ScoreOptions& score_options,
                                   const NestedSamplingOptions& sampling);

// The CandidateScore for `metric` read from a KernelScore that contains it (the optimum for warm
// starts comes from the MLL fit for mll/aic/bic and from the MAP fit otherwise).
absl::StatusOr<CandidateScore> CandidateScoreFromKernelScore(const KernelScore& score,
                                                             Metric metric);

// Scores remembered by canonical kernel text. A search always uses one internally; pass your own
// to RunKernelSearch to share fits between searches on the same data with the same options and
// seed but different metrics (e.g. the paper's experiment runs seven metrics per dataset). Entries
// made by the default scorer serve every metric they contain, so set SearchOptions::score.metrics
// to PaperMetrics() when sharing. The cache remembers a fingerprint of the data, score options and
// seed it was filled for and refuses (INVALID_ARGUMENT) a search with different ones. With warm
// starts on, a shared entry depends on which search filled it first. Thread-safe.
class ScoreCache {
 public:
  ScoreCache() = default;
  ScoreCache(const ScoreCache&) = delete;
  ScoreCache& operator=(const ScoreCache&) = delete;

  size_t size() const;
  void Clear();

 private:
  friend class KernelSearchRun;
  struct Entry {
    std::string label;      // metric name the entry was scored for
    bool core_scorer = false;  // made by the default scorer: details carry reusable metrics
    absl::StatusOr<CandidateScore> score = absl::UnknownError("unset");
    std::optional<Eigen::VectorXd> warm_start;  // the warm start it was scored with
  };
  // Checks or sets the fingerprint.
  absl::Status Bind(const std::string& fingerprint);
  // An entry usable for `label`: exact label first, else (for core metrics) a default-scorer
  // entry whose details contain that metric.
  std::optional<Entry> Find(const std::string& kernel_text, const std::string& label,
                            std::optional<Metric> core_metric) const;
  void Store(const std::string& kernel_text, Entry entry);

  mutable std::mutex mutex_;
  std::string fingerprint_;
  std::map<std::string, std::vector<Entry>> entries_;
};

// ---------------------------------------------------------------------------------------------
// The search.

struct SearchOptions {
  // Base kernels (each a single, possibly pinned, base kernel; no duplicates). Empty = SE, LIN,
  // MAT32.
  std::vector<KernelExpr> base_kernels;
  // Depth limit: at most this many base kernels in a kernel, which is also the most steps
  // (step 1 scores the base kernels). 1..10.
  int max_depth = 3;
  // "mll", "map", "aic", "bic", "lap", "lap0", "lap_aic", "lap_bic", "lap_bic_half", or any label
  // when `scorer` is set (e.g. "evidence").
  std::string metric = "lap0";
  // Kernels kept after each step (1 = greedy CKS as in the paper). 1..64.
  int beam_width = 1;
  // Changepoint / changewindow moves besides + and * (off by default: ParseSearchOperators).
  SearchOperators operators;
  // Candidates fitted in parallel; 0 = one per hardware thread. Results do not depend on it.
  int threads = 1;
  // Add the parent's optimum (embedded with the added part switched off, see
  // WarmStartFromParent) as one extra optimiser start for each child, so that a child that
  // contains its parent never scores a lower likelihood than it. On by default (the paper's
  // search had no warm starts: turn off to reproduce it).
  bool warm_start = true;
  // Fitting and scoring of each candidate. score.fit.seed is the search seed (each candidate
  // derives its own from it); score.metrics are metrics computed for every candidate in addition
  // to `metric` (empty = only what `metric` needs, the fastest). The best kernel is always
  // re-scored with every paper metric (plus these) for the result.
  ScoreOptions score;
  // Custom scorer (e.g. nested-sampling evidence); empty = MakeMetricScorer(metric, score).
  CandidateScorer scorer;
  // Also score each step's kept kernel (the first of SearchStep::chosen) with every metric, as
  // `best` is (SearchStep::kept_score), reusing the fit the search made of it. Off by default:
  // for a kept kernel other than the best this costs one more joint MLL + MAP fit (the search
  // itself needs only the fits of `metric`). `gpsel report --search` sets it, so that the
  // kernels of the search's path are not fitted a second time for its comparison.
  bool score_kept_kernels = false;
  // Where each step's candidates are scored: empty = on the search's own `threads`. When set,
  // the candidates that are not in the cache go to it, one call per step, and must come back
  // as `scorer` (or the default scorer) would score them; the re-scores with every metric at
  // the end still run here.
  CandidateBatchScorer score_candidates;

  // Checks that need no data: INVALID_ARGUMENT naming the field.
  absl::Status Validate() const;
};

struct CandidateRecord {
  std::string kernel;       // canonical text
  std::string parent;       // the kernel it was derived from; empty in step 1
  std::string derivation;   // "base" in step 1, else e.g. "[SE] * LIN"
  int num_base_kernels = 0;
  uint64_t seed = 0;
  bool warm_started = false;
  bool from_cache = false;  // scored earlier (this search or a shared cache), not refitted
  bool ok = false;
  double score = 0.0;       // when ok
  double uncertainty = 0.0;
  std::string error;        // when not ok: why it failed
  bool chosen = false;      // kept for the next step (in the beam)
  double seconds = 0.0;     // scoring time (0 when from the cache)
};

struct SearchStep {
  int depth = 0;                        // 1-based step number
  std::vector<std::string> expanded;    // kernels expanded in this step (empty in step 1)
  std::vector<CandidateRecord> candidates;
  std::vector<std::string> chosen;      // the beam after this step, best first (empty if stopped)
  bool improved = false;                // the step's best beat the best kernel so far
  double best_score = 0.0;              // best score of this step's successful candidates
  double seconds = 0.0;
  // With SearchOptions::score_kept_kernels, chosen.front() scored with every metric exactly as
  // SearchResult::best is (same seed and warm start as its candidate, whose fit is reused; equal
  // to `best` for the best kernel's step). Absent otherwise and for a step that kept nothing.
  // Its value of the search metric can exceed the candidate's score: the re-score makes both
  // fits together, cross-seeded and starting from the candidate's optimum too.
  std::optional<KernelScore> kept_score;
  // Sparse searches (Kim & Teh's SKC): candidates dropped because their upper bound lies below
  // the step's best lower bound, each with the numbers; and, when the best two candidates'
  // intervals overlap, "<best> vs <second>: undecided at m = …".
  std::vector<std::string> pruned;
  std::string undecided;
};

struct SearchResult {
  std::string metric;
  KernelExpr best_kernel;
  double best_score = 0.0;      // the search metric of best_kernel
  double best_uncertainty = 0.0;
  // best_kernel re-scored with every paper metric (same seed and warm start, so its fits are the
  // ones the search saw); a custom scorer's value is added under `metric`.
  KernelScore best;
  std::vector<SearchStep> steps;
  std::string stop_reason;
  int candidates_scored = 0;    // fitted in this search
  int cache_hits = 0;
  int failures = 0;
  int max_depth = 0;
  int beam_width = 0;
  int threads = 1;
  // The moves the search used (SearchOptions::operators, with the columns it filled in).
  SearchOperators operators;
  double seconds = 0.0;
  // What ScoreOptions::approx chose for the candidates (e.g. "auto: sparse (exact estimated
  // 2:13:05 > 60 s)"); empty for an exact search.
  std::string approx_note;
  // A sparse search's best kernel is re-scored exactly when n ≤ kDefaultMaxPoints, the exact
  // estimate ≤ kExactRescoreMaxSeconds and its memory estimate within `threads` sparse fits'
  // budgets (ApproxOptions::memory_budget_bytes; a server's per-request budget): then `best` is
  // the exact score, best_sparse the sparse one and exact_rescored names the kernel;
  // exact_rescore_note says which happened and why.
  std::vector<std::string> exact_rescored;
  std::optional<KernelScore> best_sparse;
  std::string exact_rescore_note;
  std::string Summary() const;
};

// Runs CKS on `data`. INVALID_ARGUMENT for bad options or data (before any fitting);
// FAILED_PRECONDITION when no base kernel could be scored; the callback's status when it returns
// non-OK (no candidate is started after that and running ones are asked to stop). The callback is
// called from the calling thread only: after every candidate (stage "search", fraction done, a
// message with the candidate, its score and the best so far) and once at the end.
absl::StatusOr<SearchResult> RunKernelSearch(const Dataset& data, const SearchOptions& options,
                                             const ProgressCallback& progress = nullptr,
                                             ScoreCache* cache = nullptr);

}  // namespace gpsel

#endif  // GPSEL_CORE_SEARCH_H_
