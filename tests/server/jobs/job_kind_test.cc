// JobKindRegistry (server/jobs/job_kind.h): registration, duplicates, bad kinds, lookup; the evidence
// kind's registration (server/jobs/evidence_job.h) and JobToProto's use of a kind's hooks.
#include "gpsel/server/jobs/job_kind.h"

#include <string>
#include <utility>
#include <vector>

#include "gmock/gmock.h"
#include "gpsel/server/jobs/evidence_job.h"
#include "gpsel/v1/model_selection.pb.h"
#include "gtest/gtest.h"
#include "tests/status_matchers.h"

using ::gpsel::status_matchers::StatusIs;

namespace gpsel {
namespace {

using ::testing::ElementsAre;
using ::testing::IsEmpty;

// A kind whose result is `reply`, whatever the request.
JobKind ConstantKind(std::string name, std::string reply) {
  JobKind kind;
  kind.name = std::move(name);
  kind.execute = [reply](std::string_view, const ProgressCallback&, JobTasks&)
      -> absl::StatusOr<std::string> { return reply; };
  return kind;
}

// Outside a JobRunner there is no store to put tasks in.
class NoTasks final : public JobTasks {
 public:
  absl::StatusOr<std::vector<std::string>> Run(std::string_view, std::string_view,
                                               const std::vector<std::string>&, int,
                                               const ProgressCallback&) override {
    return absl::UnimplementedError("no job store in this test");
  }
};

TEST(JobKindRegistryTest, RegisteredKindsAreFoundByName) {
  JobKindRegistry kinds;
  ASSERT_TRUE(kinds.Register(ConstantKind("score", "s")).ok());
  ASSERT_TRUE(kinds.Register(ConstantKind("evidence", "e")).ok());
  const JobKind* score = kinds.Find("score");
  ASSERT_NE(score, nullptr);
  EXPECT_EQ(score->name, "score");
  NoTasks no_tasks;
  absl::StatusOr<std::string> result = score->execute("request", nullptr, no_tasks);
  ASSERT_TRUE(result.ok()) << result.status();
  EXPECT_EQ(*result, "s");
  EXPECT_EQ(kinds.Find("search"), nullptr);
  EXPECT_EQ(kinds.Find(""), nullptr);
  EXPECT_EQ(kinds.Find("Score"), nullptr);  // names are exact
  EXPECT_THAT(kinds.names(), ElementsAre("evidence", "score"));
}

TEST(JobKindRegistryTest, DuplicateNameIsAlreadyExistsAndTheFirstStays) {
  JobKindRegistry kinds;
  ASSERT_TRUE(kinds.Register(ConstantKind("evidence", "first")).ok());
  const absl::Status again = kinds.Register(ConstantKind("evidence", "second"));
  EXPECT_EQ(again.code(), absl::StatusCode::kAlreadyExists) << again;
  EXPECT_THAT(std::string(again.message()), ::testing::HasSubstr("'evidence'"));
  ASSERT_NE(kinds.Find("evidence"), nullptr);
  NoTasks no_tasks;
  EXPECT_EQ(*kinds.Find("evidence")->execute("", nullptr, no_tasks), "first");
  EXPECT_THAT(kinds.names(), ElementsAre("evidence"));
}

TEST(JobKindRegistryTest, EmptyNameOrMissingExecuteIsInvalidArgument) {
  JobKindRegistry kinds;
  EXPECT_EQ(kinds.Register(ConstantKind("", "x")).code(), absl::StatusCode::kInvalidArgument);
  JobKind no_execute;
  no_execute.name = "search";
  EXPECT_EQ(kinds.Register(std::move(no_execute)).code(), absl::StatusCode::kInvalidArgument);
  EXPECT_THAT(kinds.names(), IsEmpty());
  EXPECT_EQ(kinds.Find(""), nullptr);
  EXPECT_EQ(kinds.Find("search"), nullptr);
}

TEST(EvidenceJobKindTest, RegistersOnce) {
  JobKindRegistry kinds;
  ASSERT_TRUE(RegisterEvidenceJobKind(&kinds, ServiceLimits()).ok());
  EXPECT_EQ(RegisterEvidenceJobKind(&kinds, ServiceLimits()).code(),
            absl::StatusCode::kAlreadyExists);
  EXPECT_THAT(kinds.names(), ElementsAre(kEvidenceJobKind, kEvidenceRunJobKind));
  EXPECT_EQ(RegisterEvidenceJobKind(nullptr, ServiceLimits()).code(),
            absl::StatusCode::kInvalidArgument);
}

TEST(EvidenceJobKindTest, ExecuteRejectsBytesThatDoNotParse) {
  JobKindRegistry kinds;
  ASSERT_TRUE(RegisterEvidenceJobKind(&kinds, ServiceLimits()).ok());
  NoTasks no_tasks;
  for (const char* kind : {kEvidenceJobKind, kEvidenceRunJobKind}) {
    absl::StatusOr<std::string> result =
        kinds.Find(kind)->execute(std::string("\xff\xff\xff", 3), nullptr, no_tasks);
    EXPECT_THAT(result, StatusIs(absl::StatusCode::kDataLoss)) << kind << result.status();
  }
}

// The kind's hooks decide the kind-specific fields: the kernel from the request in any state,
// the evidence result only when SUCCEEDED; without the kind, neither.
TEST(JobToProtoTest, UsesTheHooksOfTheJobsKind) {
  JobKindRegistry kinds;
  ASSERT_TRUE(RegisterEvidenceJobKind(&kinds, ServiceLimits()).ok());
  v1::SubmitEvidenceRequest request;
  request.set_kernel("SE + PER");
  v1::EvidenceResult result;
  result.set_log_evidence(-8.032);
  Job job;
  job.id = "01ABC";
  job.kind = kEvidenceJobKind;
  job.state = JobState::kSucceeded;
  job.request = request.SerializeAsString();
  job.result = result.SerializeAsString();
  job.attempts = 1;

  v1::Job proto;
  JobToProto(job, &kinds, &proto);
  EXPECT_EQ(proto.name(), "jobs/01ABC");
  EXPECT_EQ(proto.kind(), "evidence");
  EXPECT_EQ(proto.state(), v1::JOB_STATE_SUCCEEDED);
  EXPECT_EQ(proto.kernel(), "SE + PER");
  ASSERT_TRUE(proto.has_evidence_result());
  EXPECT_EQ(proto.evidence_result().log_evidence(), -8.032);
  EXPECT_EQ(proto.attempts(), 1);

  job.state = JobState::kRunning;
  JobToProto(job, &kinds, &proto);
  EXPECT_EQ(proto.kernel(), "SE + PER");
  EXPECT_FALSE(proto.has_evidence_result());
  EXPECT_EQ(proto.progress().stage(), "evidence");

  job.state = JobState::kSucceeded;
  JobToProto(job, nullptr, &proto);  // no registry: the kind-independent fields only
  EXPECT_EQ(proto.name(), "jobs/01ABC");
  EXPECT_EQ(proto.kernel(), "");
  EXPECT_FALSE(proto.has_evidence_result());

  job.kind = "search";  // not registered
  JobToProto(job, &kinds, &proto);
  EXPECT_EQ(proto.kind(), "search");
  EXPECT_EQ(proto.kernel(), "");
  EXPECT_FALSE(proto.has_evidence_result());
}

// Regression (tests/fuzz/job_record_fuzzer.cc): a time before 1970 read from a store row gave a
// Timestamp with negative nanos, which google.protobuf.Timestamp does not allow.
TEST(JobToProtoTest, TimesBefore1970HaveNanosInRange) {
  Job job;
  job.id = "01ABC";
  job.created = absl::FromUnixMicros(-1'500'000);  // 1969-12-31T23:59:58.5Z
  job.finished = absl::InfinitePast() + absl::Hours(1);
  v1::Job proto;
  JobToProto(job, &proto);
  EXPECT_EQ(proto.create_time().seconds(), -2);
  EXPECT_EQ(proto.create_time().nanos(), 500'000'000);
  EXPECT_GE(proto.finish_time().nanos(), 0);
  EXPECT_LT(proto.finish_time().nanos(), 1'000'000'000);
}

// Regression (tests/fuzz/job_record_fuzzer.cc): an id that is not UTF-8 (a damaged store row)
// went into `name` unchanged, and a client could not parse the response.
TEST(JobToProtoTest, IdThatIsNotUtf8IsMadeValid) {
  Job job;
  job.id = "01K\xff";
  v1::Job proto;
  JobToProto(job, &proto);
  EXPECT_EQ(proto.name(), "jobs/01K\xEF\xBF\xBD");
  v1::Job received;
  EXPECT_TRUE(received.ParseFromString(proto.SerializeAsString()));
}

// Regression (tests/fuzz/job_record_fuzzer.cc): stored result bytes that failed to parse left a
// half-read evidence_result with a string that is not UTF-8, and a client could not parse the
// response. Such a result is now left out.
TEST(JobToProtoTest, ResultThatDoesNotParseIsLeftOut) {
  JobKindRegistry kinds;
  ASSERT_TRUE(RegisterEvidenceJobKind(&kinds, ServiceLimits()).ok());
  v1::EvidenceResult result;
  result.set_log_evidence(-8.032);
  result.set_log_evidence_estimator("\xff\xfe");  // serialised as is, with a logged error
  Job job;
  job.id = "01ABC";
  job.kind = kEvidenceJobKind;
  job.state = JobState::kSucceeded;
  job.result = result.SerializeAsString();
  v1::Job proto;
  JobToProto(job, &kinds, &proto);
  EXPECT_FALSE(proto.has_evidence_result());
  v1::Job received;
  EXPECT_TRUE(received.ParseFromString(proto.SerializeAsString()));
}

}  // namespace
}  // namespace gpsel
