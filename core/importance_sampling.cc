// Importance-sampling evidence with a defensive Student-t mixture proposal, and the Pareto k̂
// diagnostic of its weights (see core/importance_sampling.h for the estimator).
#include "gpsel/core/importance_sampling.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <numeric>
#include <utility>

#include "Eigen/Cholesky"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "gpsel/core/internal/ellipsoid.h"
#include "gpsel/core/internal/thread_pool.h"
#include "gpsel/core/status_macros.h"

namespace gpsel {

using ns_internal::Rng;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kLog2Pi = std::log(2.0 * M_PI);

double LogSumExp(const Eigen::VectorXd& v) {
  const double top = v.maxCoeff();
  if (!std::isfinite(top)) return top;
  return top + std::log((v.array() - top).exp().sum());
}

// One Student-t component of a proposal: centre, Cholesky factor of c² Σ and its log weight in
// the mixture (the prior share included, so the weights of a mixture sum to 1 − β).
struct Component {
  Eigen::VectorXd mean;
  Eigen::MatrixXd cholesky;
  double log_weight = 0.0;
};

// A proposal q = β π + Σ_m exp(log_weight_m) t_ν(mean_m, L_m L_mᵀ): draws and log densities.
class MixtureProposal {
 public:
  MixtureProposal(const Eigen::VectorXd& prior_mean, const Eigen::VectorXd& prior_sd, int dof,
                  double prior_share, std::vector<Component> components)
      : prior_mean_(prior_mean),
        prior_sd_(prior_sd),
        dof_(dof),
        prior_share_(prior_share),
        components_(std::move(components)) {
    const int u = static_cast<int>(prior_mean.size());
    // log t_ν normaliser: lgamma((ν+u)/2) − lgamma(ν/2) − (u/2) log(νπ) − log |L|.
    const double t_constant =
        std::lgamma(0.5 * (dof_ + u)) - std::lgamma(0.5 * dof_) - 0.5 * u * std::log(dof_ * M_PI);
    for (const Component& c : components_) {
      log_constant_.push_back(c.log_weight + t_constant -
                              c.cholesky.diagonal().array().log().sum());
      draw_weight_.push_back(std::exp(c.log_weight) / (1.0 - prior_share_));
    }
    log_prior_constant_ = -0.5 * u * kLog2Pi - prior_sd_.array().log().sum();
  }

  // A draw into `out`; returns its source: the component index, or -1 for the prior.
  int Draw(Rng& rng, Eigen::VectorXd& out) const {
    const int u = static_cast<int>(prior_mean_.size());
    if (rng.Uniform() < prior_share_) {
      for (int i = 0; i < u; ++i) out[i] = prior_mean_[i] + prior_sd_[i] * rng.Normal();
      return -1;
    }
    double pick = rng.Uniform();
    int m = 0;
    while (m + 1 < static_cast<int>(components_.size()) && pick >= draw_weight_[m]) {
      pick -= draw_weight_[m++];
    }
    Eigen::VectorXd z(u);
    for (int i = 0; i < u; ++i) z[i] = rng.Normal();
    // Student-t: a Gaussian draw scaled by sqrt(ν / χ²_ν), χ²_ν a sum of ν squared normals.
    double chi_squared = 0.0;
    for (int k = 0; k < dof_; ++k) {
      const double g = rng.Normal();
      chi_squared += g * g;
    }
    out = components_[m].mean + components_[m].cholesky * z * std::sqrt(dof_ / chi_squared);
    return m;
  }

  double LogPrior(const Eigen::VectorXd& x) const {
    return log_prior_constant_ -
           0.5 * ((x - prior_mean_).array() / prior_sd_.array()).square().sum();
  }

  double LogDensity(const Eigen::VectorXd& x, double log_prior) const {
    const int u = static_cast<int>(x.size());
    Eigen::VectorXd terms(components_.size() + 1);
    terms[0] = std::log(prior_share_) + log_prior;
    for (size_t m = 0; m < components_.size(); ++m) {
      const Eigen::VectorXd white =
          components_[m].cholesky.triangularView<Eigen::Lower>().solve(x - components_[m].mean);
      terms[m + 1] = log_constant_[m] - 0.5 * (dof_ + u) * std::log1p(white.squaredNorm() / dof_);
    }
    return LogSumExp(terms);
  }

