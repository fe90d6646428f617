// libFuzzer target: what gpsel does with bytes read back from a job store database. A row of
// gpsel_jobs (server/store/job_store_sqlite.cc, server/store/job_store_postgres.cc: ReadJob) is made from the
// input the way ReadJob builds a Job: the state text through ParseJobState (unknown → DATA_LOSS,
// the row is dropped), Unix microseconds through TimeFromMicros, request/result blobs and text
// columns as stored. The page token a client hands back goes through DecodePageToken. Each Job
// then becomes the API resource (server/jobs/job_kind.h, JobToProto) with the hooks of every kind the
// server registers (evidence, search, score and their tasks), which parse the stored request and
// result blobs (server/jobs/evidence_job.cc, search_job.cc, score_job.cc).
// Invariants: ParseJobState and JobStateName are inverse; a decoded page token is ≥ 0 and
// round-trips through EncodePageToken; the resource serialises and parses back (every string
// valid UTF-8, as proto3 requires of the client's parser) with timestamps whose nanos lie in
// [0, 1e9) as google.protobuf.Timestamp requires, and shows the stored id as "jobs/{id}".
// The database access itself (sqlite3_column_*, pqxx) is not exercised here.
#include <fuzzer/FuzzedDataProvider.h>

#include <cstddef>
#include <cstdint>
#include <string>

#include "absl/strings/escaping.h"
#include "absl/strings/str_cat.h"
#include "gpsel/server/jobs/evidence_job.h"
#include "gpsel/server/jobs/job_kind.h"
#include "gpsel/server/jobs/score_job.h"
#include "gpsel/server/jobs/search_job.h"
#include "gpsel/server/store/job_store.h"
#include "gpsel/server/store/job_store_internal.h"
#include "gpsel/server/validation/validation.h"
#include "gpsel/v1/job.pb.h"
#include "tests/fuzz/fuzz_check.h"
#include "tests/fuzz/silence_protobuf_log.h"

namespace {

namespace jsi = gpsel::job_store_internal;

const gpsel::JobKindRegistry& Kinds() {
  static const gpsel::JobKindRegistry* kinds = [] {
    auto* registry = new gpsel::JobKindRegistry;
    for (const absl::Status& s :
         {gpsel::RegisterEvidenceJobKind(registry, gpsel::ServiceLimits{}),
          gpsel::RegisterSearchJobKinds(registry, gpsel::ServiceLimits{}),
          gpsel::RegisterScoreJobKinds(registry, gpsel::ServiceLimits{})}) {
      GPSEL_FUZZ_CHECK(s.ok(), s.ToString());
    }
    return registry;
  }();
  return *kinds;
}

// A nullable timestamp column: NULL reads as InfinitePast (ReadJob's TimeOrPast).
absl::Time TimeColumn(FuzzedDataProvider& in) {
  if (in.ConsumeBool()) return absl::InfinitePast();
  return jsi::TimeFromMicros(in.ConsumeIntegral<int64_t>());
}

void CheckTimestamp(const google::protobuf::Timestamp& t, const char* field) {
  GPSEL_FUZZ_CHECK(t.nanos() >= 0 && t.nanos() < 1'000'000'000,
                   absl::StrCat(field, ": seconds ", t.seconds(), " nanos ", t.nanos()));
}

void CheckPageToken(const std::string& token) {
  absl::StatusOr<int64_t> after = jsi::DecodePageToken(token);
  GPSEL_FUZZ_CHECK_OK_OR_INVALID(after.status());
  if (!after.ok()) return;
  GPSEL_FUZZ_CHECK(*after >= 0, token);
  absl::StatusOr<int64_t> again = jsi::DecodePageToken(jsi::EncodePageToken(*after));
  GPSEL_FUZZ_CHECK(again.ok() && *again == *after, token);
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  FuzzedDataProvider in(data, size);
  CheckPageToken(in.ConsumeRandomLengthString(64));

  gpsel::Job job;
  job.id = in.ConsumeRandomLengthString(64);
  // Mostly a registered kind, so that its hooks parse the blobs.
  static const char* const kKinds[] = {gpsel::kEvidenceJobKind, gpsel::kEvidenceRunJobKind,
                                       gpsel::kSearchJobKind,   gpsel::kSearchCandidateJobKind,
                                       gpsel::kScoreJobKind,    gpsel::kScoreKernelJobKind};
  job.kind = in.ConsumeBool() ? std::string(kKinds[in.ConsumeIntegralInRange<size_t>(0, 5)])
                              : in.ConsumeRandomLengthString(32);
  const std::string state_text = in.ConsumeRandomLengthString(16);
  const std::optional<gpsel::JobState> state = gpsel::ParseJobState(state_text);
  if (state) {
    GPSEL_FUZZ_CHECK(gpsel::JobStateName(*state) == state_text, state_text);
  }
  // Rows with a readable state; the others are DATA_LOSS in ReadJob. Most inputs get one of the
  // five names, so that the fuzzer spends its time past this point.
  constexpr gpsel::JobState kStates[] = {gpsel::JobState::kQueued, gpsel::JobState::kRunning,
                                         gpsel::JobState::kSucceeded, gpsel::JobState::kFailed,
                                         gpsel::JobState::kCancelled};
  job.state = state ? *state : kStates[in.ConsumeIntegralInRange<int>(0, 4)];
  GPSEL_FUZZ_CHECK(gpsel::ParseJobState(gpsel::JobStateName(job.state)) == job.state, "state");
  job.error_code = static_cast<int>(in.ConsumeIntegral<int64_t>());
  job.error_message = in.ConsumeRandomLengthString(64);
  job.progress = in.ConsumeFloatingPoint<double>();
  job.progress_message = in.ConsumeRandomLengthString(64);
  job.attempts = static_cast<int>(in.ConsumeIntegral<int64_t>());
  job.idempotency_key = in.ConsumeRandomLengthString(64);
  job.cancel_requested = in.ConsumeBool();
  job.lease_owner = in.ConsumeRandomLengthString(32);
  job.lease_expires = TimeColumn(in);
  job.created = TimeColumn(in);
  job.started = TimeColumn(in);
  job.finished = TimeColumn(in);
  job.updated = TimeColumn(in);
  // The blobs last: the stored request (a SubmitEvidenceRequest, when intact) and the result.
  const size_t request_size = in.ConsumeIntegralInRange<size_t>(0, in.remaining_bytes());
  job.request = in.ConsumeBytesAsString(request_size);
  job.result = in.ConsumeRemainingBytesAsString();

  gpsel::v1::Job proto;
  gpsel::JobToProto(job, &Kinds(), &proto);
  GPSEL_FUZZ_CHECK(proto.state() == gpsel::ToProto(job.state), "state");
  GPSEL_FUZZ_CHECK(proto.attempts() == job.attempts, "attempts");
  CheckTimestamp(proto.create_time(), "create_time");
  CheckTimestamp(proto.start_time(), "start_time");
  CheckTimestamp(proto.finish_time(), "finish_time");
  gpsel::v1::Job received;
  GPSEL_FUZZ_CHECK(received.ParseFromString(proto.SerializeAsString()),
                   absl::StrCat("job ", absl::CHexEscape(job.id),
                                " does not parse back: ", proto.ShortDebugString()));
  absl::StatusOr<std::string> id = gpsel::JobIdFromName(received.name(), "name");
  if (id.ok() && gpsel::ValidUtf8(job.id) == job.id) GPSEL_FUZZ_CHECK(*id == job.id, job.id);
  return 0;
}
