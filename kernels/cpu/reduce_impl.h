// Element-wise kernels, compiled once per instruction set: the including file defines
// GYRE_CPU_ISA (a namespace name) and the compiler flags. Plain loops over __restrict
// pointers that GCC vectorises; f16 uses F16C intrinsics where the ISA has them.
#pragma once

#include <cstring>
#include <type_traits>

#include "kernels/cpu/half.h"
#include "kernels/cpu/reduce.h"

#if (defined(__F16C__) && defined(__AVX__)) || defined(__AVX2__)
#include <immintrin.h>
#endif

namespace gyre::cpu::GYRE_CPU_ISA {

// Integer arithmetic wraps (two's complement) instead of overflowing, as NCCL and MPI do.
template <class T>
inline T addOf(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(a) + U(b));
  } else {
    return a + b;
  }
}
template <class T>
inline T mulOf(T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    return T(U(a) * U(b));
  } else {
    return a * b;
  }
}

struct Sum {
  template <class T>
  static T apply(T a, T b) {
    return addOf(a, b);
  }
};
struct Prod {
  template <class T>
  static T apply(T a, T b) {
    return mulOf(a, b);
  }
};
struct Min {
  template <class T>
  static T apply(T a, T b) {
    return b < a ? b : a;
  }
};
struct Max {
  template <class T>
  static T apply(T a, T b) {
    return a < b ? b : a;
  }
};

// Native element types: compute in T.
template <class T, class Op, bool kDivide>
void loopNative(T* __restrict d, const T* __restrict a, const T* __restrict b, size_t n, T div) {
  for (size_t i = 0; i < n; ++i) {
    T v = Op::apply(a[i], b[i]);
    if constexpr (kDivide) v = T(v / div);
    d[i] = v;
  }
}
template <class T, class Op, bool kDivide>
void loopNative2(T* __restrict d, T* __restrict d2, const T* __restrict a, const T* __restrict b,
                 size_t n, T div) {
  for (size_t i = 0; i < n; ++i) {
    T v = Op::apply(a[i], b[i]);
    if constexpr (kDivide) v = T(v / div);
    d[i] = v;
    d2[i] = v;
  }
}

// 16-bit floats: compute in float, round once per element.
struct Bf16 {
  static float load(uint16_t h) { return bf16ToFloat(h); }
  static uint16_t store(float f) { return floatToBf16(f); }
};
struct Fp16 {
  static float load(uint16_t h) { return halfToFloat(h); }
  static uint16_t store(float f) { return floatToHalf(f); }
};

template <class Cvt, class Op, bool kDivide>
void loopHalf(uint16_t* __restrict d, uint16_t* __restrict d2, const uint16_t* __restrict a,
              const uint16_t* __restrict b, size_t n, float div) {
  size_t i = 0;
#if defined(__F16C__) && defined(__AVX__)
  if constexpr (std::is_same_v<Cvt, Fp16>) {
    const __m256 vdiv = _mm256_set1_ps(div);
    for (; i + 8 <= n; i += 8) {
      __m256 x = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(a + i)));
      __m256 y = _mm256_cvtph_ps(_mm_loadu_si128(reinterpret_cast<const __m128i*>(b + i)));
      __m256 v;
      if constexpr (std::is_same_v<Op, Sum>)
        v = _mm256_add_ps(x, y);
      else if constexpr (std::is_same_v<Op, Prod>)
        v = _mm256_mul_ps(x, y);
      else if constexpr (std::is_same_v<Op, Min>)
        v = _mm256_min_ps(y, x);
      else
        v = _mm256_max_ps(y, x);
      if constexpr (kDivide) v = _mm256_div_ps(v, vdiv);
      __m128i h = _mm256_cvtps_ph(v, _MM_FROUND_TO_NEAREST_INT | _MM_FROUND_NO_EXC);
      _mm_storeu_si128(reinterpret_cast<__m128i*>(d + i), h);
      if (d2) _mm_storeu_si128(reinterpret_cast<__m128i*>(d2 + i), h);
    }
  }
