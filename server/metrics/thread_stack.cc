// pthread_attr_setstacksize that leaves room for static TLS; see thread_stack.h.
#include "gpsel/server/metrics/thread_stack.h"

#include <dlfcn.h>
#include <link.h>
#include <pthread.h>

#include <cerrno>
#include <cstdint>
#include <limits>

namespace gpsel {

size_t ThreadStackExtraBytes() {
  static const size_t extra = [] {
    size_t tls = 0;
    dl_iterate_phdr(
        [](dl_phdr_info* info, size_t, void* data) {
          for (int i = 0; i < info->dlpi_phnum; ++i) {
            const ElfW(Phdr)& header = info->dlpi_phdr[i];
            if (header.p_type == PT_TLS) {
              *static_cast<size_t*>(data) += header.p_memsz + header.p_align;
            }
          }
          return 0;
        },
        &tls);
    // glibc's static TLS surplus (about 2 KiB by default) and the thread descriptor fit here.
    constexpr size_t kSlack = 16 * 1024;
    constexpr size_t kPage = 4096;
    return (tls + kSlack + kPage - 1) / kPage * kPage;
  }();
  return extra;
}

}  // namespace gpsel

extern "C" int pthread_attr_setstacksize(pthread_attr_t* attr, size_t size) {
  using SetStackSize = int (*)(pthread_attr_t*, size_t);
  static const SetStackSize glibc =
      reinterpret_cast<SetStackSize>(dlsym(RTLD_NEXT, "pthread_attr_setstacksize"));
  if (glibc == nullptr) return ENOSYS;
  const size_t extra = gpsel::ThreadStackExtraBytes();
  if (size > std::numeric_limits<size_t>::max() - extra) return glibc(attr, size);
  return glibc(attr, size + extra);
}
