// ServiceMetrics and the RPC-metrics interceptor; see metrics.h.
#include "gpsel/server/metrics/metrics.h"

#include <chrono>
#include <utility>

#include <grpcpp/grpcpp.h>
#include <grpcpp/support/interceptor.h>

namespace gpsel {
namespace {

using grpc::experimental::InterceptionHookPoints;

const prometheus::Histogram::BucketBoundaries& RpcBuckets() {
  // From 0.25 ms (a cached/invalid request) to 2 minutes (a deep search or long stream).
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.00025, 0.0005, 0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1,
      0.25,    0.5,    1,     2.5,    5,     10,   30,    60,   120};
  return *buckets;
}

const prometheus::Histogram::BucketBoundaries& JobBuckets() {
  static const auto* buckets = new prometheus::Histogram::BucketBoundaries{
      0.1, 0.5, 1, 2.5, 5, 10, 30, 60, 120, 300, 600, 1800, 3600, 7200};
  return *buckets;
}

std::string_view TypeName(grpc::experimental::ServerRpcInfo::Type type) {
  switch (type) {
    case grpc::experimental::ServerRpcInfo::Type::UNARY: return "unary";
    case grpc::experimental::ServerRpcInfo::Type::CLIENT_STREAMING: return "client_stream";
    case grpc::experimental::ServerRpcInfo::Type::SERVER_STREAMING: return "server_stream";
    case grpc::experimental::ServerRpcInfo::Type::BIDI_STREAMING: return "bidi_stream";
  }
  return "unknown";
}

// Records one call. Created by gRPC when the call starts, destroyed when it is done.
class MetricsInterceptor final : public grpc::experimental::Interceptor {
 public:
  MetricsInterceptor(ServiceMetrics* metrics, grpc::experimental::ServerRpcInfo* info)
      : metrics_(metrics), start_(std::chrono::steady_clock::now()) {
    // "/gpsel.v1.ModelSelectionService/Score" -> service "gpsel.v1.ModelSelectionService".
    std::string_view full = info->method() ? info->method() : "/unknown/unknown";
    if (!full.empty() && full.front() == '/') full.remove_prefix(1);
    const size_t slash = full.find('/');
    labels_.service = std::string(full.substr(0, slash));
    labels_.method = slash == std::string_view::npos ? "unknown" : std::string(full.substr(slash + 1));
    labels_.type = std::string(TypeName(info->type()));
    metrics_->RpcStarted(labels_);
  }

  ~MetricsInterceptor() override {
    // A call that ended without a status being sent (the client went away first) still counts
    // as handled, with the code the client observed.
    if (!handled_) Handled(static_cast<int>(grpc::StatusCode::CANCELLED));
  }

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_MESSAGE) &&
        methods->GetRecvMessage() != nullptr) {
      metrics_->RpcMessageReceived(labels_);
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      metrics_->RpcMessageSent(labels_);
    }
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS) &&
        !handled_) {
      Handled(static_cast<int>(methods->GetSendStatus().error_code()));
    }
    methods->Proceed();
  }

 private:
  void Handled(int code) {
    handled_ = true;
    const double seconds =
        std::chrono::duration<double>(std::chrono::steady_clock::now() - start_).count();
    metrics_->RpcHandled(labels_, code, seconds);
  }

  ServiceMetrics* metrics_;
  ServiceMetrics::RpcLabels labels_;
  std::chrono::steady_clock::time_point start_;
  bool handled_ = false;
};

class MetricsInterceptorFactory final
    : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit MetricsInterceptorFactory(ServiceMetrics* metrics) : metrics_(metrics) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    return new MetricsInterceptor(metrics_, info);
  }

 private:
  ServiceMetrics* metrics_;
};

prometheus::Labels ToLabels(const ServiceMetrics::RpcLabels& l) {
  return {{"grpc_type", l.type}, {"grpc_service", l.service}, {"grpc_method", l.method}};
}

}  // namespace

std::string_view GrpcCodeName(int code) {
  static constexpr std::string_view kNames[] = {
      "OK",         "Canceled",          "Unknown",            "InvalidArgument",
      "DeadlineExceeded", "NotFound",    "AlreadyExists",      "PermissionDenied",
      "ResourceExhausted", "FailedPrecondition", "Aborted",    "OutOfRange",
      "Unimplemented", "Internal",       "Unavailable",        "DataLoss",
      "Unauthenticated"};
  if (code < 0 || code >= static_cast<int>(std::size(kNames))) return "Unknown";
  return kNames[code];
}

