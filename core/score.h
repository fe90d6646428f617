// Scoring a kernel on a dataset with the paper's metrics, all on the log-evidence scale
// (higher is better), the paper's Sec. 3 and its appendix derivations:
//   MLL = L̂            AIC = L̂ − u          BIC = L̂ − (u/2) log n           (MLL fit)
//   MAP = L̂_MAP + log p(θ̂_MAP)                                              (MAP fit)
//   Lap_r = MAP + (u/2) log 2π − ½ Σ log max(λ_i, 2π e^{−2r})  (paper eq. 3 and Lemma 3.1)
// with λ_i the eigenvalues of H = −∇²(log lik + log prior) at the MAP optimum.
//   Lap: no clamping (undefined when some λ_i ≤ 0); Lap0: r = 0; LapAIC: r = −1;
//   LapBIC: r = −log n (paper); LapBIC½: r = −½ log n (BIC's rate, named "lap_bic_half").
//
//   gpsel::ScoreOptions options;                 // all metrics, 5 restarts, standardised y
//   absl::StatusOr<gpsel::KernelScore> s = gpsel::ScoreKernel(data, kernel, options);
//   std::cout << s->Summary();
#ifndef GPSEL_CORE_SCORE_H_
#define GPSEL_CORE_SCORE_H_

#include <functional>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include <Eigen/Dense>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "gpsel/core/approx.h"
#include "gpsel/core/data_heuristics.h"
#include "gpsel/core/dataset.h"
#include "gpsel/core/fit.h"
#include "gpsel/core/held_out.h"
#include "gpsel/core/hyperparameters.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/progress.h"

