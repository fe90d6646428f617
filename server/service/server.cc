// GpselServer; see server.h. Start() builds the job kind registry (server/jobs/job_kind.h) that the
// job runner and the service share.
#include "gpsel/server/service/server.h"

#include <sys/resource.h>
#include <unistd.h>

#include <algorithm>
#include <fstream>
#include <iostream>
#include <sstream>
#include <thread>

#include <grpcpp/ext/proto_server_reflection_plugin.h>
#include <grpcpp/grpcpp.h>
#include <grpcpp/health_check_service_interface.h>

#include "absl/strings/str_cat.h"
#include "gpsel/core/status_macros.h"
#include "gpsel/server/jobs/evidence_job.h"
#include "gpsel/server/jobs/score_job.h"
#include "gpsel/server/jobs/search_job.h"
#include "gpsel/server/metrics/core_metrics.h"
#include "gpsel/server/metrics/process_collector.h"
#include "gpsel/server/service/startup_checks.h"
#include "grpc/health/v1/health.pb.h"

#ifndef GPSEL_VERSION
#define GPSEL_VERSION "dev"
#endif

namespace gpsel {
namespace {

constexpr char kServiceName[] = "gpsel.v1.ModelSelectionService";

// Physical memory, or the cgroup's limit when a container has a smaller one (cgroup v2
// memory.max, else v1 memory.limit_in_bytes), or the room left under the process's address-space
// limit (RLIMIT_AS, `ulimit -v`) when that is smaller still: beyond it every allocation fails
// whatever the machine has (issue 33: a 6.32 GB budget under a 4 GiB limit).
int64_t MachineMemoryBytes() {
  const int64_t page = sysconf(_SC_PAGESIZE);
  int64_t bytes = static_cast<int64_t>(sysconf(_SC_PHYS_PAGES)) * page;
  for (const char* path : {"/sys/fs/cgroup/memory.max",
                           "/sys/fs/cgroup/memory/memory.limit_in_bytes"}) {
    std::ifstream in(path);
    int64_t limit = 0;
    if (in >> limit && limit > 0 && limit < bytes) bytes = limit;  // "max" fails to parse
  }
  rlimit address_space{};
  if (getrlimit(RLIMIT_AS, &address_space) == 0 && address_space.rlim_cur != RLIM_INFINITY) {
    // What the process has mapped already (code, libraries, thread stacks) counts against it.
    int64_t mapped_pages = 0;
    std::ifstream statm("/proc/self/statm");
    statm >> mapped_pages;
    const int64_t room = std::max<int64_t>(
        0, static_cast<int64_t>(address_space.rlim_cur) - mapped_pages * page);
    bytes = std::min(bytes, room);
  }
  return bytes;
}

absl::StatusOr<std::string> ReadFile(const std::string& path, std::string_view what) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return absl::InvalidArgumentError(absl::StrCat(std::string(what), ": cannot read '", path, "'"));
  std::stringstream buffer;
  buffer << in.rdbuf();
  return buffer.str();
}

absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> MakeCredentials(
    const ServerOptions& options) {
  if (options.tls_cert_file.empty() && options.tls_key_file.empty()) {
    if (!options.tls_client_ca_file.empty()) {
      return absl::InvalidArgumentError("--tls-client-ca needs --tls-cert and --tls-key");
    }
    return grpc::InsecureServerCredentials();
  }
  if (options.tls_cert_file.empty() || options.tls_key_file.empty()) {
    return absl::InvalidArgumentError("TLS needs both --tls-cert and --tls-key");
  }
  absl::StatusOr<std::string> cert = ReadFile(options.tls_cert_file, "--tls-cert");
  if (!cert.ok()) return cert.status();
  absl::StatusOr<std::string> key = ReadFile(options.tls_key_file, "--tls-key");
  if (!key.ok()) return key.status();
  grpc::SslServerCredentialsOptions ssl;
  ssl.pem_key_cert_pairs.push_back({*key, *cert});
  if (!options.tls_client_ca_file.empty()) {
    absl::StatusOr<std::string> ca = ReadFile(options.tls_client_ca_file, "--tls-client-ca");
    if (!ca.ok()) return ca.status();
    ssl.pem_root_certs = *ca;
    ssl.client_certificate_request = GRPC_SSL_REQUEST_AND_REQUIRE_CLIENT_CERTIFICATE_AND_VERIFY;
  }
  return grpc::SslServerCredentials(ssl);
}

// The security set-up (issue 33): refused before anything is opened or listens.
absl::Status CheckSecuritySetUp(const ServerOptions& options) {
  GPSEL_RETURN_IF_ERROR(CheckAuthToken(options.service.auth_token));
  if (!options.tls_key_file.empty()) {
    GPSEL_RETURN_IF_ERROR(CheckSecretFile(options.tls_key_file, "--tls-key"));
  }
  if (options.tls_cert_file.empty() && options.service.auth_token.empty() &&
      !IsLoopbackListenAddress(options.listen)) {
    const std::string problem = absl::StrCat(
        "--listen ", options.listen,
        ": plaintext gRPC without a token on an address other hosts can reach lets anyone "
        "there run jobs; give --tls-cert/--tls-key or --auth-token-file, listen on 127.0.0.1, "
        "or pass --allow-insecure-plaintext where the network is private");
    if (!options.allow_insecure_plaintext) return absl::InvalidArgumentError(problem);
    std::cerr << "gpsel-server: WARNING: INSECURE: " << problem << "\n";
  }
  return absl::OkStatus();
}

}  // namespace

