// TSan build only (scripts/sanitize.sh links this object into every executable of build-tsan):
// absl::Mutex::Lock/Unlock/Await that call Debian's libabsl_synchronization and tell
// ThreadSanitizer about the lock.
//
// Why: Debian's absl is not built with -fsanitize=thread, so its Mutex (atomics and futexes in
// the shared library) creates no happens-before edge that TSan can see, and every field our job
// stores guard with an absl::Mutex (server/store/job_store_sqlite.cc mu_, server/store/job_store_postgres.cc
// pool_mu_) is reported as a data race. A suppression cannot fix that without naming our own
// frames (both stacks of such a report are ours). Definitions in the executable take precedence
// over the shared library's for our calls; the real functions are found with dlsym(RTLD_NEXT).
// Only what gpsel uses is wrapped (MutexLock and Mutex::Await); absl-internal calls, and gRPC's,
// still go to the library directly, uninstrumented as before.
#include <dlfcn.h>
#include <sanitizer/tsan_interface.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "absl/synchronization/mutex.h"

namespace {

#define GPSEL_STR2(x) #x
#define GPSEL_STR(x) GPSEL_STR2(x)

// The mangled name of absl::<inline namespace>::Mutex::<suffix>, e.g. suffix "4LockEv".
void* Real(const char* suffix) {
  const std::string ns = GPSEL_STR(ABSL_OPTION_INLINE_NAMESPACE_NAME);
  const std::string name = "_ZN4absl" + std::to_string(ns.size()) + ns + "5Mutex" + suffix;
  void* f = dlsym(RTLD_NEXT, name.c_str());
  if (f == nullptr) {
    std::fprintf(stderr, "tsan_absl_mutex: %s not found in libabsl\n", name.c_str());
    std::abort();
  }
  return f;
}

using Method = void (*)(absl::Mutex*);
using AwaitMethod = void (*)(absl::Mutex*, const absl::Condition&);

}  // namespace

namespace absl {
ABSL_NAMESPACE_BEGIN

void Mutex::Lock() {
  static const Method real = reinterpret_cast<Method>(Real("4LockEv"));
  real(this);
  __tsan_acquire(this);
}

void Mutex::Unlock() {
  static const Method real = reinterpret_cast<Method>(Real("6UnlockEv"));
  __tsan_release(this);
  real(this);
}

// Await releases the lock while it waits and holds it again on return.
void Mutex::Await(const Condition& cond) {
  static const AwaitMethod real = reinterpret_cast<AwaitMethod>(Real("5AwaitERKNS0_9ConditionE"));
  __tsan_release(this);
  real(this, cond);
  __tsan_acquire(this);
}

ABSL_NAMESPACE_END
}  // namespace absl