namespace gpsel {

enum class Metric { kMll, kMap, kAic, kBic, kLap, kLap0, kLapAic, kLapBic, kLapBicHalf };

// "mll", "map", "aic", "bic", "lap", "lap0", "lap_aic", "lap_bic", "lap_bic_half".
std::string_view MetricName(Metric metric);
absl::StatusOr<Metric> ParseMetric(std::string_view name);
// The eight metrics of the paper, in report order (lap_bic_half is extra and opt-in).
const std::vector<Metric>& PaperMetrics();
const std::vector<Metric>& AllMetrics();
// Parses "all" or a comma-separated list; INVALID_ARGUMENT naming the bad entry.
absl::StatusOr<std::vector<Metric>> ParseMetricList(std::string_view list);
bool NeedsMllFit(Metric metric);  // mll, aic, bic
bool NeedsMapFit(Metric metric);  // the rest

// How x is scaled before modelling: x_model = x / factor. The default priors are the paper's,
// stated on x as the paper gave it (years for Mauna Loa, [0, 1] for the interpretable example);
// data in other units can put a true period or lengthscale many prior sd out.
struct XScaling {
  enum class Mode {
    kNone,    // x as given (default: the paper's examples reproduce exactly)
    kAuto,    // the factor of AutoXScale (core/data_heuristics.h): the dominant period of y, or
              // range/10, a function of the data that scales with x
    kFactor,  // the given factor
  };
  Mode mode = Mode::kNone;
  double factor = 1.0;  // kFactor only; > 0
  absl::Status Validate() const;
};
// "none", "auto" or the factor with full precision: what ParseXScaling reads back.
std::string XScalingText(const XScaling& scaling);
// "none", "auto" or a positive number; INVALID_ARGUMENT naming `field` otherwise.
absl::StatusOr<XScaling> ParseXScaling(std::string_view text, std::string_view field = "scale_x");

struct KernelScore;

// A kernel scored earlier on the same data with the same options: when it is contained in the
// kernel being scored (core/internal/nested_embedding.h), its optima, embedded with the extra part
// switched off, are starts of the larger kernel's fits (MLL from MLL, MAP from MAP). They are
// extra starts: the prior draws and data-informed starts stay, so the larger kernel's optimum
// is the best of more starts, never of fewer. Shared rather than pointed to, so that options
// holding parents can be copied and moved freely (the server's validated request owns the
// scores a ScoreRequest carries in `nested_parents`).
struct NestedParent {
  KernelExpr kernel;
  std::shared_ptr<const KernelScore> score;
  // `kernel` is the scored kernel with one base kernel removed (ScoreOptions::search_starts):
  // started from even where the embedding is approximate (a bare stationary summand that cannot
  // be switched off, PER*RQ inside PER*RQ + PER), as a search's warm start from its parent is.
  bool one_fewer_base_kernel = false;
};

// Of `scored`, the parents whose optima should start `kernel`'s fits: the kernels `kernel`
// contains (other than itself) that no other of them contains in turn. Each of those bounds the
// ones it contains (its own MLL is at least theirs, by the same rule), so starting from the
// largest alone keeps the chain monotone at one extra start per objective each (ScoreKernels'
// rule; a kernel given twice counts once). In the order of `scored`.
std::vector<NestedParent> LargestContainedParents(const KernelExpr& kernel,
                                                  const std::vector<NestedParent>& scored);

struct ScoreOptions {
  FitOptions fit;                      // restarts (default 5), seed, ...
  bool standardize = true;             // standardise y before fitting (priors assume it)
  XScaling scale_x;                    // how x is scaled before modelling (default: not at all)
  // Data-informed starts besides the prior draws: two, four for a kernel with a period
  // (core/internal/data_starts.h).
  bool data_informed_starts = true;
  // Kernels already scored on this data with these options (e.g. a search's kept kernels,
  // SearchStep::kept_score). ScoreKernel starts from every one the kernel contains; ScoreKernels
  // adds the kernels it scores itself and passes each kernel LargestContainedParents.
  std::vector<NestedParent> nested_parents;
  // ScoreKernels only: start each kernel as a search that built it would (issue 27: one kernel,
  // one optimum whatever the command). Two parts:
  // - also score, first, every sub-kernel of each given kernel (the kernels left by removing
  //   base kernels one at a time, down to single base kernels: PER*RQ + PER → PER*RQ, PER + RQ,
  //   PER + PER → PER, RQ), each starting from the optima of those one base kernel smaller, and
  //   start each kernel's fits from them too: the chains a search may take to reach the kernel;
  // - draw each kernel's prior starts from CandidateSeed(fit.seed, its text) (core/search.h), the
  //   seed a search gives that kernel, instead of from fit.seed: on sunspots' PER*RQ + PER it is
  //   a prior draw of the search's seed, not its warm start, that reaches −137.353 (score with
  //   fit.seed 0: −140.107 after 22 starts).
  // So `score` makes every start the search makes for the kernel, and more. The sub-kernels'
  // scores are not returned. Cost: their fits, up to 2^L − 2 kernels of fewer base kernels for a
  // kernel of L ≤ 5; a kernel of more base kernels (an expanded SE[*] on many columns) gets none
  // (README, "One optimum per kernel"). In rounds (a score job), the sub-kernels are entries of
  // the rounds too (KernelToScore::start_only).
  bool search_starts = false;
  std::vector<Metric> metrics;         // empty = the eight paper metrics
  std::vector<double> laplace_r;       // extra Laplace variants with these minimal corrections r
  HyperparameterSettings hyperparameters;
  bool compute_laplace_covariance = true;
  // Exact GP, sparse GP (certified intervals) or chosen by the time estimate (core/approx.h);
  // ScoreKernel decides per kernel (core/approx_score.h), a search once for all its candidates.
  ApproxOptions approx;

