// Raw calls: the ModelSelectionService's methods receive and send bytes (gRPC's "raw callback"
// methods) and the service parses each request itself, so that bytes which do not decode as the
// method's request are refused with INVALID_ARGUMENT naming the message type (issue 33). With
// typed methods gRPC 1.51 parses the request and, when that fails, answers UNIMPLEMENTED with an
// empty message before any handler runs (grpcpp/impl/codegen/server_callback_handlers.h).
//
//   RawModelSelectionService            the generated service, every method on bytes
//   ParseRequest / SerializeResponse    bytes <-> messages, with a size bound
//   MessageWriteReactor<Message>        a server-streaming reactor that writes messages
#ifndef GPSEL_SERVICE_RAW_CALLS_H_
#define GPSEL_SERVICE_RAW_CALLS_H_

#include <cstdint>

#include <google/protobuf/message.h>
#include <grpcpp/grpcpp.h>

#include "absl/status/status.h"
#include "gpsel/v1/model_selection.grpc.pb.h"

namespace gpsel {

// The generated callback service with the methods below re-registered on bytes. It starts from
// CallbackService, so a method not listed here stays a typed callback method (and gets gRPC's
// own parse failure) until it is added.
using RawModelSelectionService = v1::ModelSelectionService::WithRawCallbackMethod_Score<
    v1::ModelSelectionService::WithRawCallbackMethod_Search<
        v1::ModelSelectionService::WithRawCallbackMethod_Predict<
            v1::ModelSelectionService::WithRawCallbackMethod_SubmitEvidence<
                v1::ModelSelectionService::WithRawCallbackMethod_SubmitSearch<
                    v1::ModelSelectionService::WithRawCallbackMethod_SubmitScore<
                        v1::ModelSelectionService::WithRawCallbackMethod_GetJob<
                            v1::ModelSelectionService::WithRawCallbackMethod_WatchJob<
                                v1::ModelSelectionService::WithRawCallbackMethod_CancelJob<
                                    v1::ModelSelectionService::WithRawCallbackMethod_ListJobs<
                                        v1::ModelSelectionService::CallbackService>>>>>>>>>>;

// Parses `bytes` into `request` (cleared first), reading at most `max_bytes` (the server's
// receive limit already bounds what arrives; this keeps the parser to it as well). Bytes that
// are not a `request` — wrong wire types, truncated fields, invalid UTF-8 in a string, nesting
// beyond protobuf's recursion limit — give INVALID_ARGUMENT "request is not a valid
// gpsel.v1.ScoreRequest ..." with ErrorInfo reason UNDECODABLE_REQUEST.
absl::Status ParseRequest(const grpc::ByteBuffer& bytes, int64_t max_bytes,
                          google::protobuf::Message* request);

// Serializes `response` into `bytes`; INTERNAL when protobuf cannot (over 2 GiB).
absl::Status SerializeResponse(const google::protobuf::Message& response, grpc::ByteBuffer* bytes);

// A server-streaming reactor whose subclass writes messages of type `Message`.
template <typename Message>
class MessageWriteReactor : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 protected:
  // Serializes `message` and starts writing it (the caller may reuse `message` at once). A
  // message that cannot be serialized is not written, and the error is returned; on success
  // OnWriteDone follows as for StartWrite.
  absl::Status StartWriteMessage(const Message& message) {
    grpc::ByteBuffer bytes;
    absl::Status status = SerializeResponse(message, &bytes);
    if (!status.ok()) return status;
    // The buffer must stay valid until OnWriteDone; only one write is in flight at a time.
    buffer_.Swap(&bytes);
    StartWrite(&buffer_);
    return absl::OkStatus();
  }

 private:
  grpc::ByteBuffer buffer_;
};

// A server stream refused before it started: finishes with `status` at once.
class RefusedWriteReactor final : public grpc::ServerWriteReactor<grpc::ByteBuffer> {
 public:
  explicit RefusedWriteReactor(const grpc::Status& status) { Finish(status); }
  void OnDone() override { delete this; }
};

}  // namespace gpsel

#endif  // GPSEL_SERVICE_RAW_CALLS_H_
