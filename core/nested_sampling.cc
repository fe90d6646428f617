// Nested sampling engine behind RunNestedSampling (see nested_sampling.h): the sampling loop,
// constrained-prior samplers (cube / multi-ellipsoid rejection / slice), thread bookkeeping that
// merges static and dynamic batches, and the estimators (classic nested sampling, thread
// bootstrap, importance nested sampling).
//
// Maths in brief.
// * Space. The sampler works in the unit hypercube u ∈ (0,1)^d, mapped to raw hyperparameters by
//   θ_i = mean_i + sd_i Φ^{-1}(u_i). The prior is then uniform, so "sample the prior above a
//   likelihood level" is plain uniform sampling in a region, and a bounding region of known
//   volume gives exact uniform draws by rejection (MultiNest, dynesty). Whitened prior space
//   z = (θ - mean)/sd would keep the posterior's shape better but makes the constrained prior
//   non-uniform, so every rejection draw would need a second accept step on the Gaussian density
//   (efficiency exp(-|z|²/2) at the edge of a wide ellipsoid), and its unbounded domain gives no
//   natural first bound. The cube also compresses the infinite flat tails GP likelihoods have
//   (noise → 0, lengthscale → ∞) into thin slabs near the faces.
// * Volumes and weights. With n live points the dead points' prior volumes X_i shrink by
//   t ~ Beta(n, 1). In y = -log X the dead points form a Poisson process whose rate is the number
//   of live points n(y) (Walter 2017), and with X̂_i = Π_{j<=i} (1 - 1/n_j) and weights
//   w_i = X̂_{i-1} / n_i the estimate Ẑ = Σ L_i w_i is exactly unbiased for any n(y) that depends
//   only on the past — constant (static runs), decreasing one by one (the final live points),
//   or raised by dynamic batches (Higson et al. 2019). Tied likelihoods (plateaus, notably
//   points where L = -inf) are removed together with n decreasing one by one, which estimates
//   the plateau's volume without bias (Fowlie, Handley & Su 2021).
// * Threads. Every point belongs to a thread (a single-live-point run, Higson et al. 2018): a
//   replacement continues the thread of the point it replaces. A thread is alive for likelihoods
//   above its birth level up to its last point, so n_i of any merged run is the number of
//   threads alive at L_i; merging dynamic batches is "sort all points by L and count threads".
// * Errors. sqrt(H / n) (Skilling 2006) from the information H, and the standard deviation of
//   log Ẑ over runs rebuilt from threads resampled with replacement (within each batch).
// * Importance nested sampling (Feroz, Hobson, Cameron & Pettitt 2019). Every likelihood
//   evaluation made by rejection sampling, accepted or not, is a draw from a known density: the
//   cube, or the union of ellipsoids of that refit ("epoch") — proposals pick ellipsoid j with
//   probability V_j / ΣV and are thinned with probability 1/m(x) where m(x) ellipsoids overlap,
//   so relative to all proposals R_e of epoch e the kept points have density 1[x ∈ U_e] / ΣV_e.
//   Pooling all epochs, Ẑ_INS = Σ_k L_k / G(x_k) with G(x) = Σ_e R_e 1[x ∈ U_e] / ΣV_e (the cube
//   epochs count R_e). It uses every call, not just the dead points, and does not depend on the
//   stochastic volumes X_i, so it is several times more precise; it is reported whenever the run
//   used rejection sampling only (not after slice sampling).
// * Batches (batch_size B > 1; dynesty's queue of proposals, Speagle 2020). Nested sampling needs
//   each replacement x to be uniform (in the cube, i.e. prior-distributed) on {L > L*}, L* the
//   level of the death it replaces, and independent of the other live points. A round proposes B
//   candidates c_1..c_B at once (evaluated in parallel) when the level is L*_0, and they are
//   examined in order: c_k is examined at the then current level L*_k >= L*_0 and becomes the
//   replacement iff L(c_k) > L*_k, else it is discarded; a new round starts when none is left.
//   Rejection sampling: the c_k are independent uniform draws from the bound E fitted to the live
//   set at L*_0, so E ⊇ {L > L*_0} ⊇ {L > L*_k} (the assumption every bound makes). L*_k is a
//   function of the live points and of c_1..c_{k-1} only, independent of c_k; so, given L*_k,
//   c_k conditioned on L(c_k) > L*_k is uniform on E ∩ {L > L*_k} = {L > L*_k} and independent
//   of the live points: exactly the draw serial rejection sampling makes — indeed the stream of
//   examined candidates is the serial stream of proposals, only with the bound refitted at round
//   boundaries (a due refit waits until the round is used up). No call is wasted, and every evaluated
//   point is a draw of its epoch's density, so importance nested sampling is unchanged.
//   Slice sampling: candidate k is the end of a chain of n_slice steps started from a live point
//   y_k (chosen uniformly among those above L*_0, so y_k ~ U{L > L*_0}); each step leaves
//   U{L > L*_0} invariant (Neal 2003), so c_k ~ U{L > L*_0}, and by the argument above c_k given
//   L(c_k) > L*_k ~ U{L > L*_k}. Its independence of the live points holds to the same
//   approximation as serial slice nested sampling (the chain forgets its start); chains of one
//   round may share a start (probability ~ B²/(2n)), which the serial sampler also allows across
//   consecutive replacements. Candidate k fails with probability 1 - X(L*_k)/X(L*_0) ≈ (k-1)/n,
//   so a round discards ≈ B(B-1)/(2n) chains. Determinism: rejection proposals come from the
//   run's one random stream in order (only the likelihood calls are parallel); slice chain k of a
//   round runs on its own stream, seeded from the run's stream in order; candidates are examined
//   and their calls counted in slot order. So the numbers depend on the seed and B, never on the
//   thread count.
#include "gpsel/core/nested_sampling.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <limits>
#include <memory>
#include <mutex>
#include <numeric>
#include <string>
#include <utility>
#include <vector>

#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/str_join.h"
#include "gpsel/core/internal/ellipsoid.h"
#include "gpsel/core/internal/thread_pool.h"

namespace gpsel {
namespace ns_internal {

namespace {
// Lower half (p <= 0.5) of the normal quantile: Acklam's rational approximation (relative error
// 1.15e-9) polished by one Halley step on Φ(x) - p with erfc, which is accurate in this tail.
double LowerNormalQuantile(double p) {
  static constexpr double a[] = {-3.969683028665376e+01, 2.209460984245205e+02,
                                 -2.759285104469687e+02, 1.383577518672690e+02,
                                 -3.066479806614716e+01, 2.506628277459239e+00};
  static constexpr double b[] = {-5.447609879822406e+01, 1.615858368580409e+02,
                                 -1.556989798598866e+02, 6.680131188771972e+01,
                                 -1.328068155288572e+01};
  static constexpr double c[] = {-7.784894002430293e-03, -3.223964580411365e-01,
                                 -2.400758277161838e+00, -2.549732539343734e+00,
                                 4.374664141464968e+00,  2.938163982698783e+00};
  static constexpr double d[] = {7.784695709041462e-03, 3.224671290700398e-01,
                                 2.445134137142996e+00, 3.754408661907416e+00};
  if (!(p > 0.0)) return -std::numeric_limits<double>::infinity();
  double x;
  if (p < 0.02425) {
    const double q = std::sqrt(-2.0 * std::log(p));
    x = (((((c[0] * q + c[1]) * q + c[2]) * q + c[3]) * q + c[4]) * q + c[5]) /
        ((((d[0] * q + d[1]) * q + d[2]) * q + d[3]) * q + 1.0);
  } else {
    const double q = p - 0.5;
    const double r = q * q;
    x = (((((a[0] * r + a[1]) * r + a[2]) * r + a[3]) * r + a[4]) * r + a[5]) * q /
        (((((b[0] * r + b[1]) * r + b[2]) * r + b[3]) * r + b[4]) * r + 1.0);
  }
  const double density = std::exp(-0.5 * x * x) / std::sqrt(2.0 * M_PI);
  if (density > 0.0) {
    const double u = (0.5 * std::erfc(-x * M_SQRT1_2) - p) / density;
    x -= u / (1.0 + 0.5 * x * u);
  }
  return x;
}
}  // namespace

double NormalQuantile(double p) {
  // 1 - p is exact for p >= 0.5 (Sterbenz), so the upper half reuses the accurate lower tail.
  return p > 0.5 ? -LowerNormalQuantile(1.0 - p) : LowerNormalQuantile(p);
}

}  // namespace ns_internal

namespace {

using ns_internal::Ellipsoid;
using ns_internal::EllipsoidFitOptions;
using ns_internal::EllipsoidUnion;
using ns_internal::NormalQuantile;
using ns_internal::Rng;

constexpr double kInf = std::numeric_limits<double>::infinity();

// Rejection sampling from bounding ellipsoids loses efficiency geometrically with dimension;
// above this many dimensions the sampler uses slice sampling once the prior itself is too
// inefficient.
constexpr int kMaxRejectionDim = 6;
constexpr int kProgressIterations = 100;
constexpr int64_t kProgressCalls = 20000;
// Importance nested sampling keeps every evaluated point; beyond this many it is dropped.
constexpr int64_t kMaxImportancePoints = 600000;

double LogAddExp(double a, double b) {
  if (a < b) std::swap(a, b);
  if (b == -kInf) return a;
  return a + std::log1p(std::exp(b - a));
}

enum class Mode { kCube, kEllipsoids, kSlice };

struct ThreadInfo {
  double birth_logl;  // alive for L > birth_logl ...
  bool root;          // ... or from the very start (drawn from the whole prior)
  int batch;
};

// Importance-sampling epoch: all proposals made with one fixed density.
struct Epoch {
  std::shared_ptr<const EllipsoidUnion> bound;  // null: the unit cube
  int64_t proposals = 0;
};

// A merged run, sorted: the order of the points by likelihood, which points end their thread,
// and the births of the threads not drawn from the whole prior.
struct RunView {
  std::vector<int> order;
  std::vector<char> is_end;
  std::vector<std::pair<double, int>> births;
  std::vector<int> roots;
  double max_logl = -kInf;
};

// Per-candidate bookkeeping of a parallel round, accounted in slot order afterwards.
struct SlotStats {
  int64_t calls = 0;
  bool saw_inf = false;  // the likelihood returned +inf (at inf_raw)
  bool ok = false;       // a slice chain that finished (not halted)
  Eigen::VectorXd inf_raw;
  absl::Status abandoned;  // an evaluation of this slot was abandoned (its poll said stop)
};

// Scratch of one worker thread of a parallel round.
struct WorkerBuffers {
  Eigen::VectorXd raw;
  std::vector<double> x, y, v, work;
};

class Engine {
 public:
  // `threads`: threads for the candidates of a round (batch_size > 1); never changes a result.
  Engine(const StoppableLogLikelihood& fn, const Eigen::VectorXd& mean, const Eigen::VectorXd& sd,
         const NestedSamplingOptions& options, const ProgressCallback& progress, int threads = 1)
      : fn_(fn),
        mean_(mean),
        sd_(sd),
        opt_(options),
        progress_(progress),
        d_(static_cast<int>(mean.size())),
        rng_(options.seed),
        raw_(mean.size()),
        work_(4 * mean.size() + 4),
        x_(mean.size()),
        y_(mean.size()),
        v_(mean.size()) {
    nlive_ = options.num_live > 0 ? options.num_live
                                  : (d_ <= kMaxRejectionDim ? 100 + 50 * d_ : 100 + 25 * d_);
    n_slice_ = std::max(5, 3 * d_);
    // A slice draw costs about 4 calls per step; rejection below this efficiency costs more.
    slice_efficiency_ = 1.0 / (4.0 * n_slice_);
    batch_ = options.batch_size;
    if (batch_ > 1) {
      const int workers = std::max(1, std::min(threads, batch_));
      // The thread that waits for a round runs tasks too, so workers - 1 pool threads suffice.
      if (workers > 1) pool_ = std::make_unique<ThreadPool>(workers - 1);
      workers_.resize(workers);
      for (WorkerBuffers& w : workers_) {
        w.raw.resize(d_);
        w.x.resize(d_);
        w.y.resize(d_);
        w.v.resize(d_);
        w.work.resize(4 * d_ + 4);
      }
      queue_u_.resize(static_cast<size_t>(batch_) * d_);
      queue_l_.resize(batch_);
      queue_epoch_.resize(batch_);
      slot_start_.resize(batch_);
      slot_seed_.resize(batch_);
      slot_stats_.resize(batch_);
    }
  }

