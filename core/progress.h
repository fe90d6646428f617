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

#include <algorithm>
#include <functional>
#include <mutex>
#include <string>

#include "absl/status/status.h"

namespace gpsel {

struct Progress {
  std::string stage;      // e.g. "map_fit", "nested_sampling", "search"
  double fraction = 0.0;  // estimated fraction done in [0, 1]; may be coarse
  std::string message;    // short human-readable detail
  // True for a poll that carries no news and only asks whether to stop. Long loops poll on every
  // likelihood evaluation (and a waiting search every 100 ms), so that a worker is free about
  // one evaluation after a cancel or deadline; callbacks that draw or send progress skip polls.
  bool poll_only = false;
};

// The poll a loop sends when it has nothing new to report.
inline Progress CancellationPoll() {
  Progress poll;
  poll.poll_only = true;
  return poll;
}

using ProgressCallback = std::function<absl::Status(const Progress&)>;

// Calls `callback` if set; OK when unset.
inline absl::Status ReportProgress(const ProgressCallback& callback, const Progress& progress) {
  if (!callback) return absl::OkStatus();
  return callback(progress);
}

// Makes a caller's progress callback safe to call from several threads at once (parallel
// optimiser starts, concurrent fits): calls are serialised, the fraction reported never
// decreases (parallel work interleaves), and once the callback has returned an error every later
// call returns that error without calling it again (so all workers stop on one cancellation).
// Must outlive the callbacks it hands out.
class SerializedProgress {
 public:
  explicit SerializedProgress(const ProgressCallback& callback) : callback_(callback) {}
  SerializedProgress(const SerializedProgress&) = delete;
  SerializedProgress& operator=(const SerializedProgress&) = delete;

  // Empty when the wrapped callback is empty (nothing to report, never cancels).
  ProgressCallback Callback() {
    if (!callback_) return nullptr;
    return [this](const Progress& progress) {
      std::lock_guard<std::mutex> lock(mutex_);
      if (!stopped_.ok()) return stopped_;
      if (progress.poll_only) {
        stopped_ = callback_(progress);
        return stopped_;
      }
      Progress monotone = progress;
      max_fraction_ = std::max(max_fraction_, progress.fraction);
      monotone.fraction = max_fraction_;
      stopped_ = callback_(monotone);
      return stopped_;
    };
  }

 private:
  const ProgressCallback& callback_;
  std::mutex mutex_;
  absl::Status stopped_;
  double max_fraction_ = 0.0;
};

}  // namespace gpsel

#endif  // GPSEL_CORE_PROGRESS_H_