  const std::vector<Component>& components() const { return components_; }

 private:
  const Eigen::VectorXd& prior_mean_;
  const Eigen::VectorXd& prior_sd_;
  const int dof_;
  const double prior_share_;
  std::vector<Component> components_;
  std::vector<double> log_constant_;
  std::vector<double> draw_weight_;
  double log_prior_constant_ = 0.0;
};

// The estimate from every sample so far.
struct Estimate {
  double log_evidence = -kInf;
  double error = kInf;
  double ess = 0.0;
  double pareto_k = std::numeric_limits<double>::quiet_NaN();
};

Estimate EstimateFrom(const Eigen::VectorXd& log_weights) {
  Estimate e;
  const Eigen::Index n = log_weights.size();
  const double top = log_weights.maxCoeff();
  if (n == 0 || !std::isfinite(top)) return e;
  const Eigen::ArrayXd w = (log_weights.array() - top).exp();
  const double sum = w.sum();
  const double mean = sum / static_cast<double>(n);
  e.log_evidence = top + std::log(mean);
  // Delta method: se(log Ẑ) = sd(w) / (√N · w̄).
  const double relative_variance =
      n > 1 ? (w / mean - 1.0).square().sum() / static_cast<double>(n - 1) : kInf;
  e.error = std::sqrt(relative_variance / static_cast<double>(n));
  e.ess = sum * sum / w.square().sum();
  e.pareto_k = is_internal::ParetoShapeOfLargestWeights(log_weights);
  return e;
}

}  // namespace

absl::Status ImportanceSamplingOptions::Validate() const {
  if (initial_samples < 10) {
    return absl::InvalidArgumentError(
        absl::StrCat("initial_samples: must be at least 10, got ", initial_samples));
  }
  if (max_samples < initial_samples) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_samples: must be at least initial_samples (", initial_samples, "), got ",
                     max_samples));
  }
  if (!(target_error > 0) || !std::isfinite(target_error)) {
    return absl::InvalidArgumentError(
        absl::StrCat("target_error: must be a positive number of nats, got ", target_error));
  }
  if (!(max_seconds >= 0) || !std::isfinite(max_seconds)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_seconds: must be >= 0 (0 = no cap), got ", max_seconds));
  }
  if (!(prior_share > 0 && prior_share < 1)) {
    return absl::InvalidArgumentError(
        absl::StrCat("prior_share: must be in (0, 1), got ", prior_share));
  }
  if (student_t_dof < 1 || student_t_dof > 1000) {
    return absl::InvalidArgumentError(
        absl::StrCat("student_t_dof: must be an integer in [1, 1000], got ", student_t_dof));
  }
  if (!(covariance_inflation > 0) || !std::isfinite(covariance_inflation)) {
    return absl::InvalidArgumentError(absl::StrCat(
        "covariance_inflation: must be a positive factor, got ", covariance_inflation));
  }
  if (!(max_pareto_k > 0) || !std::isfinite(max_pareto_k)) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_pareto_k: must be positive, got ", max_pareto_k));
  }
  if (max_adaptations < 0 || max_adaptations > 10) {
    return absl::InvalidArgumentError(
        absl::StrCat("max_adaptations: must be in [0, 10], got ", max_adaptations));
  }
  if (threads < 1 || threads > 1024) {
    return absl::InvalidArgumentError(absl::StrCat("threads: must be in [1, 1024], got ", threads));
  }
  return absl::OkStatus();
}