  absl::StatusOr<NestedSamplingResult> Run();

 private:
  // ---- likelihood and limits
  double Evaluate(const double* u);
  // The +inf error at `raw`, and the call / time caps (stop_reason_).
  void SetInfError(const Eigen::VectorXd& raw);
  void CheckCaps();
  // Thread-safe call for parallel rounds: touches no engine state; `stats` counts it.
  double EvaluateIn(const double* u, Eigen::VectorXd& raw, SlotStats* stats) const;
  // Accounts slot_stats_[0, count) in slot order: calls, the first +inf, caps, progress.
  void AccountRound(int count);
  // Runs work(slot, worker) for every slot in [0, count) on the run's threads.
  template <typename Work>
  void ParallelFor(int count, Work&& work);
  // Evaluates the m points u[0, m d) (columns) in parallel into out[0, m), accounted.
  void EvaluateMany(const double* u, int m, double* out);
  bool Halted() const { return !stop_reason_.empty() || !error_.ok(); }
  void Report(const std::string& message);
  double Elapsed() const {
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
  }

  // ---- points and threads
  int NewThread(double birth, bool root, int batch) {
    threads_.push_back({birth, root, batch});
    return static_cast<int>(threads_.size()) - 1;
  }
  void AddPoint(const double* u, double logl, int thread) {
    pts_u_.insert(pts_u_.end(), u, u + d_);
    pts_l_.push_back(logl);
    pts_thread_.push_back(thread);
  }

  // ---- samplers
  void SetMode(Mode mode, std::shared_ptr<const EllipsoidUnion> bound);
  void Refit(const Eigen::MatrixXd& points, double log_x);
  void RecordImportance(const double* u, double logl, int epoch);
  // One proposal of the current bound (or the unit cube) into u, counted towards its epoch for
  // importance nested sampling; false when the bound's draw was rejected or fell outside the
  // cube (then draw again; `outside` counts those, and past 100,000 the run falls back to the
  // cube).
  bool Propose(double* u, int64_t* outside);
  // Draws u with L(u) > lstar; the slice sampler starts from a random column of pool[0, pool_n).
  bool DrawConstrained(double lstar, const Eigen::MatrixXd& pool, const std::vector<double>& pool_l,
                       int pool_n, double* u, double* logl);
  bool SliceSample(double lstar, const double* start, double start_l, double* u, double* logl);
  // One slice-sampling chain with its own random stream, scratch, likelihood and stop test.
  template <typename Eval, typename Halt>
  bool SliceWalk(double lstar, const double* start, double start_l, Rng& rng, double* x,
                 double* y, double* v, double* work, Eval&& eval, Halt&& halted, double* u,
                 double* logl) const;
  // batch_size > 1: the next candidate of the queue with L > lstar, proposing a new round of
  // batch_size candidates (FillQueue) whenever the queue is used up. See "Batches" above.
  bool NextReplacement(double lstar, const Eigen::MatrixXd& pool, const std::vector<double>& pool_l,
                       int pool_n, double* u, double* logl);
  bool FillQueue(double lstar, const Eigen::MatrixXd& pool, const std::vector<double>& pool_l,
                 int pool_n);

  // ---- runs
  absl::Status RunBatch(int batch, double logl_start, double log_x_start,
                        const Eigen::MatrixXd* seeds, const std::vector<double>* seeds_l,
                        double logl_end, bool baseline);
  absl::Status AddDynamicBatch(int batch, const RunView& view, const std::vector<double>& logw,
                               const std::vector<int>& nlive, double log_z);

  // ---- estimators
  RunView BuildView() const;
  // log Ẑ of the run in `view`, each thread counted mult[t] times (null: once). Optionally the
  // per-point log volume weights log w_i (summed over copies) and live-point counts n_i.
  double Sweep(const RunView& view, const std::vector<int>* mult, std::vector<double>* logw,
               std::vector<int>* nlive) const;
  double BootstrapError(const RunView& view, uint64_t salt) const;
  // Importance-nested-sampling estimate over all closed epochs (call between batches only).
  bool ImportanceEstimate(double* log_z, double* error);

  const StoppableLogLikelihood& fn_;
  // Set by a worker whose evaluation was abandoned: the round's other chains stop calling.
  mutable std::atomic<bool> abandoned_{false};
  const Eigen::VectorXd& mean_;
  const Eigen::VectorXd& sd_;
  const NestedSamplingOptions& opt_;
  const ProgressCallback& progress_;
  inline static const Progress kPoll = CancellationPoll();
  const int d_;
  int nlive_ = 0;
  int n_slice_ = 0;
  double slice_efficiency_ = 0.0;
  Rng rng_;
  std::chrono::steady_clock::time_point start_;

  int64_t calls_ = 0;
  int64_t calls_at_progress_ = 0;
  double fraction_ = 0.0;
  std::string stop_reason_;
  // The baseline's largest live likelihood and log prior volume at its last iteration: the
  // remaining-mass term of a partial run (NestedSamplingResult::log_evidence_truncation).
  double last_lmax_ = -kInf;
  double last_log_x_ = 0.0;
  absl::Status error_;
  Eigen::VectorXd raw_;
  std::vector<double> work_;
  std::vector<double> x_, y_, v_;

  // All dead points of all batches, in the order they died within their batch.
  std::vector<double> pts_u_;
  std::vector<double> pts_l_;
  std::vector<int> pts_thread_;
  std::vector<ThreadInfo> threads_;
  // Baseline run: points [0, baseline_points_) sorted by L; when each was drawn (as the number of
  // baseline deaths so far) and log X̂ after each death, to rebuild its live set at any level.
  int64_t baseline_points_ = 0;
  int64_t baseline_loop_points_ = 0;
  std::vector<int64_t> baseline_created_;
  std::vector<double> baseline_logx_;

  // Sampler state.
  Mode mode_ = Mode::kCube;
  std::shared_ptr<const EllipsoidUnion> bound_;
  int epoch_ = -1;
  int64_t epoch_evals_ = 0;
  int64_t epoch_accepts_ = 0;
  bool used_slice_ = false;
  bool used_ellipsoids_ = false;
  EllipsoidFitOptions fit_options_;

