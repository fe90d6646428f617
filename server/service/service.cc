// ModelSelectionServiceImpl; see service.h.
#include "gpsel/server/service/service.h"
#include "gpsel/core/status_macros.h"
#include "gpsel/server/service/startup_checks.h"

#include <malloc.h>

#include <atomic>
#include <chrono>
#include <condition_variable>
#include <functional>
#include <iostream>
#include <new>
#include <mutex>
#include <optional>
#include <set>
#include <thread>
#include <utility>

#include <google/protobuf/util/message_differencer.h>

#include "absl/strings/ascii.h"
#include "absl/strings/cord.h"
#include "absl/strings/str_cat.h"
#include "gpsel/core/score.h"
#include "gpsel/core/search.h"
#include "gpsel/proto/bridge/convert.h"
#include "gpsel/proto/bridge/unlisted_violations.h"
#include "gpsel/server/jobs/evidence_job.h"
#include "gpsel/server/jobs/score_job.h"
#include "gpsel/server/jobs/search_job.h"

namespace gpsel {
namespace {

using Clock = std::chrono::system_clock;

// Stops the numerics of a call whose client went away or whose deadline passed.
ProgressCallback CallCancellation(const std::atomic<bool>* cancelled, Clock::time_point deadline) {
  return [cancelled, deadline](const Progress&) -> absl::Status {
    if (cancelled->load(std::memory_order_relaxed)) {
      return absl::CancelledError("the client cancelled the call");
    }
    if (Clock::now() >= deadline) {
      return absl::DeadlineExceededError("the call's deadline passed during the computation");
    }
    return absl::OkStatus();
  };
}

// Runs a request's numerics. std::bad_alloc (the memory estimate was low, or other work holds
// the memory) ends only that request, with RESOURCE_EXHAUSTED: the replica, its other calls and
// its jobs go on (the allocations unwind with the request).
absl::Status RunGuardingMemory(const std::function<absl::Status()>& work) {
  try {
    return work();
  } catch (const std::bad_alloc&) {
    return bridge::WithErrorInfo(
        absl::ResourceExhaustedError(
            "the server ran out of memory for this request; retry later, or send a smaller one"),
        "OUT_OF_MEMORY");
  }
}

// A job store failure as the client sees it: its code and what failed, never the database's
// own text — SQL, file paths, connection details (issue 33: DATA_LOSS replies showed the SQL
// statement) — which goes to the server's log instead. gpsel's own messages (unknown job, full
// queue, reused key, bad page token, lost lease) pass unchanged, and so do payloads (the
// STORE_FULL mark).
absl::Status StoreErrorForClient(const absl::Status& status, std::string_view operation) {
  switch (status.code()) {
    case absl::StatusCode::kOk:
    case absl::StatusCode::kNotFound:
    case absl::StatusCode::kInvalidArgument:
    case absl::StatusCode::kAlreadyExists:
    case absl::StatusCode::kAborted:
    case absl::StatusCode::kCancelled:
      return status;
    case absl::StatusCode::kResourceExhausted:
      if (!IsStoreFull(status)) return status;  // "job queue full: ..."
      break;
    default:
      break;
  }
  std::cerr << "gpsel-server: job store: " << operation << ": " << status << "\n";
  absl::Status out(
      status.code(),
      IsStoreFull(status)
          ? absl::StrCat("the job store's disk is full, so it could not ", std::string(operation),
                         ": nothing was written; retry once an operator has freed space")
          : absl::StrCat("the job store could not ", std::string(operation), " (",
                         absl::StatusCodeToString(status.code()),
                         "); the server's log has the details"));
  status.ForEachPayload([&out](absl::string_view type_url, const absl::Cord& payload) {
    out.SetPayload(type_url, payload);
  });
  return out;
}

// A core INVALID_ARGUMENT that the validator did not anticipate still names a field.
absl::Status AttachField(absl::Status status, const std::string& field) {
  if (absl::IsInvalidArgument(status) && bridge::FieldViolations(status).empty()) {
    return bridge::InvalidField(field, std::string(status.message()));
  }
  return status;
}

// A request validated inside a Submit* wrapper names its fields relative to the wrapped request
// ("dataset.y"); the caller sees them from its own message ("search.dataset.y").
absl::Status PrefixFields(const absl::Status& status, const std::string& prefix) {
  std::vector<std::pair<std::string, std::string>> violations = bridge::FieldViolations(status);
  if (!absl::IsInvalidArgument(status) || violations.empty()) return status;
  const int64_t unlisted = bridge::UnlistedViolations(status);
  if (unlisted > 0) violations.pop_back();  // the count, passed on
  for (auto& [field, description] : violations) field = prefix + field;
  return bridge::InvalidFieldsWithUnlisted(violations, unlisted);
}

// A refused request of at least this many bytes hands the heap's free pages back once its call
// is done (ReleaseFreedHeapMemorySoon).
constexpr size_t kTrimAfterRefusedBytes = 256 * 1024;

// Hands the heap's free pages back to the kernel (glibc malloc_trim over every arena). The
// server raises the trim threshold to 512 MB (core/linalg.h ConfigureAllocatorForLargeMatrices)
// so that a likelihood's n×n matrices are reused, not re-faulted; but then what a burst of large
// refused requests freed — ten 0.8 MB Score requests parse into ~10 MB of small strings each, on
// as many gRPC threads' arenas — stayed resident and crept up round after round (issue 33:
// 106 → 117 → 145 MB over three rounds of ten). Only after such a refusal, so the matrices'
// reuse is untouched; 100 ms after it, on a thread of its own, so that what gRPC frees after the
// call (the request's bytes) goes back too. Refusals while one is pending share it.
void ReleaseFreedHeapMemorySoon() {
  static std::atomic<bool> pending{false};
  if (pending.exchange(true)) return;  // the pending trim comes after this refusal's frees too
  std::thread([] {
    std::this_thread::sleep_for(std::chrono::milliseconds(100));
    pending.store(false);  // a refusal from here on schedules another trim
    malloc_trim(0);
  }).detach();
}

// Refusals decided after admission — the memory budget, an allocation failure, a reused
// idempotency key — counted in gpsel_rpc_rejected_total by their ErrorInfo reason, as the
// admission refusals are where they happen (issue 33: these were not counted).
void CountLateRefusal(ServiceMetrics* metrics, const absl::Status& status) {
  if (metrics == nullptr || status.ok()) return;
  const std::string reason = bridge::ErrorReason(status);
  if (reason == "REQUEST_TOO_LARGE") {
    metrics->RecordRejection("request_too_large");
  } else if (reason == "OUT_OF_MEMORY") {
    metrics->RecordRejection("out_of_memory");
  } else if (reason == "IDEMPOTENCY_KEY_REUSED") {
    metrics->RecordRejection("idempotency_key_reused");
  }
}

// Server-streaming Search: the worker thread pushes progress (coalesced: only the latest
// progress waits while a write is in flight, so memory stays bounded) and then the final event.
class SearchReactor final : public MessageWriteReactor<v1::SearchResponse> {
 public:
  explicit SearchReactor(ServiceMetrics* metrics) : metrics_(metrics) {}
  void OnCancel() override {
    cancelled_.store(true);
  }
  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mutex_);
    writing_ = false;
    if (!ok) {
      // The stream is broken; stop the numerics and finish once the worker has reported.
      write_failed_ = true;
      cancelled_.store(true);
    }
    PumpLocked();
  }
  void OnDone() override { delete this; }

