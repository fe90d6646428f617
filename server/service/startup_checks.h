// Start-up checks of gpsel-server's security set-up (issue 33): secrets that every user of the
// machine can read, bearer tokens too short or blank to resist guessing, and plaintext without a
// token on an address other hosts reach are refused before anything listens (the last one only
// warned about, loudly, when --allow-insecure-plaintext says the network is private). And the
// reflection service, registered by gRPC's plugin rather than by gpsel, asks for the token too.
//
//   GPSEL_RETURN_IF_ERROR(gpsel::CheckSecretFile(path, "--tls-key"));
//   builder.experimental().SetInterceptorCreators(...ReflectionAuthInterceptorFactory(token));
#ifndef GPSEL_SERVICE_STARTUP_CHECKS_H_
#define GPSEL_SERVICE_STARTUP_CHECKS_H_

#include <memory>
#include <string>
#include <string_view>
#include <vector>

#include <grpcpp/support/server_interceptor.h>

#include "absl/status/status.h"
#include "gpsel/core/status_macros.h"

namespace gpsel {

// Bearer tokens shorter than this are refused: 16 characters of `openssl rand -hex 32` output
// are 64 bits, beyond guessing over a network.
inline constexpr size_t kMinAuthTokenLength = 16;

// INVALID_ARGUMENT naming `flag` when the file at `path` can be read or written by users other
// than its owner and group (mode & 0006), or cannot be examined. Its contents are not read.
absl::Status CheckSecretFile(const std::string& path, std::string_view flag);

// INVALID_ARGUMENT for a token that is blank (only white space) or shorter than
// kMinAuthTokenLength; OK for a good one. "" (no token) is not checked here.
absl::Status CheckAuthToken(std::string_view token);

// Whether a gRPC listen address ("HOST:PORT", "[V6]:PORT", "unix:PATH") is reachable from this
// host only: 127.0.0.0/8, ::1, "localhost" and unix sockets. Every other host (0.0.0.0, [::],
// "", a name, a routable address) is not.
bool IsLoopbackListenAddress(std::string_view listen);

// "Bearer <token>" (scheme case-insensitive, RFC 7235 §2.1) among `values` equals `expected`,
// compared in constant time whatever the mismatch position.
bool BearerTokenMatches(const std::vector<std::string>& values, const std::string& expected);

// A server interceptor that refuses reflection calls (grpc.reflection.*) that do not carry the
// bearer token: each response is replaced by an in-band UNAUTHENTICATED ErrorResponse and the
// call ends UNAUTHENTICATED. Empty `token`: nothing to check (nullptr).
std::unique_ptr<grpc::experimental::ServerInterceptorFactoryInterface>
ReflectionAuthInterceptorFactory(const std::string& token);

}  // namespace gpsel

#endif  // GPSEL_SERVICE_STARTUP_CHECKS_H_
