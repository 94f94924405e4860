#include "kernels/cpu/reduce.h"

#include <cstring>

#include "kernels/cpu/half.h"

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

template <class T>
void divideNative(void* data, size_t n, int divisor) {
  auto* p = static_cast<T*>(data);
  for (size_t i = 0; i < n; ++i) p[i] = T(p[i] / T(divisor));
}

template <float (*Load)(uint16_t), uint16_t (*Store)(float)>
void divideHalf(void* data, size_t n, int divisor) {
  auto* p = static_cast<uint16_t*>(data);
  for (size_t i = 0; i < n; ++i) p[i] = Store(Load(p[i]) / float(divisor));
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

void divide(DataType type, void* data, size_t n, int divisor) {
  if (divisor == 1 || n == 0) return;
  switch (type) {
    case DataType::i8: return divideNative<int8_t>(data, n, divisor);
    case DataType::u8: return divideNative<uint8_t>(data, n, divisor);
    case DataType::i32: return divideNative<int32_t>(data, n, divisor);
    case DataType::u32: return divideNative<uint32_t>(data, n, divisor);
    case DataType::i64: return divideNative<int64_t>(data, n, divisor);
    case DataType::u64: return divideNative<uint64_t>(data, n, divisor);
    case DataType::f16: return divideHalf<halfToFloat, floatToHalf>(data, n, divisor);
    case DataType::bf16: return divideHalf<bf16ToFloat, floatToBf16>(data, n, divisor);
    case DataType::f32: return divideNative<float>(data, n, divisor);
    case DataType::f64: return divideNative<double>(data, n, divisor);
  }
}

const char* isaName() { return isa().name; }

}  // namespace gyre::cpu
