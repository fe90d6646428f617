// A progress callback that remembers the first stop it passed on: the evaluations of the fit
// (core/fit.cc) and of the evidence samplers (core/evidence.cc) poll it between their blocks, and
// when it says stop they abandon the evaluation and hand its status, not a value, to their caller.
#ifndef GPSEL_CORE_INTERNAL_FIRST_STOP_H_
#define GPSEL_CORE_INTERNAL_FIRST_STOP_H_

#include "absl/status/status.h"
#include "gpsel/core/progress.h"

namespace gpsel::internal {

// `inner` forwarded, with the first non-OK status it returns kept in *first_stop (which must
// outlive the callback); a null `inner` gives a null callback (nothing to poll).
ProgressCallback RecordingFirstStop(const ProgressCallback& inner, absl::Status* first_stop);

}  // namespace gpsel::internal

#endif  // GPSEL_CORE_INTERNAL_FIRST_STOP_H_
