#include "kernels/cpu/reduce.h"

#include <algorithm>
#include <atomic>
#include <cstring>

#include "base/copy_bytes.h"

#if defined(__x86_64__)
#include <cpuid.h>
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
    if (stores.dst) streamBytes(dst + off, reduced, bytes);
    if (!dst2) continue;
    if (stores.dst2)
      streamBytes(dst2 + off, reduced, bytes);
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

void copy(void* dst, void* dst2, const void* src, size_t bytes, Stores stores) {
  if (bytes == 0) return;
  if (dst != src) (stores.dst ? streamBytes : copyBytes)(dst, src, bytes);
  if (dst2 && dst2 != src) (stores.dst2 ? streamBytes : copyBytes)(dst2, src, bytes);
  if (stores.dst || stores.dst2) storeFence();
}

void scale(DataType type, void* dst, const void* src, const void* factor, size_t n) {
  // The product kernel against a block of copies of the factor, a block at a time.
  const size_t es = dataTypeSize(type);
  const size_t perBlock = kStreamBlockBytes / es;
  alignas(64) std::byte factors[kStreamBlockBytes];
  for (size_t i = 0; i < std::min(perBlock, n); ++i) std::memcpy(factors + i * es, factor, es);
  const ReduceFn fn = chosenReduce.load(std::memory_order_relaxed);
  for (size_t done = 0; done < n; done += perBlock) {
    const size_t k = std::min(perBlock, n - done), off = done * es;
    fn(type, RedOp::prod, static_cast<std::byte*>(dst) + off, nullptr,
       static_cast<const std::byte*>(src) + off, factors, k, 0);
  }
}

const char* isaName() {
  return isa().name;
}

}  // namespace gyre::cpu
