// memcpy for bulk data, safe from one pathology of `rep movsb`: where the destination lies
// 1-63 bytes past the source modulo 4 KiB, the string copy that glibc's memcpy uses from
// 2 KiB and that the kernel uses for process_vm_readv/writev runs 5-14 times slower on AMD
// Zen (32 KiB: 11-18 us instead of 0.8; 1 MiB through process_vm_readv: 440-580 us instead of
// 100). Heap buffers meet at such distances easily: std::vector's data sits 16 bytes into its
// mapping, a shared window's slot at 0.
#pragma once

#include <cstddef>
#include <cstdint>

namespace gyre {

// Whether a copy to `dst` from `src` meets that pathology: the destination 1 to within-1 bytes
// past the source, modulo 4 KiB. glibc's own guard against it (on CPUs it knows) uses 64; the
// kernel's copy was measured slow here up to 24 bytes and at its usual pace from 32.
inline bool shortCopyDistance(const void* dst, const void* src, uintptr_t within = 64) {
  const uintptr_t ahead =
      (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
  return ahead != 0 && ahead < within;
}

// dst = src for `bytes`, never overlapping: memcpy, or vector loads and stores where
// shortCopyDistance holds.
void copyBytes(void* dst, const void* src, size_t bytes);

// dst = src with streaming (non-temporal) stores where the CPU has them (x86-64: SSE2), whose
// lines go to memory instead of this core's cache; not ordered with later stores until
// storeFence().
void streamBytes(void* dst, const void* src, size_t bytes);
// Orders every streaming store before it with every store after it (a publish).
void storeFence();

// The vector loop copyBytes takes at a short distance, with AVX2 (where the CPU has it) or with
// SSE2; exposed so tests reach both.
void copyVectors(void* dst, const void* src, size_t bytes, bool avx2);

}  // namespace gyre
