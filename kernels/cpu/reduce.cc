#include "kernels/cpu/reduce.h"

#include <cstring>


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
  if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("f16c") &&
      __builtin_cpu_supports("fma")) {
    return {avx2::reduceEntry, "avx2+f16c"};
  }
#endif
  return {generic::reduceEntry, "generic"};
}

const Isa& isa() {
  static const Isa chosen = pickIsa();
  return chosen;
}

}  // namespace

void reduce(DataType type, RedOp op, void* dst, void* dst2, const void* a, const void* b,
            size_t n, int avgDivisor) {
  if (n == 0) return;
  isa().reduce(type, op, dst, dst2, a, b, n, avgDivisor);
}

void copy(void* dst, void* dst2, const void* src, size_t bytes) {
  if (bytes == 0) return;
  if (dst != src) std::memcpy(dst, src, bytes);
  if (dst2 && dst2 != src) std::memcpy(dst2, src, bytes);
}

const char* isaName() { return isa().name; }

}  // namespace gyre::cpu
