// GpselServer: one gpsel-server process — the gRPC server (ModelSelectionService, standard
// health service, reflection), its RPC worker pool, job workers, job store and the Prometheus
// /metrics endpoint — with a graceful shutdown. Used by server_main.cc and by the integration tests.
//
//   gpsel::ServerOptions options;
//   options.listen = "127.0.0.1:0";            // any free port
//   auto server = gpsel::GpselServer::Start(options);
//   std::cout << (*server)->port();
//   (*server)->Shutdown();                     // NOT_SERVING, drain, stop jobs, release leases
#ifndef GPSEL_SERVICE_SERVER_H_
#define GPSEL_SERVICE_SERVER_H_

#include <condition_variable>
#include <memory>
#include <mutex>
#include <string>
#include <thread>

#include "absl/status/statusor.h"
#include "absl/time/time.h"
#include "gpsel/server/metrics/exposer.h"
#include "gpsel/server/service/service.h"

namespace grpc {
class Server;
}

namespace gpsel {

struct ServerOptions {
  std::string listen = "127.0.0.1:50051";         // HOST:PORT; port 0 picks a free one
  std::string metrics_listen = "127.0.0.1:9464";  // "" disables /metrics
  std::string store_url = "sqlite:gpsel-jobs.db"; // JobStore URL (sqlite:PATH or postgresql://)
  int rpc_workers = 0;        // CPU threads for Score/Search/Predict; 0 = hardware threads
  int max_queued_rpcs = -1;   // admitted requests waiting for a worker; < 0 = 2 × rpc_workers
  JobRunnerOptions jobs;      // job workers (jobs.workers = 0: this process runs no jobs)
  int max_job_attempts = 5;   // a job whose worker died this many times is FAILED
  ServiceOptions service;     // limits, token, job queue bound
  // TLS: server certificate chain and key (PEM files); with a client CA, clients must present a
  // certificate it signed (mutual TLS). All empty = plaintext.
  std::string tls_cert_file;
  std::string tls_key_file;
  std::string tls_client_ca_file;
  // Plaintext without a token on an address other hosts reach (0.0.0.0, a routable address) is
  // refused at start unless this says the network is private (--allow-insecure-plaintext); it
  // is then a loud warning. (A short or blank token and a TLS key readable by every user are
  // always refused: service/startup_checks.h.)
  bool allow_insecure_plaintext = false;
  // Store health (README "Store health"): every store_health_interval a cheap read and a write
  // probe (a full disk shows there first), every store_integrity_interval — and every time
  // while the store is unhealthy — the integrity check (SQLite PRAGMA quick_check) instead of
  // the cheap read. Health is NOT_SERVING while a check fails. At least 100 ms each.
  absl::Duration store_health_interval = absl::Seconds(2);
  absl::Duration store_integrity_interval = absl::Seconds(10);
  // Shutdown: how long running calls may finish before they are cancelled.
  absl::Duration shutdown_grace = absl::Seconds(10);
  absl::Status Validate() const;
};

// The per-request memory budget when --max-request-bytes is automatic: ¾ of the machine's (or
// the container's) memory, divided among the RPC workers and job workers that run at once.
int64_t AutomaticRequestBudget(int rpc_workers, int job_workers);

class GpselServer {
 public:
  // The limits in force (max_request_bytes resolved).
  const ServiceLimits& limits() const { return options_.service.limits; }
  static absl::StatusOr<std::unique_ptr<GpselServer>> Start(ServerOptions options);
  ~GpselServer();  // Shutdown()

  int port() const { return port_; }
  int metrics_port() const { return metrics_port_; }
  JobStore* store() const { return store_.get(); }

  // Graceful: health NOT_SERVING, refuse new calls (UNAVAILABLE), let running calls finish
  // within the grace period, stop the job workers and release their leases. Idempotent.
  void Shutdown();
  // Blocks until Shutdown() has completed (from another thread or a signal handler thread).
  void Wait();

 private:
  GpselServer() = default;
  void RefreshStoredJobMetrics();
  // Checks the job store (JobStore::CheckHealth) and sets the gRPC health status from it:
  // NOT_SERVING while it fails. Called at start and every store_health_interval by the
  // refresher thread.
  void CheckStoreHealth();

  ServerOptions options_;
  std::unique_ptr<JobStore> store_;
  std::unique_ptr<ServiceMetrics> metrics_;
  std::unique_ptr<BoundedWorkerPool> pool_;
  std::unique_ptr<JobRunner> runner_;
  std::unique_ptr<ModelSelectionServiceImpl> service_;
  std::unique_ptr<grpc::Server> server_;
  std::unique_ptr<MetricsExposer> metrics_exposer_;
  int port_ = 0;
  int metrics_port_ = 0;
  std::mutex mutex_;
  std::condition_variable state_changed_;
  bool shutting_down_ = false;
  // Written by Start and then only by the refresher thread.
  bool store_healthy_ = false;
  bool store_checked_ = false;
  absl::Time last_integrity_check_ = absl::InfinitePast();
  bool shut_down_ = false;
  std::thread refresher_;
};

}  // namespace gpsel

#endif  // GPSEL_SERVICE_SERVER_H_