#endif
#if defined(__AVX2__)
  if constexpr (std::is_same_v<Cvt, Bf16>) {
    const __m256 vdiv = _mm256_set1_ps(div);
    const __m256i zero = _mm256_setzero_si256();
    const __m256i one = _mm256_set1_epi32(1);
    const __m256i half = _mm256_set1_epi32(0x7fff);
    const __m256i quietBit = _mm256_set1_epi32(0x40);
    auto apply = [&](__m256 x, __m256 y) {
      __m256 v;
      if constexpr (std::is_same_v<Op, Sum>)
        v = _mm256_add_ps(x, y);
      else if constexpr (std::is_same_v<Op, Prod>)
        v = _mm256_mul_ps(x, y);
      else if constexpr (std::is_same_v<Op, Min>)
        v = _mm256_min_ps(y, x);
      else
        v = _mm256_max_ps(y, x);
      if constexpr (kDivide) v = _mm256_div_ps(v, vdiv);
      // float -> bf16 in the low 16 bits, round to nearest even; NaN stays a quiet NaN (as
      // floatToBf16).
      const __m256i u = _mm256_castps_si256(v);
      const __m256i top = _mm256_srli_epi32(u, 16);
      const __m256i lsb = _mm256_and_si256(top, one);
      const __m256i rounded =
          _mm256_srli_epi32(_mm256_add_epi32(u, _mm256_add_epi32(half, lsb)), 16);
      const __m256i isNan = _mm256_castps_si256(_mm256_cmp_ps(v, v, _CMP_UNORD_Q));
      return _mm256_blendv_epi8(rounded, _mm256_or_si256(top, quietBit), isNan);
    };
    // Sixteen at a time: interleaving with zeros puts each bf16 in the high half of a float
    // (elements 0-3 and 8-11 from unpacklo, 4-7 and 12-15 from unpackhi, per 128-bit lane),
    // and packus undoes exactly that interleaving, so no lane crossing is needed.
    for (; i + 16 <= n; i += 16) {
      const __m256i ha = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(a + i));
      const __m256i hb = _mm256_loadu_si256(reinterpret_cast<const __m256i*>(b + i));
      const __m256i lo = apply(_mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, ha)),
                               _mm256_castsi256_ps(_mm256_unpacklo_epi16(zero, hb)));
      const __m256i hi = apply(_mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, ha)),
                               _mm256_castsi256_ps(_mm256_unpackhi_epi16(zero, hb)));
      const __m256i h = _mm256_packus_epi32(lo, hi);
      _mm256_storeu_si256(reinterpret_cast<__m256i*>(d + i), h);
      if (d2) _mm256_storeu_si256(reinterpret_cast<__m256i*>(d2 + i), h);
    }
  }
#endif
  for (; i < n; ++i) {
    float v = Op::apply(Cvt::load(a[i]), Cvt::load(b[i]));
    if constexpr (kDivide) v = v / div;
    const uint16_t h = Cvt::store(v);
    d[i] = h;
    if (d2) d2[i] = h;
  }
}

template <class T, class Op>
void dispatchDivide(void* d, void* d2, const void* a, const void* b, size_t n, int div) {
  if constexpr (std::is_same_v<T, Bf16> || std::is_same_v<T, Fp16>) {
    auto* dh = static_cast<uint16_t*>(d);
    auto* d2h = static_cast<uint16_t*>(d2);
    auto* ah = static_cast<const uint16_t*>(a);
    auto* bh = static_cast<const uint16_t*>(b);
    if (div > 0)
      loopHalf<T, Op, true>(dh, d2h, ah, bh, n, float(div));
    else
      loopHalf<T, Op, false>(dh, d2h, ah, bh, n, 1.0f);
  } else {
    auto* dt = static_cast<T*>(d);
    auto* d2t = static_cast<T*>(d2);
    auto* at = static_cast<const T*>(a);
    auto* bt = static_cast<const T*>(b);
    if (d2t) {
      if (div > 0)
        loopNative2<T, Op, true>(dt, d2t, at, bt, n, T(div));
      else
        loopNative2<T, Op, false>(dt, d2t, at, bt, n, T(1));
    } else {
      if (div > 0)
        loopNative<T, Op, true>(dt, at, bt, n, T(div));
      else
        loopNative<T, Op, false>(dt, at, bt, n, T(1));
    }
  }
}

template <class T>
void dispatchOp(RedOp op, void* d, void* d2, const void* a, const void* b, size_t n, int div) {
  switch (op) {
    case RedOp::sum:
      return dispatchDivide<T, Sum>(d, d2, a, b, n, 0);
    case RedOp::avg:
      return dispatchDivide<T, Sum>(d, d2, a, b, n, div);
    case RedOp::prod:
      return dispatchDivide<T, Prod>(d, d2, a, b, n, 0);
    case RedOp::min:
      return dispatchDivide<T, Min>(d, d2, a, b, n, 0);
    case RedOp::max:
      return dispatchDivide<T, Max>(d, d2, a, b, n, 0);
  }
}

inline void reduceImpl(DataType type, RedOp op, void* d, void* d2, const void* a, const void* b,
                       size_t n, int div) {
  switch (type) {
    case DataType::i8:
      return dispatchOp<int8_t>(op, d, d2, a, b, n, div);
    case DataType::u8:
      return dispatchOp<uint8_t>(op, d, d2, a, b, n, div);
    case DataType::i32:
      return dispatchOp<int32_t>(op, d, d2, a, b, n, div);
    case DataType::u32:
      return dispatchOp<uint32_t>(op, d, d2, a, b, n, div);
    case DataType::i64:
      return dispatchOp<int64_t>(op, d, d2, a, b, n, div);
    case DataType::u64:
      return dispatchOp<uint64_t>(op, d, d2, a, b, n, div);
    case DataType::f16:
      return dispatchOp<Fp16>(op, d, d2, a, b, n, div);
    case DataType::bf16:
      return dispatchOp<Bf16>(op, d, d2, a, b, n, div);
    case DataType::f32:
      return dispatchOp<float>(op, d, d2, a, b, n, div);
    case DataType::f64:
      return dispatchOp<double>(op, d, d2, a, b, n, div);
  }
}

}  // namespace gyre::cpu::GYRE_CPU_ISA
