// Requests parsed and responses serialized by the service itself; see raw_calls.h.
#include "gpsel/server/service/raw_calls.h"

#include <algorithm>
#include <climits>

#include <google/protobuf/io/coded_stream.h>
#include <grpcpp/support/proto_buffer_reader.h>
#include <grpcpp/support/proto_buffer_writer.h>

#include "absl/strings/str_cat.h"
#include "gpsel/proto/bridge/convert.h"

namespace gpsel {

absl::Status ParseRequest(const grpc::ByteBuffer& bytes, int64_t max_bytes,
                          google::protobuf::Message* request) {
  request->Clear();
  const std::string type = request->GetDescriptor()->full_name();
  const size_t size = bytes.Length();
  auto refuse = [&](const std::string& why) {
    return bridge::WithErrorInfo(
        absl::InvalidArgumentError(absl::StrCat(
            "request is not a valid ", type, ": its ", size, " bytes ", why,
            "; send a ", type, " serialized by a protobuf library (proto/gpsel/v1/)")),
        "UNDECODABLE_REQUEST");
  };
  if (max_bytes > 0 && size > static_cast<uint64_t>(max_bytes)) {
    return refuse(absl::StrCat("exceed the server's limit of ", max_bytes, " bytes"));
  }
  grpc::ByteBuffer copy(bytes);  // shares the slices; the reader needs a mutable buffer
  bool parsed = false;
  {
    grpc::ProtoBufferReader reader(&copy);
    if (!reader.status().ok()) return refuse("could not be read");
    google::protobuf::io::CodedInputStream input(&reader);
    input.SetTotalBytesLimit(static_cast<int>(
        std::min<int64_t>(max_bytes > 0 ? max_bytes : INT_MAX, INT_MAX)));
    parsed = request->ParseFromCodedStream(&input) && input.ConsumedEntireMessage();
  }
  if (!parsed) {
    request->Clear();  // whatever was parsed before the error goes at once
    return refuse(
        "do not decode as one (wrong field types, a truncated field, invalid UTF-8 in a string, "
        "or nesting too deep)");
  }
  return absl::OkStatus();
}

absl::Status SerializeResponse(const google::protobuf::Message& response,
                               grpc::ByteBuffer* bytes) {
  bool own_buffer = false;
  const grpc::Status status =
      grpc::SerializationTraits<google::protobuf::Message>::Serialize(response, bytes,
                                                                       &own_buffer);
  if (!status.ok()) {
    return absl::InternalError(absl::StrCat("could not serialize the ",
                                            response.GetDescriptor()->full_name(), ": ",
                                            status.error_message()));
  }
  return absl::OkStatus();
}

}  // namespace gpsel
