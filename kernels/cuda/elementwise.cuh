// Device-side element operations: the same results, bit for bit, as the CPU kernels
// (kernels/cpu/reduce.h). Integers wrap; min and max keep `a` when either side is NaN; 16-bit
// floats are computed in float and rounded once to nearest even; avg divides once, at the end.
// For f16/bf16 sum and prod without a divide the packed instructions (__hadd2, __hmul2) are
// used: they round the exact result once, and because float's 24-bit significand is at least
// 2p + 2 for both formats (p = 11, 8), rounding through float first gives the same value.
// C++17: shared with device code that runs the algorithms.
#pragma once

#include <cuda_bf16.h>
#include <cuda_fp16.h>

#include <cstdint>
#include <cstring>
#include <type_traits>

namespace gyre::cuda {

struct Sum {};
struct Prod {};
struct Min {};
struct Max {};
struct Copy {};  // d = a

// Element types: the stored type S and the type C the arithmetic runs in.
template <class T>
struct Elem {
  using S = T;
  using C = T;
  static __device__ __forceinline__ C load(S s) { return s; }
  static __device__ __forceinline__ S store(C c) { return c; }
};
struct F16 {};
struct BF16 {};
template <>
struct Elem<F16> {
  using S = uint16_t;
  using C = float;
  static __device__ __forceinline__ C load(S s) { return __half2float(__ushort_as_half(s)); }
  static __device__ __forceinline__ S store(C c) { return __half_as_ushort(__float2half_rn(c)); }
};
template <>
struct Elem<BF16> {
  using S = uint16_t;
  using C = float;
  static __device__ __forceinline__ C load(S s) {
    return __bfloat162float(__ushort_as_bfloat16(s));
  }
  static __device__ __forceinline__ S store(C c) {
    return __bfloat16_as_ushort(__float2bfloat16_rn(c));
  }
};

template <class Op, class C>
__device__ __forceinline__ C apply(C a, C b) {
  if constexpr (std::is_same_v<Op, Copy>) {
    return a;
  } else if constexpr (std::is_same_v<Op, Min>) {
    return b < a ? b : a;
  } else if constexpr (std::is_same_v<Op, Max>) {
    return a < b ? b : a;
  } else if constexpr (std::is_integral_v<C>) {
    using U = std::make_unsigned_t<C>;
    if constexpr (std::is_same_v<Op, Sum>) return C(U(a) + U(b));
    return C(U(a) * U(b));
  } else {
    if constexpr (std::is_same_v<Op, Sum>) return a + b;
    return a * b;
  }
}

// One element: d = a op b, then / div when kDivide.
template <class T, class Op, bool kDivide>
__device__ __forceinline__ typename Elem<T>::S combine(typename Elem<T>::S a, typename Elem<T>::S b,
                                                       typename Elem<T>::C div) {
  using E = Elem<T>;
  auto v = apply<Op>(E::load(a), E::load(b));
  if constexpr (kDivide) v = decltype(v)(v / div);
  return E::store(v);
}

// Sixteen bytes of elements, loaded and stored as one vector.
template <class S>
union alignas(16) Pack {
  static constexpr int kCount = 16 / int(sizeof(S));
  uint4 raw;
  S v[kCount];
};

template <class T, class Op, bool kDivide>
__device__ __forceinline__ uint4 combinePack(uint4 a, uint4 b, typename Elem<T>::C div) {
  using S = typename Elem<T>::S;
  constexpr bool kPacked16 = (std::is_same_v<T, F16> || std::is_same_v<T, BF16>)&&!kDivide &&
                             (std::is_same_v<Op, Sum> || std::is_same_v<Op, Prod>);
  if constexpr (kPacked16) {
    using V2 = std::conditional_t<std::is_same_v<T, F16>, __half2, __nv_bfloat162>;
    const uint32_t* x = reinterpret_cast<const uint32_t*>(&a);
    const uint32_t* y = reinterpret_cast<const uint32_t*>(&b);
    uint4 out;
    uint32_t* o = reinterpret_cast<uint32_t*>(&out);
#pragma unroll
    for (int j = 0; j < 4; ++j) {
      V2 p, q, r;
      std::memcpy(&p, &x[j], 4);
      std::memcpy(&q, &y[j], 4);
      if constexpr (std::is_same_v<Op, Sum>) {
        r = __hadd2(p, q);
      } else {
        r = __hmul2(p, q);
      }
      std::memcpy(&o[j], &r, 4);
    }
    return out;
  } else {
    Pack<S> pa, pb, po;
    pa.raw = a;
    pb.raw = b;
#pragma unroll
    for (int j = 0; j < Pack<S>::kCount; ++j) {
      po.v[j] = combine<T, Op, kDivide>(pa.v[j], pb.v[j], div);
    }
    return po.raw;
  }
}

}  // namespace gyre::cuda
