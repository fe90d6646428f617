// ServiceMetrics: the Prometheus metrics of gpsel-server, served on their own port.
//
// RPC metrics use the go-grpc-prometheus names and labels (grpc_type, grpc_service, grpc_method,
// grpc_code), recorded by a server interceptor so every service (ours, health, reflection) is
// covered the same way:
//   grpc_server_started_total, grpc_server_handled_total, grpc_server_handling_seconds,
//   grpc_server_msg_received_total, grpc_server_msg_sent_total
// plus gpsel's own: in-flight RPCs, rejections by reason, worker-pool queue depth and busy
// threads, running jobs, job outcomes and durations, jobs per state in the store, build info.
//
//   gpsel::ServiceMetrics metrics("0.1.0");
//   builder.experimental().SetInterceptorCreators(metrics.InterceptorFactories());
//   auto exposer = gpsel::MetricsExposer::Start("127.0.0.1:9464", {metrics.registry()});
#ifndef GPSEL_METRICS_METRICS_H_
#define GPSEL_METRICS_METRICS_H_

#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/support/server_interceptor.h>
#include <prometheus/counter.h>
#include <prometheus/family.h>
#include <prometheus/gauge.h>
#include <prometheus/histogram.h>
#include <prometheus/registry.h>

namespace gpsel {

// go-grpc-prometheus code names: "OK", "Canceled", "InvalidArgument", "ResourceExhausted", ...
std::string_view GrpcCodeName(int code);

class ServiceMetrics {
 public:
  explicit ServiceMetrics(std::string_view version);
  ServiceMetrics(const ServiceMetrics&) = delete;
  ServiceMetrics& operator=(const ServiceMetrics&) = delete;

  std::shared_ptr<prometheus::Registry> registry() const { return registry_; }

  // One factory recording the RPC metrics; pass to ServerBuilder::experimental().
  std::vector<std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>>
  InterceptorFactories();

  // A request refused: reason "queue_full", "job_queue_full", "store_full", "draining",
  // "unauthenticated" (before any work), "request_too_large" (over the memory budget),
  // "out_of_memory" (an allocation failed), "idempotency_key_reused".
  void RecordRejection(std::string_view reason);
  void SetWorkerPool(int size, int queued, int busy);
  void JobStarted(std::string_view kind);
  // outcome: "succeeded", "failed", "cancelled" (stored as such), "lost_lease", "released",
  // "not_stored" (the store refused the outcome: the job is re-run, and counted, later).
  void JobFinished(std::string_view kind, std::string_view outcome, double seconds);
  // Jobs per state in the store (all replicas), refreshed periodically.
  void SetStoredJobs(const std::map<std::string, double>& count_by_state);
  // 1 while the job store passes its health check (JobStore::CheckHealth), else 0.
  void SetStoreHealthy(bool healthy);

  // Used by the interceptor.
  struct RpcLabels {
    std::string type, service, method;
  };
  void RpcStarted(const RpcLabels& labels);
  void RpcHandled(const RpcLabels& labels, int code, double seconds);
  void RpcMessageReceived(const RpcLabels& labels);
  void RpcMessageSent(const RpcLabels& labels);

 private:
  std::shared_ptr<prometheus::Registry> registry_;
  prometheus::Family<prometheus::Counter>& started_;
  prometheus::Family<prometheus::Counter>& handled_;
  prometheus::Family<prometheus::Histogram>& handling_seconds_;
  prometheus::Family<prometheus::Counter>& msg_received_;
  prometheus::Family<prometheus::Counter>& msg_sent_;
  prometheus::Family<prometheus::Gauge>& in_flight_;
  prometheus::Family<prometheus::Counter>& rejections_;
  prometheus::Gauge& pool_size_;
  prometheus::Gauge& queue_depth_;
  prometheus::Gauge& pool_busy_;
  prometheus::Family<prometheus::Gauge>& jobs_running_;
  prometheus::Family<prometheus::Counter>& jobs_finished_;
  prometheus::Family<prometheus::Histogram>& job_seconds_;
  prometheus::Family<prometheus::Gauge>& stored_jobs_;
  prometheus::Gauge& store_healthy_;
};

}  // namespace gpsel

#endif  // GPSEL_METRICS_METRICS_H_
