// OpenJobStore: picks the JobStore backend from the URL scheme.
#include <algorithm>
#include <memory>
#include <string>
#include <string_view>

#include "absl/status/status.h"
#include "absl/status/statusor.h"
#include "absl/strings/match.h"
#include "absl/strings/str_cat.h"
#include "gpsel/server/store/job_store.h"
#include "gpsel/server/store/job_store_internal.h"
#include "gpsel/server/store/job_store_postgres.h"
#include "gpsel/server/store/job_store_sqlite.h"

namespace gpsel {

absl::StatusOr<std::unique_ptr<JobStore>> OpenJobStore(std::string_view url,
                                                       const JobStoreOptions& options) {
  namespace jsi = job_store_internal;
  const absl::string_view u = jsi::AsAbsl(url);
  if (absl::StartsWith(u, "postgresql://") || absl::StartsWith(u, "postgres://")) {
    return OpenPostgresJobStore(url, options);
  }
  if (absl::StartsWith(u, "sqlite:")) {
    std::string_view path = url.substr(std::string_view("sqlite:").size());
    // "sqlite://PATH": the authority part is empty, so "sqlite:///var/x.db" is /var/x.db.
    if (path.substr(0, 2) == "//") path.remove_prefix(2);
    if (path.empty()) {
      return absl::InvalidArgumentError(
          "job store URL: sqlite needs a path, e.g. sqlite:/var/lib/gpsel/jobs.db");
    }
    return OpenSqliteJobStore(path, options);
  }
  // Only the scheme is echoed: a mistyped PostgreSQL URL may carry a password.
  const absl::string_view scheme = u.substr(0, std::min(u.find(':'), size_t{32}));
  return absl::InvalidArgumentError(absl::StrCat(
      "job store URL: unknown scheme '", scheme,
      "'; expected sqlite:PATH, postgresql://... or postgres://..."));
}

std::string RedactStoreUrl(std::string_view url) {
  std::string out(url);
  const size_t scheme_end = out.find("://");
  if (scheme_end != std::string::npos) {
    const size_t authority = scheme_end + 3;
    const size_t authority_end = std::min(out.find_first_of("/?", authority), out.size());
    const size_t at = out.rfind('@', authority_end);
    if (at != std::string::npos && at >= authority) {
      const size_t colon = out.find(':', authority);
      if (colon != std::string::npos && colon < at) out.replace(colon + 1, at - colon - 1, "***");
    }
  }
  for (size_t pos = out.find("password="); pos != std::string::npos;
       pos = out.find("password=", pos + 1)) {
    const size_t value = pos + 9;
    const size_t value_end = std::min(out.find_first_of("& ", value), out.size());
    out.replace(value, value_end - value, "***");
  }
  return out;
}

}  // namespace gpsel