  const std::atomic<bool>* cancelled() const { return &cancelled_; }

  void PushProgress(const Progress& progress) {
    std::lock_guard<std::mutex> lock(mutex_);
    v1::SearchResponse event;
    bridge::ToProto(progress, event.mutable_progress());
    pending_progress_ = std::move(event);
    PumpLocked();
  }

  // The worker's last call: after it, the worker must not touch the reactor.
  void PushFinal(std::optional<v1::SearchResponse> result, absl::Status status) {
    std::lock_guard<std::mutex> lock(mutex_);
    pending_progress_.reset();
    pending_result_ = std::move(result);
    final_status_ = std::move(status);
    worker_done_ = true;
    PumpLocked();
  }

 private:
  void PumpLocked() {
    if (writing_ || finished_) return;
    if (!write_failed_) {
      if (pending_progress_) {
        current_ = std::move(*pending_progress_);
        pending_progress_.reset();
        StartWriteLocked();
        return;
      }
      if (pending_result_) {
        current_ = std::move(*pending_result_);
        pending_result_.reset();
        StartWriteLocked();
        return;
      }
    }
    if (worker_done_) {
      finished_ = true;
      if (!write_failed_) CountLateRefusal(metrics_, final_status_);
      Finish(write_failed_ ? grpc::Status(grpc::StatusCode::CANCELLED, "stream broken")
                           : bridge::ToGrpcStatus(final_status_));
    }
  }

  // Writes current_. An event that cannot be serialized (over 2 GiB: not below the send limit)
  // breaks the stream as a failed write does.
  void StartWriteLocked() {
    if (StartWriteMessage(current_).ok()) {
      writing_ = true;
      return;
    }
    write_failed_ = true;
    cancelled_.store(true);
    PumpLocked();
  }

