// Backend-independent parts of the job store: state names, options, ids, page tokens, validation.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <string>

#include "absl/random/random.h"
#include "absl/strings/cord.h"
#include "absl/strings/numbers.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"
#include "absl/strings/strip.h"
#include "gpsel/server/store/job_store.h"
#include "gpsel/server/store/job_store_internal.h"

namespace gpsel {

std::string_view JobStateName(JobState state) {
  switch (state) {
    case JobState::kQueued:
      return "QUEUED";
    case JobState::kRunning:
      return "RUNNING";
    case JobState::kSucceeded:
      return "SUCCEEDED";
    case JobState::kFailed:
      return "FAILED";
    case JobState::kCancelled:
      return "CANCELLED";
  }
  return "UNKNOWN";
}

std::optional<JobState> ParseJobState(std::string_view name) {
  for (JobState s : {JobState::kQueued, JobState::kRunning, JobState::kSucceeded,
                     JobState::kFailed, JobState::kCancelled}) {
    if (JobStateName(s) == name) return s;
  }
  return std::nullopt;
}

bool IsTerminal(JobState state) {
  return state == JobState::kSucceeded || state == JobState::kFailed ||
         state == JobState::kCancelled;
}

namespace {
// Payload key of StoreFullError; its value is irrelevant.
constexpr char kStoreFullPayload[] = "gpsel.jobstore/store-full";
// Payload key of IdempotencyKeyReusedError; its value is the id of the job the key names.
constexpr char kKeyReusedPayload[] = "gpsel.jobstore/idempotency-key-reused";
}  // namespace

absl::Status IdempotencyKeyReusedError(std::string_view key, const Job& existing,
                                       std::string_view kind) {
  using job_store_internal::AsAbsl;
  absl::Status status = absl::AlreadyExistsError(absl::StrCat(
      "idempotency key '", AsAbsl(key), "' already names job ", existing.id, " of kind '",
      existing.kind, "'; it cannot also name a '", AsAbsl(kind), "' job"));
  status.SetPayload(kKeyReusedPayload, absl::Cord(existing.id));
  return status;
}

bool IsIdempotencyKeyReused(const absl::Status& status) {
  return absl::IsAlreadyExists(status) && status.GetPayload(kKeyReusedPayload).has_value();
}

absl::Status StoreFullError(std::string_view message) {
  absl::Status status = absl::ResourceExhaustedError(job_store_internal::AsAbsl(message));
  status.SetPayload(kStoreFullPayload, absl::Cord("1"));
  return status;
}

bool IsStoreFull(const absl::Status& status) {
  return absl::IsResourceExhausted(status) && status.GetPayload(kStoreFullPayload).has_value();
}

absl::Status JobStoreOptions::Validate() const {
  if (max_attempts < 1) {
    return absl::InvalidArgumentError("JobStoreOptions.max_attempts: must be at least 1");
  }
  if (sqlite_busy_timeout < absl::ZeroDuration()) {
    return absl::InvalidArgumentError("JobStoreOptions.sqlite_busy_timeout: must not be negative");
  }
  if (postgres_max_connections < 1) {
    return absl::InvalidArgumentError(
        "JobStoreOptions.postgres_max_connections: must be at least 1");
  }
  return absl::OkStatus();
}

namespace job_store_internal {
namespace {

constexpr char kCrockford[] = "0123456789ABCDEFGHJKMNPQRSTVWXYZ";
constexpr absl::string_view kPageTokenPrefix = "p1.";

}  // namespace

std::string AbandonedMessage(int max_attempts) {
  return absl::StrCat("job abandoned: started ", max_attempts,
                      " times without finishing (its workers crashed, stalled or were shut "
                      "down); not retried again");
}

std::string NewJobId() {
  // absl::BitGen is not thread-safe; one generator per thread, seeded from the OS.
  thread_local absl::BitGen gen;
  const uint64_t millis = static_cast<uint64_t>(absl::ToUnixMillis(absl::Now())) &
                          ((uint64_t{1} << 48) - 1);
  const uint64_t rand_hi = absl::Uniform<uint64_t>(gen) & 0xFFFF;  // 16 bits
  const uint64_t rand_lo = absl::Uniform<uint64_t>(gen);           // 64 bits
  // 128 bits = millis(48) | rand_hi(16) | rand_lo(64); encoded 5 bits at a time from the top,
  // 26 characters = 130 bits, so the first character carries only the top 3 bits.
  const uint64_t hi = (millis << 16) | rand_hi;
  const uint64_t lo = rand_lo;
  std::string id(26, '0');
  for (int i = 25; i >= 0; --i) {
    const int bit = (25 - i) * 5;  // position of the character's lowest bit
    uint64_t v;
    if (bit + 5 <= 64) {
      v = lo >> bit;
    } else if (bit >= 64) {
      v = hi >> (bit - 64);
    } else {
      v = (lo >> bit) | (hi << (64 - bit));
    }
    id[i] = kCrockford[v & 31];
  }
  return id;
}

std::string EncodePageToken(int64_t after_seq) {
  return absl::StrCat(kPageTokenPrefix, after_seq);
}

absl::StatusOr<int64_t> DecodePageToken(std::string_view token_in) {
  absl::string_view token = AsAbsl(token_in);
  int64_t seq = 0;
  if (!absl::ConsumePrefix(&token, kPageTokenPrefix) || !absl::SimpleAtoi(token, &seq) ||
      seq < 0) {
    return absl::InvalidArgumentError("page_token: not a token returned by ListJobs");
  }
  return seq;
}

absl::StatusOr<int> EffectivePageSize(int requested) {
  if (requested < 0) return absl::InvalidArgumentError("page_size: must not be negative");
  if (requested == 0) return ListJobsRequest::kDefaultPageSize;
  return std::min(requested, ListJobsRequest::kMaxPageSize);
}

absl::Status ValidateSubmit(std::string_view kind, std::string_view idempotency_key) {
  if (kind.empty()) return absl::InvalidArgumentError("kind: must not be empty");
  if (kind.size() > kMaxKindLength) {
    return absl::InvalidArgumentError(absl::StrCat("kind: longer than ", kMaxKindLength));
  }
  if (idempotency_key.size() > kMaxIdempotencyKeyLength) {
    return absl::InvalidArgumentError(
        absl::StrCat("idempotency_key: longer than ", kMaxIdempotencyKeyLength));
  }
  return absl::OkStatus();
}

absl::Status ValidateWorkerId(std::string_view worker_id) {
  if (worker_id.empty()) return absl::InvalidArgumentError("worker_id: must not be empty");
  if (worker_id.size() > kMaxWorkerIdLength) {
    return absl::InvalidArgumentError(absl::StrCat("worker_id: longer than ", kMaxWorkerIdLength));
  }
  return absl::OkStatus();
}

absl::Status ValidateClaim(std::string_view worker_id, absl::Duration lease) {
  if (absl::Status s = ValidateWorkerId(worker_id); !s.ok()) return s;
  if (lease <= absl::ZeroDuration() || lease == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError("lease: must be positive and finite");
  }
  return absl::OkStatus();
}

absl::Status ValidateHeartbeat(std::string_view id, double progress, absl::Duration lease) {
  if (id.empty()) return absl::InvalidArgumentError("id: must not be empty");
  if (!std::isfinite(progress)) return absl::InvalidArgumentError("progress: must be finite");
  if (lease <= absl::ZeroDuration() || lease == absl::InfiniteDuration()) {
    return absl::InvalidArgumentError("lease: must be positive and finite");
  }
  return absl::OkStatus();
}

absl::Status ValidateFail(const absl::Status& error) {
  if (error.ok()) return absl::InvalidArgumentError("error: a failed job needs a non-OK status");
  return absl::OkStatus();
}

absl::Status ValidateListTasks(std::string_view parent_id, std::string_view batch) {
  if (parent_id.empty()) return absl::InvalidArgumentError("parent_id: must not be empty");
  if (batch.empty()) return absl::InvalidArgumentError("batch: must not be empty");
  if (batch.size() > kMaxTaskBatchLength) {
    return absl::InvalidArgumentError(absl::StrCat("batch: longer than ", kMaxTaskBatchLength));
  }
  return absl::OkStatus();
}

absl::Status ValidateSubmitTasks(std::string_view parent_id, std::string_view batch,
                                 std::string_view kind, const std::vector<std::string>& requests) {
  if (absl::Status s = ValidateListTasks(parent_id, batch); !s.ok()) return s;
  if (absl::Status s = ValidateSubmit(kind, ""); !s.ok()) return s;
  if (requests.empty()) return absl::InvalidArgumentError("requests: a batch needs a task");
  if (requests.size() > static_cast<size_t>(JobStore::kMaxTasksPerBatch)) {
    return absl::InvalidArgumentError(absl::StrCat("requests: more than ",
                                                   JobStore::kMaxTasksPerBatch, " tasks"));
  }
  return absl::OkStatus();
}

absl::Status TasksOfTaskError(std::string_view parent_id) {
  return absl::FailedPreconditionError(
      absl::StrCat("job ", AsAbsl(parent_id), " is a task; tasks cannot have tasks"));
}

absl::Status TasksOfIdleJobError(std::string_view parent_id, JobState state) {
  return absl::FailedPreconditionError(absl::StrCat("job ", AsAbsl(parent_id), " is ",
                                                    AsAbsl(JobStateName(state)),
                                                    "; only a RUNNING job can add tasks"));
}

absl::Status TasksOfCancelledJobError(std::string_view parent_id) {
  return absl::CancelledError(absl::StrCat("job ", AsAbsl(parent_id),
                                           " has a cancel request; no tasks added"));
}

absl::Status TaskBatchSizeError(std::string_view parent_id, std::string_view batch, size_t existing,
                                size_t requested) {
  return absl::FailedPreconditionError(
      absl::StrCat("job ", AsAbsl(parent_id), ": task batch '", AsAbsl(batch), "' has ", existing,
                   " tasks already, not ", requested));
}

double ClampProgress(double progress) { return std::clamp(progress, 0.0, 1.0); }

int64_t DurationMicros(absl::Duration d) {
  return std::max<int64_t>(1, absl::ToInt64Microseconds(d));
}

absl::Time TimeFromMicros(int64_t micros) { return absl::FromUnixMicros(micros); }

absl::Status LostLeaseError(std::string_view id, int attempt, JobState state,
                            int current_attempt) {
  return absl::AbortedError(absl::StrFormat(
      "job %s: attempt %d no longer holds the lease (job is %s at attempt %d)", AsAbsl(id),
      attempt, AsAbsl(JobStateName(state)), current_attempt));
}

absl::Status JobNotFoundError(std::string_view id) {
  return absl::NotFoundError(absl::StrCat("job ", AsAbsl(id), " not found"));
}

}  // namespace job_store_internal
}  // namespace gpsel
