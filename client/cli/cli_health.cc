// `gpsel health`: the standard gRPC health check of a gpsel-server; exit 0 only when SERVING.
// --json prints the grpc.health.v1.HealthCheckResponse in the protobuf JSON mapping (status
// UNKNOWN when the server cannot be reached; the reason goes to stderr).
//
//   gpsel health --server 127.0.0.1:50051 && echo up
#include <iostream>
#include <memory>
#include <string>

#include "gpsel/client/cli/backend.h"
#include "gpsel/client/cli/cli_common.h"
#include "gpsel/client/cli/commands.h"

namespace gpsel::cli {

// A health check answers at once or not at all: a few seconds, not the 600 s of a fit.
inline constexpr double kHealthTimeoutSeconds = 5;

CommandRunner SetupHealth(CLI::App& sub) {
  auto flags = std::make_shared<RemoteFlags>();
  auto service = std::make_shared<std::string>();
  auto json = std::make_shared<bool>(false);
  AddRemoteFlags(sub, *flags, /*server_required=*/true, kHealthTimeoutSeconds);
  sub.add_option("--service", *service,
                 "service to check (default: the whole server; e.g. gpsel.v1.ModelSelectionService)");
  sub.add_flag("--json", *json, "print the HealthCheckResponse as JSON");
  return [flags, service, json]() -> int {
    using grpc::health::v1::HealthCheckResponse;
    absl::StatusOr<std::unique_ptr<Client>> client = Connect(*flags);
    if (!client.ok()) return ReportError(client.status());
    absl::StatusOr<HealthCheckResponse::ServingStatus> status = (*client)->Health(*service);
    HealthCheckResponse response;
    response.set_status(status.ok() ? *status : HealthCheckResponse::UNKNOWN);
    if (*json) {
      PrintJson(response);
    } else {
      std::cout << (status.ok() ? HealthCheckResponse::ServingStatus_Name(*status) : "UNREACHABLE")
                << "\n";
    }
    if (!status.ok()) std::cerr << "gpsel: " << status.status().message() << "\n";
    return status.ok() && *status == HealthCheckResponse::SERVING ? kExitOk : kExitFailure;
  };
}

}  // namespace gpsel::cli