  ServiceMetrics* const metrics_;
  std::atomic<bool> cancelled_{false};
  std::mutex mutex_;
  bool writing_ = false;
  bool write_failed_ = false;
  bool worker_done_ = false;
  bool finished_ = false;
  std::optional<v1::SearchResponse> pending_progress_;
  std::optional<v1::SearchResponse> pending_result_;
  absl::Status final_status_;
  v1::SearchResponse current_;
};

std::string Fingerprint(const Job& job) {
  return absl::StrCat(std::string(JobStateName(job.state)), "|", job.attempts, "|", job.progress, "|",
                      job.progress_message, "|", job.cancel_requested);
}

}  // namespace

// A unary call: remembers cancellation for the numerics (when its work runs on the worker pool)
// and, when it finishes well, serializes its response into the call's response bytes.
class CpuUnaryReactor : public grpc::ServerUnaryReactor {
 public:
  CpuUnaryReactor(ServiceMetrics* metrics, const grpc::ByteBuffer* raw_request,
                  grpc::ByteBuffer* raw_response, const google::protobuf::Message* response)
      : metrics_(metrics),
        request_bytes_(raw_request != nullptr ? raw_request->Length() : 0),
        raw_response_(raw_response),
        response_(response) {}
  void OnCancel() override { cancelled_.store(true); }
  void OnDone() override {
    // The parsed request is freed with the reactor; a large refused one's memory goes back to
    // the system after it (ReleaseFreedHeapMemorySoon).
    const bool release = release_when_done_;
    delete this;
    if (release) ReleaseFreedHeapMemorySoon();
  }
  void FinishWith(const absl::Status& status) {
    CountLateRefusal(metrics_, status);
    if (!status.ok() && request_bytes_ >= kTrimAfterRefusedBytes) release_when_done_ = true;
    if (status.ok()) {
      const absl::Status serialized = SerializeResponse(*response_, raw_response_);
      if (!serialized.ok()) {
        Finish(bridge::ToGrpcStatus(serialized));
        return;
      }
    }
    Finish(bridge::ToGrpcStatus(status));
  }
  const std::atomic<bool>* cancelled() const { return &cancelled_; }

 private:
  ServiceMetrics* const metrics_;
  const size_t request_bytes_;
  bool release_when_done_ = false;
  grpc::ByteBuffer* const raw_response_;
  const google::protobuf::Message* const response_;
  std::atomic<bool> cancelled_{false};
};

namespace {

// A unary call of a method with these messages: the reactor owns its parsed request and its
// response, which live as long as the call.
template <typename Request, typename Response>
class UnaryCall final : public CpuUnaryReactor {
 public:
  UnaryCall(ServiceMetrics* metrics, const grpc::ByteBuffer* raw_request,
            grpc::ByteBuffer* raw_response)
      : CpuUnaryReactor(metrics, raw_request, raw_response, &response_) {}
  Request* request() { return &request_; }
  Response* response() { return &response_; }

 private:
  Request request_;
  Response response_;
};

}  // namespace

// ---- WatchJob -----------------------------------------------------------------------------

class WatchReactor;

// One thread polls the store for every open WatchJob stream.
class ModelSelectionServiceImpl::WatchHub {
 public:
  WatchHub(JobStore* store, absl::Duration interval) : store_(store), interval_(interval) {
    thread_ = std::thread([this] { Loop(); });
  }
  ~WatchHub() {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      stopping_ = true;
    }
    wake_.notify_all();
    thread_.join();
  }
  void Add(WatchReactor* reactor);
  void Remove(WatchReactor* reactor) {
    std::lock_guard<std::mutex> lock(mutex_);
    reactors_.erase(reactor);
  }
  void Drain() {
    std::lock_guard<std::mutex> lock(mutex_);
    draining_ = true;
    wake_.notify_all();
  }

 private:
  void Loop();

  JobStore* store_;
  absl::Duration interval_;
  std::mutex mutex_;
  std::condition_variable wake_;
  bool stopping_ = false;
  bool draining_ = false;
  std::set<WatchReactor*> reactors_;
  std::thread thread_;
};

class WatchReactor final : public MessageWriteReactor<v1::WatchJobResponse> {
 public:
  WatchReactor(ModelSelectionServiceImpl::WatchHub* hub, std::string id,
               const JobKindRegistry* kinds)
      : hub_(hub), id_(std::move(id)), kinds_(kinds) {}

