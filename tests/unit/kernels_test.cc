// CPU kernels, both instruction-set builds, against scalar references computed here:
// bit-exact for every type (16-bit floats are computed in float and rounded once).
#include <doctest/doctest.h>
#include <immintrin.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <random>
#include <string_view>
#include <tuple>
#include <type_traits>
#include <vector>

#include "kernels/cpu/half.h"
#include "kernels/cpu/reduce.h"
#include "tests/harness/ref_op.h"

namespace gyre::cpu {
namespace generic {
void reduceEntry(DataType, RedOp, void*, void*, const void*, const void*, size_t, int);
}
namespace avx2 {
void reduceEntry(DataType, RedOp, void*, void*, const void*, const void*, size_t, int);
}
}  // namespace gyre::cpu

using namespace gyre;
using gyre::test::refOp;
using ReduceFn = void (*)(DataType, RedOp, void*, void*, const void*, const void*, size_t, int);

namespace {

// AVX2, FMA and F16C, as the library's own pick decides (not every compiler's
// __builtin_cpu_supports knows "f16c").
bool cpuHasAvx2() {
  return std::string_view(cpu::isaName()) == "avx2+f16c";
}

__attribute__((target("f16c"))) uint16_t hardwareHalf(float f) {
  return uint16_t(_cvtss_sh(f, _MM_FROUND_TO_NEAREST_INT));
}
__attribute__((target("f16c"))) float hardwareHalfToFloat(uint16_t h) {
  return _cvtsh_ss(h);
}

// Random inputs of storage type S and the expected result, per data type.
struct Case {
  std::vector<unsigned char> a, b, expect;
};

template <class T>
Case makeNative(DataType, RedOp op, size_t n, int div, std::mt19937_64& rng) {
  Case c;
  c.a.resize(n * sizeof(T));
  c.b.resize(n * sizeof(T));
  c.expect.resize(n * sizeof(T));
  for (size_t i = 0; i < n; ++i) {
    T x, y;
    if constexpr (std::is_integral_v<T>) {
      x = T(rng());
      y = T(rng());
    } else {
      std::uniform_real_distribution<T> d(-100, 100);
      x = d(rng);
      y = d(rng);
    }
    T r = refOp(op, x, y);
    if (div > 0) r = T(r / T(div));
    std::memcpy(&c.a[i * sizeof(T)], &x, sizeof(T));
    std::memcpy(&c.b[i * sizeof(T)], &y, sizeof(T));
    std::memcpy(&c.expect[i * sizeof(T)], &r, sizeof(T));
  }
  return c;
}

Case makeHalf(DataType type, RedOp op, size_t n, int div, std::mt19937_64& rng) {
  const bool bf = type == DataType::bf16;
  auto toF = [&](uint16_t h) { return bf ? cpu::bf16ToFloat(h) : cpu::halfToFloat(h); };
  auto fromF = [&](float f) { return bf ? cpu::floatToBf16(f) : cpu::floatToHalf(f); };
  Case c;
  c.a.resize(n * 2);
  c.b.resize(n * 2);
  c.expect.resize(n * 2);
  std::uniform_real_distribution<float> d(-60, 60);
  for (size_t i = 0; i < n; ++i) {
    const uint16_t x = fromF(d(rng)), y = fromF(d(rng));
    float r = refOp(op, toF(x), toF(y));
    if (div > 0) r = r / float(div);
    const uint16_t e = fromF(r);
    std::memcpy(&c.a[i * 2], &x, 2);
    std::memcpy(&c.b[i * 2], &y, 2);
    std::memcpy(&c.expect[i * 2], &e, 2);
  }
  return c;
}

Case makeCase(DataType type, RedOp op, size_t n, int div, std::mt19937_64& rng) {
  switch (type) {
    case DataType::i8:
      return makeNative<int8_t>(type, op, n, div, rng);
    case DataType::u8:
      return makeNative<uint8_t>(type, op, n, div, rng);
    case DataType::i32:
      return makeNative<int32_t>(type, op, n, div, rng);
    case DataType::u32:
      return makeNative<uint32_t>(type, op, n, div, rng);
    case DataType::i64:
      return makeNative<int64_t>(type, op, n, div, rng);
    case DataType::u64:
      return makeNative<uint64_t>(type, op, n, div, rng);
    case DataType::f16:
    case DataType::bf16:
      return makeHalf(type, op, n, div, rng);
    case DataType::f32:
      return makeNative<float>(type, op, n, div, rng);
    case DataType::f64:
      return makeNative<double>(type, op, n, div, rng);
  }
  return {};
}

void checkKernel(ReduceFn fn, const char* isa) {
  std::mt19937_64 rng(42);
  for (int t = 0; t < kNumDataTypes; ++t) {
    const auto type = static_cast<DataType>(t);
    const size_t es = dataTypeSize(type);
    for (int o = 0; o < kNumRedOps; ++o) {
      const auto op = static_cast<RedOp>(o);
      for (size_t n :
           {size_t(0), size_t(1), size_t(7), size_t(8), size_t(9), size_t(33), size_t(1000)}) {
        for (int div : {0, 3}) {
          if (div && op != RedOp::avg) continue;
          CAPTURE(isa);
          CAPTURE(dataTypeName(type));
          CAPTURE(redOpName(op));
          CAPTURE(n);
          Case c = makeCase(type, op, n, div, rng);
          // Misalign every buffer by one element to exercise unaligned heads and tails.
          std::vector<unsigned char> a(es + c.a.size()), b(es + c.b.size()),
              d(es * 2 + c.a.size(), 0xA5), d2(es + c.a.size(), 0x5A);
          if (n) std::memcpy(a.data() + es, c.a.data(), c.a.size());
          if (n) std::memcpy(b.data() + es, c.b.data(), c.b.size());
          fn(type, op, d.data() + es, d2.data() + es, a.data() + es, b.data() + es, n, div);
          REQUIRE((n == 0 || std::memcmp(d.data() + es, c.expect.data(), c.expect.size()) == 0));
          REQUIRE((n == 0 || std::memcmp(d2.data() + es, c.expect.data(), c.expect.size()) == 0));
          // Nothing written outside [0, n).
          for (size_t i = 0; i < es; ++i) REQUIRE(d[i] == 0xA5);
          for (size_t i = 0; i < es; ++i) REQUIRE(d[es + c.a.size() + i] == 0xA5);
          // In place, into the first operand, with no second destination.
          fn(type, op, a.data() + es, nullptr, a.data() + es, b.data() + es, n, div);
          REQUIRE((n == 0 || std::memcmp(a.data() + es, c.expect.data(), c.expect.size()) == 0));
        }
      }
    }
  }
}

}  // namespace

