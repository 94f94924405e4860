// Prefetches for lines another core writes or reads: issued a few calls ahead of the access,
// the line's transfer overlaps the work in between instead of stalling the access.
#pragma once

#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#endif

namespace gyre {

inline void prefetchForRead(const void* p) {
  __builtin_prefetch(p, 0);
}

// Brings the line over owned, ready to be written: the store that follows does not wait for
// the other cores to drop their copies. x86 only where the CPU has PREFETCHW (say
// canPrefetchForWrite, once); everywhere else a hint the CPU may ignore.
#if defined(__x86_64__) || defined(__i386__)
inline bool canPrefetchForWrite() {
  unsigned a = 0, b = 0, c = 0, d = 0;
  return __get_cpuid(0x80000001, &a, &b, &c, &d) && (c & (1u << 8)) != 0;
}
__attribute__((target("prfchw"))) inline void prefetchForWrite(const void* p) {
  __builtin_prefetch(p, 1);
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
