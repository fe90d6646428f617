// ProgressClock: elapsed time and an estimate of the time left for a progress display, from the
// fractions done that the core reports (core/progress.h) and the time they took.
//
// The estimate is linear in the fraction: remaining = elapsed · (1 − f) / f over the current
// phase. A phase is a run of non-decreasing fractions; a fraction that falls (a search's
// re-score after its candidates, the MAP fit after the MLL fit when a stage counts from 0 again)
// starts a new phase with its own clock, so a finished phase's pace never claims the next one.
// No estimate is given before 1 % of a phase or 1 s into it: too early to mean anything.
//
//   gpsel::ProgressClock clock;
//   gpsel::ProgressClock::Reading r = clock.Update(p.fraction);
//   std::cerr << FormatDuration(r.elapsed_seconds) << " elapsed";
#ifndef GPSEL_CORE_PROGRESS_CLOCK_H_
#define GPSEL_CORE_PROGRESS_CLOCK_H_

#include <functional>
#include <optional>
#include <string>

namespace gpsel {

class ProgressClock {
 public:
  // `now` returns seconds on a monotonic clock (default: std::chrono::steady_clock); tests pass
  // their own. The run's clock starts at construction.
  explicit ProgressClock(std::function<double()> now = {});

  struct Reading {
    double elapsed_seconds = 0.0;             // since construction
    std::optional<double> remaining_seconds;  // of the current phase; empty when too early
    int phase = 0;                            // 0-based, +1 each time the fraction fell
  };
  Reading Update(double fraction);

 private:
  std::function<double()> now_;
  double run_start_ = 0.0;
  double phase_start_ = 0.0;
  double phase_start_fraction_ = 0.0;
  double last_fraction_ = 0.0;
  int phase_ = 0;
};

// "0:42", "3:05", "1:02:07" (h:mm:ss once an hour is reached).
std::string FormatDuration(double seconds);

}  // namespace gpsel

#endif  // GPSEL_CORE_PROGRESS_CLOCK_H_
