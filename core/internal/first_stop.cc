// RecordingFirstStop (see first_stop.h).
#include "gpsel/core/internal/first_stop.h"

namespace gpsel::internal {

ProgressCallback RecordingFirstStop(const ProgressCallback& inner, absl::Status* first_stop) {
  if (!inner) return ProgressCallback();
  return [inner, first_stop](const Progress& p) {
    absl::Status status = inner(p);
    if (!status.ok() && first_stop->ok()) *first_stop = status;
    return status;
  };
}

}  // namespace gpsel::internal