std::string ImportanceSamplingResult::Summary() const {
  std::string text = absl::StrFormat(
      "log Z = %.4f ± %.4f (importance sampling, %d samples, ESS %.0f, Pareto k %.2f, %.2f s)\n"
      "proposal: %d mode(s), prior share %.2f%s%s",
      log_evidence, log_evidence_error, num_samples, effective_sample_size, pareto_k, seconds,
      static_cast<int>(modes.size()), prior_share,
      reliable ? "" : "\nNOT RELIABLE: ", reliable ? "" : reliability);
  if (partial) absl::StrAppend(&text, "\npartial: ", partial_reason);
  return text;
}

double LogLaplaceMass(double log_posterior, const Eigen::MatrixXd& covariance) {
  const Eigen::LLT<Eigen::MatrixXd> llt(covariance);
  if (llt.info() != Eigen::Success) return -kInf;
  const double half_log_det = llt.matrixLLT().diagonal().array().log().sum();
  return log_posterior + 0.5 * static_cast<double>(covariance.rows()) * kLog2Pi + half_log_det;
}

namespace {

// The caller's target and modes, checked before any sampling: INVALID_ARGUMENT naming the field.
absl::Status ValidateTarget(const StoppableLogLikelihood& log_likelihood,
                            const Eigen::VectorXd& prior_mean, const Eigen::VectorXd& prior_sd,
                            const std::vector<ProposalMode>& modes) {
  if (!log_likelihood.fn) return absl::InvalidArgumentError("log_likelihood: must be set");
  const int u = static_cast<int>(prior_mean.size());
  if (u < 1) return absl::InvalidArgumentError("prior_mean: must have at least one entry");
  if (prior_sd.size() != u) {
    return absl::InvalidArgumentError(
        absl::StrCat("prior_sd: has ", prior_sd.size(), " entries, prior_mean ", u));
  }
  if (!prior_mean.allFinite()) return absl::InvalidArgumentError("prior_mean: must be finite");
  if (!prior_sd.allFinite() || !(prior_sd.array() > 0).all()) {
    return absl::InvalidArgumentError("prior_sd: every entry must be finite and > 0");
  }
  if (modes.empty()) return absl::InvalidArgumentError("modes: need at least one mode");
  return absl::OkStatus();
}

// The first proposal: the modes weighted by Laplace mass, sharing 1 − prior_share; each
// mode's covariance inflated by inflation2 (the square of covariance_inflation).
absl::StatusOr<std::vector<Component>> FirstProposal(const std::vector<ProposalMode>& modes,
                                                     int u, double inflation2,
                                                     double prior_share) {
  std::vector<Component> components;
  Eigen::VectorXd log_mass(modes.size());
  for (size_t m = 0; m < modes.size(); ++m) {
    const ProposalMode& mode = modes[m];
    const std::string field = absl::StrCat("modes[", m, "]");
    if (mode.mean.size() != u || !mode.mean.allFinite()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".mean: must have ", u, " finite entries"));
    }
    if (mode.covariance.rows() != u || mode.covariance.cols() != u ||
        !mode.covariance.allFinite()) {
      return absl::InvalidArgumentError(
          absl::StrCat(field, ".covariance: must be a finite ", u, "×", u, " matrix"));
    }
    if (!std::isfinite(mode.log_laplace_mass)) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".log_laplace_mass: must be finite"));
    }
    const Eigen::LLT<Eigen::MatrixXd> llt(inflation2 * mode.covariance);
    if (llt.info() != Eigen::Success) {
      return absl::InvalidArgumentError(absl::StrCat(field, ".covariance: not positive definite"));
    }
    components.push_back({mode.mean, llt.matrixL(), 0.0});
    log_mass[m] = mode.log_laplace_mass;
  }
  const double log_total_mass = LogSumExp(log_mass);
  for (size_t m = 0; m < modes.size(); ++m) {
    components[m].log_weight = std::log1p(-prior_share) + log_mass[m] - log_total_mass;
  }
  return components;
}

