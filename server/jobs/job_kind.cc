// JobKindRegistry and the store's Job as the API resource; see job_kind.h.
#include "gpsel/server/jobs/job_kind.h"

#include <utility>

#include "absl/strings/str_cat.h"
#include "gpsel/proto/bridge/convert.h"

namespace gpsel {
namespace {

void SetTime(absl::Time t, google::protobuf::Timestamp* out) {
  const int64_t nanos = absl::ToUnixNanos(t);
  // Floor division: a Timestamp's nanos lie in [0, 1e9) also before 1970 (a store row with a
  // negative time, found by tests/fuzz/job_record_fuzzer.cc, gave negative nanos).
  int64_t seconds = nanos / 1000000000;
  int64_t fraction = nanos % 1000000000;
  if (fraction < 0) {
    fraction += 1000000000;
    --seconds;
  }
  out->set_seconds(seconds);
  out->set_nanos(static_cast<int32_t>(fraction));
}

}  // namespace

absl::Status JobKindRegistry::Register(JobKind kind) {
  if (kind.name.empty()) return absl::InvalidArgumentError("job kind: the name is empty");
  if (!kind.execute) {
    return absl::InvalidArgumentError(
        absl::StrCat("job kind '", kind.name, "': no execute function"));
  }
  if (kinds_.count(kind.name) > 0) {
    return absl::AlreadyExistsError(
        absl::StrCat("job kind '", kind.name, "' is registered already"));
  }
  std::string name = kind.name;
  kinds_.emplace(std::move(name), std::move(kind));
  return absl::OkStatus();
}

const JobKind* JobKindRegistry::Find(std::string_view name) const {
  auto it = kinds_.find(name);
  return it == kinds_.end() ? nullptr : &it->second;
}

std::vector<std::string> JobKindRegistry::names() const {
  std::vector<std::string> names;
  names.reserve(kinds_.size());
  for (const auto& entry : kinds_) names.push_back(entry.first);
  return names;
}

std::string JobName(std::string_view id) { return "jobs/" + std::string(id); }

absl::StatusOr<std::string> JobIdFromName(std::string_view name, std::string_view field) {
  if (name.substr(0, 5) == "jobs/") name.remove_prefix(5);
  if (name.empty()) {
    return bridge::InvalidField(field, "is empty: expected \"jobs/{id}\"");
  }
  if (name.size() > 128 || name.find('/') != std::string_view::npos) {
    return bridge::InvalidField(field, "is not a job name of the form \"jobs/{id}\"");
  }
  return std::string(name);
}

v1::JobState ToProto(JobState state) {
  switch (state) {
    case JobState::kQueued: return v1::JOB_STATE_QUEUED;
    case JobState::kRunning: return v1::JOB_STATE_RUNNING;
    case JobState::kSucceeded: return v1::JOB_STATE_SUCCEEDED;
    case JobState::kFailed: return v1::JOB_STATE_FAILED;
    case JobState::kCancelled: return v1::JOB_STATE_CANCELLED;
  }
  return v1::JOB_STATE_UNSPECIFIED;
}

std::optional<JobState> FromProto(v1::JobState state) {
  switch (state) {
    case v1::JOB_STATE_QUEUED: return JobState::kQueued;
    case v1::JOB_STATE_RUNNING: return JobState::kRunning;
    case v1::JOB_STATE_SUCCEEDED: return JobState::kSucceeded;
    case v1::JOB_STATE_FAILED: return JobState::kFailed;
    case v1::JOB_STATE_CANCELLED: return JobState::kCancelled;
    default: return std::nullopt;
  }
}

std::string ValidUtf8(std::string_view text) {
  // RFC 3629: 1–4 byte sequences, no overlong forms, no surrogates, nothing above U+10FFFF.
  static constexpr char kReplacement[] = "\xEF\xBF\xBD";  // U+FFFD
  std::string out;
  out.reserve(text.size());
  size_t i = 0;
  while (i < text.size()) {
    const unsigned char lead = static_cast<unsigned char>(text[i]);
    size_t length = 0;
    unsigned char low = 0x80, high = 0xBF;  // allowed range of the second byte
    if (lead < 0x80) {
      length = 1;
    } else if (lead >= 0xC2 && lead <= 0xDF) {
      length = 2;
    } else if (lead >= 0xE0 && lead <= 0xEF) {
      length = 3;
      if (lead == 0xE0) low = 0xA0;   // overlong
      if (lead == 0xED) high = 0x9F;  // surrogates
    } else if (lead >= 0xF0 && lead <= 0xF4) {
      length = 4;
      if (lead == 0xF0) low = 0x90;   // overlong
      if (lead == 0xF4) high = 0x8F;  // above U+10FFFF
    }
    bool valid = length > 0 && i + length <= text.size();
    for (size_t k = 1; valid && k < length; ++k) {
      const unsigned char c = static_cast<unsigned char>(text[i + k]);
      valid = k == 1 ? (c >= low && c <= high) : (c >= 0x80 && c <= 0xBF);
    }
    if (valid) {
      out.append(text.substr(i, length));
      i += length;
    } else {
      out.append(kReplacement);
      ++i;
    }
  }
  return out;
}

void JobToProto(const Job& job, const JobKindRegistry* kinds, v1::Job* proto) {
  // Text from the store goes out as proto `string` fields, which must be UTF-8: a damaged store
  // page must not make the whole response undecodable for clients.
  proto->Clear();
  proto->set_name(JobName(ValidUtf8(job.id)));  // the id is text from the store too
  proto->set_kind(ValidUtf8(job.kind));
  proto->set_state(ToProto(job.state));
  v1::Progress* progress = proto->mutable_progress();
  progress->set_fraction(job.progress);
  progress->set_message(ValidUtf8(job.progress_message));
  if (job.state == JobState::kRunning) progress->set_stage(ValidUtf8(job.kind));
  if (job.state == JobState::kFailed || job.state == JobState::kCancelled) {
    proto->mutable_error()->set_code(job.error_code);
    proto->mutable_error()->set_message(ValidUtf8(job.error_message));
  }
  if (job.created != absl::InfinitePast()) SetTime(job.created, proto->mutable_create_time());
  if (job.started != absl::InfinitePast()) SetTime(job.started, proto->mutable_start_time());
  if (job.finished != absl::InfinitePast()) SetTime(job.finished, proto->mutable_finish_time());
  proto->set_attempts(job.attempts);
  proto->set_cancel_requested(job.cancel_requested);
  proto->set_request_id(ValidUtf8(job.idempotency_key));
  const JobKind* kind = kinds != nullptr ? kinds->Find(job.kind) : nullptr;
  if (kind == nullptr) return;
  if (kind->describe) kind->describe(job.request, proto);
  if (job.state == JobState::kSucceeded && kind->result_to_proto) {
    kind->result_to_proto(job.result, proto);
  }
}

}  // namespace gpsel