  // Importance nested sampling.
  bool ins_valid_ = true;
  std::vector<double> ins_u_;
  std::vector<double> ins_l_;
  std::vector<int> ins_epoch_;
  std::vector<Epoch> epochs_;
  // log G of the stored points over epochs [0, ins_done_epochs_) (points [0, ins_done_points_)).
  std::vector<double> ins_log_g_;
  int64_t ins_done_points_ = 0;
  int ins_done_epochs_ = 0;

  // Batches (batch_size > 1): the queue of evaluated candidates (u column-wise, L, the epoch
  // that proposed them), the next one to examine, and a round's slice starts, stream seeds,
  // per-slot accounting, worker scratch and pool.
  int batch_ = 1;
  std::vector<double> queue_u_;
  std::vector<double> queue_l_;
  std::vector<int> queue_epoch_;
  int queue_n_ = 0;
  int queue_pos_ = 0;
  // Set by RunBatch's main loop: the refit due before a new round is proposed.
  std::function<void()> before_round_;
  std::vector<int> slot_start_;
  std::vector<uint64_t> slot_seed_;
  std::vector<SlotStats> slot_stats_;
  std::vector<WorkerBuffers> workers_;
  std::unique_ptr<ThreadPool> pool_;
};

double Engine::Evaluate(const double* u) {
  for (int i = 0; i < d_; ++i) raw_[i] = mean_[i] + sd_[i] * NormalQuantile(u[i]);
  absl::StatusOr<double> value = fn_.fn(raw_);
  if (!value.ok()) {
    // Abandoned part-way: no value. The run halts and returns this status (Run returns error_
    // whenever it is set), so the -inf handed back never reaches a result.
    if (error_.ok()) error_ = value.status();
    return -kInf;
  }
  double l = *value;
  ++calls_;
  if (std::isnan(l)) l = -kInf;
  if (l == kInf) {
    SetInfError(raw_);
    l = -kInf;
  }
  CheckCaps();
  if (calls_ - calls_at_progress_ >= kProgressCalls) {
    Report("sampling");
  } else if (progress_ && error_.ok()) {
    // Every call asks whether to stop, so a cancelled job frees its worker one call later.
    if (absl::Status s = progress_(kPoll); !s.ok()) error_ = s;
  }
  return l;
}

void Engine::SetInfError(const Eigen::VectorXd& raw) {
  if (!error_.ok()) return;
  error_ = absl::InvalidArgumentError(absl::StrCat(
      "log_likelihood returned +inf at raw = [", absl::StrJoin(raw.data(), raw.data() + d_, ", "), "]"));
}

void Engine::CheckCaps() {
  if (!stop_reason_.empty()) return;
  if (calls_ >= opt_.max_likelihood_calls) {
    stop_reason_ = absl::StrCat("max_likelihood_calls (", opt_.max_likelihood_calls, ") reached");
  } else if (opt_.max_seconds > 0 && Elapsed() >= opt_.max_seconds) {
    stop_reason_ = absl::StrCat("max_seconds (", opt_.max_seconds, ") reached");
  }
}

double Engine::EvaluateIn(const double* u, Eigen::VectorXd& raw, SlotStats* stats) const {
  for (int i = 0; i < d_; ++i) raw[i] = mean_[i] + sd_[i] * NormalQuantile(u[i]);
  if (abandoned_.load() || !stats->abandoned.ok()) return -kInf;  // the round is being abandoned
  absl::StatusOr<double> value = fn_.fn(raw);
  if (!value.ok()) {
    stats->abandoned = value.status();  // AccountRound makes it the run's error
    abandoned_.store(true);
    return -kInf;
  }
  double l = *value;
  ++stats->calls;
  if (std::isnan(l)) l = -kInf;
  if (l == kInf) {
    if (!stats->saw_inf) {
      stats->saw_inf = true;
      stats->inf_raw = raw;
    }
    l = -kInf;
  }
  return l;
}

void Engine::AccountRound(int count) {
  // Slot order, so that the error reported and the call count do not depend on which thread
  // finished first. The caps are checked once per round: a round may overshoot
  // max_likelihood_calls by less than one round's calls. The likelihood is not polled for
  // cancellation inside a round (workers must not call the progress callback), only here.
  for (int s = 0; s < count; ++s) {
    calls_ += slot_stats_[s].calls;
    if (!slot_stats_[s].abandoned.ok() && error_.ok()) error_ = slot_stats_[s].abandoned;
    if (slot_stats_[s].saw_inf) SetInfError(slot_stats_[s].inf_raw);
  }
  CheckCaps();
  if (calls_ - calls_at_progress_ >= kProgressCalls) {
    Report("sampling");
  } else if (progress_ && error_.ok()) {
    if (absl::Status s = progress_(kPoll); !s.ok()) error_ = s;
  }
}

template <typename Work>
void Engine::ParallelFor(int count, Work&& work) {
  const int tasks = std::min(static_cast<int>(workers_.size()), count);
  if (tasks <= 1 || pool_ == nullptr) {
    for (int s = 0; s < count; ++s) work(s, 0);
    return;
  }
  // Slots are claimed dynamically (slice chains differ in length); worker t owns workers_[t].
  std::atomic<int> next{0};
  TaskGroup group(pool_.get());
  for (int t = 0; t < tasks; ++t) {
    group.Schedule([&, t] {
      for (int s = next.fetch_add(1); s < count; s = next.fetch_add(1)) work(s, t);
    });
  }
  group.Wait();
}

void Engine::EvaluateMany(const double* u, int m, double* out) {
  ParallelFor(m, [&](int k, int w) {
    slot_stats_[k] = SlotStats();
    out[k] = EvaluateIn(u + static_cast<size_t>(k) * d_, workers_[w].raw, &slot_stats_[k]);
  });
  AccountRound(m);
}

void Engine::Report(const std::string& message) {
  calls_at_progress_ = calls_;
  if (!progress_ || !error_.ok()) return;
  Progress p;
  p.stage = "nested_sampling";
  p.fraction = std::clamp(fraction_, 0.0, 1.0);
  p.message = message;
  absl::Status s = progress_(p);
  if (!s.ok()) error_ = s;
}

void Engine::SetMode(Mode mode, std::shared_ptr<const EllipsoidUnion> bound) {
  const bool new_epoch = mode != mode_ || mode == Mode::kEllipsoids || epoch_ < 0;
  mode_ = mode;
  bound_ = std::move(bound);
  epoch_evals_ = 0;
  epoch_accepts_ = 0;
  if (mode == Mode::kSlice) {
    used_slice_ = true;
    ins_valid_ = false;
    return;
  }
  if (mode == Mode::kEllipsoids) used_ellipsoids_ = true;
  if (new_epoch && ins_valid_) {
    epochs_.push_back({mode == Mode::kCube ? nullptr : bound_, 0});
    epoch_ = static_cast<int>(epochs_.size()) - 1;
  }
}

void Engine::Refit(const Eigen::MatrixXd& points, double log_x) {
  auto bound = std::make_shared<const EllipsoidUnion>(EllipsoidUnion::Fit(points, log_x, fit_options_));
  if (bound->empty()) {
    SetMode(Mode::kCube, nullptr);
    return;
  }
  Mode next;
  if (d_ > kMaxRejectionDim) {
    // The prior itself accepts a fraction ≈ X of draws: keep it until that is too low.
    next = (mode_ == Mode::kCube && std::exp(log_x) > slice_efficiency_) ? Mode::kCube : Mode::kSlice;
  } else if (mode_ == Mode::kSlice) {
    next = Mode::kSlice;
  } else if (bound->log_total_volume() >= 0.0) {
    next = Mode::kCube;  // the ellipsoids are bigger than the cube
  } else if (mode_ == Mode::kEllipsoids && epoch_evals_ >= 50 &&
             epoch_accepts_ < slice_efficiency_ * epoch_evals_) {
    next = Mode::kSlice;
  } else {
    next = Mode::kEllipsoids;
  }
  SetMode(next, std::move(bound));
}

void Engine::RecordImportance(const double* u, double logl, int epoch) {
  if (!ins_valid_) return;
  if (static_cast<int64_t>(ins_l_.size()) >= kMaxImportancePoints) {
    ins_valid_ = false;
    std::vector<double>().swap(ins_u_);
    std::vector<double>().swap(ins_l_);
    std::vector<int>().swap(ins_epoch_);
    return;
  }
  ins_u_.insert(ins_u_.end(), u, u + d_);
  ins_l_.push_back(logl);
  ins_epoch_.push_back(epoch);
}

bool Engine::Propose(double* u, int64_t* outside) {
  if (mode_ == Mode::kCube) {
    for (int i = 0; i < d_; ++i) u[i] = rng_.OpenUniform();
    if (ins_valid_) ++epochs_[epoch_].proposals;
    return true;
  }
  const bool kept = bound_->Sample(rng_, u, work_.data());
  if (ins_valid_) ++epochs_[epoch_].proposals;
  if (!kept) return false;
  bool inside = true;
  for (int i = 0; i < d_; ++i) inside = inside && u[i] > 0.0 && u[i] < 1.0;
  if (!inside) {
    if (++*outside > 100000) SetMode(Mode::kCube, nullptr);  // bound hopelessly off the cube
    return false;
  }
  return true;
}

bool Engine::DrawConstrained(double lstar, const Eigen::MatrixXd& pool,
                             const std::vector<double>& pool_l, int pool_n, double* u,
                             double* logl) {
  if (mode_ == Mode::kSlice) {
    if (pool_n <= 0) return false;
    // Start from a random live point: it is already a draw from the constrained prior.
    int k = static_cast<int>(rng_.Index(pool_n));
    for (int tries = 0; pool_l[k] <= lstar && tries < 4 * pool_n; ++tries) {
      k = static_cast<int>(rng_.Index(pool_n));
    }
    if (pool_l[k] <= lstar) return false;
    return SliceSample(lstar, pool.col(k).data(), pool_l[k], u, logl);
  }
  int64_t outside = 0;
  while (!Halted()) {
    if (!Propose(u, &outside)) continue;
    *logl = Evaluate(u);
    RecordImportance(u, *logl, epoch_);
    ++epoch_evals_;
    if (*logl > lstar) {
      ++epoch_accepts_;
      return true;
    }
  }
  return false;
}

bool Engine::SliceSample(double lstar, const double* start, double start_l, double* u,
                         double* logl) {
  return SliceWalk(lstar, start, start_l, rng_, x_.data(), y_.data(), v_.data(), work_.data(),
                   [this](const double* p) { return Evaluate(p); }, [this] { return Halted(); },
                   u, logl);
}

template <typename Eval, typename Halt>
bool Engine::SliceWalk(double lstar, const double* start, double start_l, Rng& rng, double* x,
                       double* y, double* v, double* work, Eval&& eval, Halt&& halted, double* u,
                       double* logl) const {
  // Hit-and-run slice sampling (Neal 2003) along random directions in the metric of the nearest
  // bounding ellipsoid (as in PolyChord and dynesty's "rslice"): the direction v = L n with n
  // uniform on the unit sphere, so t ∈ [-1, 1] spans the ellipsoid. Step out by the unit width,
  // then shrink. Each step leaves the uniform distribution on {L > lstar} invariant.
  std::copy(start, start + d_, x);
  double lx = start_l;
  const Ellipsoid& e = bound_->ellipsoids()[bound_->Nearest(x, work)];
  const double* L = e.chol().data();
  auto inside = [&](double t, double* ly) {
    for (int i = 0; i < d_; ++i) {
      y[i] = x[i] + t * v[i];
      if (!(y[i] > 0.0 && y[i] < 1.0)) return false;
    }
    *ly = eval(y);
    return *ly > lstar;
  };
  const double w = 1.0;
  for (int step = 0; step < n_slice_; ++step) {
    double norm2 = 0.0;
    for (int i = 0; i < d_; ++i) {
      work[i] = rng.Normal();
      norm2 += work[i] * work[i];
    }
    const double inv = 1.0 / std::sqrt(norm2);
    for (int i = 0; i < d_; ++i) {
      double s = 0.0;
      for (int j = 0; j <= i; ++j) s += L[i + j * d_] * work[j];
      v[i] = s * inv;
    }
    const double r = rng.Uniform();
    double lo = -r * w, hi = (1.0 - r) * w, ly;
    for (int k = 0; k < 100 && !halted() && inside(lo, &ly); ++k) lo -= w;
    for (int k = 0; k < 100 && !halted() && inside(hi, &ly); ++k) hi += w;
    if (halted()) return false;
    for (;;) {
      const double t = lo + rng.Uniform() * (hi - lo);
      if (inside(t, &ly)) {
        std::copy(y, y + d_, x);
        lx = ly;
        break;
      }
      if (halted()) return false;
      if (t < 0) lo = t; else hi = t;
      if (hi - lo < 1e-12) break;  // numerically stuck: stay
    }
  }
  std::copy(x, x + d_, u);
  *logl = lx;
  return true;
}

bool Engine::NextReplacement(double lstar, const Eigen::MatrixXd& pool,
                             const std::vector<double>& pool_l, int pool_n, double* u,
                             double* logl) {
  for (;;) {
    while (queue_pos_ < queue_n_) {
      const int k = queue_pos_++;
      // Examined at the current level: accepted iff above it, else discarded (see "Batches").
      if (queue_l_[k] > lstar) {
        std::copy(&queue_u_[static_cast<size_t>(k) * d_], &queue_u_[static_cast<size_t>(k + 1) * d_], u);
        *logl = queue_l_[k];
        if (mode_ != Mode::kSlice) ++epoch_accepts_;
        return true;
      }
    }
    if (before_round_) before_round_();
    if (!FillQueue(lstar, pool, pool_l, pool_n)) return false;
  }
}

bool Engine::FillQueue(double lstar, const Eigen::MatrixXd& pool, const std::vector<double>& pool_l,
                       int pool_n) {
  queue_n_ = queue_pos_ = 0;
  if (Halted()) return false;
  if (mode_ == Mode::kSlice) {
    if (pool_n <= 0) return false;
    // Starts and stream seeds from the run's stream, in slot order (as DrawConstrained picks its
    // start: a random live point above lstar).
    int m = 0;
    for (int s = 0; s < batch_; ++s) {
      int k = static_cast<int>(rng_.Index(pool_n));
      for (int tries = 0; pool_l[k] <= lstar && tries < 4 * pool_n; ++tries) {
        k = static_cast<int>(rng_.Index(pool_n));
      }
      const uint64_t seed = rng_.Bits();
      if (pool_l[k] <= lstar) continue;
      slot_start_[m] = k;
      slot_seed_[m] = seed;
      ++m;
    }
    if (m == 0) return false;
    // The call cap, shared out between the chains so that a round overshoots it by at most m.
    const int64_t budget = std::max<int64_t>(1, (opt_.max_likelihood_calls - calls_ + m - 1) / m);
    ParallelFor(m, [&](int s, int w) {
      WorkerBuffers& b = workers_[w];
      SlotStats& st = slot_stats_[s];
      st = SlotStats();
      Rng rng(slot_seed_[s]);
      auto eval = [&](const double* p) { return EvaluateIn(p, b.raw, &st); };
      auto halted = [&] {
        return st.saw_inf || st.calls >= budget || abandoned_.load() ||
               (opt_.max_seconds > 0 && Elapsed() >= opt_.max_seconds);
      };
      const int k = slot_start_[s];
      st.ok = SliceWalk(lstar, pool.col(k).data(), pool_l[k], rng, b.x.data(), b.y.data(),
                        b.v.data(), b.work.data(), eval, halted,
                        &queue_u_[static_cast<size_t>(s) * d_], &queue_l_[s]);
    });
    AccountRound(m);
    for (int s = 0; s < m; ++s) {  // keep the finished chains, in slot order
      if (!slot_stats_[s].ok) continue;
      if (s != queue_n_) {
        std::copy(&queue_u_[static_cast<size_t>(s) * d_], &queue_u_[static_cast<size_t>(s + 1) * d_],
                  &queue_u_[static_cast<size_t>(queue_n_) * d_]);
        queue_l_[queue_n_] = queue_l_[s];
      }
      ++queue_n_;
    }
    return queue_n_ > 0;
  }
  // Rejection sampling: B proposals of the current bound (or cube) from the run's stream, as
  // DrawConstrained makes them, then their likelihoods in parallel. Each proposal is a draw of
  // its epoch's density (recorded for importance nested sampling whatever its likelihood).
  int m = 0;
  int64_t outside = 0;
  while (m < batch_) {
    double* u = &queue_u_[static_cast<size_t>(m) * d_];
    if (!Propose(u, &outside)) continue;
    queue_epoch_[m] = epoch_;
    ++m;
  }
  EvaluateMany(queue_u_.data(), m, queue_l_.data());
  for (int k = 0; k < m; ++k) {
    RecordImportance(&queue_u_[static_cast<size_t>(k) * d_], queue_l_[k], queue_epoch_[k]);
  }
  epoch_evals_ += m;
  queue_n_ = m;
  return true;
}

absl::Status Engine::RunBatch(int batch, double logl_start, double log_x_start,
                              const Eigen::MatrixXd* seeds, const std::vector<double>* seeds_l,
                              double logl_end, bool baseline) {
  const int n0 = nlive_;
  Eigen::MatrixXd lu(d_, n0);
  std::vector<double> ll(n0);
  std::vector<int> lt(n0);
  std::vector<int64_t> lc(n0);
  int n = 0;
  std::vector<double> u(d_);
  double l;
  epoch_ = -1;  // every batch opens new epochs, so earlier ones are closed (their R_e final)
  queue_n_ = queue_pos_ = 0;  // candidates of an earlier batch were made under its bounds

  // Initial live points: uniform in the cube, or uniform above logl_start using the seeds (the
  // baseline's live set at that level) to build the bound.
  if (seeds == nullptr) {
    SetMode(Mode::kCube, nullptr);
    if (batch_ == 1) {
      for (int k = 0; k < n0 && !Halted(); ++k) {
        for (int i = 0; i < d_; ++i) lu(i, n) = rng_.OpenUniform();
        if (ins_valid_) ++epochs_[epoch_].proposals;
        ll[n] = Evaluate(lu.col(n).data());
        RecordImportance(lu.col(n).data(), ll[n], epoch_);
        lt[n] = NewThread(-kInf, /*root=*/true, batch);
        lc[n] = 0;
        ++n;
      }
    } else {
      // The same draws from the same stream (the likelihood uses no random numbers), evaluated
      // batch_size at a time in parallel.
      while (n < n0 && !Halted()) {
        const int m = std::min(batch_, n0 - n);
        for (int k = n; k < n + m; ++k) {
          for (int i = 0; i < d_; ++i) lu(i, k) = rng_.OpenUniform();
          if (ins_valid_) ++epochs_[epoch_].proposals;
        }
        EvaluateMany(lu.col(n).data(), m, &ll[n]);
        for (int k = n; k < n + m; ++k) {
          RecordImportance(lu.col(k).data(), ll[k], epoch_);
          lt[k] = NewThread(-kInf, /*root=*/true, batch);
          lc[k] = 0;
        }
        n += m;
      }
    }
  } else {
    SetMode(Mode::kCube, nullptr);
    Refit(*seeds, log_x_start);
    const int seeds_n = static_cast<int>(seeds->cols());
    for (int k = 0; k < n0 && !Halted(); ++k) {
      const bool drawn =
          batch_ == 1 ? DrawConstrained(logl_start, *seeds, *seeds_l, seeds_n, u.data(), &l)
                      : NextReplacement(logl_start, *seeds, *seeds_l, seeds_n, u.data(), &l);
      if (!drawn) break;
      lu.col(n) = Eigen::Map<Eigen::VectorXd>(u.data(), d_);
      ll[n] = l;
      lt[n] = NewThread(logl_start, /*root=*/false, batch);
      lc[n] = 0;
      ++n;
    }
  }

  double log_x = log_x_start;
  double log_z = -kInf;  // running estimate; only the baseline's stopping rule uses it
  int64_t since_refit = 0;
  const int64_t refit_interval = std::max(1, n0 / 10);
  int64_t local_iterations = 0;
  if (seeds == nullptr) since_refit = refit_interval - 1;  // first fit after one iteration
  std::vector<int> ties;
  std::vector<int> ended_threads;
  // With batches a due refit waits until the round in flight is used up and is made just before
  // the next round is proposed (a round's candidates all come from one bound; see "Batches").
  // Refitting only when a round happens to end with an iteration would almost never refit once
  // fewer than one candidate per iteration is accepted, and the stale bound would cost calls.
  if (batch_ > 1) {
    before_round_ = [&] {
      if (since_refit >= refit_interval && n > d_ + 1 && !Halted()) {
        Refit(lu.leftCols(n), log_x);
        since_refit = 0;
      }
    };
  }
  while (n > 0 && !Halted()) {
    double lmin = kInf, lmax = -kInf;
    for (int k = 0; k < n; ++k) {
      lmin = std::min(lmin, ll[k]);
      lmax = std::max(lmax, ll[k]);
    }
    if (baseline) {
      last_lmax_ = lmax;
      last_log_x_ = log_x;
      const double remaining = LogAddExp(log_z, lmax + log_x) - log_z;  // +inf while log_z = -inf
      if (remaining < opt_.dlogz) break;
      const double todo = std::log1p(std::max(0.0, remaining) / opt_.dlogz);
      fraction_ = static_cast<double>(local_iterations) / (local_iterations + n0 * todo + 1.0);
      if (opt_.dynamic) fraction_ *= 0.3;
    } else if (lmin >= logl_end) {
      break;
    }
    if (lmin == lmax) break;  // every live point ties: nothing can be sampled strictly above
    if (progress_ && local_iterations % kProgressIterations == 0) {
      Report(absl::StrFormat("batch %d, iteration %d, log Z ~ %.4f", batch, local_iterations, log_z));
      if (Halted()) break;
    }
    ties.clear();
    for (int k = 0; k < n; ++k) {
      if (ll[k] == lmin) ties.push_back(k);
    }
    // Kill the lowest point(s). Ties die together with n decreasing one by one, and their threads
    // end (replacements start new threads born at lmin).
    ended_threads.clear();
    for (int t = static_cast<int>(ties.size()) - 1; t >= 0; --t) {
      const int k = ties[t];
      if (baseline) {
        baseline_created_.push_back(lc[k]);
      }
      AddPoint(lu.col(k).data(), ll[k], lt[k]);
      log_z = LogAddExp(log_z, ll[k] + log_x - std::log(static_cast<double>(n)));
      log_x += std::log1p(-1.0 / n);
      if (baseline) baseline_logx_.push_back(log_x);
      ended_threads.push_back(lt[k]);
      --n;
      if (k != n) {
        lu.col(k) = lu.col(n);
        ll[k] = ll[n];
        lt[k] = lt[n];
        lc[k] = lc[n];
      }
      ++local_iterations;
    }
    const int64_t deaths = static_cast<int64_t>(baseline_created_.size());
    for (int r = 0; r < static_cast<int>(ties.size()); ++r) {
      const bool drawn = batch_ == 1 ? DrawConstrained(lmin, lu, ll, n, u.data(), &l)
                                     : NextReplacement(lmin, lu, ll, n, u.data(), &l);
      if (!drawn) break;
      lu.col(n) = Eigen::Map<Eigen::VectorXd>(u.data(), d_);
      ll[n] = l;
      lt[n] = ties.size() == 1 ? ended_threads[0] : NewThread(lmin, /*root=*/false, batch);
      lc[n] = deaths;
      ++n;
    }
    since_refit += static_cast<int64_t>(ties.size());
    if (batch_ == 1 && since_refit >= refit_interval && n > d_ + 1 && !Halted()) {
      Refit(lu.leftCols(n), log_x);
      since_refit = 0;
    }
  }
  before_round_ = nullptr;
  // The remaining live points end their threads, in increasing order of L.
  if (baseline) baseline_loop_points_ = static_cast<int64_t>(pts_l_.size());
  std::vector<int> rest(n);
  std::iota(rest.begin(), rest.end(), 0);
  std::stable_sort(rest.begin(), rest.end(), [&](int a, int b) { return ll[a] < ll[b]; });
  for (int k : rest) {
    if (baseline) {
      baseline_created_.push_back(lc[k]);
      log_x += std::log1p(-1.0 / n);
      baseline_logx_.push_back(log_x);
      --n;
    }
    AddPoint(lu.col(k).data(), ll[k], lt[k]);
  }
  if (baseline) baseline_points_ = static_cast<int64_t>(pts_l_.size());
  return error_;
}

RunView Engine::BuildView() const {
  RunView view;
  const int m = static_cast<int>(pts_l_.size());
  view.order.resize(m);
  std::iota(view.order.begin(), view.order.end(), 0);
  std::stable_sort(view.order.begin(), view.order.end(),
                   [&](int a, int b) { return pts_l_[a] < pts_l_[b]; });
  // A thread's points are recorded in increasing L, so its last recorded point is its end.
  std::vector<int> last(threads_.size(), -1);
  for (int p = 0; p < m; ++p) last[pts_thread_[p]] = p;
  view.is_end.assign(m, 0);
  for (int p : last) {
    if (p >= 0) view.is_end[p] = 1;
  }
  for (int t = 0; t < static_cast<int>(threads_.size()); ++t) {
    if (threads_[t].root) {
      view.roots.push_back(t);
    } else {
      view.births.emplace_back(threads_[t].birth_logl, t);
    }
  }
  std::stable_sort(view.births.begin(), view.births.end(),
                   [](const auto& a, const auto& b) { return a.first < b.first; });
  for (double l : pts_l_) view.max_logl = std::max(view.max_logl, l);
  return view;
}

double Engine::Sweep(const RunView& view, const std::vector<int>* mult, std::vector<double>* logw,
                     std::vector<int>* nlive) const {
  const int m = static_cast<int>(view.order.size());
  if (logw) logw->assign(m, -kInf);
  if (nlive) nlive->assign(m, 0);
  auto count = [&](int t) { return mult ? (*mult)[t] : 1; };
  int64_t alive = 0;
  for (int t : view.roots) alive += count(t);
  const double shift = view.max_logl;
  double log_x = 0.0, z = 0.0;
  size_t b = 0;
  for (int pos = 0; pos < m; ++pos) {
    const int p = view.order[pos];
    const double l = pts_l_[p];
    while (b < view.births.size() && view.births[b].first < l) alive += count(view.births[b++].second);
    const int copies = count(pts_thread_[p]);
    if (copies == 0) continue;
    double lw_sum = -kInf;
    for (int c = 0; c < copies; ++c) {
      const int64_t nl = std::max<int64_t>(1, view.is_end[p] ? alive - c : alive);
      const double lw = log_x - std::log(static_cast<double>(nl));
      log_x = nl == 1 ? -kInf : log_x + std::log1p(-1.0 / static_cast<double>(nl));
      if (l > -kInf) z += std::exp(l - shift + lw);
      if (logw) lw_sum = LogAddExp(lw_sum, lw);
      if (nlive && c == 0) (*nlive)[pos] = static_cast<int>(nl);
    }
    if (view.is_end[p]) alive -= copies;
    if (logw) (*logw)[pos] = lw_sum;
  }
  return z > 0.0 ? shift + std::log(z) : -kInf;
}

double Engine::BootstrapError(const RunView& view, uint64_t salt) const {
  const int reps = opt_.num_bootstrap;
  if (reps < 2) return 0.0;
  // Resample threads with replacement within each batch (Higson et al. 2018): a batch's threads
  // are exchangeable, and keeping the counts per batch keeps the run's structure.
  std::vector<std::vector<int>> by_batch;
  for (int t = 0; t < static_cast<int>(threads_.size()); ++t) {
    const int b = threads_[t].batch;
    if (b >= static_cast<int>(by_batch.size())) by_batch.resize(b + 1);
    by_batch[b].push_back(t);
  }
  Rng rng(opt_.seed ^ (0x5851f42d4c957f2dULL * (salt + 1)));
  std::vector<int> mult(threads_.size());
  double sum = 0.0, sum2 = 0.0;
  int good = 0;
  for (int r = 0; r < reps; ++r) {
    std::fill(mult.begin(), mult.end(), 0);
    for (const std::vector<int>& group : by_batch) {
      const int g = static_cast<int>(group.size());
      for (int k = 0; k < g; ++k) ++mult[group[rng.Index(g)]];
    }
    const double lz = Sweep(view, &mult, nullptr, nullptr);
    if (!std::isfinite(lz)) continue;
    sum += lz;
    sum2 += lz * lz;
    ++good;
  }
  if (good < 2) return kInf;
  const double mean = sum / good;
  return std::sqrt(std::max(0.0, (sum2 - good * mean * mean) / (good - 1)));
}

bool Engine::ImportanceEstimate(double* log_z, double* error) {
  if (!ins_valid_ || ins_l_.empty()) return false;
  const int num_epochs = static_cast<int>(epochs_.size());
  std::vector<double> log_density(num_epochs);  // log(R_e / ΣV_e)
  for (int e = 0; e < num_epochs; ++e) {
    log_density[e] = epochs_[e].proposals == 0
                         ? -kInf
                         : std::log(static_cast<double>(epochs_[e].proposals)) -
                               (epochs_[e].bound ? epochs_[e].bound->log_total_volume() : 0.0);
  }
  // G is accumulated incrementally (epochs are closed once their batch is over, so their R_e is
  // final): points seen before get the new epochs, new points all epochs. Within one update G is
  // summed in linear space relative to the largest density.
  std::vector<double> work(2 * d_ + 2), density(num_epochs);
  auto accumulate = [&](int64_t k_begin, int64_t k_end, int e_begin) {
    double top = -kInf;
    for (int e = e_begin; e < num_epochs; ++e) top = std::max(top, log_density[e]);
    if (top == -kInf) return;
    for (int e = e_begin; e < num_epochs; ++e) density[e] = std::exp(log_density[e] - top);
    for (int64_t k = k_begin; k < k_end; ++k) {
      const double* x = &ins_u_[k * d_];
      double g = 0.0;
      for (int e = e_begin; e < num_epochs; ++e) {
        if (density[e] == 0.0) continue;
        // A point always lies in the region of its own epoch (tested explicitly so that rounding
        // on an ellipsoid's surface cannot drop it).
        if (!epochs_[e].bound || e == ins_epoch_[k] || epochs_[e].bound->Contains(x, work.data())) {
          g += density[e];
        }
      }
      if (g > 0.0) ins_log_g_[k] = LogAddExp(ins_log_g_[k], top + std::log(g));
    }
  };
  const int64_t m = static_cast<int64_t>(ins_l_.size());
  ins_log_g_.resize(m, -kInf);
  if (ins_done_epochs_ < num_epochs) accumulate(0, ins_done_points_, ins_done_epochs_);
  accumulate(ins_done_points_, m, 0);
  ins_done_points_ = m;
  ins_done_epochs_ = num_epochs;

  double max_term = -kInf;
  for (int64_t k = 0; k < m; ++k) {
    if (ins_l_[k] > -kInf) max_term = std::max(max_term, ins_l_[k] - ins_log_g_[k]);
  }
  if (max_term == -kInf || !std::isfinite(max_term)) return false;
  double s1 = 0.0;
  for (int64_t k = 0; k < m; ++k) {
    if (ins_l_[k] == -kInf) continue;
    s1 += std::exp(ins_l_[k] - ins_log_g_[k] - max_term);
  }
  *log_z = max_term + std::log(s1);
  // Ẑ = Σ_all w_j with w = L / G on kept points and 0 elsewhere (G = Σ_e R_e/V_e 1[x ∈ bound_e]).
  // The draws are stratified, not R independent draws from the mixture G: epoch e draws exactly
  // R_e points uniformly from its own bound. So Var Ẑ = Σ_e R_e Var_e(w), estimated by
  // Σ_e (Σ_{j∈e} w_j² − (Σ_{j∈e} w_j)² / R_e). The formula for independent draws from G,
  // Σ w² − Ẑ²/R, which this replaced, adds the spread of the epochs' means and overstated the
  // error 1.75-fold on the paper's example (93 % of 30 seeds inside ±1σ; bench/RESULTS.md,
  // "Issue 27", bench/evidence_coverage.py).
  std::vector<double> epoch_sum(num_epochs, 0.0), epoch_squares(num_epochs, 0.0);
  for (int64_t k = 0; k < m; ++k) {
    if (ins_l_[k] == -kInf) continue;
    const double e = std::exp(ins_l_[k] - ins_log_g_[k] - max_term);
    epoch_sum[ins_epoch_[k]] += e;
    epoch_squares[ins_epoch_[k]] += e * e;
  }
  double variance = 0.0;
  for (int e = 0; e < num_epochs; ++e) {
    if (epochs_[e].proposals == 0) continue;
    variance += epoch_squares[e] -
                epoch_sum[e] * epoch_sum[e] / static_cast<double>(epochs_[e].proposals);
  }
  const double rel_var = variance / (s1 * s1);
  *error = std::sqrt(std::max(rel_var, 0.0));
  return std::isfinite(*log_z);
}

absl::Status Engine::AddDynamicBatch(int batch, const RunView& view, const std::vector<double>& logw,
                                     const std::vector<int>& nlive, double log_z) {
  // Importance of each dead point (Higson et al. 2019): posterior mass p_i, and the evidence
  // importance Z_{>i} / n_i (evidence still ahead, shared among the live points there). The new
  // batch spans the likelihood range where the mixed importance exceeds 90% of its maximum.
  const int m = static_cast<int>(view.order.size());
  std::vector<double> post(m), evid(m);
  double ahead = 0.0, max_post = 0.0, max_evid = 0.0;
  for (int pos = m - 1; pos >= 0; --pos) {
    const double l = pts_l_[view.order[pos]];
    post[pos] = l == -kInf ? 0.0 : std::exp(l + logw[pos] - log_z);
    evid[pos] = ahead / std::max(1, nlive[pos]);
    ahead += post[pos];
    max_post = std::max(max_post, post[pos]);
    max_evid = std::max(max_evid, evid[pos]);
  }
  // Automatic weight: importance nested sampling gains most from proposals where the posterior
  // is (its variance is smallest when the proposal density follows the posterior), the classic
  // estimate from live points where evidence remains (Higson et al. 2019, G = 1).
  const double wp = opt_.dynamic_posterior_weight >= 0 ? opt_.dynamic_posterior_weight
                                                       : (ins_valid_ ? 1.0 : 0.25);
  double max_imp = 0.0;
  std::vector<double> imp(m);
  for (int pos = 0; pos < m; ++pos) {
    imp[pos] = (max_post > 0 ? wp * post[pos] / max_post : 0.0) +
               (max_evid > 0 ? (1.0 - wp) * evid[pos] / max_evid : 0.0);
    max_imp = std::max(max_imp, imp[pos]);
  }
  int first = m, last = -1;
  for (int pos = 0; pos < m; ++pos) {
    if (imp[pos] >= 0.9 * max_imp) {
      first = std::min(first, pos);
      last = pos;
    }
  }
  if (last < 0) return absl::OkStatus();
  // Start one point below the range, at a level where the baseline still had all its live points
  // (its live set there seeds the bound), and end one point above it.
  const double l_first = first > 0 ? pts_l_[view.order[first - 1]] : -kInf;
  int64_t c = std::upper_bound(pts_l_.begin(), pts_l_.begin() + baseline_points_, l_first) -
              pts_l_.begin();
  c = std::min(c, baseline_loop_points_);
  const double logl_end = pts_l_[view.order[std::min(last + 1, m - 1)]];
  if (c == 0) return RunBatch(batch, -kInf, 0.0, nullptr, nullptr, logl_end, false);
  const double logl_start = pts_l_[c - 1];
  std::vector<int> seed_idx;
  for (int64_t j = c; j < baseline_points_; ++j) {
    if (baseline_created_[j] <= c && pts_l_[j] > logl_start) seed_idx.push_back(static_cast<int>(j));
  }
  if (static_cast<int>(seed_idx.size()) < d_ + 2) {
    return RunBatch(batch, -kInf, 0.0, nullptr, nullptr, logl_end, false);
  }
  Eigen::MatrixXd seeds(d_, seed_idx.size());
  std::vector<double> seeds_l(seed_idx.size());
  for (size_t k = 0; k < seed_idx.size(); ++k) {
    seeds.col(k) = Eigen::Map<const Eigen::VectorXd>(&pts_u_[seed_idx[k] * d_], d_);
    seeds_l[k] = pts_l_[seed_idx[k]];
  }
  return RunBatch(batch, logl_start, baseline_logx_[c - 1], &seeds, &seeds_l, logl_end, false);
}

absl::StatusOr<NestedSamplingResult> Engine::Run() {
  start_ = std::chrono::steady_clock::now();
  absl::Status s = RunBatch(0, -kInf, 0.0, nullptr, nullptr, kInf, /*baseline=*/true);
  if (!s.ok()) return s;
  int batches = 0;
  RunView view = BuildView();
  std::vector<double> logw;
  std::vector<int> nlive;
  double log_z = Sweep(view, nullptr, &logw, &nlive);
  if (log_z == -kInf && !Halted()) {
    return absl::FailedPreconditionError(
        "log_likelihood is -inf (or NaN) at every point nested sampling tried");
  }
  double boot = -1.0;
  if (opt_.dynamic) {
    for (;;) {
      // The error of the estimate that will be reported: importance-sampling error while
      // importance nested sampling is available, else the bootstrap error.
      double ins_log_z = 0.0, err = 0.0;
      boot = -1.0;
      if (!ImportanceEstimate(&ins_log_z, &err)) err = boot = BootstrapError(view, batches);
      fraction_ = 0.3 + 0.7 * std::min(1.0, std::pow(opt_.dynamic_target_error / err, 2));
      Report(absl::StrFormat("dynamic: %d batches, log Z ~ %.4f +- %.4f", batches, log_z, err));
      if (!error_.ok()) return error_;
      if (err <= opt_.dynamic_target_error || Halted()) break;
      ++batches;
      s = AddDynamicBatch(batches, view, logw, nlive, log_z);
      if (!s.ok()) return s;
      view = BuildView();
      log_z = Sweep(view, nullptr, &logw, &nlive);
    }
  }
  if (!error_.ok()) return error_;
  if (boot < 0) boot = BootstrapError(view, 0);

  NestedSamplingResult r;
  const int m = static_cast<int>(view.order.size());
  // Posterior weights, information, ESS, and sqrt(H / n) with n the posterior-weighted harmonic
  // mean of the live-point counts (= n_live for a static run).
  double info = 0.0, sum_p2 = 0.0;
  Eigen::VectorXd log_post(m);
  for (int pos = 0; pos < m; ++pos) {
    const double l = pts_l_[view.order[pos]];
    log_post[pos] = l == -kInf ? -kInf : l + logw[pos] - log_z;
    if (log_post[pos] == -kInf) continue;
    const double p = std::exp(log_post[pos]);
    info += p * (l - log_z);
    sum_p2 += p * p;
  }
  info = std::max(info, 0.0);
  // sqrt(H / n_live) (Skilling 2006). With a varying number of live points (dynamic runs) n_live
  // is their harmonic mean over the compression y = -log X weighted by F(y)², F = fraction of the
  // evidence still ahead: the shrinkage at step j perturbs log Z by F_j δlog t_j with
  // Var(log t_j) = 1/n_j², and step j spans Δy = 1/n_j.
  double ahead = 1.0, num = 0.0, den = 0.0;
  for (int pos = 0; pos < m; ++pos) {
    if (log_post[pos] > -kInf) ahead -= std::exp(log_post[pos]);
    const double f2 = std::max(ahead, 0.0) * std::max(ahead, 0.0);
    num += f2 / nlive[pos];
    den += f2 / (static_cast<double>(nlive[pos]) * nlive[pos]);
  }
  const double n_eff = den > 0 ? num / den : nlive_;
  r.log_evidence_nested = log_z;
  r.log_evidence_nested_error = std::sqrt(info / n_eff);
  r.log_evidence_error_bootstrap = boot;
  r.information = info;
  r.effective_sample_size = sum_p2 > 0 ? 1.0 / sum_p2 : 0.0;
  double ins_log_z = 0.0, ins_error = 0.0;
  if (ImportanceEstimate(&ins_log_z, &ins_error)) {
    r.log_evidence = ins_log_z;
    r.log_evidence_error = ins_error;
    r.log_evidence_estimator = "importance";
  } else {
    r.log_evidence = log_z;
    r.log_evidence_error = r.log_evidence_nested_error;
    r.log_evidence_estimator = "nested";
  }
  r.likelihood_calls = calls_;
  r.iterations = m;
  r.num_live = nlive_;
  r.num_batches = batches;
  r.partial = !stop_reason_.empty();
  r.partial_reason = stop_reason_;
  if (r.partial) {
    // The mass not yet integrated: at most L_max times the volume left when the run stopped
    // (before the baseline loop ever ran: the whole prior, X = 1). Relative to the reported
    // estimate, which already holds the final live points at their mean likelihood.
    double lmax = last_lmax_, log_x = last_log_x_;
    if (lmax == -kInf) {
      log_x = 0.0;
      for (double l : pts_l_) lmax = std::max(lmax, l);
    }
    r.log_evidence_truncation =
        r.log_evidence == -kInf ? kInf : LogAddExp(r.log_evidence, lmax + log_x) - r.log_evidence;
    r.log_evidence_error = std::hypot(r.log_evidence_error, r.log_evidence_truncation);
  }
  if (opt_.return_samples) {
    r.samples.resize(m, d_);
    r.log_weights = log_post;
    r.log_likelihoods.resize(m);
    for (int pos = 0; pos < m; ++pos) {
      const int p = view.order[pos];
      for (int i = 0; i < d_; ++i) r.samples(pos, i) = mean_[i] + sd_[i] * NormalQuantile(pts_u_[p * d_ + i]);
      r.log_likelihoods[pos] = pts_l_[p];
    }
  }
  r.seconds = Elapsed();
  return r;
}

}  // namespace

namespace {
NestedSamplingResult::Run RunSummary(const NestedSamplingResult& r, uint64_t seed) {
  NestedSamplingResult::Run run;
  run.seed = seed;
  run.log_evidence = r.log_evidence;
  run.log_evidence_error = r.log_evidence_error;
  run.likelihood_calls = r.likelihood_calls;
  run.iterations = r.iterations;
  run.partial = r.partial;
  run.seconds = r.seconds;
  return run;
}
}  // namespace

absl::Status NestedSamplingOptions::Validate() const {
  if (num_live < 0) return absl::InvalidArgumentError("options.num_live must be >= 0 (0 = automatic)");
  if (!(dlogz > 0) || !std::isfinite(dlogz)) return absl::InvalidArgumentError("options.dlogz must be finite and > 0");
  if (!(dynamic_target_error > 0) || !std::isfinite(dynamic_target_error)) {
    return absl::InvalidArgumentError("options.dynamic_target_error must be finite and > 0");
  }
  if (!(dynamic_posterior_weight == -1 || (dynamic_posterior_weight >= 0 && dynamic_posterior_weight <= 1))) {
    return absl::InvalidArgumentError("options.dynamic_posterior_weight must be -1 (automatic) or in [0, 1]");
  }
  if (max_likelihood_calls <= 0) return absl::InvalidArgumentError("options.max_likelihood_calls must be > 0");
  if (!(max_seconds >= 0) || !std::isfinite(max_seconds)) {
    return absl::InvalidArgumentError("options.max_seconds must be finite and >= 0 (0 = no cap)");
  }
  if (num_bootstrap < 0) return absl::InvalidArgumentError("options.num_bootstrap must be >= 0");
  if (dynamic && num_bootstrap < 2) {
    return absl::InvalidArgumentError("options.num_bootstrap must be >= 2 for dynamic nested sampling");
  }
  if (num_runs < 1 || num_runs > 256) {
    return absl::InvalidArgumentError("options.num_runs must be in [1, 256]");
  }
  if (batch_size < 1 || batch_size > 1024) {
    return absl::InvalidArgumentError("options.batch_size must be in [1, 1024]");
  }
  if (threads < 1 || threads > 1024) {
    return absl::InvalidArgumentError("options.threads must be in [1, 1024]");
  }
  return absl::OkStatus();
}

std::string NestedSamplingResult::Summary() const {
  std::string s = absl::StrFormat(
      "log Z = %.4f ± %.4f (%s; classic %.4f ± %.4f, its bootstrap ± %.4f), H = %.3f nats, "
      "%d likelihood calls, %d dead points, ESS %.0f, %d live points",
      log_evidence, log_evidence_error, log_evidence_estimator, log_evidence_nested,
      log_evidence_nested_error, log_evidence_error_bootstrap, information, likelihood_calls,
      iterations, effective_sample_size, num_live);
  if (num_batches > 0) absl::StrAppend(&s, absl::StrFormat(", %d dynamic batches", num_batches));
  if (runs.size() > 1) {
    absl::StrAppend(&s, absl::StrFormat(", %d runs merged (spread error ± %.4f)",
                                        static_cast<int>(runs.size()),
                                        log_evidence_error_spread));
  }
  absl::StrAppend(&s, absl::StrFormat(", %.3f s", seconds));
  if (partial) {
    absl::StrAppend(&s, absl::StrFormat(" [PARTIAL: %s; the error includes the remaining-mass "
                                        "term %.4f]",
                                        partial_reason, log_evidence_truncation));
  }
  return s;
}

absl::StatusOr<NestedSamplingResult> RunNestedSampling(const LogLikelihoodFn& log_likelihood,
                                                       const Eigen::VectorXd& prior_mean,
                                                       const Eigen::VectorXd& prior_sd,
                                                       const NestedSamplingOptions& options,
                                                       const ProgressCallback& progress) {
  if (!log_likelihood) return absl::InvalidArgumentError("log_likelihood must be set");
  const StoppableLogLikelihood never_stops{
      [&log_likelihood](const Eigen::VectorXd& raw) -> absl::StatusOr<double> {
        return log_likelihood(raw);
      }};
  return RunNestedSampling(never_stops, prior_mean, prior_sd, options, progress);
}

absl::StatusOr<NestedSamplingResult> RunNestedSampling(const StoppableLogLikelihood& log_likelihood,
                                                       const Eigen::VectorXd& prior_mean,
                                                       const Eigen::VectorXd& prior_sd,
                                                       const NestedSamplingOptions& options,
                                                       const ProgressCallback& progress) {
  if (!log_likelihood.fn) return absl::InvalidArgumentError("log_likelihood must be set");
  if (prior_mean.size() == 0) return absl::InvalidArgumentError("prior_mean must not be empty");
  if (prior_sd.size() != prior_mean.size()) {
    return absl::InvalidArgumentError(absl::StrCat("prior_sd has ", prior_sd.size(),
                                                   " entries but prior_mean has ", prior_mean.size()));
  }
  for (int i = 0; i < prior_mean.size(); ++i) {
    if (!std::isfinite(prior_mean[i])) {
      return absl::InvalidArgumentError(absl::StrCat("prior_mean[", i, "] is not finite"));
    }
    if (!std::isfinite(prior_sd[i]) || !(prior_sd[i] > 0)) {
      return absl::InvalidArgumentError(absl::StrCat("prior_sd[", i, "] must be finite and > 0"));
    }
  }
  absl::Status s = options.Validate();
  if (!s.ok()) return s;
  if (options.num_live > 0 && options.num_live < prior_mean.size() + 2) {
    return absl::InvalidArgumentError(absl::StrCat("options.num_live must be 0 or >= u + 2 = ",
                                                   prior_mean.size() + 2));
  }
  if (options.num_runs == 1) {
    Engine engine(log_likelihood, prior_mean, prior_sd, options, progress, options.threads);
    absl::StatusOr<NestedSamplingResult> run = engine.Run();
    if (run.ok()) run->runs = {RunSummary(*run, options.seed)};
    return run;
  }
  // Several runs on a pool: each reports its own fraction; the caller sees their mean.
  const auto start = std::chrono::steady_clock::now();
  const int k = options.num_runs;
  std::vector<absl::StatusOr<NestedSamplingResult>> results(k, absl::UnknownError("not run"));
  std::vector<double> fractions(k, 0.0);
  std::mutex progress_mutex;
  absl::Status stopped;
  std::unique_ptr<ThreadPool> pool;
  const int outer = std::min(options.threads, k);
  if (outer > 1) pool = std::make_unique<ThreadPool>(outer);
  // Threads left over by the runs go to each run's candidate rounds (batch_size > 1).
  const int inner = std::max(1, options.threads / outer);
  TaskGroup group(pool.get());
  for (int run = 0; run < k; ++run) {
    group.Schedule([&, run] {
      NestedSamplingOptions one = options;
      one.num_runs = 1;
      one.seed = NestedSamplingRunSeed(options.seed, run);
      const ProgressCallback run_progress = [&, run](const Progress& p) -> absl::Status {
        std::lock_guard<std::mutex> lock(progress_mutex);
        if (!stopped.ok()) return stopped;
        if (!progress) return absl::OkStatus();
        Progress combined = p;
        if (!p.poll_only) {
          fractions[run] = std::max(fractions[run], p.fraction);
          combined.fraction = std::accumulate(fractions.begin(), fractions.end(), 0.0) / k;
          combined.message = absl::StrCat("run ", run + 1, "/", k, ": ", p.message);
        }
        stopped = progress(combined);
        return stopped;
      };
      Engine engine(log_likelihood, prior_mean, prior_sd, one, run_progress, inner);
      results[run] = engine.Run();
      if (results[run].ok()) results[run]->runs = {RunSummary(*results[run], one.seed)};
    });
  }
  group.Wait();
  std::vector<NestedSamplingResult> runs;
  for (absl::StatusOr<NestedSamplingResult>& r : results) {
    if (!r.ok()) return r.status();
    runs.push_back(*std::move(r));
  }
  absl::StatusOr<NestedSamplingResult> merged = MergeNestedSamplingRuns(std::move(runs));
  if (merged.ok()) {
    merged->seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
  }
  return merged;
}

uint64_t NestedSamplingRunSeed(uint64_t seed, int run) {
  if (run == 0) return seed;
  // SplitMix64 of (seed, run): decorrelated streams for the runs.
  uint64_t z = seed + 0x9E3779B97F4A7C15ull * static_cast<uint64_t>(run + 1);
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

absl::StatusOr<NestedSamplingResult> MergeNestedSamplingRuns(
    std::vector<NestedSamplingResult> runs) {
  if (runs.empty()) return absl::InvalidArgumentError("runs: need at least one run to merge");
  if (runs.size() == 1) return std::move(runs.front());
  // A fixed order (by seed, then estimate), so that who ran what and in which order is moot.
  auto key = [](const NestedSamplingResult& r) {
    return std::make_pair(r.runs.empty() ? 0 : r.runs.front().seed, r.log_evidence);
  };
  std::sort(runs.begin(), runs.end(),
            [&](const NestedSamplingResult& a, const NestedSamplingResult& b) {
              return key(a) < key(b);
            });
  const int k = static_cast<int>(runs.size());
  // log of the mean of exp(values), and the propagated error Σ_k (Z_k / ΣZ)² σ_k².
  auto merge = [&](auto value, auto error, double* merged_error) {
    double top = -kInf;
    for (const NestedSamplingResult& r : runs) top = std::max(top, value(r));
    double sum = 0.0;
    for (const NestedSamplingResult& r : runs) sum += std::exp(value(r) - top);
    double variance = 0.0;
    for (const NestedSamplingResult& r : runs) {
      const double share = std::exp(value(r) - top) / sum;
      variance += share * share * error(r) * error(r);
    }
    *merged_error = std::sqrt(variance);
    return top + std::log(sum / k);
  };
  NestedSamplingResult m;
  // A partial run's error holds its remaining-mass term t_k in quadrature: the statistical part
  // merges as independent errors, the truncations as masses (they are biases of one sign, which
  // averaging does not shrink): t = log(Σ Z_k e^{t_k}) − log Σ Z_k.
  auto statistical = [](const NestedSamplingResult& r) {
    return std::sqrt(std::max(0.0, r.log_evidence_error * r.log_evidence_error -
                                       r.log_evidence_truncation * r.log_evidence_truncation));
  };
  m.log_evidence = merge([](const NestedSamplingResult& r) { return r.log_evidence; },
                         statistical, &m.log_evidence_error);
  {
    double top = -kInf;
    for (const NestedSamplingResult& r : runs) top = std::max(top, r.log_evidence);
    double with = 0.0, without = 0.0;
    for (const NestedSamplingResult& r : runs) {
      without += std::exp(r.log_evidence - top);
      with += std::exp(r.log_evidence - top + r.log_evidence_truncation);
    }
    m.log_evidence_truncation = std::log(with) - std::log(without);
    if (m.log_evidence_truncation > 0) {
      m.log_evidence_error = std::hypot(m.log_evidence_error, m.log_evidence_truncation);
    }
  }
  m.log_evidence_nested =
      merge([](const NestedSamplingResult& r) { return r.log_evidence_nested; },
            [](const NestedSamplingResult& r) { return r.log_evidence_nested_error; },
            &m.log_evidence_nested_error);
  merge([](const NestedSamplingResult& r) { return r.log_evidence; },
        [](const NestedSamplingResult& r) { return r.log_evidence_error_bootstrap; },
        &m.log_evidence_error_bootstrap);
  m.log_evidence_estimator = runs.front().log_evidence_estimator;
  double mean_log_z = 0.0, spread = 0.0;
  for (const NestedSamplingResult& r : runs) mean_log_z += r.log_evidence / k;
  for (const NestedSamplingResult& r : runs) {
    spread += (r.log_evidence - mean_log_z) * (r.log_evidence - mean_log_z) / (k - 1);
    if (r.log_evidence_estimator != m.log_evidence_estimator) m.log_evidence_estimator = "mixed";
    m.information += r.information / k;
    m.likelihood_calls += r.likelihood_calls;
    m.iterations += r.iterations;
    m.effective_sample_size += r.effective_sample_size;
    m.num_live = std::max(m.num_live, r.num_live);
    m.num_batches += r.num_batches;
    m.seconds = std::max(m.seconds, r.seconds);
    if (r.partial) {
      m.partial = true;
      if (!m.partial_reason.empty()) absl::StrAppend(&m.partial_reason, "; ");
      absl::StrAppend(&m.partial_reason, "run seed ", r.runs.empty() ? 0 : r.runs.front().seed,
                      ": ", r.partial_reason);
    }
    m.runs.insert(m.runs.end(), r.runs.begin(), r.runs.end());
  }
  m.log_evidence_error_spread = std::sqrt(spread / k);
  // Pooled samples: run k's posterior weights scaled by its share Z_k / ΣZ.
  int64_t rows = 0;
  for (const NestedSamplingResult& r : runs) rows += r.samples.rows();
  if (rows > 0) {
    const int d = static_cast<int>(runs.front().samples.cols());
    m.samples.resize(rows, d);
    m.log_weights.resize(rows);
    m.log_likelihoods.resize(rows);
    double top = -kInf;
    for (const NestedSamplingResult& r : runs) top = std::max(top, r.log_evidence);
    double sum = 0.0;
    for (const NestedSamplingResult& r : runs) sum += std::exp(r.log_evidence - top);
    int64_t at = 0;
    for (const NestedSamplingResult& r : runs) {
      const int64_t n = r.samples.rows();
      if (n == 0) continue;
      m.samples.middleRows(at, n) = r.samples;
      m.log_weights.segment(at, n) =
          r.log_weights.array() + (r.log_evidence - top - std::log(sum));
      m.log_likelihoods.segment(at, n) = r.log_likelihoods;
      at += n;
    }
  }
  return m;
}

}  // namespace gpsel