// Adapts the proposal: appends to `next` two Student-t components, one at the importance-
// weighted mean and covariance of every sample so far (the posterior's moments: ridges and
// missed regions widen it), one at those of the heaviest weights (the tail k̂ was fitted to:
// where the proposal is thinnest relative to the posterior), and records them as adapted modes.
// Returns how many were added (a covariance that is not positive definite adds none).
int AddAdaptedComponents(const Eigen::MatrixXd& points, const Eigen::VectorXd& log_weights,
                         double pareto_k, double inflation2, std::vector<Component>* next,
                         std::vector<ProposalMode>* all_modes) {
  const int64_t total = points.rows();
  const int u = static_cast<int>(points.cols());
  const int64_t tail_size = static_cast<int64_t>(std::ceil(
      std::min(0.2 * static_cast<double>(total), 3.0 * std::sqrt(static_cast<double>(total)))));
  std::vector<int64_t> all(total);
  std::iota(all.begin(), all.end(), 0);
  std::vector<int64_t> heaviest = all;
  std::nth_element(heaviest.begin(), heaviest.begin() + tail_size, heaviest.end(),
                   [&](int64_t a, int64_t b) { return log_weights[a] > log_weights[b]; });
  heaviest.resize(tail_size);
  std::sort(heaviest.begin(), heaviest.end());  // a fixed order: sums do not depend on it
  int added = 0;
  for (const std::vector<int64_t>* subset : {&all, &heaviest}) {
    const std::vector<int64_t>& rows = *subset;
    Eigen::VectorXd lw(rows.size());
    Eigen::MatrixXd x(rows.size(), u);
    for (size_t r = 0; r < rows.size(); ++r) {
      lw[r] = log_weights[rows[r]];
      x.row(r) = points.row(rows[r]);
    }
    const Eigen::ArrayXd w = (lw.array() - lw.maxCoeff()).exp();
    const Eigen::VectorXd normalised = (w / w.sum()).matrix();
    const Eigen::VectorXd mean = x.transpose() * normalised;
    const Eigen::MatrixXd centred = x.rowwise() - mean.transpose();
    Eigen::MatrixXd covariance = centred.transpose() * normalised.asDiagonal() * centred;
    covariance.diagonal().array() += 1e-9;
    const Eigen::LLT<Eigen::MatrixXd> llt(inflation2 * covariance);
    if (llt.info() != Eigen::Success) continue;
    next->push_back({mean, llt.matrixL(), 0.0});
    ProposalMode adapted;
    adapted.mean = mean;
    adapted.covariance = covariance;
    adapted.adapted = true;
    adapted.origin =
        absl::StrFormat("adapted: importance-weighted moments of %s %d samples (Pareto k %.2f)",
                        subset == &all ? "all" : "the heaviest",
                        static_cast<int64_t>(rows.size()), pareto_k);
    all_modes->push_back(std::move(adapted));
    ++added;
  }
  return added;
}

// The estimate and its diagnostics into `result`: the last stage's mixture weights, each
// source's share of the weight, and whether the estimate is reliable (and why not).
void Summarise(const Estimate& estimate, const MixtureProposal& last_stage,
               const std::vector<int>& sources, const Eigen::VectorXd& log_weights,
               std::vector<ProposalMode> all_modes, const ImportanceSamplingOptions& options,
               ImportanceSamplingResult* result) {
  const int64_t total = log_weights.size();
  result->log_evidence = estimate.log_evidence;
  result->log_evidence_error = estimate.error;
  result->effective_sample_size = estimate.ess;
  result->num_samples = total;
  result->pareto_k = estimate.pareto_k;
  result->modes = all_modes;
  // The last stage's mixture weights.
  for (const Component& c : last_stage.components()) {
    result->mode_weights.push_back(std::exp(c.log_weight));
  }
  result->prior_share = options.prior_share;
  // Weight shares by source.
  const double top = log_weights.maxCoeff();
  const Eigen::ArrayXd w = (log_weights.array() - top).exp();
  const double sum = w.sum();
  result->mode_weight_shares.assign(all_modes.size(), 0.0);
  for (int64_t i = 0; i < total; ++i) {
    if (sources[i] < 0) {
      result->prior_weight_share += w[i] / sum;
    } else {
      result->mode_weight_shares[sources[i]] += w[i] / sum;
    }
  }
  if (estimate.pareto_k > options.max_pareto_k) {
    result->reliability = absl::StrFormat(
        "Pareto k %.2f > %.2f: a few samples carry most of the weight (the proposal misses "
        "part of the posterior), so the estimate and its error are not reliable",
        estimate.pareto_k, options.max_pareto_k);
  } else if (estimate.error > options.target_error) {
    result->reliability =
        absl::StrFormat("error %.3f nats above the target %.3f (%s)", estimate.error,
                        options.target_error, result->partial_reason);
  } else if (std::isnan(estimate.pareto_k)) {
    result->reliability = "Pareto k could not be estimated (too few distinct weights)";
  } else {
    result->reliable = true;
    result->reliability =
        absl::StrFormat("Pareto k %.2f ≤ %.2f and error %.3f ≤ %.3f nats", estimate.pareto_k,
                        options.max_pareto_k, estimate.error, options.target_error);
  }
}

}  // namespace

