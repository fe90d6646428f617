// LLVMFuzzerInitialize for the libFuzzer targets that parse protobuf messages (request_fuzzer,
// job_record_fuzzer): protobuf logs an error for every string field with invalid UTF-8 it parses
// or serialises, which the fuzzers feed on purpose and check themselves (fuzz_check.h). Kept out
// of fuzz_check.h so that the parser fuzzers (kernel_expr_fuzzer, csv_fuzzer) do not include
// protobuf. Defines a function: include it from one file per fuzz target, its <target>.cc.
#ifndef GPSEL_TESTS_FUZZ_SILENCE_PROTOBUF_LOG_H_
#define GPSEL_TESTS_FUZZ_SILENCE_PROTOBUF_LOG_H_

#include <google/protobuf/stubs/logging.h>

#include <string>

namespace gpsel::fuzz {

inline void IgnoreProtobufLog(google::protobuf::LogLevel, const char*, int, const std::string&) {}

}  // namespace gpsel::fuzz

extern "C" int LLVMFuzzerInitialize(int*, char***) {
  google::protobuf::SetLogHandler(&gpsel::fuzz::IgnoreProtobufLog);
  return 0;
}

#endif  // GPSEL_TESTS_FUZZ_SILENCE_PROTOBUF_LOG_H_