ServiceMetrics::ServiceMetrics(std::string_view version)
    : registry_(std::make_shared<prometheus::Registry>()),
      started_(prometheus::BuildCounter()
                   .Name("grpc_server_started_total")
                   .Help("Total number of RPCs started on the server.")
                   .Register(*registry_)),
      handled_(prometheus::BuildCounter()
                   .Name("grpc_server_handled_total")
                   .Help("Total number of RPCs completed on the server, regardless of success or failure.")
                   .Register(*registry_)),
      handling_seconds_(prometheus::BuildHistogram()
                            .Name("grpc_server_handling_seconds")
                            .Help("Histogram of response latency (seconds) of gRPC that had been application-level handled by the server.")
                            .Register(*registry_)),
      msg_received_(prometheus::BuildCounter()
                        .Name("grpc_server_msg_received_total")
                        .Help("Total number of RPC stream messages received on the server.")
                        .Register(*registry_)),
      msg_sent_(prometheus::BuildCounter()
                    .Name("grpc_server_msg_sent_total")
                    .Help("Total number of gRPC stream messages sent by the server.")
                    .Register(*registry_)),
      in_flight_(prometheus::BuildGauge()
                     .Name("gpsel_rpc_in_flight_requests")
                     .Help("RPCs started and not yet handled.")
                     .Register(*registry_)),
      rejections_(prometheus::BuildCounter()
                      .Name("gpsel_rpc_rejected_total")
                      .Help("Requests refused, by reason (queue_full, job_queue_full, store_full, draining, unauthenticated, request_too_large, out_of_memory, idempotency_key_reused, undecodable_request).")
                      .Register(*registry_)),
      pool_size_(prometheus::BuildGauge()
                     .Name("gpsel_worker_pool_threads")
                     .Help("Threads of the RPC worker pool (CPU work of Score, Search, Predict).")
                     .Register(*registry_)
                     .Add({})),
      queue_depth_(prometheus::BuildGauge()
                       .Name("gpsel_worker_pool_queue_depth")
                       .Help("RPCs admitted and waiting for a worker thread.")
                       .Register(*registry_)
                       .Add({})),
      pool_busy_(prometheus::BuildGauge()
                     .Name("gpsel_worker_pool_busy_threads")
                     .Help("Worker threads running an RPC now.")
                     .Register(*registry_)
                     .Add({})),
      jobs_running_(prometheus::BuildGauge()
                        .Name("gpsel_jobs_running")
                        .Help("Jobs running in this process's job workers, by kind.")
                        .Register(*registry_)),
      jobs_finished_(prometheus::BuildCounter()
                         .Name("gpsel_jobs_finished_total")
                         .Help("Job attempts finished by this process, by kind and outcome (succeeded, failed, cancelled: stored as such; lost_lease, released, not_stored: the job runs again).")
                         .Register(*registry_)),
      job_seconds_(prometheus::BuildHistogram()
                       .Name("gpsel_job_duration_seconds")
                       .Help("Wall-clock duration of job attempts in this process, by kind and outcome.")
                       .Register(*registry_)),
      stored_jobs_(prometheus::BuildGauge()
                       .Name("gpsel_jobs")
                       .Help("Jobs in the job store (shared by all replicas), by state.")
                       .Register(*registry_)),
      store_healthy_(prometheus::BuildGauge()
                         .Name("gpsel_job_store_healthy")
                         .Help("1 while the job store passes its health checks (a read and a write "
                               "every 2 s, SQLite quick_check every 10 s), else 0.")
                         .Register(*registry_)
                         .Add({})) {
  prometheus::BuildGauge()
      .Name("gpsel_build_info")
      .Help("Build information; the value is always 1.")
      .Register(*registry_)
      .Add({{"version", std::string(version)}, {"grpc_version", grpc::Version()}})
      .Set(1);
  // Zero-valued series from the start, so dashboards and rate() see them before the first event.
  jobs_running_.Add({{"kind", "evidence"}});
  for (const char* reason :
       {"queue_full", "job_queue_full", "store_full", "draining", "unauthenticated",
        "request_too_large", "out_of_memory", "idempotency_key_reused", "undecodable_request"}) {
    rejections_.Add({{"reason", reason}});
  }
}

std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
ServiceMetrics::InterceptorFactories() {
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>> out;
  out.push_back(std::make_unique<MetricsInterceptorFactory>(this));
  return out;
}

void ServiceMetrics::RecordRejection(std::string_view reason) {
  rejections_.Add({{"reason", std::string(reason)}}).Increment();
}

void ServiceMetrics::SetWorkerPool(int size, int queued, int busy) {
  pool_size_.Set(size);
  queue_depth_.Set(queued);
  pool_busy_.Set(busy);
}

void ServiceMetrics::JobStarted(std::string_view kind) {
  jobs_running_.Add({{"kind", std::string(kind)}}).Increment();
}

void ServiceMetrics::JobFinished(std::string_view kind, std::string_view outcome,
                                 double seconds) {
  jobs_running_.Add({{"kind", std::string(kind)}}).Decrement();
  const prometheus::Labels labels{{"kind", std::string(kind)}, {"outcome", std::string(outcome)}};
  jobs_finished_.Add(labels).Increment();
  job_seconds_.Add(labels, JobBuckets()).Observe(seconds);
}

void ServiceMetrics::SetStoreHealthy(bool healthy) { store_healthy_.Set(healthy ? 1.0 : 0.0); }

void ServiceMetrics::SetStoredJobs(const std::map<std::string, double>& count_by_state) {
  for (const auto& [state, count] : count_by_state) {
    stored_jobs_.Add({{"state", state}}).Set(count);
  }
}

void ServiceMetrics::RpcStarted(const RpcLabels& labels) {
  const prometheus::Labels l = ToLabels(labels);
  started_.Add(l).Increment();
  in_flight_.Add(l).Increment();
  // Pre-create the zero-valued series so rates work from the first scrape.
  msg_received_.Add(l);
  msg_sent_.Add(l);
}

void ServiceMetrics::RpcHandled(const RpcLabels& labels, int code, double seconds) {
  prometheus::Labels l = ToLabels(labels);
  in_flight_.Add(l).Decrement();
  handling_seconds_.Add(l, RpcBuckets()).Observe(seconds);
  l.emplace("grpc_code", std::string(GrpcCodeName(code)));
  handled_.Add(l).Increment();
}

void ServiceMetrics::RpcMessageReceived(const RpcLabels& labels) {
  msg_received_.Add(ToLabels(labels)).Increment();
}

void ServiceMetrics::RpcMessageSent(const RpcLabels& labels) {
  msg_sent_.Add(ToLabels(labels)).Increment();
}

}  // namespace gpsel
