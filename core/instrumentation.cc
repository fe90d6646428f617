// The process-wide CoreObserver pointer; see instrumentation.h.
#include "gpsel/core/instrumentation.h"

namespace gpsel {
namespace internal {
std::atomic<CoreObserver*> g_core_observer{nullptr};
}  // namespace internal

CoreObserver* SetCoreObserver(CoreObserver* observer) {
  return internal::g_core_observer.exchange(observer, std::memory_order_acq_rel);
}

}  // namespace gpsel
