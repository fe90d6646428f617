// Start-up security checks and the reflection token check; see startup_checks.h.
#include "gpsel/server/service/startup_checks.h"

#include <arpa/inet.h>
#include <sys/stat.h>

#include <algorithm>
#include <cerrno>
#include <cstring>

#include <grpcpp/grpcpp.h>
#include <grpcpp/server_context.h>

#include "absl/strings/ascii.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "absl/strings/str_format.h"

namespace gpsel {
namespace {

absl::string_view AsAbsl(std::string_view s) { return absl::string_view(s.data(), s.size()); }

// Refuses reflection calls without the token: the reflection service is gRPC's, so the check
// that every gpsel handler makes (ModelSelectionServiceImpl::Admit) happens here instead. A
// server interceptor cannot end a call with a status of its own, but it can rewrite what the
// handler sends: every response becomes the reflection protocol's in-band ErrorResponse
// (UNAUTHENTICATED), so no descriptor leaves the server, and the call's final status becomes
// UNAUTHENTICATED (issue 33: cancelling the call showed the client CANCELLED).
class ReflectionAuthInterceptor final : public grpc::experimental::Interceptor {
 public:
  explicit ReflectionAuthInterceptor(const std::string* token) : token_(token) {}

  void Intercept(grpc::experimental::InterceptorBatchMethods* methods) override {
    using grpc::experimental::InterceptionHookPoints;
    if (methods->QueryInterceptionHookPoint(InterceptionHookPoints::POST_RECV_INITIAL_METADATA)) {
      std::vector<std::string> values;
      for (const auto& [key, value] : *methods->GetRecvInitialMetadata()) {
        if (std::string(key.data(), key.size()) == "authorization") {
          values.emplace_back(value.data(), value.size());
        }
      }
      refused_ = !BearerTokenMatches(values, *token_);
    }
    if (refused_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_MESSAGE)) {
      if (grpc::ByteBuffer* message = methods->GetSerializedSendMessage()) {
        grpc::Slice slice(RefusalResponse());
        *message = grpc::ByteBuffer(&slice, 1);
      }
    }
    if (refused_ && methods->QueryInterceptionHookPoint(InterceptionHookPoints::PRE_SEND_STATUS)) {
      methods->ModifySendStatus(grpc::Status(grpc::StatusCode::UNAUTHENTICATED, kRefusal));
    }
    methods->Proceed();
  }

 private:
  static constexpr char kRefusal[] =
      "missing or wrong bearer token (metadata \"authorization: Bearer <token>\")";
  static_assert(sizeof(kRefusal) < 120, "RefusalResponse writes one-byte lengths");

  // ServerReflectionResponse{error_response (7): ErrorResponse{error_code (1): 16,
  // error_message (2): kRefusal}}, encoded by hand: the reflection messages' C++ classes are
  // not installed.
  static std::string RefusalResponse() {
    const std::string message(kRefusal);
    std::string error;
    error += '\x08';  // field 1, varint
    error += static_cast<char>(grpc::StatusCode::UNAUTHENTICATED);
    error += '\x12';  // field 2, length-delimited
    error += static_cast<char>(message.size());  // < 128: one varint byte
    error += message;
    std::string response;
    response += '\x3a';  // field 7, length-delimited
    response += static_cast<char>(error.size());  // < 128
    response += error;
    return response;
  }

  const std::string* token_;
  bool refused_ = false;
};

class ReflectionAuthFactory final : public grpc::experimental::ServerInterceptorFactoryInterface {
 public:
  explicit ReflectionAuthFactory(std::string token) : token_(std::move(token)) {}
  grpc::experimental::Interceptor* CreateServerInterceptor(
      grpc::experimental::ServerRpcInfo* info) override {
    const char* method = info->method();
    if (method == nullptr || !absl::StartsWith(method, "/grpc.reflection.")) return nullptr;
    return new ReflectionAuthInterceptor(&token_);
  }

 private:
  const std::string token_;
};

}  // namespace

absl::Status CheckSecretFile(const std::string& path, std::string_view flag) {
  struct stat info {};
  if (stat(path.c_str(), &info) != 0) {
    return absl::InvalidArgumentError(absl::StrCat(AsAbsl(flag), ": cannot examine '", path,
                                                   "': ", std::strerror(errno)));
  }
  if ((info.st_mode & (S_IROTH | S_IWOTH)) != 0) {
    return absl::InvalidArgumentError(absl::StrFormat(
        "%s: '%s' is %s by every user of this machine (mode %04o); make it private first "
        "(chmod 600 '%s')",
        AsAbsl(flag), path, (info.st_mode & S_IROTH) ? "readable" : "writable",
        info.st_mode & 07777, path));
  }
  return absl::OkStatus();
}

absl::Status CheckAuthToken(std::string_view token) {
  if (token.empty()) return absl::OkStatus();
  const bool blank = std::all_of(token.begin(), token.end(),
                                 [](char c) { return absl::ascii_isspace(c); });
  if (blank) return absl::InvalidArgumentError("auth token: is only white space");
  if (token.size() < kMinAuthTokenLength) {
    return absl::InvalidArgumentError(absl::StrCat(
        "auth token: ", token.size(), " characters, fewer than ", kMinAuthTokenLength,
        "; make one with: openssl rand -hex 32"));
  }
  return absl::OkStatus();
}

bool IsLoopbackListenAddress(std::string_view listen) {
  if (absl::StartsWith(AsAbsl(listen), "unix:") || absl::StartsWith(AsAbsl(listen), "unix-abstract:")) {
    return true;
  }
  const size_t colon = listen.rfind(':');
  std::string host(listen.substr(0, colon == std::string_view::npos ? listen.size() : colon));
  if (host.size() >= 2 && host.front() == '[' && host.back() == ']') {
    host = host.substr(1, host.size() - 2);
  }
  if (absl::AsciiStrToLower(host) == "localhost") return true;
  in_addr v4{};
  if (inet_pton(AF_INET, host.c_str(), &v4) == 1) return (ntohl(v4.s_addr) >> 24) == 127;
  in6_addr v6{};
  if (inet_pton(AF_INET6, host.c_str(), &v6) == 1) return IN6_IS_ADDR_LOOPBACK(&v6);
  return false;  // "", 0.0.0.0-like names, other host names: reachable from elsewhere
}

bool BearerTokenMatches(const std::vector<std::string>& values, const std::string& expected) {
  bool authorized = false;
  for (const std::string& given : values) {
    // "<scheme> <token>": the scheme is case-insensitive (RFC 7235 §2.1), the token is not.
    const size_t space = given.find(' ');
    if (space == std::string::npos || absl::AsciiStrToLower(given.substr(0, space)) != "bearer") {
      continue;
    }
    const size_t start = given.find_first_not_of(' ', space);
    const std::string token = start == std::string::npos ? "" : given.substr(start);
    if (token.size() == expected.size()) {
      unsigned char diff = 0;
      for (size_t i = 0; i < token.size(); ++i) diff |= token[i] ^ expected[i];
      authorized = authorized || diff == 0;
    }
  }
  return authorized;
}

std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
ReflectionAuthInterceptorFactory(const std::string& token) {
  if (token.empty()) return nullptr;
  return std::make_unique<ReflectionAuthFactory>(token);
}

}  // namespace gpsel
