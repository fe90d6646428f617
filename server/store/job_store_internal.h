// Helpers shared by the JobStore backends (job_store_sqlite.cc, job_store_postgres.cc): job ids,
// page tokens, argument validation and the messages both backends must word identically.
// Not part of the public interface; include only from server/job_store*.cc.
#ifndef GPSEL_STORE_JOB_STORE_INTERNAL_H_
#define GPSEL_STORE_JOB_STORE_INTERNAL_H_

#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/string_view.h"
#include "absl/time/time.h"
#include "gpsel/server/store/job_store.h"

namespace gpsel::job_store_internal {

// Debian's Abseil is built with its own absl::string_view (ABSL_OPTION_USE_STD_STRING_VIEW 0),
// which does not convert from std::string_view; these bridge the two without copying.
inline absl::string_view AsAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }
inline std::string_view AsStd(absl::string_view s) { return std::string_view(s.data(), s.size()); }

// Version of the schema this code writes; stored in the schema version table of each database.
// Version 2 added the task columns (parent_id, task_batch, task_index); a version-1 database
// is migrated when opened.
inline constexpr int kSchemaVersion = 2;

// Limits on caller-supplied strings (keys are indexed; ids of workers appear in every row).
inline constexpr size_t kMaxKindLength = 64;
inline constexpr size_t kMaxIdempotencyKeyLength = 256;
inline constexpr size_t kMaxWorkerIdLength = 256;
inline constexpr size_t kMaxTaskBatchLength = 64;

// Error recorded when a job that has been started max_attempts times would be claimed again.
std::string AbandonedMessage(int max_attempts);
// Error message recorded for cancelled jobs.
inline constexpr std::string_view kCancelledMessage = "job cancelled";
// Error recorded for tasks cancelled because their job ended before they ran.
inline constexpr std::string_view kOrphanedTaskMessage = "task cancelled: its job has ended";

// A new ULID: 48-bit Unix milliseconds then 80 random bits, in 26 Crockford base-32 characters.
// Time-ordered ids keep database index inserts local and make ids roughly sortable by age.
std::string NewJobId();

// Page tokens encode the position (creation sequence number) after which the next page starts.
std::string EncodePageToken(int64_t after_seq);
absl::StatusOr<int64_t> DecodePageToken(std::string_view token);
// Effective page size for a ListJobsRequest (INVALID_ARGUMENT when negative).
absl::StatusOr<int> EffectivePageSize(int requested);

absl::Status ValidateSubmit(std::string_view kind, std::string_view idempotency_key);
absl::Status ValidateClaim(std::string_view worker_id, absl::Duration lease);
absl::Status ValidateHeartbeat(std::string_view id, double progress, absl::Duration lease);
absl::Status ValidateFail(const absl::Status& error);
absl::Status ValidateWorkerId(std::string_view worker_id);
absl::Status ValidateSubmitTasks(std::string_view parent_id, std::string_view batch,
                                 std::string_view kind, const std::vector<std::string>& requests);
absl::Status ValidateListTasks(std::string_view parent_id, std::string_view batch);

// FAILED_PRECONDITION for SubmitTasks on a job that cannot take tasks (a task, or not RUNNING),
// or on an existing batch of another size; shared wording for both backends.
absl::Status TasksOfTaskError(std::string_view parent_id);
absl::Status TasksOfIdleJobError(std::string_view parent_id, JobState state);
absl::Status TasksOfCancelledJobError(std::string_view parent_id);
absl::Status TaskBatchSizeError(std::string_view parent_id, std::string_view batch, size_t existing,
                                size_t requested);

// Progress clamped into [0, 1] (already validated as finite).
double ClampProgress(double progress);

// Whole microseconds of a positive duration, at least 1 (databases store microseconds).
int64_t DurationMicros(absl::Duration d);
// absl::Time from Unix microseconds.
absl::Time TimeFromMicros(int64_t micros);

// The error a fenced call returns when the caller's token no longer matches.
absl::Status LostLeaseError(std::string_view id, int attempt, JobState state, int current_attempt);
absl::Status JobNotFoundError(std::string_view id);

}  // namespace gpsel::job_store_internal

#endif  // GPSEL_STORE_JOB_STORE_INTERNAL_H_