  // Held-out data (same columns as the training data): when set, each fit made also gets its
  // test log-likelihood and predictive log density on it (KernelScore::held_out,
  // core/held_out.h). Shared so that options stay cheap to copy.
  std::shared_ptr<const Dataset> test;
  absl::Status Validate() const;
};

// Eigen-analysis of the MAP Hessian H = −∇²(log lik + log prior).
struct LaplaceDiagnostics {
  Eigen::VectorXd eigenvalues;          // ascending
  Eigen::MatrixXd eigenvectors;         // columns, unit norm, in free-parameter order
  bool positive_definite = false;       // all λ_i > 0, i.e. plain Lap is defined
  // For each clamped direction (λ below the threshold of a variant): parameters it loads on.
  struct ClampedDirection {
    double eigenvalue = 0.0;
    std::vector<std::pair<std::string, double>> loadings;  // |loading| ≥ 0.3, largest first
  };
  std::map<std::string, std::vector<ClampedDirection>> clamped;  // by metric name, e.g. "lap0"
  Eigen::MatrixXd covariance;           // H⁻¹ (Laplace posterior covariance, raw); empty if not PD
  double hessian_jitter = 0.0;          // jitter the likelihood's Cholesky needed at the optimum
};

// Where the exact log-likelihood part of a metric lies when it was computed on the sparse model:
// the metric's value is `lower` (core/sparse_score.h).
struct ScoreInterval {
  double lower = 0.0;
  double upper = 0.0;
};

// KernelScore::prior_dominated: posterior variance over prior variance at or above this.
inline constexpr double kPriorDominatedShare = 0.9;

struct KernelScore {
  std::string kernel;                   // canonical text
  int num_points = 0;
  int num_hyperparameters = 0;          // u (free ones, noise included)
  bool standardized = false;
  Standardization standardization;
  // x was divided by this before modelling (1 = as given). Fitted values (mll_fit/map_fit
  // `values`) are in the user's units of x all the same; raw vectors, Hessians and the Laplace
  // covariance are those of the scaled model.
  double x_scale = 1.0;
  // --scale-x auto on several columns when every x-dependent parameter belongs to one column
  // (pinned kernels, BASE[*]): column c was divided by x_scales[c], its own range/10, and
  // x_scale is 1. Empty otherwise (every column divided by x_scale).
  std::vector<double> x_scales;
  std::string x_scale_reason;           // why this factor ("as given", "auto: ...", "given")
  // Things the user should know about the optima: a parameter on a bound or more than 3 prior sd
  // from its prior mean (with the remedy), an optimum reached by a single start.
  std::vector<std::string> warnings;
  // Free parameters whose MAP posterior is their prior: the Laplace posterior variance at the
  // MAP point is at least kPriorDominatedShare of the prior's (raw space), i.e. the likelihood's
  // curvature there is under a ninth of the prior's. Their MAP values are the prior's, not
  // structure the data show (the report does not describe them as such).
  std::vector<std::string> prior_dominated;
  std::vector<std::string> parameter_names;  // free parameters in raw-vector order
  std::map<std::string, double> metrics;     // by metric name; an undefined Lap is absent ...
  std::map<std::string, std::string> undefined_metrics;  // ... and listed here with the reason
  std::map<double, double> laplace_r;        // extra Laplace variants: r -> value
  std::optional<FitResult> mll_fit;
  std::optional<FitResult> map_fit;
  std::optional<LaplaceDiagnostics> laplace;
  // With ScoreOptions::test: one entry per fit made (MLL first), core/held_out.h.
  std::vector<HeldOutLikelihood> held_out;
  double seconds = 0.0;
  // "exact", or "sparse": then every metric is the lower end of intervals[metric], the fits'
  // log_likelihood is the ELBO, m = num_inducing, and there is no Laplace covariance.
  std::string method = "exact";
  int num_inducing = 0;
  std::map<std::string, ScoreInterval> intervals;  // by metric name; sparse only
  std::string approx_note;  // what approx = auto chose and why (or that sparse was asked for)
  std::string Summary() const;
};

// "" when every fit of `score` reached its optimum from two starts at least; else
// "  (MLL optimum MAY NOT BE GLOBAL: ...)" for a headline (FitResult::may_not_be_global).
std::string MayNotBeGlobalNote(const KernelScore& score);

// Lap_r from a MAP value, Hessian eigenvalues and r (r = +inf means no clamping). Exposed for
// tests and for search; returns nullopt when unclamped and some λ ≤ 0.
std::optional<double> LaplaceScore(double map_value, const Eigen::VectorXd& eigenvalues,
                                   double r);
// The threshold 2π e^{−2r} of Lemma 3.1.
double LaplaceEigenvalueFloor(double r);

// Validates the data and options, standardises y (if asked), fits what the metrics need and
// computes them. INVALID_ARGUMENT for bad input (before any O(n³) work); the callback's status
// when cancelled; FAILED_PRECONDITION when no restart produced a finite fit.
absl::StatusOr<KernelScore> ScoreKernel(const Dataset& data, const KernelExpr& kernel,
                                        const ScoreOptions& options,
                                        const ProgressCallback& progress = nullptr);

// As ScoreKernel, but reuses the fits of `earlier`: a score of the same kernel on the same data
// with the same fit options, seed and priors, perhaps for fewer metrics (kernel search re-scores
// its best candidate this way). When `earlier` has every fit the metrics need, they are reused
// as they are; when it lacks one, both fits are made together (cross-seeded, as ScoreKernel
// makes them), the one `earlier` had also starting from its optimum, so it is at least as good.
// INVALID_ARGUMENT when `earlier` is for another kernel or data size.
absl::StatusOr<KernelScore> ScoreKernelReusingFits(const Dataset& data, const KernelExpr& kernel,
                                                   const ScoreOptions& options,
                                                   const KernelScore& earlier,
                                                   const ProgressCallback& progress = nullptr);

// Natural value in the user's units of x per natural value of the scaled model, for the
// parameter `name`: x_scale for lengthscales (except PER's, which is relative to the period)
// and periods, 1/x_scale² for LIN variances (k = σ²·x·x'), 1 otherwise.
double UserUnitsPerModelUnit(std::string_view name, double x_scale);
// The same when the columns were scaled each by its own factor (`column_scales`, empty = all by
// x_scale): a parameter of a kernel pinned to column c ("SE[2].lengthscale", "LIN[0]#2.variance")
// takes column_scales[c]; the others x_scale.
double UserUnitsPerModelUnit(std::string_view name, double x_scale,
                             const std::vector<double>& column_scales);
// The column a parameter's kernel is pinned to, read from its name ("SE[2]#1.lengthscale" -> 2);
// −1 when unpinned.
int PinnedColumnOfParameter(std::string_view name);

// A parameter's prior in natural units (the user's units of x): the raw Normal N(m, s) through
// softplus (plus the 1e-4 floor for the noise), i.e. median softplus(m) and central 95 % interval
// [softplus(m − 1.96 s), softplus(m + 1.96 s)], times UserUnitsPerModelUnit.
struct PriorSummary {
  std::string name;
  NormalPrior raw;
  bool fixed = false;
  double fixed_value = 0.0;  // natural, user units (fixed parameters only)
  double median = 0.0;
  double lower95 = 0.0;
  double upper95 = 0.0;
};
// With `column_scales` (ScaledInputs::column_factors), a pinned kernel's prior is in its own
// column's units.
absl::StatusOr<std::vector<PriorSummary>> DescribePriors(
    const KernelExpr& kernel, const HyperparameterSettings& settings, double x_scale = 1.0,
    const std::vector<double>& column_scales = {});

// The scales of one input column that lengthscales and periods must be able to reach, and y's
// strongest period along it (core/data_heuristics.h): what `gpsel priors --data` shows beside
// the priors, in x's own units.
struct InputColumnScales {
  int column = 0;
  InputColumnGeometry geometry;
  std::optional<PeriodogramPeak> strongest_period;
};
std::vector<InputColumnScales> DescribeInputScales(const Dataset& data);

// One sentence for each period prior whose central 95 % interval misses a column's strongest
// period of y: the prior cannot reach the cycle the data shows (an 11-year cycle under a period
// prior of 0.3–2.7 years), which a user should see before any fit.
std::vector<std::string> PeriodsOutOfPriorReach(const std::vector<PriorSummary>& priors,
                                                const std::vector<InputColumnScales>& scales);

// What a model is built from under an x scaling: x / factor, and the settings with fixed values
// converted from the user's units of x into the model's.
//
// --scale-x auto on several columns divides each column by its own range/10 (column_factors,
// factor 1) when `kernel` is given and every parameter of it that has x's units belongs to a
// kernel pinned to one column (SE[2], LIN[0], the copies of SE[*]): each is then reported in its
// own column's units. A kernel reading every column with one lengthscale (SE, LIN without a pin)
// has no such units when the columns are scaled differently, so it, and a call without
// `kernel`, get one factor for all (the geometric mean of the columns' range/10), which the
// reason says.
struct ScaledInputs {
  Eigen::MatrixXd x;
  HyperparameterSettings settings;
  double factor = 1.0;
  std::vector<double> column_factors;  // per column, or empty (every column by `factor`)
  std::string reason;  // "as given", "given", "auto: ..."
};
absl::StatusOr<ScaledInputs> ScaleInputs(const Dataset& data, const XScaling& scaling,
                                         const HyperparameterSettings& settings,
                                         const KernelExpr* kernel = nullptr);

// Scores several kernels on one dataset: smaller kernels first, each one's optima feeding the
// fits of every larger kernel that contains it (ScoreOptions::nested_parents), so that a kernel's
// MLL is not below that of a kernel it contains, except for what the bounds leave of the
// switched-off part (README, "Nested kernels"). Kernels scored before the call, given in
// options.nested_parents, feed the fits of those that contain them the same way (a report's
// given kernel starting from the search's kept kernels). Results are in the order of `kernels`.
// On an error, `failed_kernel` (if given) receives the index of the kernel that failed.
//
// The kernels fall into rounds: a kernel's round comes after those of the kernels of the call
// that it contains, and the kernels of one round do not depend on each other. With
// `score_round`, each round is handed to it in one call instead of being scored here one kernel
// after another (a score job makes each kernel a task that any replica may run,
// server/jobs/score_job.h); the results are the same, since a kernel's score depends only on its own
// inputs and its parents' scores.
struct KernelToScore {
  size_t index = 0;                          // into the call's kernels, then its sub-kernels
  KernelExpr kernel;                         // the kernel to score (BASE[*] expanded)
  uint64_t fit_seed = 0;                     // its fits' seed (ScoreOptions::search_starts)
  std::vector<NestedParent> nested_parents;  // what its fits start from (LargestContainedParents)
  // A sub-kernel (ScoreOptions::search_starts): scored only for the starts its optima offer, so
  // a scorer that cannot score it (an error other than cancellation or a deadline) returns no
  // score for it rather than failing the call, as ScoreKernels does when it scores it itself.
  bool start_only = false;
};
// The sub-kernels ScoreKernels also scores with ScoreOptions::search_starts, for `kernels`
// (BASE[*] expanded): those left by removing base kernels one at a time, down to single base
// kernels, each once and none of `kernels`; kernels of more than 5 base kernels get none.
std::vector<KernelExpr> SubKernelsForSearchStarts(const std::vector<KernelExpr>& kernels);
// Whether a sub-kernel's scoring error (ScoreOptions::search_starts) only means it offers no
// start: any error but a cancellation or a deadline, which stop the whole call.
bool SubKernelErrorOffersNoStart(const absl::Status& status);
// Scores one round: for each entry, in order, exactly what ScoreKernel(data, entry.kernel,
// options with fit.seed = entry.fit_seed and nested_parents = entry.nested_parents) returns;
// nullopt only for a start_only entry it could not score. `round` is 1-based. An error fails
// the whole ScoreKernels call with it.
using KernelRoundScorer = std::function<absl::StatusOr<std::vector<std::optional<KernelScore>>>(
    int round, const std::vector<KernelToScore>& entries, const ProgressCallback& progress)>;
absl::StatusOr<std::vector<KernelScore>> ScoreKernels(const Dataset& data,
                                                      const std::vector<KernelExpr>& kernels,
                                                      const ScoreOptions& options,
                                                      const ProgressCallback& progress = nullptr,
                                                      int* failed_kernel = nullptr,
                                                      const KernelRoundScorer& score_round = nullptr);

// Free raw values of every parameter of a fit of `score` by name (fixed ones included), in the
// scaled model's raw space: what nested embeddings start from.
std::map<std::string, double> ModelRawValues(const KernelScore& score, const FitResult& fit);
// The same values for a model whose x is scaled by `x_factor` / `x_factors` (another kernel's
// scaling under --scale-x auto, core/score.h ScaleInputs): the fit's natural values (user units)
// through that scaling's UserUnitsPerModelUnit, so that an optimum passed from one kernel to a
// kernel scaled otherwise (SE[*] per column → SE[*] + LIN by one factor) is the same point in
// the user's units. Equal to ModelRawValues(score, fit) when the scalings are the same.
std::map<std::string, double> ModelRawValues(const KernelScore& score, const FitResult& fit,
                                             double x_factor,
                                             const std::vector<double>& x_factors);

}  // namespace gpsel

#endif  // GPSEL_CORE_SCORE_H_
