// Test data whose collective results are known exactly in every type: random bits for
// integers (arithmetic wraps the same way everywhere), random small integers for floats
// (chosen per op and n so every partial result is exact even in bfloat16).
#pragma once

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <type_traits>

#include "gyre/types.h"
#include "kernels/cpu/half.h"
#include "tests/harness/ref_op.h"

namespace gyre::test {

inline uint64_t mix(uint64_t x) {  // splitmix64
  x += 0x9e3779b97f4a7c15ull;
  x = (x ^ (x >> 30)) * 0xbf58476d1ce4e5b9ull;
  x = (x ^ (x >> 27)) * 0x94d049bb133111ebull;
  return x ^ (x >> 31);
}

struct Data {
  DataType type;
  RedOp op;
  int n;
  uint64_t seed;

  uint64_t bits(int rank, size_t i) const { return mix(seed ^ mix(uint64_t(rank) * 1000003 + i)); }

  double small(int rank, size_t i) const {
    const uint64_t h = bits(rank, i);
    switch (op) {
      case RedOp::sum: {
        const int64_t r = std::clamp(120 / n, 1, 10);
        return double(int64_t(h % uint64_t(2 * r + 1)) - r);
      }
      case RedOp::prod:
        return (h & 1) ? 2.0 : ((h & 2) ? -1.0 : 1.0);
      case RedOp::avg: {
        const int64_t r = std::clamp<int64_t>(120 / (int64_t(n) * n), 0, 10);
        return double(n) * double(int64_t(h % uint64_t(2 * r + 1)) - r);
      }
      case RedOp::min:
      case RedOp::max:
        return double(int64_t(h % 201) - 100);
    }
    return 0;
  }

  // The value rank `rank` contributes at global element i.
  void input(void* buf, size_t idx, int rank, size_t i) const {
    if (isFloating(type)) return storeFloat(buf, idx, small(rank, i));
    storeBits(buf, idx, bits(rank, i));
  }

  // The reduction over all ranks at global element i (or rank `only`'s value if >= 0).
  void expected(void* buf, size_t idx, size_t i, int only = -1) const {
    if (only >= 0) return input(buf, idx, only, i);
    if (isFloating(type)) {
      double acc = small(0, i);
      for (int r = 1; r < n; ++r) acc = refOp(op, acc, small(r, i));
      return storeFloat(buf, idx, op == RedOp::avg ? acc / n : acc);
    }
    switch (type) {
      case DataType::i8:
        return foldInt<int8_t>(buf, idx, i);
      case DataType::u8:
        return foldInt<uint8_t>(buf, idx, i);
      case DataType::i32:
        return foldInt<int32_t>(buf, idx, i);
      case DataType::u32:
        return foldInt<uint32_t>(buf, idx, i);
      case DataType::i64:
        return foldInt<int64_t>(buf, idx, i);
      case DataType::u64:
        return foldInt<uint64_t>(buf, idx, i);
      default:
        return;
    }
  }

 private:
  template <class T>
  void foldInt(void* buf, size_t idx, size_t i) const {
    T acc = T(bits(0, i));
    for (int r = 1; r < n; ++r) acc = refOp(op, acc, T(bits(r, i)));
    if (op == RedOp::avg) acc = T(acc / T(n));
    static_cast<T*>(buf)[idx] = acc;
  }
  void storeFloat(void* buf, size_t idx, double v) const {
    switch (type) {
      case DataType::f16:
        static_cast<uint16_t*>(buf)[idx] = cpu::floatToHalf(float(v));
        break;
      case DataType::bf16:
        static_cast<uint16_t*>(buf)[idx] = cpu::floatToBf16(float(v));
        break;
      case DataType::f32:
        static_cast<float*>(buf)[idx] = float(v);
        break;
      case DataType::f64:
        static_cast<double*>(buf)[idx] = v;
        break;
      default:
        break;
    }
  }
  void storeBits(void* buf, size_t idx, uint64_t b) const {
    const size_t es = dataTypeSize(type);
    std::memcpy(static_cast<char*>(buf) + idx * es, &b, es);  // little-endian: low bytes
  }
};

}  // namespace gyre::test
