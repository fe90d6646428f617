// Thread stacks that fit the process's static TLS, for prometheus-cpp-pull's Exposer.
//
// Civetweb (Debian's libcivetweb1, under prometheus::Exposer) starts its request threads with
// pthread_attr_setstacksize(102400), and glibc carves each thread's static TLS out of the stack
// it is given. gpsel-server's static TLS is about 65 KiB (Debian's pthread OpenBLAS alone has
// 60 KiB), so a civetweb thread had under 30 KiB left and the first scrape overflowed it: the
// server died with SIGSEGV (exit 139) — the reason metrics/ once had a hand-written HTTP server.
// thread_stack.cc therefore defines pthread_attr_setstacksize in the executable, which the
// dynamic linker prefers to glibc's for every library (the executable exports the symbol: see
// server/metrics/CMakeLists.txt), and adds the static TLS size to every requested size, so that each
// thread gets the usable stack it asked for. Threads with default stacks are unaffected.
#ifndef GPSEL_METRICS_THREAD_STACK_H_
#define GPSEL_METRICS_THREAD_STACK_H_

#include <cstddef>

namespace gpsel {

// Bytes added to every pthread_attr_setstacksize request: the static TLS of the loaded
// modules plus slack for glibc's surplus and alignment. Computed once.
size_t ThreadStackExtraBytes();

}  // namespace gpsel

#endif  // GPSEL_METRICS_THREAD_STACK_H_