absl::Status ServerOptions::Validate() const {
  if (listen.empty()) return absl::InvalidArgumentError("--listen: must be HOST:PORT");
  if (jobs.workers < 0) return absl::InvalidArgumentError("--job-workers: must be >= 0");
  if (jobs.lease < absl::Seconds(1)) {
    return absl::InvalidArgumentError("--job-lease: must be at least 1 second");
  }
  if (max_job_attempts < 1) return absl::InvalidArgumentError("--max-job-attempts: must be >= 1");
  if (store_health_interval < absl::Milliseconds(100) ||
      store_integrity_interval < absl::Milliseconds(100)) {
    return absl::InvalidArgumentError(
        "--store-health-interval, --store-integrity-interval: must be at least 0.1 seconds");
  }
  return service.limits.Validate();
}

int64_t AutomaticRequestBudget(int rpc_workers, int job_workers) {
  const int concurrent = std::max(1, rpc_workers + job_workers);
  return MachineMemoryBytes() / 4 * 3 / concurrent;
}

absl::StatusOr<std::unique_ptr<GpselServer>> GpselServer::Start(ServerOptions options) {
  GPSEL_RETURN_IF_ERROR(options.Validate());
  GPSEL_RETURN_IF_ERROR(CheckSecuritySetUp(options));
  const int hardware = std::max(1, static_cast<int>(std::thread::hardware_concurrency()));
  const int workers = options.rpc_workers > 0 ? options.rpc_workers : hardware;
  ServiceLimits& limits = options.service.limits;
  if (limits.max_request_bytes == ServiceLimits::kAutomaticRequestBudget) {
    limits.max_request_bytes = AutomaticRequestBudget(workers, options.jobs.workers);
  }
  std::unique_ptr<GpselServer> server(new GpselServer());
  server->options_ = options;

  JobStoreOptions store_options;
  store_options.max_attempts = options.max_job_attempts;
  absl::StatusOr<std::unique_ptr<JobStore>> store = OpenJobStore(options.store_url, store_options);
  if (!store.ok()) return store.status();
  server->store_ = *std::move(store);
  server->metrics_ = std::make_unique<ServiceMetrics>(GPSEL_VERSION);
  // The numerical core reports fits and likelihood evaluations to this (core/instrumentation.h).
  CoreMetrics& core_metrics = CoreMetrics::InstallGlobal();

  const int max_queued = options.max_queued_rpcs >= 0 ? options.max_queued_rpcs : 2 * workers;
  server->pool_ = std::make_unique<BoundedWorkerPool>(workers, max_queued);

  // Every job kind this server runs and shows (server/jobs/job_kind.h); a new kind adds its
  // Register...JobKind call here. The runner and the service share the registry.
  auto job_kinds = std::make_shared<JobKindRegistry>();
  GPSEL_RETURN_IF_ERROR(RegisterEvidenceJobKind(job_kinds.get(), options.service.limits));
  GPSEL_RETURN_IF_ERROR(RegisterSearchJobKinds(job_kinds.get(), options.service.limits));
  GPSEL_RETURN_IF_ERROR(RegisterScoreJobKinds(job_kinds.get(), options.service.limits));
  if (options.jobs.workers > 0) {
    server->runner_ = std::make_unique<JobRunner>(server->store_.get(), job_kinds, options.jobs,
                                                  server->metrics_.get());
  }
  server->service_ = std::make_unique<ModelSelectionServiceImpl>(
      options.service, server->pool_.get(), server->store_.get(), job_kinds,
      server->runner_.get(), server->metrics_.get());

  absl::StatusOr<std::shared_ptr<grpc::ServerCredentials>> credentials = MakeCredentials(options);
  if (!credentials.ok()) return credentials.status();
  // Link the health messages into the descriptor pool so reflection can describe the (built-in)
  // health service to tools such as `buf curl`.
  (void)grpc::health::v1::HealthCheckRequest::descriptor();
  grpc::EnableDefaultHealthCheckService(true);
  grpc::reflection::InitProtoReflectionServerBuilderPlugin();
  grpc::ServerBuilder builder;
  builder.AddListeningPort(options.listen, *credentials, &server->port_);
  builder.RegisterService(server->service_.get());
  builder.SetMaxReceiveMessageSize(options.service.limits.max_message_bytes);
  builder.SetMaxSendMessageSize(options.service.limits.max_message_bytes);
  auto interceptors = server->metrics_->InterceptorFactories();
  // Reflection is gRPC's service: its calls get the token check here (startup_checks.h).
  if (auto reflection_auth = ReflectionAuthInterceptorFactory(options.service.auth_token)) {
    interceptors.push_back(std::move(reflection_auth));
  }
  builder.experimental().SetInterceptorCreators(std::move(interceptors));
  server->server_ = builder.BuildAndStart();
  if (!server->server_ || server->port_ == 0) {
    return absl::UnavailableError(absl::StrCat("cannot listen on ", options.listen));
  }

  if (!options.metrics_listen.empty()) {
    // This server's metrics, the core's (process-wide: every server in the process counts into
    // them) and the process_* ones.
    absl::StatusOr<std::unique_ptr<MetricsExposer>> exposer = MetricsExposer::Start(
        options.metrics_listen, {server->metrics_->registry(), core_metrics.registry(),
                                 std::make_shared<ProcessCollector>()});
    if (!exposer.ok()) {
      server->server_->Shutdown();
      return exposer.status();
    }
    server->metrics_exposer_ = *std::move(exposer);
    server->metrics_port_ = server->metrics_exposer_->port();
  }

  server->CheckStoreHealth();  // SERVING unless the store fails its integrity check
  if (server->runner_) server->runner_->Start();
  server->RefreshStoredJobMetrics();
  server->refresher_ = std::thread([s = server.get()] {
    std::unique_lock<std::mutex> lock(s->mutex_);
    while (!s->shutting_down_) {
      s->state_changed_.wait_for(
          lock, absl::ToChronoMilliseconds(s->options_.store_health_interval));
      if (s->shutting_down_) break;
      lock.unlock();
      s->CheckStoreHealth();
      s->RefreshStoredJobMetrics();
      lock.lock();
    }
  });
  return server;
}

