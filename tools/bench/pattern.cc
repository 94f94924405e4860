#include "tools/bench/pattern.h"

#include <algorithm>
#include <cstring>

#include "kernels/cpu/half.h"

namespace gyre::bench {

namespace {
size_t base(int rank, size_t i) {
  return size_t(rank) * 7 + i * 3;
}
}  // namespace

double patternValue(RedOp op, int rank, int n, size_t i) {
  switch (op) {
    case RedOp::sum: {
      // Sums stay <= 240: exact in bf16 (8-bit mantissa) and int8.
      const size_t range = size_t(std::clamp(240 / n, 1, 10));
      return double(base(rank, i) % (range + 1));
    }
    case RedOp::prod:
      return double(1 + (base(rank, i) % 2));  // powers of two: exact
    case RedOp::avg: {
      const size_t range = size_t(std::max(0, std::min(10, 240 / (n * n))));
      return double(n) * double(base(rank, i) % (range + 1));
    }
    case RedOp::min:
    case RedOp::max:
      return double(base(rank, i) % 101);
  }
  return 0;
}

size_t patternPeriod(RedOp op, int n) {
  // Values depend on (7 rank + 3 i) mod m, so m is a period in i.
  switch (op) {
    case RedOp::sum:
      return size_t(std::clamp(240 / n, 1, 10)) + 1;
    case RedOp::prod:
      return 2;
    case RedOp::avg:
      return size_t(std::max(0, std::min(10, 240 / (n * n)))) + 1;
    case RedOp::min:
    case RedOp::max:
      return 101;
  }
  return 1;
}

double reducedValue(RedOp op, int n, size_t i) {
  double acc = patternValue(op, 0, n, i);
  for (int r = 1; r < n; ++r) {
    const double v = patternValue(op, r, n, i);
    switch (op) {
      case RedOp::sum:
      case RedOp::avg:
        acc += v;
        break;
      case RedOp::prod:
        acc *= v;
        break;
      case RedOp::min:
        acc = std::min(acc, v);
        break;
      case RedOp::max:
        acc = std::max(acc, v);
        break;
    }
  }
  return op == RedOp::avg ? acc / n : acc;
}

void storeValue(DataType type, void* base, size_t i, double v) {
  // Integers wrap modulo 2^bits, as the library's integer arithmetic does.
  const auto wrapped = static_cast<int64_t>(static_cast<uint64_t>(static_cast<int64_t>(v)));
  switch (type) {
    case DataType::i8:
      static_cast<int8_t*>(base)[i] = int8_t(wrapped);
      break;
    case DataType::u8:
      static_cast<uint8_t*>(base)[i] = uint8_t(wrapped);
      break;
    case DataType::i32:
      static_cast<int32_t*>(base)[i] = int32_t(wrapped);
      break;
    case DataType::u32:
      static_cast<uint32_t*>(base)[i] = uint32_t(wrapped);
      break;
    case DataType::i64:
      static_cast<int64_t*>(base)[i] = wrapped;
      break;
    case DataType::u64:
      static_cast<uint64_t*>(base)[i] = uint64_t(wrapped);
      break;
    case DataType::f16:
      static_cast<uint16_t*>(base)[i] = cpu::floatToHalf(float(v));
      break;
    case DataType::bf16:
      static_cast<uint16_t*>(base)[i] = cpu::floatToBf16(float(v));
      break;
    case DataType::f32:
      static_cast<float*>(base)[i] = float(v);
      break;
    case DataType::f64:
      static_cast<double*>(base)[i] = v;
      break;
  }
}

size_t countMismatches(DataType type, const void* actual, const void* expected, size_t count) {
  const size_t es = dataTypeSize(type);
  const auto* a = static_cast<const unsigned char*>(actual);
  const auto* e = static_cast<const unsigned char*>(expected);
  size_t wrong = 0;
  for (size_t i = 0; i < count; ++i) wrong += std::memcmp(a + i * es, e + i * es, es) != 0;
  return wrong;
}

}  // namespace gyre::bench
