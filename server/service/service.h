// ModelSelectionServiceImpl: the gpsel.v1.ModelSelectionService on gRPC's callback API.
//
// Its methods take and give bytes (server/service/raw_calls.h): each parses its request itself,
// after the token check, so that bytes which are not the method's request get INVALID_ARGUMENT
// naming the message type (counted as undecodable_request in gpsel_rpc_rejected_total).
// RPC threads never do numerics: Score, Search and Predict are validated on the RPC thread
// (INVALID_ARGUMENT with google.rpc.BadRequest) and then handed to a BoundedWorkerPool; when its
// queue is full the call fails at once with RESOURCE_EXHAUSTED. The numerics get a progress
// callback that returns CANCELLED when the client goes away and DEADLINE_EXCEEDED when the call's
// deadline passes, so abandoned work stops. Job RPCs talk to the JobStore (short transactions);
// WatchJob streams are driven by one polling thread for all watchers, which also works when
// another replica runs the job. Jobs are shown through the hooks of their kind in a
// JobKindRegistry (server/jobs/job_kind.h): evidence jobs carry their kernel and evidence_result.
//
//   gpsel::ModelSelectionServiceImpl service(options, &pool, store.get(), kinds, &runner,
//                                            &metrics);
//   builder.RegisterService(&service);
#ifndef GPSEL_SERVICE_SERVICE_H_
#define GPSEL_SERVICE_SERVICE_H_

#include <atomic>
#include <cstdint>
#include <memory>
#include <string>

#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "absl/time/time.h"
#include "gpsel/server/jobs/job_kind.h"
#include "gpsel/server/jobs/job_runner.h"
#include "gpsel/server/metrics/metrics.h"
#include "gpsel/server/service/raw_calls.h"
#include "gpsel/server/service/worker_pool.h"
#include "gpsel/server/store/job_store.h"
#include "gpsel/server/validation/validation.h"
#include "gpsel/v1/model_selection.grpc.pb.h"

namespace gpsel {

struct ServiceOptions {
  ServiceLimits limits;
  // When non-empty, every ModelSelectionService call must carry "authorization: Bearer <token>"
  // (the health service stays open so that orchestrators can probe it).
  std::string auth_token;
  // SubmitEvidence fails with RESOURCE_EXHAUSTED when this many jobs are QUEUED (≤ 0: no limit).
  int64_t max_queued_jobs = 1000;
  // How often WatchJob streams look at their job.
  absl::Duration watch_poll_interval = absl::Milliseconds(200);
};

class CpuUnaryReactor;  // service.cc: a unary call's reactor

class ModelSelectionServiceImpl final : public RawModelSelectionService {
 public:
  // `runner` may be null (a server without job workers still accepts and serves jobs); `kinds`
  // is the registry the runner executes from.
  ModelSelectionServiceImpl(ServiceOptions options, BoundedWorkerPool* pool, JobStore* store,
                            std::shared_ptr<const JobKindRegistry> kinds, JobRunner* runner,
                            ServiceMetrics* metrics);
  ~ModelSelectionServiceImpl() override;

  // New calls fail with UNAVAILABLE; open WatchJob streams end with UNAVAILABLE.
  void StartDraining();