  // Called by the hub (with the hub's lock held, so the reactor cannot be deleted meanwhile).
  void Poll(JobStore* store, bool draining) {
    {
      std::lock_guard<std::mutex> lock(mutex_);
      if (writing_ || finishing_) return;
      if (draining) {
        FinishLocked(grpc::Status(grpc::StatusCode::UNAVAILABLE, "server is shutting down"));
        return;
      }
    }
    absl::StatusOr<Job> job = store->GetJob(id_);
    std::lock_guard<std::mutex> lock(mutex_);
    if (writing_ || finishing_) return;
    if (!job.ok()) {
      // A transient store error is retried at the next poll; anything else ends the stream.
      if (!absl::IsUnavailable(job.status())) FinishLocked(bridge::ToGrpcStatus(job.status()));
      return;
    }
    std::string fingerprint = Fingerprint(*job);
    if (fingerprint == last_fingerprint_) return;
    last_fingerprint_ = std::move(fingerprint);
    JobToProto(*job, kinds_, response_.mutable_job());
    terminal_ = IsTerminal(job->state);
    if (absl::Status written = StartWriteMessage(response_); !written.ok()) {
      FinishLocked(bridge::ToGrpcStatus(written));
      return;
    }
    writing_ = true;
  }

  void OnWriteDone(bool ok) override {
    std::lock_guard<std::mutex> lock(mutex_);
    writing_ = false;
    if (!ok) {
      FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "stream broken"));
    } else if (terminal_) {
      FinishLocked(grpc::Status::OK);
    }
  }
  void OnCancel() override {
    std::lock_guard<std::mutex> lock(mutex_);
    if (!writing_) FinishLocked(grpc::Status(grpc::StatusCode::CANCELLED, "cancelled"));
    // else OnWriteDone(false) follows and finishes.
  }
  void OnDone() override {
    hub_->Remove(this);
    delete this;
  }

 private:
  void FinishLocked(const grpc::Status& status) {
    if (finishing_) return;
    finishing_ = true;
    Finish(status);
  }

  ModelSelectionServiceImpl::WatchHub* hub_;
  const std::string id_;
  const JobKindRegistry* kinds_;
  std::mutex mutex_;
  bool writing_ = false;
  bool finishing_ = false;
  bool terminal_ = false;
  std::string last_fingerprint_;
  v1::WatchJobResponse response_;
};

void ModelSelectionServiceImpl::WatchHub::Add(WatchReactor* reactor) {
  std::lock_guard<std::mutex> lock(mutex_);
  reactors_.insert(reactor);
  reactor->Poll(store_, draining_);  // the first event goes out at once
}

void ModelSelectionServiceImpl::WatchHub::Loop() {
  std::unique_lock<std::mutex> lock(mutex_);
  while (!stopping_) {
    wake_.wait_for(lock, absl::ToChronoMilliseconds(interval_));
    if (stopping_) break;
    // Poll a snapshot: a reactor finishing during the loop removes itself only after we let go
    // of the lock, so every pointer here stays valid.
    for (WatchReactor* reactor : reactors_) reactor->Poll(store_, draining_);
  }
}

// ---- the service ----------------------------------------------------------------------------

ModelSelectionServiceImpl::ModelSelectionServiceImpl(ServiceOptions options,
                                                     BoundedWorkerPool* pool, JobStore* store,
                                                     std::shared_ptr<const JobKindRegistry> kinds,
                                                     JobRunner* runner, ServiceMetrics* metrics)
    : options_(std::move(options)), pool_(pool), store_(store), kinds_(std::move(kinds)),
      runner_(runner), metrics_(metrics),
      watch_hub_(std::make_unique<WatchHub>(store, options_.watch_poll_interval)) {
  pool_->SetObserver([this] { UpdatePoolMetrics(); });
  UpdatePoolMetrics();
}

ModelSelectionServiceImpl::~ModelSelectionServiceImpl() = default;

void ModelSelectionServiceImpl::StartDraining() {
  draining_.store(true);
  watch_hub_->Drain();
}

bool ModelSelectionServiceImpl::Authorized(grpc::CallbackServerContext* context) const {
  if (options_.auth_token.empty()) return true;
  std::vector<std::string> given;
  auto range = context->client_metadata().equal_range("authorization");
  for (auto it = range.first; it != range.second; ++it) {
    given.emplace_back(it->second.data(), it->second.size());
  }
  return BearerTokenMatches(given, options_.auth_token);
}

absl::Status ModelSelectionServiceImpl::ReadRequest(grpc::CallbackServerContext* context,
                                                    const grpc::ByteBuffer& raw,
                                                    google::protobuf::Message* request) {
  // Without the token the bytes are not even parsed: Admit refuses the call.
  if (!Authorized(context)) return absl::OkStatus();
  absl::Status status = ParseRequest(raw, options_.limits.max_message_bytes, request);
  if (!status.ok() && metrics_) metrics_->RecordRejection("undecodable_request");
  return status;
}