absl::StatusOr<ImportanceSamplingResult> RunImportanceSampling(
    const LogLikelihoodFn& log_likelihood, const Eigen::VectorXd& prior_mean,
    const Eigen::VectorXd& prior_sd, const std::vector<ProposalMode>& modes,
    const ImportanceSamplingOptions& options, const ProgressCallback& progress) {
  StoppableLogLikelihood never_stops;
  if (log_likelihood) {
    never_stops.fn = [&log_likelihood](const Eigen::VectorXd& raw) -> absl::StatusOr<double> {
      return log_likelihood(raw);
    };
  }
  return RunImportanceSampling(never_stops, prior_mean, prior_sd, modes, options, progress);
}

absl::StatusOr<ImportanceSamplingResult> RunImportanceSampling(
    const StoppableLogLikelihood& log_likelihood, const Eigen::VectorXd& prior_mean,
    const Eigen::VectorXd& prior_sd, const std::vector<ProposalMode>& modes,
    const ImportanceSamplingOptions& options, const ProgressCallback& progress) {
  const auto start_time = std::chrono::steady_clock::now();
  auto elapsed = [&] {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_time).count();
  };
  GPSEL_RETURN_IF_ERROR(options.Validate());
  GPSEL_RETURN_IF_ERROR(ValidateTarget(log_likelihood, prior_mean, prior_sd, modes));
  const int u = static_cast<int>(prior_mean.size());
  const double inflation2 = options.covariance_inflation * options.covariance_inflation;
  GPSEL_ASSIGN_OR_RETURN(std::vector<Component> components,
                         FirstProposal(modes, u, inflation2, options.prior_share));
  // Proposal stages: the first, then one per adaptation. Each sample's weight uses the mixture
  // of every stage's proposal in proportion to its samples (the balance heuristic of multiple
  // importance sampling), so that samples of an early, poorer proposal are reweighted by the
  // better later ones instead of keeping their heavy weights.
  std::vector<MixtureProposal> stages;
  stages.emplace_back(prior_mean, prior_sd, options.student_t_dof, options.prior_share, components);
  std::vector<int64_t> stage_samples = {0};
  std::vector<ProposalMode> all_modes = modes;  // the initial modes, then adapted components

  // Every sample's point, source (component index, −1 for the prior), log likelihood, log prior
  // and log density under each stage; drawn in order from one generator (so the draws never
  // depend on the thread count), evaluated in parallel.
  Eigen::MatrixXd points(0, u);
  std::vector<int> sources;
  Eigen::VectorXd log_likelihoods(0), log_priors(0), log_weights(0);
  std::vector<Eigen::VectorXd> stage_log_q(1);  // [stage](sample)
  Rng rng(options.seed);
  std::unique_ptr<ThreadPool> pool;
  if (options.threads > 1) pool = std::make_unique<ThreadPool>(options.threads);
  SerializedProgress serialized(progress);
  const ProgressCallback report = serialized.Callback();
  const Progress poll = CancellationPoll();

  ImportanceSamplingResult result;
  Estimate estimate;
  int64_t total = options.initial_samples;
  int batches = 0, batches_since_adaptation = 0;
  // Tails heavier than this (but maybe below max_pareto_k) are worth another proposal.
  constexpr double kAdaptAbovePareto = 0.5;
  while (true) {
    const int64_t begin = points.rows();
    const MixtureProposal& proposal = stages.back();
    points.conservativeResize(total, u);
    log_likelihoods.conservativeResize(total);
    sources.resize(total);
    for (int64_t i = begin; i < total; ++i) {
      Eigen::VectorXd x(u);
      const int source = proposal.Draw(rng, x);
      // Component indices of a stage are indices into all_modes (stages only ever append).
      sources[i] = source;
      points.row(i) = x.transpose();
    }
    // Evaluation in chunks; a chunk stops at a cancellation or when the time cap is reached
    // (its unevaluated samples are then dropped below).
    std::atomic<bool> out_of_time{false};
    absl::Status stopped;
    std::mutex stopped_mutex;
    std::atomic<bool> abandoned{false};  // an evaluation was abandoned: the other chunks stop
    std::vector<char> evaluated(total - begin, 0);
    constexpr int64_t kChunk = 16;
    TaskGroup group(pool.get());
    for (int64_t chunk = begin; chunk < total; chunk += kChunk) {
      group.Schedule([&, chunk] {
        for (int64_t i = chunk; i < std::min(total, chunk + kChunk); ++i) {
          if (abandoned.load()) return;
          if (absl::Status s = ReportProgress(report, poll); !s.ok()) {
            std::lock_guard<std::mutex> lock(stopped_mutex);
            if (stopped.ok()) stopped = s;
            return;
          }
          if (options.max_seconds > 0 && elapsed() > options.max_seconds) {
            out_of_time = true;
            return;
          }
          const Eigen::VectorXd x = points.row(i).transpose();
          absl::StatusOr<double> evaluated_value = log_likelihood.fn(x);
          if (!evaluated_value.ok()) {
            // Abandoned part-way: no value; the run returns this status below (no sample of
            // this batch is weighted).
            std::lock_guard<std::mutex> lock(stopped_mutex);
            if (stopped.ok()) stopped = evaluated_value.status();
            abandoned.store(true);
            return;
          }
          double value = *evaluated_value;
          if (std::isnan(value)) value = -kInf;
          log_likelihoods[i] = value;
          evaluated[i - begin] = 1;
        }
      });
    }
    group.Wait();
    if (!stopped.ok()) return stopped;
    if (out_of_time) {
      // Keep the evaluated samples only (the dropped ones were chosen by timing, not by value).
      int64_t kept = begin;
      for (int64_t i = begin; i < total; ++i) {
        if (!evaluated[i - begin]) continue;
        points.row(kept) = points.row(i);
        sources[kept] = sources[i];
        log_likelihoods[kept] = log_likelihoods[i];
        ++kept;
      }
      total = kept;
      points.conservativeResize(total, u);
      log_likelihoods.conservativeResize(total);
      sources.resize(total);
    }
    for (int64_t i = begin; i < total; ++i) {
      if (log_likelihoods[i] == kInf) {
        return absl::InvalidArgumentError(
            "log_likelihood: returned +inf (the likelihood must be bounded)");
      }
    }
    // Log prior and log density under every stage of the new samples.
    log_priors.conservativeResize(total);
    for (int64_t i = begin; i < total; ++i)
      log_priors[i] = stages[0].LogPrior(points.row(i).transpose());
    for (size_t st = 0; st < stages.size(); ++st) {
      Eigen::VectorXd& q = stage_log_q[st];
      const int64_t from = q.size();
      q.conservativeResize(total);
      for (int64_t i = from; i < total; ++i) {
        q[i] = stages[st].LogDensity(points.row(i).transpose(), log_priors[i]);
      }
    }
    stage_samples.back() += total - begin;
    // Weights under the balance heuristic: q̄ = Σ_s (N_s / N) q_s.
    log_weights.resize(total);
    for (int64_t i = 0; i < total; ++i) {
      if (log_likelihoods[i] == -kInf) {
        log_weights[i] = -kInf;
        continue;
      }
      Eigen::VectorXd terms(stages.size());
      for (size_t st = 0; st < stages.size(); ++st) {
        terms[st] = std::log(static_cast<double>(stage_samples[st]) / total) + stage_log_q[st][i];
      }
      log_weights[i] = log_likelihoods[i] + log_priors[i] - LogSumExp(terms);
    }
    ++batches;
    ++batches_since_adaptation;
    estimate = EstimateFrom(log_weights);
    const bool tail_ok = !(estimate.pareto_k > options.max_pareto_k);
    const bool target_met = estimate.error <= options.target_error;
    Progress p{"importance_sampling",
               std::min(1.0, std::pow(options.target_error / std::max(estimate.error, 1e-300), 2)),
               absl::StrFormat("%d samples, log Z %.3f ± %.3f, Pareto k %.2f", total,
                               estimate.log_evidence, estimate.error, estimate.pareto_k)};
    GPSEL_RETURN_IF_ERROR(ReportProgress(report, p));
    if (target_met && tail_ok) break;
    if (out_of_time) {
      result.partial = true;
      result.partial_reason = absl::StrFormat(
          "max_seconds (%g s) reached after %d samples, before the stopping rule was met "
          "(error %.3f nats for a target of %.3f, Pareto k %.2f for at most %.2f)",
          options.max_seconds, total, estimate.error, options.target_error, estimate.pareto_k,
          options.max_pareto_k);
      break;
    }
    if (total >= options.max_samples) {
      result.partial = true;
      result.partial_reason = absl::StrFormat(
          "max_samples (%d) reached before the stopping rule was met (error %.3f nats for a "
          "target of %.3f, Pareto k %.2f for at most %.2f)",
          options.max_samples, estimate.error, options.target_error, estimate.pareto_k,
          options.max_pareto_k);
      break;
    }
    const int adaptations = static_cast<int>(stages.size()) - 1;
    // A heavy tail that persists over two batches after the last adaptation is the proposal's
    // fault, not the sample size's: more samples would converge slowly and the error would
    // stay untrustworthy.
    if (!tail_ok && adaptations >= options.max_adaptations && batches_since_adaptation >= 2) break;
    int64_t next_batch = 0;
    if (estimate.pareto_k > kAdaptAbovePareto && adaptations < options.max_adaptations &&
        std::isfinite(estimate.log_evidence)) {
      // Adapt: add two Student-t components, one at the importance-weighted mean and covariance
      // of every sample so far (the posterior's moments: ridges and missed regions widen it),
      // one at those of the heaviest weights (the tail k̂ was fitted to: where the proposal is
      // thinnest relative to the posterior). They share half of the non-prior share; the
      // earlier components keep the other half in their proportions.
      std::vector<Component> next = stages.back().components();
      for (Component& c : next) c.log_weight += std::log(0.5);
      const int added = AddAdaptedComponents(points, log_weights,
                                             estimate.pareto_k, inflation2, &next, &all_modes);
      if (added > 0) {
        for (int k = 0; k < added; ++k) {
          next[next.size() - 1 - k].log_weight =
              std::log1p(-options.prior_share) + std::log(0.5 / added);
        }
        stages.emplace_back(prior_mean, prior_sd, options.student_t_dof, options.prior_share,
                            std::move(next));
        stage_samples.push_back(0);
        stage_log_q.emplace_back();
        batches_since_adaptation = 0;
        // The new stage gets as many samples as there are so far, so that it dominates q̄.
        next_batch = total;
      }
    }
    if (next_batch == 0) {
      // The error falls as 1/√N: aim at the target, at least doubling.
      const double needed =
          static_cast<double>(total) * std::pow(estimate.error / options.target_error, 2) * 1.1;
      next_batch = std::max<int64_t>(
          total, std::isfinite(needed) ? static_cast<int64_t>(needed) - total : 0);
    }
    total = std::min<int64_t>(options.max_samples, total + next_batch);
  }
  if (!std::isfinite(estimate.log_evidence)) {
    return absl::FailedPreconditionError(
        absl::StrCat("importance sampling: none of ", total,
                     " samples had a finite likelihood (covariance never positive definite?)"));
  }

  Summarise(estimate, stages.back(), sources, log_weights, std::move(all_modes), options,
            &result);
  if (options.return_samples) {
    result.samples = points;
    result.log_weights = log_weights.array() - LogSumExp(log_weights);
    result.log_likelihoods = log_likelihoods;
  }
  result.seconds = elapsed();
  return result;
}

