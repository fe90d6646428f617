// Progress reporting and cancellation for long-running core loops (optimiser, sampler, search).
//
// Every long loop calls the callback now and then; a non-OK status returned by the callback stops
// the loop, and the loop returns that status (e.g. CANCELLED when a client went away, or
// DEADLINE_EXCEEDED). An empty std::function means "no progress wanted, never cancel".
//
//   gpsel::ProgressCallback cb = [&](const gpsel::Progress& p) {
//     std::cerr << p.stage << " " << p.fraction << "\n";
//     return cancelled ? absl::CancelledError("user") : absl::OkStatus();
//   };
#ifndef GPSEL_CORE_PROGRESS_H_
#define GPSEL_CORE_PROGRESS_H_

#include <functional>
#include <string>

#include "absl/status/status.h"

namespace gpsel {

struct Progress {
  std::string stage;      // e.g. "map_fit", "nested_sampling", "search"
  double fraction = 0.0;  // estimated fraction done in [0, 1]; may be coarse
  std::string message;    // short human-readable detail
};

using ProgressCallback = std::function<absl::Status(const Progress&)>;

// Calls `callback` if set; OK when unset.
inline absl::Status ReportProgress(const ProgressCallback& callback, const Progress& progress) {
  if (!callback) return absl::OkStatus();
  return callback(progress);
}

}  // namespace gpsel

#endif  // GPSEL_CORE_PROGRESS_H_
