// IEEE binary16 and bfloat16 conversions in portable C++ (round to nearest even), used by
// the generic kernels, by tests for reference values and by gyre-bench.
#pragma once

#include <cstdint>
#include <cstring>

namespace gyre::cpu {

inline float bitsToFloat(uint32_t u) {
  float f;
  std::memcpy(&f, &u, sizeof f);
  return f;
}

inline uint32_t floatToBits(float f) {
  uint32_t u;
  std::memcpy(&u, &f, sizeof u);
  return u;
}

inline float bf16ToFloat(uint16_t h) {
  return bitsToFloat(uint32_t(h) << 16);
}

inline uint16_t floatToBf16(float f) {
  uint32_t u = floatToBits(f);
  if ((u & 0x7fffffffu) > 0x7f800000u) return uint16_t((u >> 16) | 0x40);  // quiet NaN
  u += 0x7fffu + ((u >> 16) & 1u);
  return uint16_t(u >> 16);
}

inline float halfToFloat(uint16_t h) {
  const uint32_t sign = uint32_t(h & 0x8000u) << 16;
  const uint32_t exp = (h >> 10) & 0x1fu;
  uint32_t mant = h & 0x3ffu;
  if (exp == 0x1f) return bitsToFloat(sign | 0x7f800000u | (mant << 13));  // inf / NaN
  if (exp == 0) {
    if (mant == 0) return bitsToFloat(sign);
    // Subnormal: value = mant * 2^-24.
    float v = float(mant) * 5.9604644775390625e-8f;
    return sign ? -v : v;
  }
  return bitsToFloat(sign | ((exp + 112) << 23) | (mant << 13));
}

inline uint16_t floatToHalf(float f) {
  const uint32_t u = floatToBits(f);
  const uint16_t sign = uint16_t((u >> 16) & 0x8000u);
  const uint32_t absu = u & 0x7fffffffu;
  // NaN: quiet, keeping the top payload bits, as the F16C instruction does.
  if (absu > 0x7f800000u) return uint16_t(sign | 0x7e00u | ((absu >> 13) & 0x3ffu));
  if (absu >= 0x477ff000u) return uint16_t(sign | 0x7c00u);  // rounds to inf
  if (absu < 0x38800000u) {
    // Result is subnormal or zero: round abs(f) * 2^24 to nearest even integer.
    const float scaled = bitsToFloat(absu) * 16777216.0f;  // exact: power-of-two scaling
    uint32_t m = uint32_t(scaled);
    const float rest = scaled - float(m);
    if (rest > 0.5f || (rest == 0.5f && (m & 1u))) ++m;
    return uint16_t(sign | m);
  }
  // Normal: rebias exponent, round mantissa from 23 to 10 bits, nearest even.
  uint32_t v = absu - 0x38000000u;  // exponent bias 127 -> 15
  v += 0xfffu + ((v >> 13) & 1u);
  return uint16_t(sign | (v >> 13));
}

}  // namespace gyre::cpu
