// The core's metrics end to end: the CoreObserver hooks (core/instrumentation.h) as the core
// calls them, CoreMetrics (server/metrics/core_metrics.h), the cost of an observer on one likelihood
// evaluation, and a real server on loopback whose /metrics shows a Score RPC's fits and
// evaluations next to the process_* metrics. Also: gpsel-server refuses a busy metrics port.
#include <atomic>
#include <chrono>
#include <cmath>
#include <iostream>
#include <optional>

#include "absl/strings/match.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_split.h"
#include "gmock/gmock.h"
#include "gpsel/core/evidence.h"
#include "gpsel/core/fit.h"
#include "gpsel/core/gp_model.h"
#include "gpsel/core/instrumentation.h"
#include "gpsel/core/kernel_expr.h"
#include "gpsel/core/score.h"
#include "gpsel/server/metrics/core_metrics.h"
#include "gpsel/server/metrics/exposer.h"
#include "gtest/gtest.h"
#include "tests/server/service/server_test_util.h"

namespace gpsel::testing {
namespace {

using ::testing::HasSubstr;

// The value of one series ("name{labels}" exactly as exposed) on a scraped page.
std::optional<double> MetricValue(const std::string& page, const std::string& series) {
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (!absl::StartsWith(line, series + " ")) continue;
    double value = 0;
    if (absl::SimpleAtod(line.substr(series.size() + 1), &value)) return value;
  }
  return std::nullopt;
}

// Sum over every series of a family whose line starts with `prefix` (e.g. "gpsel_fits_total{").
double SumOf(const std::string& page, const std::string& prefix) {
  double sum = 0;
  for (absl::string_view line : absl::StrSplit(page, '\n')) {
    if (!absl::StartsWith(line, prefix)) continue;
    const size_t space = line.rfind(' ');
    double value = 0;
    if (space != absl::string_view::npos && absl::SimpleAtod(line.substr(space + 1), &value)) {
      sum += value;
    }
  }
  return sum;
}

class CountingObserver : public CoreObserver {
 public:
  void OnFitStarted(int u) override {
    ++fits;
    last_u = u;
  }
  void OnLikelihoodEvaluation(int /*u*/, int n, double seconds) override {
    ++evaluations;
    last_n = n;
    if (!(seconds >= 0)) ++bad_times;
  }
  void OnEvidenceLikelihoodCall(int) override { ++evidence_calls; }
  std::atomic<int> fits{0}, evaluations{0}, evidence_calls{0}, bad_times{0};
  std::atomic<int> last_u{-1}, last_n{-1};
};

// Installs an observer for one scope and puts the previous one back.
class ScopedObserver {
 public:
  explicit ScopedObserver(CoreObserver* observer) : previous_(SetCoreObserver(observer)) {}
  ~ScopedObserver() { SetCoreObserver(previous_); }

