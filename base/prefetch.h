// Prefetches for the lines of a host window. For reading, a line another core writes: issued a
// few calls ahead of the read, its transfer overlaps the work in between instead of stalling
// the read. For writing, a rank's own next post, whose line the readers took a lap before: the
// line comes back while the rank finishes its call, instead of in its next post's first store,
// which every later store waits behind (docs/perf/small_calls.md).
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace gyre {

inline void prefetchForRead(const void* p) {
  __builtin_prefetch(p, 0);
}

#if defined(__x86_64__) || defined(__i386__)
// PREFETCHW, where the CPU has it (CPUID 0x80000001, ECX bit 8). Written as the instruction:
// __builtin_prefetch(p, 1) emits it only in code built for a CPU that has it, and nothing else.
inline bool canPrefetchForWrite() {
  static const bool can = [] {
    unsigned a = 0, b = 0, c = 0, d = 0;
    return __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 8)) != 0;
  }();
  return can;
}
inline void prefetchForWrite(const void* p) {
  __asm__ volatile("prefetchw %0" : : "m"(*static_cast<const char*>(p)));
}
#else
inline bool canPrefetchForWrite() {
  return true;
}
inline void prefetchForWrite(const void* p) {
  __builtin_prefetch(p, 1);
}
#endif

}  // namespace gyre