TEST_CASE("reduce kernels, generic build: every type, op, length, alignment") {
  checkKernel(cpu::generic::reduceEntry, "generic");
}

TEST_CASE("reduce kernels, avx2 build: every type, op, length, alignment") {
  if (!cpuHasAvx2()) {
    MESSAGE("skipped: this CPU lacks AVX2/F16C/FMA");
    return;
  }
  checkKernel(cpu::avx2::reduceEntry, "avx2");
}

TEST_CASE("half conversions match the F16C hardware for every half and many floats") {
  if (!cpuHasAvx2()) {
    MESSAGE("skipped: this CPU lacks F16C");
    return;
  }
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = cpu::halfToFloat(uint16_t(h));
    const float hw = hardwareHalfToFloat(uint16_t(h));
    if (std::isnan(hw)) {
      REQUIRE(std::isnan(f));
      continue;
    }
    REQUIRE(cpu::floatToBits(f) == cpu::floatToBits(hw));
    REQUIRE(cpu::floatToHalf(f) == uint16_t(h));
  }
  std::mt19937 rng(7);
  for (int i = 0; i < 2000000; ++i) {
    const float f = cpu::bitsToFloat(uint32_t(rng()));
    REQUIRE(cpu::floatToHalf(f) == hardwareHalf(f));  // NaNs too: same payload
  }
}

