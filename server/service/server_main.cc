// gpsel-server: the gpsel gRPC service (Score, Search, Predict, evidence jobs) with health,
// reflection, Prometheus metrics on their own port, a persistent job queue, optional TLS and
// bearer-token auth. SIGTERM/SIGINT shut it down gracefully (NOT_SERVING, drain, release leases).
//
//   gpsel-server --listen 0.0.0.0:50051 --metrics-listen 0.0.0.0:9464 --store sqlite:jobs.db
#include <signal.h>

#include <CLI/CLI.hpp>
#include <cstdlib>
#include <fstream>
#include <iostream>
#include <string>

#include "absl/strings/str_cat.h"
#include "gpsel/core/linalg.h"
#include "gpsel/core/memory_estimate.h"
#include "gpsel/server/service/server.h"
#include "gpsel/server/service/startup_checks.h"
#include "gpsel/server/store/job_store.h"

namespace {

std::string TrimmedFileContents(const std::string& path) {
  std::ifstream in(path);
  std::string token;
  std::getline(in, token);
  while (!token.empty() && (token.back() == '\r' || token.back() == ' ')) token.pop_back();
  return token;
}

}  // namespace

int main(int argc, char** argv) {
  gpsel::ConfigureAllocatorForLargeMatrices();
  gpsel::ServerOptions options;
  gpsel::ServiceLimits& limits = options.service.limits;
  double job_lease_seconds = absl::ToDoubleSeconds(options.jobs.lease);
  double grace_seconds = absl::ToDoubleSeconds(options.shutdown_grace);
  double watch_poll_ms = absl::ToDoubleMilliseconds(options.service.watch_poll_interval);
  std::string auth_token_file;

  CLI::App app{"gpsel-server: Gaussian-process model selection as a gRPC service"};
  app.add_option("--listen", options.listen, "gRPC address HOST:PORT (port 0: any free port)")
      ->capture_default_str();
  app.add_option("--metrics-listen", options.metrics_listen,
                 "Prometheus /metrics address HOST:PORT (\"\" disables it)")
      ->capture_default_str();
  app.add_option("--store", options.store_url,
                 "job store: sqlite:PATH (default, a file in the working directory) or "
                 "postgresql://USER@HOST/DB")
      ->capture_default_str();
  app.add_option("--workers", options.rpc_workers,
                 "threads for Score/Search/Predict (0 = one per core)")
      ->capture_default_str();
  app.add_option("--max-queued", options.max_queued_rpcs,
                 "requests that may wait for a worker before RESOURCE_EXHAUSTED (-1 = 2 x workers)")
      ->capture_default_str();
  app.add_option("--job-workers", options.jobs.workers,
                 "concurrent evidence jobs in this process (0 = none: submit/serve only)")
      ->capture_default_str();
  app.add_option("--job-lease", job_lease_seconds,
                 "seconds a job worker's lease lasts without a heartbeat (crash detection)")
      ->capture_default_str();
  app.add_option("--max-job-attempts", options.max_job_attempts,
                 "a job whose worker died this many times is marked FAILED")
      ->capture_default_str();
  app.add_option("--max-queued-jobs", options.service.max_queued_jobs,
                 "queued jobs before SubmitEvidence fails with RESOURCE_EXHAUSTED (0 = no limit)")
      ->capture_default_str();
  app.add_option("--max-points", limits.max_points, "limit: data points n")->capture_default_str();
  app.add_option("--max-dims", limits.max_dims, "limit: input dimensions d")->capture_default_str();
  app.add_option("--max-expression-length", limits.max_expression_length,
                 "limit: characters of a kernel expression")
      ->capture_default_str();
  app.add_option("--max-expression-depth", limits.max_expression_depth,
                 "limit: nesting depth of a kernel expression")
      ->capture_default_str();
  app.add_option("--max-base-kernels", limits.max_base_kernels,
                 "limit: base kernels in an expression")
      ->capture_default_str();
  app.add_option("--max-kernels", limits.max_kernels_per_request,
                 "limit: kernels in one Score request")
      ->capture_default_str();
  app.add_option("--max-restarts", limits.max_restarts, "limit: fit restarts")
      ->capture_default_str();
  app.add_option("--max-search-depth", limits.max_search_depth, "limit: search depth")
      ->capture_default_str();
  app.add_option("--max-beam-width", limits.max_beam_width, "limit: search beam width")
      ->capture_default_str();
  app.add_option(
         "--max-search-threads", limits.max_search_threads,
         "cap on the threads of one search or importance-sampling evidence job (0 = one per core)")
      ->capture_default_str();
  app.add_option("--max-live-points", limits.max_live_points, "limit: nested-sampling live points")
      ->capture_default_str();
  app.add_option("--max-message-bytes", limits.max_message_bytes, "limit: gRPC message size")
      ->capture_default_str();
  app.add_option("--max-iterations", limits.max_iterations, "limit: optimiser iterations per start")
      ->capture_default_str();
  app.add_option("--max-likelihood-calls", limits.max_likelihood_calls,
                 "limit: likelihood calls of one evidence job")
      ->capture_default_str();
  app.add_option("--max-predict-points", limits.max_predict_points,
                 "limit: rows of x_new in one Predict")
      ->capture_default_str();
  limits.max_request_bytes = gpsel::ServiceLimits::kAutomaticRequestBudget;
  app.add_option("--max-request-bytes", limits.max_request_bytes,
                 "estimated peak memory one request may use, else RESOURCE_EXHAUSTED "
                 "(-1 = 3/4 of the machine's memory divided among --workers and --job-workers; "
                 "0 = no budget)")
      ->capture_default_str();
  app.add_option("--tls-cert", options.tls_cert_file, "PEM certificate chain (enables TLS)");
  app.add_option("--tls-key", options.tls_key_file, "PEM private key");
  app.add_option("--tls-client-ca", options.tls_client_ca_file,
                 "PEM CA that client certificates must chain to (mutual TLS)");
  app.add_option("--auth-token-file", auth_token_file,
                 "file whose first line is the bearer token clients must send "
                 "(or set GPSEL_AUTH_TOKEN); the health service stays open");
  app.add_flag("--allow-insecure-plaintext", options.allow_insecure_plaintext,
               "serve plaintext gRPC without a token on an address other hosts reach (only on a "
               "private network; refused otherwise)");
  double store_health_seconds = absl::ToDoubleSeconds(options.store_health_interval);
  double store_integrity_seconds = absl::ToDoubleSeconds(options.store_integrity_interval);
  app.add_option("--store-health-interval", store_health_seconds,
                 "seconds between the job store's cheap health checks (a read and a write)")
      ->capture_default_str();
  app.add_option("--store-integrity-interval", store_integrity_seconds,
                 "seconds between the job store's integrity checks (SQLite PRAGMA quick_check)")
      ->capture_default_str();
  app.add_option("--shutdown-grace", grace_seconds,
                 "seconds running calls may take to finish on SIGTERM")
      ->capture_default_str();
  app.add_option("--watch-poll-ms", watch_poll_ms, "how often WatchJob streams look at the store")
      ->capture_default_str();
  CLI11_PARSE(app, argc, argv);

  options.jobs.lease = absl::Seconds(job_lease_seconds);
  options.shutdown_grace = absl::Seconds(grace_seconds);
  options.store_health_interval = absl::Seconds(store_health_seconds);
  options.store_integrity_interval = absl::Seconds(store_integrity_seconds);
  options.service.watch_poll_interval = absl::Milliseconds(watch_poll_ms);
  if (!auth_token_file.empty()) {
    // A token every user of the machine can read is no secret (issue 33).
    if (absl::Status s = gpsel::CheckSecretFile(auth_token_file, "--auth-token-file"); !s.ok()) {
      std::cerr << "gpsel-server: " << s.message() << "\n";
      return 2;
    }
    options.service.auth_token = TrimmedFileContents(auth_token_file);
    if (options.service.auth_token.empty()) {
      std::cerr << "gpsel-server: --auth-token-file: '" << auth_token_file << "' is empty\n";
      return 2;
    }
  } else if (const char* token = std::getenv("GPSEL_AUTH_TOKEN"); token && *token) {
    options.service.auth_token = token;
  }

  // Block the shutdown signals in every thread (they inherit the mask) and wait for them here.
  sigset_t signals;
  sigemptyset(&signals);
  sigaddset(&signals, SIGTERM);
  sigaddset(&signals, SIGINT);
  pthread_sigmask(SIG_BLOCK, &signals, nullptr);

  absl::StatusOr<std::unique_ptr<gpsel::GpselServer>> server = gpsel::GpselServer::Start(options);
  if (!server.ok()) {
    std::cerr << "gpsel-server: " << server.status() << "\n";
    return absl::IsInvalidArgument(server.status()) ? 2 : 1;
  }
  const std::string host = options.listen.substr(0, options.listen.rfind(':'));
  std::cout << "gpsel-server listening on " << host << ":" << (*server)->port();
  if ((*server)->metrics_port() > 0) {
    std::cout << ", metrics on "
              << options.metrics_listen.substr(0, options.metrics_listen.rfind(':')) << ":"
              << (*server)->metrics_port() << "/metrics";
  }
  std::cout << ", store " << gpsel::RedactStoreUrl(options.store_url)
            << (options.service.auth_token.empty() ? "" : ", token auth")
            << (options.tls_cert_file.empty() ? "" : ", TLS") << ", request memory budget "
            << ((*server)->limits().max_request_bytes > 0
                    ? gpsel::FormatBytes((*server)->limits().max_request_bytes)
                    : std::string("none"))
            << std::endl;

  int received = 0;
  sigwait(&signals, &received);
  std::cerr << "gpsel-server: " << (received == SIGTERM ? "SIGTERM" : "SIGINT")
            << ": draining (up to " << grace_seconds << " s)\n";
  (*server)->Shutdown();
  std::cerr << "gpsel-server: stopped\n";
  return 0;
}