namespace is_internal {

double ParetoShapeOfLargestWeights(const Eigen::VectorXd& log_weights) {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  std::vector<double> sorted;
  sorted.reserve(log_weights.size());
  for (double v : log_weights) {
    if (!std::isnan(v)) sorted.push_back(v);
  }
  const int64_t s = static_cast<int64_t>(sorted.size());
  if (s < 5) return nan;
  std::sort(sorted.begin(), sorted.end());
  const double top = sorted.back();
  if (!std::isfinite(top)) return nan;
  // The tail: the M largest weights, M = min(0.2 S, 3 √S), as exceedances over the next one.
  const int64_t tail_size = static_cast<int64_t>(
      std::ceil(std::min(0.2 * static_cast<double>(s), 3.0 * std::sqrt(static_cast<double>(s)))));
  const double cutoff = std::exp(sorted[s - tail_size - 1] - top);
  std::vector<double> x;
  for (int64_t i = s - tail_size; i < s; ++i) {
    const double exceedance = std::exp(sorted[i] - top) - cutoff;
    if (exceedance > 0) x.push_back(exceedance);
  }
  const int n = static_cast<int>(x.size());
  if (n < 5 || x.back() <= 0) return nan;
  // Zhang & Stephens (2009): a quadrature over θ = −k/σ (here b) with the profile likelihood
  // of k given θ, k(θ) = mean log(1 − θ x) and ℓ(θ) = n (log(θ / k(θ)) ... ); grid points
  // θ_j = 1/x_max + (1 − √(m / (j − ½))) / (3 x_quartile), j = 1..m, m = 30 + √n.
  const int m = 30 + static_cast<int>(std::sqrt(static_cast<double>(n)));
  const double quartile = x[static_cast<size_t>(std::max(0, static_cast<int>(n / 4.0 + 0.5) - 1))];
  std::vector<double> theta(m), profile(m);
  for (int j = 0; j < m; ++j) {
    theta[j] = 1.0 / x.back() + (1.0 - std::sqrt(m / (j + 0.5))) / (3.0 * quartile);
    double k = 0.0;
    for (double xi : x) k += std::log1p(-theta[j] * xi);
    k /= n;
    // Profile log likelihood: n (log(−θ/k) − k − 1).
    profile[j] = n * (std::log(-theta[j] / k) - k - 1.0);
  }
  // Posterior weights of the grid points (uniform prior over the grid), normalised stably.
  std::vector<double> weight(m);
  for (int j = 0; j < m; ++j) {
    double sum = 0.0;
    for (int l = 0; l < m; ++l) sum += std::exp(profile[l] - profile[j]);
    weight[j] = 1.0 / sum;
  }
  double total = 0.0, theta_mean = 0.0;
  for (int j = 0; j < m; ++j) {
    if (!(weight[j] >= 10 * std::numeric_limits<double>::epsilon())) continue;
    total += weight[j];
    theta_mean += weight[j] * theta[j];
  }
  if (!(total > 0)) return nan;
  theta_mean /= total;
  double k = 0.0;
  for (double xi : x) k += std::log1p(-theta_mean * xi);
  k /= n;
  // Weakly informative prior: 10 pseudo-observations at k = 0.5.
  constexpr double kPriorCount = 10.0;
  return (k * n + kPriorCount * 0.5) / (n + kPriorCount);
}

}  // namespace is_internal
}  // namespace gpsel