 private:
  CoreObserver* previous_;
};

TEST(CoreObserverTest, FitsEvaluationsAndEvidenceCallsAreReported) {
  const Dataset data = LoadData("interpretable_linear.csv");
  const KernelExpr kernel = *ParseKernel("SE");
  absl::StatusOr<GpModel> model = GpModel::Create(kernel, data.x, data.y);
  ASSERT_TRUE(model.ok()) << model.status();
  CountingObserver counting;
  {
    ScopedObserver installed(&counting);
    FitOptions options;
    options.restarts = 3;
    options.threads = 2;  // hooks from pool threads too
    absl::StatusOr<FitResult> fit =
        FitHyperparameters(*model, FitObjective::kMaximumAPosteriori, options);
    ASSERT_TRUE(fit.ok()) << fit.status();
    EXPECT_EQ(counting.fits.load(), 1);
    EXPECT_EQ(counting.last_u.load(), model->num_free());
    // Every evaluation the fit counts, plus the ones it does not (the final values, Hessians).
    EXPECT_GE(counting.evaluations.load(), fit->evaluations);
    EXPECT_EQ(counting.last_n.load(), data.num_points());
    EXPECT_EQ(counting.evidence_calls.load(), 0);

    const int before = counting.evaluations.load();
    EvidenceOptions evidence;
    evidence.sampling.num_live = 30;
    evidence.sampling.dlogz = 0.5;
    evidence.sampling.num_bootstrap = 0;
    absl::StatusOr<EvidenceResult> z = ComputeEvidence(data, kernel, evidence);
    ASSERT_TRUE(z.ok()) << z.status();
    EXPECT_EQ(counting.evidence_calls.load(), z->likelihood_calls);
    EXPECT_EQ(counting.evaluations.load() - before, z->likelihood_calls);
    EXPECT_EQ(counting.fits.load(), 1);
  }
  EXPECT_EQ(counting.bad_times.load(), 0);
  // Uninstalled: nothing more arrives.
  const int evaluations = counting.evaluations.load();
  ASSERT_TRUE(model->LogLikelihood(model->prior_mean()).ok());
  EXPECT_EQ(counting.evaluations.load(), evaluations);
}

TEST(CoreMetricsTest, LabelsAreBoundedAndSeriesCount) {
  EXPECT_EQ(CoreMetrics::HyperparameterLabel(0), "0");
  EXPECT_EQ(CoreMetrics::HyperparameterLabel(3), "3");
  EXPECT_EQ(CoreMetrics::HyperparameterLabel(9), "9");
  EXPECT_EQ(CoreMetrics::HyperparameterLabel(10), "10+");
  EXPECT_EQ(CoreMetrics::HyperparameterLabel(57), "10+");

  CoreMetrics metrics;  // not installed: the hooks are called directly
  metrics.OnFitStarted(3);
  metrics.OnFitStarted(12);
  metrics.OnLikelihoodEvaluation(3, 50, 0.002);
  metrics.OnLikelihoodEvaluation(3, 50, 20.0);  // above the last bucket: +Inf only
  metrics.OnEvidenceLikelihoodCall(3);
  absl::StatusOr<std::unique_ptr<MetricsExposer>> exposer =
      MetricsExposer::Start("127.0.0.1:0", {metrics.registry()});
  ASSERT_TRUE(exposer.ok()) << exposer.status();
  const std::string page = HttpGet((*exposer)->port(), "/metrics");
  EXPECT_EQ(MetricValue(page, "gpsel_fits_total{hyperparameters=\"3\"}"), 1.0) << page;
  EXPECT_EQ(MetricValue(page, "gpsel_fits_total{hyperparameters=\"10+\"}"), 1.0);
  EXPECT_EQ(MetricValue(page, "gpsel_fits_total{hyperparameters=\"0\"}"), 0.0);
  EXPECT_EQ(MetricValue(page, "gpsel_likelihood_evaluations_total{hyperparameters=\"3\"}"), 2.0);
  EXPECT_EQ(MetricValue(page, "gpsel_likelihood_evaluation_seconds_count"), 2.0);
  EXPECT_EQ(MetricValue(page, "gpsel_likelihood_evaluation_seconds_bucket{le=\"0.0025\"}"), 1.0);
  EXPECT_EQ(MetricValue(page, "gpsel_likelihood_evaluation_seconds_bucket{le=\"10\"}"), 1.0);
  EXPECT_EQ(MetricValue(page, "gpsel_likelihood_evaluation_seconds_bucket{le=\"+Inf\"}"), 2.0);
  EXPECT_EQ(MetricValue(page, "gpsel_evidence_likelihood_calls_total"), 1.0);
  EXPECT_EQ(SumOf(page, "gpsel_fits_total{"), 2.0);
}

// Not a test of speed (nothing is asserted): prints the cost of one likelihood+gradient
// evaluation with no observer (the hooks then cost one atomic load each), with an observer that
// does nothing (the two clock reads) and with CoreMetrics installed (clock reads, a counter and
// the histogram), for the README and reviews. Best of several interleaved rounds.
TEST(CoreMetricsTest, OverheadOfAnObserverOnOneEvaluation) {
  const Dataset data = MaunaLoa(200);
  for (const int n : {10, 50, 200}) {
    const Eigen::MatrixXd x = data.x.topRows(n);
    const Eigen::VectorXd y = data.y.head(n);
    absl::StatusOr<GpModel> model = GpModel::Create(*ParseKernel("SE"), x, y);
    ASSERT_TRUE(model.ok());
    const Eigen::VectorXd raw = model->prior_mean();
    Eigen::VectorXd gradient;
    CoreObserver nothing;
    CoreMetrics metrics;
    int failures = 0;
    auto per_evaluation = [&](CoreObserver* observer, int repeats) -> double {
      ScopedObserver installed(observer);
      const auto start = std::chrono::steady_clock::now();
      for (int i = 0; i < repeats; ++i) failures += !model->LogLikelihood(raw, &gradient).ok();
      return std::chrono::duration<double, std::nano>(std::chrono::steady_clock::now() - start)
                 .count() / repeats;
    };
    const int repeats = n == 10 ? 20000 : n == 50 ? 2000 : 100;
    per_evaluation(nullptr, repeats / 10);  // warm up
    double none = 1e300, noop = 1e300, full = 1e300;
    for (int round = 0; round < 5; ++round) {
      none = std::min(none, per_evaluation(nullptr, repeats));
      noop = std::min(noop, per_evaluation(&nothing, repeats));
      full = std::min(full, per_evaluation(&metrics, repeats));
    }
    EXPECT_EQ(failures, 0);
    std::cout << "likelihood+gradient, SE, n = " << n << ": " << none
              << " ns with no observer, " << noop << " ns with a no-op observer, " << full
              << " ns with CoreMetrics (+" << (full - none) << " ns, "
              << 100.0 * (full - none) / none << " %)\n";
    RecordProperty(absl::StrCat("ns_no_observer_n", n), std::to_string(none));
    RecordProperty(absl::StrCat("ns_core_metrics_n", n), std::to_string(full));
  }
}

class ServerMetricsTest : public ::testing::Test {
 protected:
  void SetUp() override {
    dir_ = MakeTempDir("gpsel-core-metrics-test");
    absl::StatusOr<std::unique_ptr<GpselServer>> server =
        GpselServer::Start(TestServerOptions(dir_));
    ASSERT_TRUE(server.ok()) << server.status();
    server_ = *std::move(server);
  }
  void TearDown() override {
    server_.reset();
    std::filesystem::remove_all(dir_);
  }
  std::filesystem::path dir_;
  std::unique_ptr<GpselServer> server_;
};

TEST_F(ServerMetricsTest, ScoreRpcShowsUpInCoreMetrics) {
  const std::string before = HttpGet(server_->metrics_port(), "/metrics");
  ASSERT_THAT(before, HasSubstr("# TYPE gpsel_fits_total counter"));

  const Dataset data = LoadData("interpretable_linear.csv");
  ScoreOptions options;
  options.fit.seed = 3;
  std::unique_ptr<Client> client = Connect(server_->port());
  absl::StatusOr<std::vector<KernelScore>> scores =
      client->Score(data, {*ParseKernel("SE")}, options);
  ASSERT_TRUE(scores.ok()) << scores.status();
  const std::string u =
      CoreMetrics::HyperparameterLabel(static_cast<int>((*scores)[0].parameter_names.size()));

  const std::string after = HttpGet(server_->metrics_port(), "/metrics");
  const std::string fits = "gpsel_fits_total{hyperparameters=\"" + u + "\"}";
  const std::string evaluations =
      "gpsel_likelihood_evaluations_total{hyperparameters=\"" + u + "\"}";
  ASSERT_TRUE(MetricValue(before, fits).has_value()) << before;
  ASSERT_TRUE(MetricValue(after, evaluations).has_value()) << after;
  // The default metrics need both fits (MLL and MAP).
  EXPECT_GE(*MetricValue(after, fits) - *MetricValue(before, fits), 2.0);
  const double evaluated = *MetricValue(after, evaluations) - *MetricValue(before, evaluations);
  EXPECT_GT(evaluated, 10.0);
  // Only this model was evaluated, and the histogram saw every evaluation once.
  EXPECT_EQ(SumOf(after, "gpsel_likelihood_evaluations_total{") -
                SumOf(before, "gpsel_likelihood_evaluations_total{"),
            evaluated);
  const std::string count = "gpsel_likelihood_evaluation_seconds_count";
  ASSERT_TRUE(MetricValue(after, count).has_value());
  EXPECT_EQ(*MetricValue(after, count) - MetricValue(before, count).value_or(0), evaluated);
  const double seconds = *MetricValue(after, "gpsel_likelihood_evaluation_seconds_sum") -
                         MetricValue(before, "gpsel_likelihood_evaluation_seconds_sum").value_or(0);
  EXPECT_GT(seconds, 0.0);
  EXPECT_EQ(MetricValue(after, "gpsel_evidence_likelihood_calls_total"),
            MetricValue(before, "gpsel_evidence_likelihood_calls_total"));

  // process_* metrics, plausible for this (test) process.
  const double now = absl::ToUnixSeconds(absl::Now());
  const std::optional<double> start = MetricValue(after, "process_start_time_seconds");
  ASSERT_TRUE(start.has_value()) << after;
  EXPECT_LE(*start, now + 1);
  EXPECT_GT(*start, now - 6 * 3600);  // the test binary started less than 6 hours ago
  EXPECT_GT(MetricValue(after, "process_cpu_seconds_total").value_or(0), 0.0);
  EXPECT_GE(MetricValue(after, "process_cpu_seconds_total").value_or(0),
            MetricValue(before, "process_cpu_seconds_total").value_or(1e300));
  const double rss = MetricValue(after, "process_resident_memory_bytes").value_or(0);
  EXPECT_GT(rss, 4 << 20);
  EXPECT_GE(MetricValue(after, "process_virtual_memory_bytes").value_or(0), rss);
  const double fds = MetricValue(after, "process_open_fds").value_or(0);
  EXPECT_GE(fds, 3);  // stdin, stdout, stderr at least; and the listening sockets
  EXPECT_GE(MetricValue(after, "process_max_fds").value_or(0), fds);
  EXPECT_THAT(after, HasSubstr("# TYPE process_cpu_seconds_total counter"));

  if (!OnPath("promtool")) {
    GTEST_SKIP() << "promtool not installed (Debian package 'prometheus'): not linted";
  }
  const std::filesystem::path file = dir_ / "metrics.txt";
  std::ofstream(file) << after;
  CommandResult lint = RunCommand("promtool check metrics < " + file.string() + " 2>&1");
  EXPECT_EQ(lint.exit_code, 0) << lint.output;
}

// gpsel-server with its metrics port taken: a clear error and a non-zero exit, not a crash.
TEST(ServerProcessMetricsTest, BusyMetricsPortIsAStartupError) {
  absl::StatusOr<std::unique_ptr<MetricsExposer>> taken =
      MetricsExposer::Start("127.0.0.1:0", {std::make_shared<prometheus::Registry>()});
  ASSERT_TRUE(taken.ok()) << taken.status();
  const std::filesystem::path dir = MakeTempDir("gpsel-busy-metrics-test");
  const CommandResult run = RunCommand(absl::StrCat(
      GPSEL_SERVER_PATH, " --listen 127.0.0.1:0 --metrics-listen 127.0.0.1:", (*taken)->port(),
      " --store sqlite:", (dir / "jobs.db").string(), " 2>&1"));
  EXPECT_EQ(run.exit_code, 1) << run.output;  // -1 would be a signal (a crash)
  EXPECT_THAT(run.output, HasSubstr("cannot serve metrics on 127.0.0.1:")) << run.output;
  EXPECT_THAT(run.output, ::testing::Not(HasSubstr("listening on")));
  std::filesystem::remove_all(dir);
}

// The gpsel-server binary (OpenBLAS, gRPC and civetweb in one process) answers many scrapes,
// with the core's and the process metrics in them.
TEST(ServerProcessMetricsTest, BinaryServesManyScrapes) {
  const std::filesystem::path dir = MakeTempDir("gpsel-scrape-test");
  ServerProcess server({"--listen", "127.0.0.1:0", "--metrics-listen", "127.0.0.1:0", "--store",
                        "sqlite:" + (dir / "jobs.db").string()},
                       dir / "server.log");
  ASSERT_GT(server.metrics_port(), 0) << "gpsel-server did not start; see " << dir / "server.log";
  std::unique_ptr<Client> client = Connect(server.port());
  ASSERT_TRUE(client->Score(LoadData("interpretable_linear.csv"), {*ParseKernel("SE")},
                            ScoreOptions())
                  .ok());
  for (int i = 0; i < 50; ++i) {
    const std::string page = HttpGet(server.metrics_port(), "/metrics");
    ASSERT_THAT(page, HasSubstr("gpsel_likelihood_evaluation_seconds_count")) << "scrape " << i;
    ASSERT_THAT(page, HasSubstr("process_open_fds"));
    ASSERT_THAT(page, HasSubstr("grpc_server_handled_total"));
  }
  EXPECT_GT(SumOf(HttpGet(server.metrics_port(), "/metrics"), "gpsel_fits_total{"), 0.0);
  server.Kill(SIGTERM);
  std::filesystem::remove_all(dir);
}

}  // namespace
}  // namespace gpsel::testing
