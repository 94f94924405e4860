#include "kernels/cpu/reduce.h"

#include <algorithm>
#include <atomic>
#include <cstdint>
#include <cstring>

#include "base/copy_bytes.h"

#if defined(__x86_64__)
#include <cpuid.h>
#include <emmintrin.h>
#endif

namespace gyre::cpu {

namespace generic {
void reduceEntry(DataType, RedOp, void*, void*, const void*, const void*, size_t, int);
}
#if defined(__x86_64__)
namespace avx2 {
void reduceEntry(DataType, RedOp, void*, void*, const void*, const void*, size_t, int);
}
#endif

namespace {

using ReduceFn = void (*)(DataType, RedOp, void*, void*, const void*, const void*, size_t, int);

struct Isa {
  ReduceFn reduce;
  const char* name;
};

Isa pickIsa() {
#if defined(__x86_64__)
  __builtin_cpu_init();
  // F16C is CPUID leaf 1, ECX bit 29 (not every compiler's builtin knows its name).
  unsigned eax = 0, ebx = 0, ecx = 0, edx = 0;
  const bool f16c = __get_cpuid(1, &eax, &ebx, &ecx, &edx) && (ecx & (1u << 29));
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma") && f16c) {
    return {avx2::reduceEntry, "avx2+f16c"};
  }
#endif
  return {generic::reduceEntry, "generic"};
}

const Isa& isa() {
  static const Isa chosen = pickIsa();
  return chosen;
}

// The first call picks the instruction set and puts its kernel here; later calls jump
// straight to it (no guard of a local static on the way: a tiny reduction feels its frame).
void pickThenReduce(DataType, RedOp, void*, void*, const void*, const void*, size_t, int);
std::atomic<ReduceFn> chosenReduce{pickThenReduce};

void pickThenReduce(DataType type, RedOp op, void* dst, void* dst2, const void* a, const void* b,
                    size_t n, int avgDivisor) {
  const ReduceFn fn = isa().reduce;
  chosenReduce.store(fn, std::memory_order_relaxed);
  fn(type, op, dst, dst2, a, b, n, avgDivisor);
}

// Streaming stores without the closing fence, for kernels that stream piece by piece. SSE2's
// 16-byte stores (every x86-64 CPU has them) fill the write-combining buffers as fully as wider
// ones do.
void streamUnfenced(std::byte* dst, const std::byte* src, size_t bytes) {
#if defined(__x86_64__)
  const size_t head = std::min(bytes, size_t(-reinterpret_cast<uintptr_t>(dst) & 15));
  std::memcpy(dst, src, head);
  size_t i = head;
  for (; i + 64 <= bytes; i += 64) {
    const __m128i v0 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i));
    const __m128i v1 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 16));
    const __m128i v2 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 32));
    const __m128i v3 = _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i + 48));
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i), v0);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 16), v1);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 32), v2);
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i + 48), v3);
  }
  for (; i + 16 <= bytes; i += 16) {
    _mm_stream_si128(reinterpret_cast<__m128i*>(dst + i),
                     _mm_loadu_si128(reinterpret_cast<const __m128i*>(src + i)));
  }
  std::memcpy(dst + i, src + i, bytes - i);
#else
  std::memcpy(dst, src, bytes);
#endif
}

void storeFence() {
#if defined(__x86_64__)
  _mm_sfence();
#endif
}

// A streamed destination is written a block at a time from where the block was reduced while
// it is still in L1: the output itself where it is cached, else this buffer.
constexpr size_t kStreamBlockBytes = 4096;

void reduceStreaming(DataType type, RedOp op, std::byte* dst, std::byte* dst2, const void* a,
                     const void* b, size_t n, int avgDivisor, Stores stores) {
  const ReduceFn fn = chosenReduce.load(std::memory_order_relaxed);
  const size_t es = dataTypeSize(type);
  const size_t perBlock = kStreamBlockBytes / es;
  alignas(64) std::byte block[kStreamBlockBytes];
  for (size_t done = 0; done < n; done += perBlock) {
    const size_t k = std::min(perBlock, n - done), off = done * es, bytes = k * es;
    const auto* ab = static_cast<const std::byte*>(a) + off;
    const auto* bb = static_cast<const std::byte*>(b) + off;
    std::byte* reduced = stores.dst ? block : dst + off;
    fn(type, op, reduced, nullptr, ab, bb, k, avgDivisor);
    if (stores.dst) streamUnfenced(dst + off, reduced, bytes);
    if (!dst2) continue;
    if (stores.dst2)
      streamUnfenced(dst2 + off, reduced, bytes);
    else
      std::memcpy(dst2 + off, reduced, bytes);
  }
  storeFence();
}

}  // namespace

void reduce(DataType type, RedOp op, void* dst, void* dst2, const void* a, const void* b, size_t n,
            int avgDivisor, Stores stores) {
  if (n == 0) return;
  if (stores.dst || (stores.dst2 && dst2)) {
    return reduceStreaming(type, op, static_cast<std::byte*>(dst), static_cast<std::byte*>(dst2), a,
                           b, n, avgDivisor, stores);
  }
  chosenReduce.load(std::memory_order_relaxed)(type, op, dst, dst2, a, b, n, avgDivisor);
}

void streamCopy(void* dst, const void* src, size_t bytes) {
  streamUnfenced(static_cast<std::byte*>(dst), static_cast<const std::byte*>(src), bytes);
  storeFence();
}

void copy(void* dst, void* dst2, const void* src, size_t bytes, Stores stores) {
  if (bytes == 0) return;
  const auto* s = static_cast<const std::byte*>(src);
  if (dst != src) {
    if (stores.dst)
      streamUnfenced(static_cast<std::byte*>(dst), s, bytes);
    else
      copyBytes(dst, src, bytes);
  }
  if (dst2 && dst2 != src) {
    if (stores.dst2)
      streamUnfenced(static_cast<std::byte*>(dst2), s, bytes);
    else
      copyBytes(dst2, src, bytes);
  }
  if (stores.dst || stores.dst2) storeFence();
}

const char* isaName() {
  return isa().name;
}

}  // namespace gyre::cpu
