// memcpy for bulk data, safe from one pathology of `rep movsb`: where the destination lies
// 1-63 bytes past the source modulo 4 KiB, the string copy that glibc's memcpy uses from
// 2 KiB and that the kernel uses for process_vm_readv/writev runs 5-14 times slower on AMD
// Zen (32 KiB: 11-18 us instead of 0.8; 1 MiB through process_vm_readv: 440-580 us instead of
// 100). Heap buffers meet at such distances easily: std::vector's data sits 16 bytes into its
// mapping, a shared window's slot at 0. Other CPUs copy at those distances at their usual pace
// (an Intel Xeon: 32 KiB in 0.62 us against 0.58), where the detours cost 11-45 %, so whether
// the CPU stalls is measured, not assumed.
#pragma once

#include <atomic>
#include <cstddef>
#include <cstdint>
#include <functional>
#include <optional>

namespace gyre {

// Whether a copy to `dst` from `src` meets that pathology: the destination 1 to within-1 bytes
// past the source, modulo 4 KiB. glibc's own guard against it (on CPUs it knows) uses 64; the
// kernel's copy was measured slow here up to 24 bytes and at its usual pace from 32.
inline bool shortCopyDistance(const void* dst, const void* src, uintptr_t within = 64) {
  const uintptr_t ahead =
      (reinterpret_cast<uintptr_t>(dst) - reinterpret_cast<uintptr_t>(src)) & 4095;
  return ahead != 0 && ahead < within;
}

// The probe behind both stall verdicts (memcpy's here, the kernel's in link/mailbox.h): `copy`
// of 32 KiB to a page-aligned destination and to one 16 bytes past a page, the best of a few
// rounds each (tens of microseconds; a few hundred where it stalls); whether the near copy took
// kShortDistanceStallRatio times the aligned one's time. A copy that fails (returns false)
// counts as a stall: the guarded path is the safe one.
bool measureShortDistanceStall(const std::function<bool(void* dst, const void* src, size_t)>& copy);
// AMD Zen 3 took 17 times as long, an Intel Xeon 1.07 times.
inline constexpr double kShortDistanceStallRatio = 2.0;

// Whether one way of copying stalls at a short distance on this CPU: measured at the first ask
// and kept for the process, unless overridden.
class StallVerdict {
 public:
  using Copy = bool (*)(void* dst, const void* src, size_t bytes);
  explicit constexpr StallVerdict(Copy copy) : copy_(copy) {}
  bool stalls();
  // Takes `stalls` in place of the measurement (nullopt measures again at the next ask): for
  // tests and side-by-side benchmarks of either path.
  void override(std::optional<bool> stalls) {
    verdict_.store(stalls ? int(*stalls) : -1, std::memory_order_relaxed);
  }

 private:
  Copy copy_;
  std::atomic<int> verdict_{-1};  // -1: not measured yet
};

// memcpy's verdict: copyBytes takes vector loops at a short distance only where it stalls.
bool stringCopyStallsNearby();
void overrideStringCopyStall(std::optional<bool> stalls);

// dst = src for `bytes`, never overlapping: memcpy, or vector loads and stores where
// shortCopyDistance holds and stringCopyStallsNearby().
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