  // Every method receives its request's bytes (`raw_request`) and, for a unary method, fills
  // `raw_response` with its response's bytes.
  grpc::ServerUnaryReactor* Score(grpc::CallbackServerContext* context,
                                  const grpc::ByteBuffer* raw_request,
                                  grpc::ByteBuffer* raw_response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* Search(grpc::CallbackServerContext* context,
                                                     const grpc::ByteBuffer* raw_request) override;
  grpc::ServerUnaryReactor* Predict(grpc::CallbackServerContext* context,
                                    const grpc::ByteBuffer* raw_request,
                                    grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* SubmitEvidence(grpc::CallbackServerContext* context,
                                           const grpc::ByteBuffer* raw_request,
                                           grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* SubmitSearch(grpc::CallbackServerContext* context,
                                         const grpc::ByteBuffer* raw_request,
                                         grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* SubmitScore(grpc::CallbackServerContext* context,
                                        const grpc::ByteBuffer* raw_request,
                                        grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* GetJob(grpc::CallbackServerContext* context,
                                   const grpc::ByteBuffer* raw_request,
                                   grpc::ByteBuffer* raw_response) override;
  grpc::ServerWriteReactor<grpc::ByteBuffer>* WatchJob(
      grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request) override;
  grpc::ServerUnaryReactor* CancelJob(grpc::CallbackServerContext* context,
                                      const grpc::ByteBuffer* raw_request,
                                      grpc::ByteBuffer* raw_response) override;
  grpc::ServerUnaryReactor* ListJobs(grpc::CallbackServerContext* context,
                                     const grpc::ByteBuffer* raw_request,
                                     grpc::ByteBuffer* raw_response) override;

  class WatchHub;

 private:
  // Auth and draining checks every call passes first.
  absl::Status Admit(grpc::CallbackServerContext* context);
  // Whether the call carries the token (or none is needed); counts nothing (Admit does).
  bool Authorized(grpc::CallbackServerContext* context) const;
  // Parses a call's request bytes into `request`. A call without the token is not parsed (its
  // handler's Admit refuses it, with UNAUTHENTICATED); bytes that are not a request give
  // INVALID_ARGUMENT (raw_calls.h ParseRequest), counted as undecodable_request.
  absl::Status ReadRequest(grpc::CallbackServerContext* context, const grpc::ByteBuffer& raw,
                           google::protobuf::Message* request);
  // Queues CPU work; false (and a RESOURCE_EXHAUSTED status in *refusal) when full.
  bool Schedule(std::function<void()> task, absl::Status* refusal);
  void UpdatePoolMetrics();
  // The one shape of the CPU-bound unary RPCs (Score, Predict): Admit, then `validate` the
  // request, then queue `work` on the pool (RESOURCE_EXHAUSTED when full) and run it under the
  // call's cancellation and deadline and the memory guard; the response is cleared on failure.
  template <typename Valid, typename Response>
  grpc::ServerUnaryReactor* ServeCpuUnary(
      grpc::CallbackServerContext* context, CpuUnaryReactor* reactor,
      const std::function<absl::StatusOr<Valid>()>& validate, Response* response,
      std::function<absl::Status(const Valid&, const ProgressCallback& cancel, Response*)> work);
  // A Submit* call after validation (`validation`: Admit's and the request's checks; its field
  // names get `field_prefix`, the wrapped request's field in the Submit message): stores
  // `stored` as a job of `kind` and fills the response's job and created.
  template <typename Request, typename Response>
  absl::Status SubmitJob(std::string_view kind, const absl::Status& validation,
                         const std::string& field_prefix, const Request& stored,
                         Response* response);
  // The job `id` as GetJob, WatchJob and CancelJob see it: NOT_FOUND for a task.
  absl::StatusOr<Job> GetApiJob(const std::string& id);
  // Stores a validated Submit* request (`stored`, its canonical form) as a job of `kind`,
  // idempotent per `request_id`, and fills the job and created. A full store gives
  // STORE_FULL, a full queue JOB_QUEUE_FULL, the same key with another request of the same
  // kind IDEMPOTENCY_KEY_REUSED (AIP-155).
  absl::Status StoreJob(std::string_view kind, const google::protobuf::Message& stored,
                        const std::string& request_id, v1::Job* job, bool* created);

  ServiceOptions options_;
  BoundedWorkerPool* pool_;
  JobStore* store_;
  std::shared_ptr<const JobKindRegistry> kinds_;
  JobRunner* runner_;
  ServiceMetrics* metrics_;
  std::atomic<bool> draining_{false};
  std::unique_ptr<WatchHub> watch_hub_;
};

}  // namespace gpsel

#endif  // GPSEL_SERVICE_SERVICE_H_