TEST_CASE("bfloat16 rounds to nearest even and keeps NaN") {
  CHECK(cpu::floatToBf16(1.0f) == 0x3f80);
  CHECK(cpu::floatToBf16(cpu::bitsToFloat(0x3f808000)) == 0x3f80);  // tie -> even
  CHECK(cpu::floatToBf16(cpu::bitsToFloat(0x3f818000)) == 0x3f82);  // tie -> even (up)
  CHECK(cpu::floatToBf16(cpu::bitsToFloat(0x3f808001)) == 0x3f81);
  CHECK(std::isnan(cpu::bf16ToFloat(cpu::floatToBf16(std::nanf("")))));
  for (uint32_t h = 0; h < 65536; ++h) {
    const float f = cpu::bf16ToFloat(uint16_t(h));
    if (!std::isnan(f)) REQUIRE(cpu::floatToBf16(f) == h);
  }
}

TEST_CASE("copy") {
  std::vector<int32_t> src{1, 2, 3, 4}, dst(4, -1), dst2(4, -1);
  cpu::copy(dst.data(), dst2.data(), src.data(), 16);
  CHECK(dst == src);
  CHECK(dst2 == src);
  cpu::copy(src.data(), nullptr, src.data(), 16);  // self copy is a no-op
  CHECK(src == std::vector<int32_t>{1, 2, 3, 4});
}

// scale (premul sums) multiplies by one factor as the product kernel multiplies by a buffer of
// copies of it: bit for bit, every type, lengths across its 4 KiB blocks, in place, and
// nothing written past n.
TEST_CASE("scale: the product kernel against one factor") {
  std::mt19937_64 rng(11);
  for (int t = 0; t < kNumDataTypes; ++t) {
    const auto type = DataType(t);
    const size_t es = dataTypeSize(type);
    for (size_t n : {size_t(0), size_t(1), size_t(7), 4096 / es - 1, 4096 / es + 3, size_t(5000)}) {
      CAPTURE(t);
      CAPTURE(n);
      std::vector<unsigned char> src(n * es + 64), factors(n * es + 64), dst(n * es + 64, 0xAB);
      for (auto& b : src) b = static_cast<unsigned char>(rng());
      unsigned char factor[8];
      for (auto& b : factor) b = static_cast<unsigned char>(rng() % 4);  // small: no overflow
      for (size_t i = 0; i < n; ++i) std::memcpy(&factors[i * es], factor, es);
      std::vector<unsigned char> want(n * es + 64, 0xAB);
      cpu::reduce(type, RedOp::prod, want.data(), nullptr, src.data(), factors.data(), n, 0);
      cpu::scale(type, dst.data(), src.data(), factor, n);
      CHECK(std::memcmp(dst.data(), want.data(), dst.size()) == 0);
      cpu::scale(type, src.data(), src.data(), factor, n);  // in place
      CHECK(std::memcmp(src.data(), want.data(), n * es) == 0);
    }
  }
}

