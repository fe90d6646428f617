// ProgressClock: elapsed time and a linear time-left estimate per phase; see progress_clock.h.
#include "gpsel/core/progress_clock.h"

#include <algorithm>
#include <chrono>
#include <cmath>

#include "absl/strings/str_format.h"

namespace gpsel {
namespace {
constexpr double kMinFraction = 0.01;  // of a phase, before any estimate
constexpr double kMinSeconds = 1.0;    // into a phase, before any estimate
}  // namespace

ProgressClock::ProgressClock(std::function<double()> now) : now_(std::move(now)) {
  if (!now_) {
    now_ = [] {
      return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch())
          .count();
    };
  }
  run_start_ = phase_start_ = now_();
}

ProgressClock::Reading ProgressClock::Update(double fraction) {
  const double now = now_();
  fraction = std::isfinite(fraction) ? std::clamp(fraction, 0.0, 1.0) : 0.0;
  if (fraction < last_fraction_) {
    ++phase_;
    phase_start_ = now;
    phase_start_fraction_ = fraction;
  }
  last_fraction_ = fraction;
  Reading reading;
  reading.elapsed_seconds = now - run_start_;
  reading.phase = phase_;
  // The phase's own share: a phase entered at fraction f0 has 1 − f0 to do, at the pace of
  // (f − f0) per elapsed second (the first phase starts at 0, so this is elapsed·(1 − f)/f).
  const double done = fraction - phase_start_fraction_;
  const double phase_seconds = now - phase_start_;
  if (fraction >= 1.0) {
    reading.remaining_seconds = 0.0;
  } else if (done >= kMinFraction * (1.0 - phase_start_fraction_) && phase_seconds >= kMinSeconds) {
    reading.remaining_seconds = phase_seconds * (1.0 - fraction) / done;
  }
  return reading;
}

std::string FormatDuration(double seconds) {
  const long long total = std::llround(std::max(0.0, std::isfinite(seconds) ? seconds : 0.0));
  const long long h = total / 3600, m = (total / 60) % 60, s = total % 60;
  if (h > 0) return absl::StrFormat("%d:%02d:%02d", h, m, s);
  return absl::StrFormat("%d:%02d", m, s);
}

}  // namespace gpsel