absl::Status ModelSelectionServiceImpl::Admit(grpc::CallbackServerContext* context) {
  if (!Authorized(context)) {
    if (metrics_) metrics_->RecordRejection("unauthenticated");
    return absl::UnauthenticatedError(
        "missing or wrong bearer token (metadata \"authorization: Bearer <token>\")");
  }
  if (draining_.load()) {
    if (metrics_) metrics_->RecordRejection("draining");
    return bridge::WithErrorInfo(absl::UnavailableError("server is shutting down; retry"),
                                  "DRAINING");
  }
  return absl::OkStatus();
}

void ModelSelectionServiceImpl::UpdatePoolMetrics() {
  if (metrics_) metrics_->SetWorkerPool(pool_->num_threads(), pool_->queued(), pool_->busy());
}

bool ModelSelectionServiceImpl::Schedule(std::function<void()> task, absl::Status* refusal) {
  const bool accepted = pool_->TrySubmit(std::move(task));
  if (!accepted) {
    if (metrics_) metrics_->RecordRejection("queue_full");
    *refusal = bridge::WithErrorInfo(
        absl::ResourceExhaustedError(absl::StrCat(
            "server busy: all ", pool_->num_threads(), " workers are busy and ",
            pool_->max_queued(), " requests are waiting; retry later")),
        "QUEUE_FULL");
  }
  return accepted;
}

template <typename Valid, typename Response>
grpc::ServerUnaryReactor* ModelSelectionServiceImpl::ServeCpuUnary(
    grpc::CallbackServerContext* context, CpuUnaryReactor* reactor,
    const std::function<absl::StatusOr<Valid>()>& validate, Response* response,
    std::function<absl::Status(const Valid&, const ProgressCallback& cancel, Response*)> work) {
  if (absl::Status s = Admit(context); !s.ok()) {
    reactor->FinishWith(s);
    return reactor;
  }
  absl::StatusOr<Valid> valid = validate();
  if (!valid.ok()) {
    reactor->FinishWith(valid.status());
    return reactor;
  }
  auto request = std::make_shared<Valid>(*std::move(valid));
  const Clock::time_point deadline = context->deadline();
  absl::Status refusal;
  const bool accepted = Schedule(
      [reactor, response, request, deadline, work = std::move(work)] {
        ProgressCallback cancel = CallCancellation(reactor->cancelled(), deadline);
        const absl::Status status = RunGuardingMemory([&]() -> absl::Status {
          // It may have waited in the queue.
          GPSEL_RETURN_IF_ERROR(cancel(CancellationPoll()));
          return work(*request, cancel, response);
        });
        if (!status.ok()) response->Clear();
        reactor->FinishWith(status);
      },
      &refusal);
  if (!accepted) reactor->FinishWith(refusal);
  return reactor;
}