// Streaming stores go out a 4 KiB block at a time, with unaligned heads and tails: lengths
// across blocks, destinations an element or a few off 16-byte alignment, every choice of which
// destination streams, in place, and nothing written outside [0, n).
TEST_CASE("streaming stores: the same bytes as cached ones, nothing outside") {
  std::mt19937_64 rng(9);
  const cpu::Stores choices[] = {{true, false}, {false, true}, {true, true}};
  for (DataType type : {DataType::i8, DataType::bf16, DataType::f32, DataType::f64}) {
    const size_t es = dataTypeSize(type);
    for (size_t n : {size_t(1), size_t(15), size_t(1000), size_t(4096 / es + 3), size_t(30011)}) {
      for (size_t skewElems : {size_t(0), size_t(1), size_t(3)}) {
        const size_t skew = skewElems * es, skew2 = (2 * skewElems + 1) * es;
        for (const cpu::Stores stores : choices) {
          CAPTURE(dataTypeName(type));
          CAPTURE(n);
          CAPTURE(skew);
          CAPTURE(stores.dst);
          CAPTURE(stores.dst2);
          const RedOp op = type == DataType::i8 ? RedOp::sum : RedOp::max;
          Case c = makeCase(type, op, n, 0, rng);
          const size_t bytes = c.a.size(), pad = 64;
          std::vector<unsigned char> d(bytes + 2 * pad, 0xA5), d2(bytes + 2 * pad, 0x5A);
          unsigned char* dst = d.data() + pad + skew;
          unsigned char* dst2 = d2.data() + pad + skew2;
          cpu::reduce(type, op, dst, dst2, c.a.data(), c.b.data(), n, 0, stores);
          REQUIRE(std::memcmp(dst, c.expect.data(), bytes) == 0);
          REQUIRE(std::memcmp(dst2, c.expect.data(), bytes) == 0);
          for (auto [buf, at, fill] : {std::tuple{&d, dst, 0xA5}, std::tuple{&d2, dst2, 0x5A}}) {
            for (unsigned char* p = buf->data(); p < at; ++p) REQUIRE(*p == fill);
            for (unsigned char* p = at + bytes; p < buf->data() + buf->size(); ++p)
              REQUIRE(*p == fill);
          }
          // The copies, from the reduced bytes into poisoned destinations.
          std::fill(d.begin(), d.end(), 0xA5);
          std::fill(d2.begin(), d2.end(), 0x5A);
          cpu::copy(dst, dst2, c.expect.data(), bytes, stores);
          REQUIRE(std::memcmp(dst, c.expect.data(), bytes) == 0);
          REQUIRE(std::memcmp(dst2, c.expect.data(), bytes) == 0);
          REQUIRE(d[pad + skew - 1] == 0xA5);
          REQUIRE(d2[pad + skew2 - 1] == 0x5A);
          REQUIRE(d[pad + skew + bytes] == 0xA5);
          // In place into the first operand, streamed.
          std::vector<unsigned char> a = c.a;
          cpu::reduce(type, op, a.data(), nullptr, a.data(), c.b.data(), n, 0, stores);
          REQUIRE(std::memcmp(a.data(), c.expect.data(), bytes) == 0);
        }
      }
    }
  }
  std::vector<int32_t> src(1000), dst(1002, -1);
  for (size_t i = 0; i < src.size(); ++i) src[i] = int32_t(i * 31);
  cpu::copy(dst.data() + 1, nullptr, src.data(), src.size() * 4, {true, false});
  CHECK(std::equal(src.begin(), src.end(), dst.begin() + 1));
  CHECK(dst.front() == -1);
  CHECK(dst.back() == -1);
}

TEST_CASE("16-bit float kernels: both builds agree on NaN, infinity and rounding") {
  if (!cpuHasAvx2()) {
    MESSAGE("skipped: this CPU lacks AVX2/F16C/FMA");
    return;
  }
  std::mt19937 rng(3);
  for (DataType type : {DataType::f16, DataType::bf16}) {
    for (int o = 0; o < kNumRedOps; ++o) {
      const auto op = static_cast<RedOp>(o);
      const size_t n = 1000;
      std::vector<uint16_t> a(n), b(n), generic(n), avx2(n);
      for (size_t i = 0; i < n; ++i) {
        a[i] = uint16_t(rng());  // every bit pattern: NaNs, infinities, subnormals
        b[i] = uint16_t(rng());
      }
      cpu::generic::reduceEntry(type, op, generic.data(), nullptr, a.data(), b.data(), n, 3);
      cpu::avx2::reduceEntry(type, op, avx2.data(), nullptr, a.data(), b.data(), n, 3);
      const std::string what = std::string(dataTypeName(type)) + " " + redOpName(op);
      for (size_t i = 0; i < n; ++i) {
        CAPTURE(what);
        CAPTURE(a[i]);
        CAPTURE(b[i]);
        CAPTURE(generic[i]);
        CAPTURE(avx2[i]);
        // Which payload survives two NaN inputs depends on operand order: NaN is NaN.
        const auto isNan = [&](uint16_t h) {
          return std::isnan(type == DataType::bf16 ? cpu::bf16ToFloat(h) : cpu::halfToFloat(h));
        };
        if (isNan(generic[i]) || isNan(avx2[i])) {
          REQUIRE(isNan(generic[i]) == isNan(avx2[i]));
        } else {
          REQUIRE(generic[i] == avx2[i]);
        }
      }
    }
  }
}
