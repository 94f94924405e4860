// The CUDA kernels against the CPU kernels, bit for bit (both compute 16-bit floats in float
// and round once to nearest even, integers wrap, avg divides once): every type and op, counts
// from 0 to past a million, heads and tails that are not 16-byte aligned, pointers aligned
// differently, in place, with a second destination. Inputs are drawn fresh each run (the seed
// is printed; GYRE_TEST_SEED replays one); outputs are poisoned first and checked past both
// ends. Without a CUDA device the program exits 77, which ctest reports as skipped.
// Plain C++ with no test framework, so that tools/gpu-check.sh can build it with nvcc alone on
// a machine that has nothing else installed.
#include <cuda_runtime_api.h>

#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <iterator>
#include <random>
#include <sstream>
#include <string>
#include <vector>

#include "gyre/types.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/reduce.h"
#include "kernels/cuda/reduce.h"
#include "tests/cuda/device.h"

namespace {

using gyre::DataType;
using gyre::RedOp;

uint64_t gSeed = 0;
int gFailures = 0;
bool gQuick = false;  // GYRE_CUDA_TEST_QUICK=1: no million-element cases (sanitizer runs)

template <class... Parts>
std::string text(const Parts&... parts) {
  std::ostringstream out;
  (out << ... << parts);
  return out.str();
}
// A wrong result: counted and shown (the first 20), the test goes on.
#define CHECK_MESSAGE(cond, ...)                                         \
  do {                                                                   \
    if (!(cond)) {                                                       \
      if (gFailures++ < 20)                                              \
        std::printf("FAILED %s:%d: %s: %s\n", __FILE__, __LINE__, #cond, \
                    text(__VA_ARGS__).c_str());                          \
    }                                                                    \
  } while (0)
#define CHECK(cond) CHECK_MESSAGE(cond, "")
// A failed CUDA call or setup: nothing after it can be trusted.
#define REQUIRE_MESSAGE(cond, ...)                                                                 \
  do {                                                                                             \
    if (!(cond)) {                                                                                 \
      std::printf("FAILED %s:%d: %s: %s\n", __FILE__, __LINE__, #cond, text(__VA_ARGS__).c_str()); \
      std::exit(1);                                                                                \
    }                                                                                              \
  } while (0)
#define REQUIRE(cond) REQUIRE_MESSAGE(cond, "")

constexpr unsigned char kPoison = 0xA5;
constexpr size_t kGuard = 64;  // bytes checked on each side of an output

// A device allocation with kGuard poisoned bytes before and after `bytes` at `offset`.
struct DeviceBuffer {
  unsigned char* base = nullptr;
  size_t total = 0, offset = 0, bytes = 0;
  DeviceBuffer(size_t bytes_, size_t offset_) : total(bytes_ + offset_ + 2 * kGuard) {
    offset = kGuard + offset_;
    bytes = bytes_;
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&base), total) == cudaSuccess);
    REQUIRE(cudaMemset(base, kPoison, total) == cudaSuccess);
    // cudaMemset and pageable cudaMemcpy may still be running when they return, and the
    // kernels under test run on a non-blocking stream that does not wait for them.
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  }
  ~DeviceBuffer() { cudaFree(base); }
  DeviceBuffer(const DeviceBuffer&) = delete;
  DeviceBuffer& operator=(const DeviceBuffer&) = delete;
  void* data() { return base + offset; }
  void upload(const std::vector<unsigned char>& host) {
    REQUIRE(cudaMemcpy(data(), host.data(), bytes, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(cudaDeviceSynchronize() == cudaSuccess);
  }
  std::vector<unsigned char> downloadAll() const {
    std::vector<unsigned char> host(total);
    REQUIRE(cudaMemcpy(host.data(), base, total, cudaMemcpyDeviceToHost) == cudaSuccess);
    return host;
  }
};

// Random bytes that are valid values of `type`: any bits for integers, finite floats in
// [-8, 8] (with some 16-bit subnormals) so that sums and products stay finite.
std::vector<unsigned char> randomValues(DataType type, size_t n, std::mt19937_64& rng) {
  const size_t es = gyre::dataTypeSize(type);
  std::vector<unsigned char> out(n * es);
  std::uniform_real_distribution<double> real(-8.0, 8.0);
  for (size_t i = 0; i < n; ++i) {
    unsigned char* p = out.data() + i * es;
    const double x = (rng() % 16 == 0) ? real(rng) * 1e-6 : real(rng);
    switch (type) {
      case DataType::f16: {
        const uint16_t h = gyre::cpu::floatToHalf(float(x));
        std::memcpy(p, &h, 2);
        break;
      }
      case DataType::bf16: {
        const uint16_t h = gyre::cpu::floatToBf16(float(x));
        std::memcpy(p, &h, 2);
        break;
      }
      case DataType::f32: {
        const float f = float(x);
        std::memcpy(p, &f, 4);
        break;
      }
      case DataType::f64:
        std::memcpy(p, &x, 8);
        break;
      default: {
        const uint64_t bits = rng();
        std::memcpy(p, &bits, es);
      }
    }
  }
  return out;
}

// Checks `all` (a whole DeviceBuffer download): `expected` at the buffer's offset, poison
// around it.
void checkOutput(const DeviceBuffer& buffer, const std::vector<unsigned char>& all,
                 const std::vector<unsigned char>& expected, size_t es, const std::string& what) {
  size_t wrong = 0, first = SIZE_MAX;
  for (size_t i = 0; i < expected.size(); ++i) {
    if (all[buffer.offset + i] != expected[i]) {
      ++wrong;
      if (first == SIZE_MAX) first = i / es;
    }
  }
  CHECK_MESSAGE(wrong == 0, what, ": ", wrong, " wrong bytes, first in element ", first);
  size_t overwritten = 0;
  for (size_t i = 0; i < all.size(); ++i) {
    const bool inside = i >= buffer.offset && i < buffer.offset + expected.size();
    if (!inside && all[i] != kPoison) ++overwritten;
  }
  CHECK_MESSAGE(overwritten == 0, what, ": ", overwritten, " bytes written outside the output");
}

const char* opName(RedOp op) {
  return gyre::redOpName(op);
}

struct Offsets {
  size_t a, b, d, d2;  // in elements
};

void runReduce(DataType type, RedOp op, int divisor, size_t n, Offsets off, bool second,
               bool inPlace, cudaStream_t stream, std::mt19937_64& rng) {
  const size_t es = gyre::dataTypeSize(type);
  const std::string what = std::string(gyre::dataTypeName(type)) + " " + opName(op) + "/" +
                           std::to_string(divisor) + " n=" + std::to_string(n) + " offsets " +
                           std::to_string(off.a) + "," + std::to_string(off.b) + "," +
                           std::to_string(off.d) + (second ? " +dst2" : "") +
                           (inPlace ? " in place" : "") + " seed " + std::to_string(gSeed);
  const auto a = randomValues(type, n, rng), b = randomValues(type, n, rng);
  std::vector<unsigned char> expected(n * es);
  gyre::cpu::reduce(type, op, expected.data(), nullptr, a.data(), b.data(), n, divisor);

  DeviceBuffer da(n * es, off.a * es), db(n * es, off.b * es);
  DeviceBuffer dd(n * es, off.d * es), dd2(n * es, off.d2 * es);
  da.upload(a);
  db.upload(b);
  void* dst = inPlace ? da.data() : dd.data();
  void* dst2 = second ? dd2.data() : nullptr;
  const cudaError_t launched =
      gyre::cuda::reduce(type, op, dst, dst2, da.data(), db.data(), n, divisor, stream);
  REQUIRE_MESSAGE(launched == cudaSuccess, what, ": ", cudaGetErrorString(launched));
  const cudaError_t done = cudaStreamSynchronize(stream);
  REQUIRE_MESSAGE(done == cudaSuccess, what, ": ", cudaGetErrorString(done));
  const DeviceBuffer& out = inPlace ? da : dd;
  checkOutput(out, out.downloadAll(), expected, es, what);
  if (second) checkOutput(dd2, dd2.downloadAll(), expected, es, what + " (dst2)");
  if (inPlace) {
    checkOutput(dd, dd.downloadAll(), {}, es, what + " (unused dst)");
  }
  checkOutput(db, db.downloadAll(), b, es, what + " (input b unchanged)");
}

struct Stream {
  cudaStream_t s = nullptr;
  Stream() { REQUIRE(cudaStreamCreateWithFlags(&s, cudaStreamNonBlocking) == cudaSuccess); }
  ~Stream() { cudaStreamDestroy(s); }
};

// Every type and op, bit for bit with the CPU kernels.
void testReduceMatrix() {
  std::mt19937_64 rng(gSeed);
  Stream stream;
  const size_t sizes[] = {0, 1, 7, 31, 4099, (size_t(1) << 20) + 5};
  const Offsets offsets[] = {{0, 0, 0, 0}, {1, 1, 1, 1}, {3, 1, 2, 0}, {0, 0, 1, 1}};
  struct OpCase {
    RedOp op;
    int divisor;
  };
  const OpCase ops[] = {{RedOp::sum, 0}, {RedOp::prod, 0}, {RedOp::min, 0},
                        {RedOp::max, 0}, {RedOp::avg, 3},  {RedOp::avg, 0}};
  int cases = 0;
  for (int t = 0; t < gyre::kNumDataTypes; ++t) {
    for (const OpCase& oc : ops) {
      for (size_t n : sizes) {
        for (size_t k = 0; k < std::size(offsets); ++k) {
          const bool large = n > 100000;
          if (large && (k >= 2 || gQuick)) continue;  // aligned and equally misaligned only
          const bool second = (k + size_t(t)) % 2 == 1;
          const bool inPlace = !large && k == 1 && oc.op == RedOp::sum;
          runReduce(DataType(t), oc.op, oc.divisor, n, offsets[k], second, inPlace, stream.s, rng);
          ++cases;
        }
      }
    }
  }
  std::printf("reduce: %d cases\n", cases);
}

void testKnownValues() {
  Stream stream;
  auto one = [&](DataType type, RedOp op, int divisor, auto x, auto y) {
    using T = decltype(x);
    T* d = nullptr;
    REQUIRE(cudaMalloc(reinterpret_cast<void**>(&d), 3 * sizeof(T)) == cudaSuccess);
    const T host[2] = {x, y};
    REQUIRE(cudaMemcpy(d, host, sizeof host, cudaMemcpyHostToDevice) == cudaSuccess);
    REQUIRE(gyre::cuda::reduce(type, op, d + 2, nullptr, d, d + 1, 1, divisor, stream.s) ==
            cudaSuccess);
    T out{};
    REQUIRE(cudaMemcpyAsync(&out, d + 2, sizeof out, cudaMemcpyDeviceToHost, stream.s) ==
            cudaSuccess);
    REQUIRE(cudaStreamSynchronize(stream.s) == cudaSuccess);
    cudaFree(d);
    return out;
  };
  CHECK(one(DataType::i8, RedOp::sum, 0, int8_t(127), int8_t(1)) == int8_t(-128));     // wraps
  CHECK(one(DataType::u8, RedOp::prod, 0, uint8_t(200), uint8_t(2)) == uint8_t(144));  // wraps
  CHECK(one(DataType::i32, RedOp::avg, 3, int32_t(-4), int32_t(-3)) == -2);            // truncates
  CHECK(one(DataType::u64, RedOp::max, 0, ~uint64_t(0), uint64_t(1)) == ~uint64_t(0));
  CHECK(one(DataType::i64, RedOp::min, 0, int64_t(-5), int64_t(7)) == -5);
  CHECK(one(DataType::f64, RedOp::avg, 4, 1.0, 2.0) == 0.75);
  const uint16_t h = one(DataType::f16, RedOp::sum, 0, gyre::cpu::floatToHalf(1.5f),
                         gyre::cpu::floatToHalf(2.25f));
  CHECK(gyre::cpu::halfToFloat(h) == 3.75f);
  const uint16_t bf = one(DataType::bf16, RedOp::prod, 0, gyre::cpu::floatToBf16(3.0f),
                          gyre::cpu::floatToBf16(-0.5f));
  CHECK(gyre::cpu::bf16ToFloat(bf) == -1.5f);
}

// One and two destinations, any alignment.
void testCopy() {
  std::mt19937_64 rng(gSeed + 1);
  Stream stream;
  for (size_t bytes : {size_t(0), size_t(1), size_t(15), size_t(16), size_t(17),
                       gQuick ? size_t(4099) : (size_t(1) << 20) + 3}) {
    for (size_t offSrc : {0, 1, 8}) {
      for (size_t offDst : {0, 1, 5}) {
        for (bool second : {false, true}) {
          const std::string what = "copy " + std::to_string(bytes) + " B, offsets " +
                                   std::to_string(offSrc) + "," + std::to_string(offDst) +
                                   (second ? " +dst2" : "");
          const auto src = randomValues(DataType::u8, bytes, rng);
          DeviceBuffer ds(bytes, offSrc), dd(bytes, offDst), dd2(bytes, offSrc);
          ds.upload(src);
          const cudaError_t launched = gyre::cuda::copy(dd.data(), second ? dd2.data() : nullptr,
                                                        ds.data(), bytes, stream.s);
          REQUIRE_MESSAGE(launched == cudaSuccess, what, ": ", cudaGetErrorString(launched));
          REQUIRE(cudaStreamSynchronize(stream.s) == cudaSuccess);
          checkOutput(dd, dd.downloadAll(), src, 1, what);
          checkOutput(dd2, dd2.downloadAll(), second ? src : std::vector<unsigned char>{}, 1,
                      what + " (dst2)");
        }
      }
    }
  }
}

// A bad type or op is refused, not launched.
void testRefused() {
  Stream stream;
  CHECK(gyre::cuda::reduce(DataType(99), RedOp::sum, nullptr, nullptr, nullptr, nullptr, 4, 0,
                           stream.s) == cudaErrorInvalidValue);
  CHECK(gyre::cuda::reduce(DataType::f32, RedOp(99), nullptr, nullptr, nullptr, nullptr, 4, 0,
                           stream.s) == cudaErrorInvalidValue);
}

}  // namespace

int main() {
  gyre::test::exitUnlessCudaDevice();
  const char* quick = std::getenv("GYRE_CUDA_TEST_QUICK");
  gQuick = quick && std::strcmp(quick, "1") == 0;
  const char* seed = std::getenv("GYRE_TEST_SEED");
  gSeed = seed ? std::strtoull(seed, nullptr, 0) : std::random_device{}();
  cudaDeviceProp prop{};
  cudaGetDeviceProperties(&prop, 0);
  std::printf("cuda kernels test on %s (sm_%d%d), seed %llu (GYRE_TEST_SEED replays it)\n",
              prop.name, prop.major, prop.minor, (unsigned long long)gSeed);
  testKnownValues();
  testRefused();
  testCopy();
  testReduceMatrix();
  if (gFailures) {
    std::printf("cuda kernels test: %d checks FAILED (seed %llu)\n", gFailures,
                (unsigned long long)gSeed);
    return 1;
  }
  std::printf("cuda kernels test: all passed\n");
  return 0;
}
