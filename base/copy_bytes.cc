#include "base/copy_bytes.h"

#include <algorithm>
#include <chrono>
#include <cstring>
#include <memory>

#if defined(__x86_64__)
#include <immintrin.h>
#endif

namespace gyre {

namespace {

// Below glibc's threshold for `rep movsb` (2112 bytes) memcpy moves vectors itself.
constexpr size_t kStringCopyFrom = 2048;

#if defined(__x86_64__)
// 128 bytes a round; the empty asm keeps the compiler from turning the loop back into memcpy.
__attribute__((target("avx2"))) void copyAvx2(std::byte* d, const std::byte* s, size_t bytes) {
  size_t i = 0;
  for (; i + 128 <= bytes; i += 128) {
    const __m256i a = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i));
    const __m256i b = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 32));
    const __m256i c = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 64));
    const __m256i e = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(s + i + 96));
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), a);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 32), b);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 64), c);
    _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i + 96), e);
    asm volatile("" ::: "memory");
  }
  std::memcpy(d + i, s + i, bytes - i);
}

// Streaming stores (kStream) send the lines to memory, not into this core's cache; they need
// a 16-byte aligned destination, which streamBytes() gives them.
template <bool kStream>
void copySse2(std::byte* d, const std::byte* s, size_t bytes) {
  const auto store = [](std::byte* to, __m128i v) {
    if constexpr (kStream)
      _mm_stream_si128(reinterpret_cast<__m128i*>(to), v);
    else
      _mm_storeu_si128(reinterpret_cast<__m128i*>(to), v);
  };
  size_t i = 0;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i a = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i));
    const __m128i b = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 16));
    const __m128i c = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 32));
    const __m128i e = _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i + 48));
    store(d + i, a);
    store(d + i + 16, b);
    store(d + i + 32, c);
    store(d + i + 48, e);
    asm volatile("" ::: "memory");
  }
  for (; kStream && i + 16 <= bytes; i += 16)
    store(d + i, _mm_loadu_si128(reinterpret_cast<const __m128i*>(s + i)));
  std::memcpy(d + i, s + i, bytes - i);
}

bool hasAvx2() {
  static const bool has = [] {
    __builtin_cpu_init();
    return __builtin_cpu_supports("avx2") != 0;
  }();
  return has;
}
#endif

}  // namespace

void copyVectors(void* dst, const void* src, size_t bytes, bool avx2) {
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
#if defined(__x86_64__)
  return avx2 && hasAvx2() ? copyAvx2(d, s, bytes) : copySse2<false>(d, s, bytes);
#else
  (void)avx2;
  std::memcpy(d, s, bytes);
#endif
}

void streamBytes(void* dst, const void* src, size_t bytes) {
  auto* d = static_cast<std::byte*>(dst);
  const auto* s = static_cast<const std::byte*>(src);
#if defined(__x86_64__)
  const size_t head = std::min(bytes, size_t(-reinterpret_cast<uintptr_t>(d) & 15));
  std::memcpy(d, s, head);
  copySse2<true>(d + head, s + head, bytes - head);
#else
  std::memcpy(d, s, bytes);
#endif
}

void storeFence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

bool measureShortDistanceStall(
    const std::function<bool(void* dst, const void* src, size_t)>& copy) {
  constexpr size_t kPage = 4096, kBytes = size_t(32) << 10, kNear = 16;
  constexpr int kRounds = 6, kCopies = 4;
  const auto arena = std::make_unique<std::byte[]>(2 * kBytes + 3 * kPage);
  auto* src = reinterpret_cast<std::byte*>((reinterpret_cast<uintptr_t>(arena.get()) + kPage - 1) &
                                           ~uintptr_t(kPage - 1));
  std::byte* dst = src + kBytes + kPage;
  std::memset(src, 1, kBytes);
  std::memset(dst, 2, kBytes + kNear);
  using Clock = std::chrono::steady_clock;
  Clock::duration best[2] = {Clock::duration::max(), Clock::duration::max()};
  // Rounds alternate the two distances, so a slower stretch of the machine's meets both.
  for (int round = 0; round < kRounds; ++round) {
    for (int near = 0; near < 2; ++near) {
      const auto t0 = Clock::now();
      for (int i = 0; i < kCopies; ++i) {
        if (!copy(dst + (near ? kNear : 0), src, kBytes)) return true;
      }
      best[near] = std::min(best[near], Clock::now() - t0);
    }
  }
  return double(best[1].count()) >= kShortDistanceStallRatio * double(best[0].count());
}

bool StallVerdict::stalls() {
  int verdict = verdict_.load(std::memory_order_relaxed);
  if (verdict < 0) {
    verdict = measureShortDistanceStall(copy_);
    verdict_.store(verdict, std::memory_order_relaxed);
  }
  return verdict != 0;
}

namespace {
StallVerdict stringCopy([](void* dst, const void* src, size_t bytes) {
  std::memcpy(dst, src, bytes);
  asm volatile("" ::: "memory");  // the copy is the point: not to be elided
  return true;
});
}  // namespace

bool stringCopyStallsNearby() {
  return stringCopy.stalls();
}

void overrideStringCopyStall(std::optional<bool> stalls) {
  stringCopy.override(stalls);
}

void copyBytes(void* dst, const void* src, size_t bytes) {
#if defined(__x86_64__)
  if (bytes >= kStringCopyFrom && shortCopyDistance(dst, src) && stringCopyStallsNearby())
    return copyVectors(dst, src, bytes, true);
#endif
  std::memcpy(dst, src, bytes);
}

}  // namespace gyre