void GpselServer::CheckStoreHealth() {
  // A healthy store gets the cheap read, and the integrity check when it is due; a failing (or
  // not yet checked) one the integrity check, until it passes. Then the write probe: a full
  // disk or a read-only database passes every read (issue 33: the worker could not claim jobs
  // while health said SERVING).
  const absl::Time now = absl::Now();
  const bool integrity = !store_healthy_ ||
                         now - last_integrity_check_ >= options_.store_integrity_interval;
  if (integrity) last_integrity_check_ = now;
  absl::Status status =
      store_->CheckHealth(integrity ? StoreCheck::kIntegrity : StoreCheck::kConnection);
  if (status.ok()) status = store_->CheckHealth(StoreCheck::kWrite);
  const bool healthy = status.ok();
  if (!healthy) {
    std::cerr << "gpsel-server: job store unhealthy, health NOT_SERVING: " << status << "\n";
  } else if (!store_healthy_ && store_checked_) {
    std::cerr << "gpsel-server: job store healthy again, health SERVING\n";
  }
  if (healthy != store_healthy_ || !store_checked_) {
    grpc::HealthCheckServiceInterface* health = server_->GetHealthCheckService();
    health->SetServingStatus(kServiceName, healthy);
    health->SetServingStatus(healthy);
  }
  metrics_->SetStoreHealthy(healthy);
  store_healthy_ = healthy;
  store_checked_ = true;
}

void GpselServer::RefreshStoredJobMetrics() {
  absl::StatusOr<JobCounts> counts = store_->CountByState();
  if (!counts.ok()) return;
  std::map<std::string, double> by_name;
  for (const auto& [state, count] : *counts) {
    by_name[std::string(JobStateName(state))] = static_cast<double>(count);
  }
  metrics_->SetStoredJobs(by_name);
}

GpselServer::~GpselServer() { Shutdown(); }

void GpselServer::Shutdown() {
  {
    std::lock_guard<std::mutex> lock(mutex_);
    if (shutting_down_) return;
    shutting_down_ = true;
  }
  state_changed_.notify_all();
  if (refresher_.joinable()) refresher_.join();
  if (server_) {
    // Tell load balancers first, then refuse new work and let running calls finish.
    server_->GetHealthCheckService()->SetServingStatus(kServiceName, false);
    server_->GetHealthCheckService()->SetServingStatus(false);
    service_->StartDraining();
    server_->Shutdown(std::chrono::system_clock::now() +
                      absl::ToChronoMilliseconds(options_.shutdown_grace));
    server_->Wait();
  }
  if (runner_) runner_->Stop();  // running jobs stop; their leases are released
  pool_.reset();                  // every admitted task has finished by now
  metrics_exposer_.reset();
  {
    std::lock_guard<std::mutex> lock(mutex_);
    shut_down_ = true;
  }
  state_changed_.notify_all();
}

void GpselServer::Wait() {
  std::unique_lock<std::mutex> lock(mutex_);
  state_changed_.wait(lock, [this] { return shut_down_; });
}

}  // namespace gpsel