grpc::ServerUnaryReactor* ModelSelectionServiceImpl::Score(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  auto* reactor = new UnaryCall<v1::ScoreRequest, v1::ScoreResponse>(metrics_, raw_request, raw_response);
  if (absl::Status s = ReadRequest(context, *raw_request, reactor->request()); !s.ok()) {
    reactor->FinishWith(s);
    return reactor;
  }
  const v1::ScoreRequest* request = reactor->request();
  v1::ScoreResponse* response = reactor->response();
  return ServeCpuUnary<ValidScore, v1::ScoreResponse>(
      context, reactor, [&] { return ValidateScoreRequest(*request, options_.limits); }, response,
      [](const ValidScore& work, const ProgressCallback& cancel,
         v1::ScoreResponse* response) -> absl::Status {
        // Smaller kernels first, each feeding the fits of the larger ones that contain it.
        int failed = 0;
        absl::StatusOr<std::vector<KernelScore>> scores =
            ScoreKernels(work.data, work.kernels, work.options, cancel, &failed);
        if (!scores.ok()) {
          return AttachField(scores.status(), absl::StrCat("kernels[", failed, "]"));
        }
        for (const KernelScore& score : *scores) bridge::ToProto(score, response->add_scores());
        return absl::OkStatus();
      });
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* ModelSelectionServiceImpl::Search(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request) {
  v1::SearchRequest parsed;
  if (absl::Status s = ReadRequest(context, *raw_request, &parsed); !s.ok()) {
    return new RefusedWriteReactor(bridge::ToGrpcStatus(s));
  }
  const v1::SearchRequest* request = &parsed;
  auto* reactor = new SearchReactor(metrics_);
  if (absl::Status s = Admit(context); !s.ok()) {
    reactor->PushFinal(std::nullopt, s);
    return reactor;
  }
  absl::StatusOr<ValidSearch> valid = ValidateSearchRequest(*request, options_.limits);
  if (!valid.ok()) {
    reactor->PushFinal(std::nullopt, valid.status());
    return reactor;
  }
  auto work = std::make_shared<ValidSearch>(*std::move(valid));
  const Clock::time_point deadline = context->deadline();
  absl::Status refusal;
  const bool accepted = Schedule(
      [reactor, work, deadline] {
        ProgressCallback cancel = CallCancellation(reactor->cancelled(), deadline);
        ProgressCallback progress = [reactor, &cancel](const Progress& p) -> absl::Status {
          absl::Status s = cancel(p);
          if (s.ok() && !p.poll_only) reactor->PushProgress(p);
          return s;
        };
        std::optional<v1::SearchResponse> final_event;
        const absl::Status status = RunGuardingMemory([&]() -> absl::Status {
          GPSEL_RETURN_IF_ERROR(cancel(CancellationPoll()));
          absl::StatusOr<SearchResult> result = RunKernelSearch(work->data, work->options, progress);
          if (!result.ok()) return AttachField(result.status(), "search");
          final_event.emplace();
          bridge::ToProto(*result, final_event->mutable_result());
          return absl::OkStatus();
        });
        if (!status.ok()) final_event.reset();
        reactor->PushFinal(std::move(final_event), status);
      },
      &refusal);
  if (!accepted) reactor->PushFinal(std::nullopt, refusal);
  return reactor;
}

grpc::ServerUnaryReactor* ModelSelectionServiceImpl::Predict(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  auto* reactor = new UnaryCall<v1::PredictRequest, v1::PredictResponse>(metrics_, raw_request, raw_response);
  if (absl::Status s = ReadRequest(context, *raw_request, reactor->request()); !s.ok()) {
    reactor->FinishWith(s);
    return reactor;
  }
  const v1::PredictRequest* request = reactor->request();
  v1::PredictResponse* response = reactor->response();
  return ServeCpuUnary<ValidPredict, v1::PredictResponse>(
      context, reactor, [&] { return ValidatePredictRequest(*request, options_.limits); }, response,
      [](const ValidPredict& work, const ProgressCallback& cancel,
         v1::PredictResponse* response) -> absl::Status {
        absl::StatusOr<PredictResult> result =
            FitAndPredict(work.data, work.kernel, work.x_new, work.options, cancel);
        if (!result.ok()) {
          const bool fitted = work.options.hyperparameters.empty();
          return AttachField(result.status(), fitted ? "kernel" : "hyperparameters");
        }
        bridge::ToProto(*result, response);
        return absl::OkStatus();
      });
}

grpc::ServerUnaryReactor* ModelSelectionServiceImpl::SubmitEvidence(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  auto* reactor = new UnaryCall<v1::SubmitEvidenceRequest, v1::SubmitEvidenceResponse>(metrics_, raw_request, raw_response);
  if (absl::Status s = ReadRequest(context, *raw_request, reactor->request()); !s.ok()) {
    reactor->FinishWith(s);
    return reactor;
  }
  const v1::SubmitEvidenceRequest* request = reactor->request();
  v1::SubmitEvidenceResponse* response = reactor->response();
  absl::Status status = Admit(context);
  absl::StatusOr<ValidEvidence> valid =
      status.ok() ? ValidateEvidenceRequest(*request, options_.limits) : status;
  if (!valid.ok()) {
    reactor->FinishWith(valid.status());
    return reactor;
  }
  // Store the canonical kernel text so that listings show one spelling per kernel.
  v1::SubmitEvidenceRequest stored = *request;
  stored.set_kernel(ToString(valid->kernel));
  reactor->FinishWith(SubmitJob(kEvidenceJobKind, absl::OkStatus(), "", stored, response));
  return reactor;
}

grpc::ServerUnaryReactor* ModelSelectionServiceImpl::SubmitSearch(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  auto* reactor = new UnaryCall<v1::SubmitSearchRequest, v1::SubmitSearchResponse>(metrics_, raw_request, raw_response);
  if (absl::Status s = ReadRequest(context, *raw_request, reactor->request()); !s.ok()) {
    reactor->FinishWith(s);
    return reactor;
  }
  const v1::SubmitSearchRequest* request = reactor->request();
  v1::SubmitSearchResponse* response = reactor->response();
  // Validated now, so that a bad request is refused at once rather than failing as a job; the
  // job validates again when it runs (the limits may have changed by then).
  absl::Status status = Admit(context);
  if (status.ok()) status = ValidateSearchRequest(request->search(), options_.limits).status();
  reactor->FinishWith(SubmitJob(kSearchJobKind, status, "search.", *request, response));
  return reactor;
}

grpc::ServerUnaryReactor* ModelSelectionServiceImpl::SubmitScore(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  auto* reactor = new UnaryCall<v1::SubmitScoreRequest, v1::SubmitScoreResponse>(metrics_, raw_request, raw_response);
  if (absl::Status s = ReadRequest(context, *raw_request, reactor->request()); !s.ok()) {
    reactor->FinishWith(s);
    return reactor;
  }
  const v1::SubmitScoreRequest* request = reactor->request();
  v1::SubmitScoreResponse* response = reactor->response();
  absl::Status status = Admit(context);
  if (status.ok()) status = ValidateScoreRequest(request->score(), options_.limits).status();
  reactor->FinishWith(SubmitJob(kScoreJobKind, status, "score.", *request, response));
  return reactor;
}

template <typename Request, typename Response>
absl::Status ModelSelectionServiceImpl::SubmitJob(std::string_view kind,
                                                  const absl::Status& validation,
                                                  const std::string& field_prefix,
                                                  const Request& stored, Response* response) {
  if (!validation.ok()) return PrefixFields(validation, field_prefix);
  bool created = false;
  absl::Status status =
      StoreJob(kind, stored, stored.request_id(), response->mutable_job(), &created);
  if (!status.ok()) {
    response->Clear();
    return status;
  }
  response->set_created(created);
  return absl::OkStatus();
}

absl::Status ModelSelectionServiceImpl::StoreJob(std::string_view kind,
                                                 const google::protobuf::Message& stored,
                                                 const std::string& request_id, v1::Job* job,
                                                 bool* created) {
  absl::StatusOr<SubmitResult> submitted = store_->Submit(
      std::string(kind), stored.SerializeAsString(), request_id, options_.max_queued_jobs);
  if (!submitted.ok()) {
    absl::Status error = StoreErrorForClient(submitted.status(), "store the job");
    if (IsStoreFull(error)) {
      // Not a full queue: nothing was written, and retrying will not help until an operator
      // frees space.
      if (metrics_) metrics_->RecordRejection("store_full");
      error = bridge::WithErrorInfo(error, "STORE_FULL");
    } else if (absl::IsResourceExhausted(error)) {
      if (metrics_) metrics_->RecordRejection("job_queue_full");
      error = bridge::WithErrorInfo(error, "JOB_QUEUE_FULL");
    } else if (IsIdempotencyKeyReused(error)) {
      // The key names a job of another kind (one key, one job: server/store/job_store.h Submit).
      error = bridge::WithErrorInfo(
          absl::AlreadyExistsError(absl::StrCat(
              "request_id: ", error.message(), "; use a new request_id for a new request")),
          "IDEMPOTENCY_KEY_REUSED");
    }
    return error;
  }
  if (!submitted->created) {
    // The same key with a different request is a conflict, not a retry (AIP-155): say so
    // instead of returning the other request's job as if it were this one's. (A key used for
    // another kind of job is refused by the store itself, above.)
    std::unique_ptr<google::protobuf::Message> earlier(stored.New());
    if (!earlier->ParseFromString(submitted->job.request) ||
        !google::protobuf::util::MessageDifferencer::Equals(*earlier, stored)) {
      return bridge::WithErrorInfo(
          absl::AlreadyExistsError(absl::StrCat(
              "request_id: '", request_id, "' was used for a different request (job ",
              submitted->job.id, "); use a new request_id for a new request")),
          "IDEMPOTENCY_KEY_REUSED");
    }
  }
  JobToProto(submitted->job, kinds_.get(), job);
  *created = submitted->created;
  if (submitted->created && runner_ != nullptr) runner_->Wake();
  return absl::OkStatus();
}

grpc::ServerUnaryReactor* ModelSelectionServiceImpl::GetJob(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  auto* reactor = new UnaryCall<v1::GetJobRequest, v1::GetJobResponse>(metrics_, raw_request, raw_response);
  if (absl::Status s = ReadRequest(context, *raw_request, reactor->request()); !s.ok()) {
    reactor->FinishWith(s);
    return reactor;
  }
  const v1::GetJobRequest* request = reactor->request();
  v1::GetJobResponse* response = reactor->response();
  absl::Status status = Admit(context);
  absl::StatusOr<std::string> id = status.ok() ? JobIdFromName(request->name(), "name") : status;
  if (!id.ok()) {
    reactor->FinishWith(id.status());
    return reactor;
  }
  absl::StatusOr<Job> job = GetApiJob(*id);
  if (job.ok()) JobToProto(*job, kinds_.get(), response->mutable_job());
  reactor->FinishWith(job.status());
  return reactor;
}

absl::StatusOr<Job> ModelSelectionServiceImpl::GetApiJob(const std::string& id) {
  absl::StatusOr<Job> job = store_->GetJob(id);
  if (!job.ok()) return StoreErrorForClient(job.status(), "read the job");
  // A task is a part of its job (an evidence run, a search candidate), run and cancelled with
  // it; ListJobs does not show tasks, and neither do the calls that take a job's name.
  if (job.ok() && job->is_task()) {
    return absl::NotFoundError(absl::StrCat("job ", id, " not found (it is a task of job ",
                                            job->parent_id, ")"));
  }
  return job;
}

grpc::ServerWriteReactor<grpc::ByteBuffer>* ModelSelectionServiceImpl::WatchJob(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request) {
  v1::WatchJobRequest parsed;
  if (absl::Status s = ReadRequest(context, *raw_request, &parsed); !s.ok()) {
    return new RefusedWriteReactor(bridge::ToGrpcStatus(s));
  }
  const v1::WatchJobRequest* request = &parsed;
  absl::Status status = Admit(context);
  absl::StatusOr<std::string> id = status.ok() ? JobIdFromName(request->name(), "name") : status;
  if (id.ok()) {
    // Unknown jobs fail at once with NOT_FOUND rather than on the first poll.
    absl::StatusOr<Job> job = GetApiJob(*id);
    if (!job.ok()) id = job.status();
  }
  if (!id.ok()) return new RefusedWriteReactor(bridge::ToGrpcStatus(id.status()));
  auto* reactor = new WatchReactor(watch_hub_.get(), *id, kinds_.get());
  watch_hub_->Add(reactor);
  return reactor;
}

grpc::ServerUnaryReactor* ModelSelectionServiceImpl::CancelJob(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  auto* reactor = new UnaryCall<v1::CancelJobRequest, v1::CancelJobResponse>(metrics_, raw_request, raw_response);
  if (absl::Status s = ReadRequest(context, *raw_request, reactor->request()); !s.ok()) {
    reactor->FinishWith(s);
    return reactor;
  }
  const v1::CancelJobRequest* request = reactor->request();
  v1::CancelJobResponse* response = reactor->response();
  absl::Status status = Admit(context);
  absl::StatusOr<std::string> id = status.ok() ? JobIdFromName(request->name(), "name") : status;
  if (!id.ok()) {
    reactor->FinishWith(id.status());
    return reactor;
  }
  absl::StatusOr<Job> job = GetApiJob(*id);
  if (job.ok()) {
    job = store_->RequestCancel(*id);
    if (!job.ok()) job = StoreErrorForClient(job.status(), "cancel the job");
  }
  if (job.ok()) JobToProto(*job, kinds_.get(), response->mutable_job());
  reactor->FinishWith(job.status());
  return reactor;
}

grpc::ServerUnaryReactor* ModelSelectionServiceImpl::ListJobs(
    grpc::CallbackServerContext* context, const grpc::ByteBuffer* raw_request,
    grpc::ByteBuffer* raw_response) {
  auto* reactor = new UnaryCall<v1::ListJobsRequest, v1::ListJobsResponse>(metrics_, raw_request, raw_response);
  if (absl::Status s = ReadRequest(context, *raw_request, reactor->request()); !s.ok()) {
    reactor->FinishWith(s);
    return reactor;
  }
  const v1::ListJobsRequest* request = reactor->request();
  v1::ListJobsResponse* response = reactor->response();
  if (absl::Status s = Admit(context); !s.ok()) {
    reactor->FinishWith(s);
    return reactor;
  }
  if (request->page_size() < 0) {
    reactor->FinishWith(bridge::InvalidField("page_size", "must not be negative"));
    return reactor;
  }
  if (!v1::JobState_IsValid(request->state())) {
    reactor->FinishWith(bridge::InvalidField(
        "state", absl::StrCat("unknown job state ", request->state())));
    return reactor;
  }
  ListJobsRequest list;
  list.page_size = request->page_size();
  list.page_token = request->page_token();
  list.state = FromProto(request->state());
  absl::StatusOr<ListJobsResponse> page = store_->ListJobs(list);
  if (!page.ok()) {
    reactor->FinishWith(
        AttachField(StoreErrorForClient(page.status(), "list the jobs"), "page_token"));
    return reactor;
  }
  for (const Job& job : page->jobs) JobToProto(job, kinds_.get(), response->add_jobs());
  response->set_next_page_token(page->next_page_token);
  reactor->FinishWith(absl::OkStatus());
  return reactor;
}

}  // namespace gpsel
