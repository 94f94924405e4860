// gyre-kernel-bench: the CPU reduction kernels against this machine's memory limits,
// measured in the same run: memcpy, and a plain `a += b` float loop (what the peer kit's
// membw calls the in-place reduce). GB/s counts 3 streams (read a, read b, write a), as
// membw does; the 16-bit kernels count their 2-byte elements.
//   build/tools/gyre-kernel-bench [MiB] [repeats]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include "kernels/cpu/half.h"
#include "kernels/cpu/reduce.h"

namespace {

using Clock = std::chrono::steady_clock;

template <class Fn>
double bestSeconds(int repeats, Fn fn) {
  double best = 1e30;
  for (int r = 0; r < repeats; ++r) {
    const auto t0 = Clock::now();
    fn();
    best = std::min(best, std::chrono::duration<double>(Clock::now() - t0).count());
  }
  return best;
}

__attribute__((noinline)) void plainAdd(float* __restrict a, const float* __restrict b, size_t n) {
  for (size_t i = 0; i < n; ++i) a[i] += b[i];
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? size_t(std::atol(argv[1])) : 256;
  const int repeats = argc > 2 ? std::atoi(argv[2]) : 10;
  const size_t bytes = mib << 20;
  std::vector<unsigned char> a(bytes), b(bytes);
  for (size_t i = 0; i < bytes / 4; ++i) {
    reinterpret_cast<float*>(a.data())[i] = float(i % 7);
    reinterpret_cast<float*>(b.data())[i] = float(i % 5);
  }
  std::printf("# gyre-kernel-bench: %zu MiB buffers, best of %d, kernels: %s\n", mib, repeats,
              gyre::cpu::isaName());
  std::printf("# %-22s %10s %10s\n", "kernel", "GB/s", "vs a+=b");
  const double memcpySec = bestSeconds(repeats, [&] { std::memcpy(a.data(), b.data(), bytes); });
  const double plainSec = bestSeconds(repeats, [&] {
    plainAdd(reinterpret_cast<float*>(a.data()), reinterpret_cast<const float*>(b.data()),
             bytes / 4);
  });
  const double plainGBs = 3.0 * double(bytes) / plainSec / 1e9;
  std::printf("  %-22s %10.2f %10s\n", "memcpy (bytes once)", double(bytes) / memcpySec / 1e9, "-");
  std::printf("  %-22s %10.2f %10s\n", "a+=b float (plain)", plainGBs, "1.00");
  struct Case {
    const char* name;
    gyre::DataType type;
  } cases[] = {{"reduce sum float", gyre::DataType::f32},
               {"reduce sum half", gyre::DataType::f16},
               {"reduce sum bfloat16", gyre::DataType::bf16},
               {"reduce sum double", gyre::DataType::f64},
               {"reduce sum int32", gyre::DataType::i32}};
  for (const auto& c : cases) {
    const size_t n = bytes / gyre::dataTypeSize(c.type);
    if (c.type == gyre::DataType::f16 || c.type == gyre::DataType::bf16) {
      auto* h = reinterpret_cast<uint16_t*>(b.data());
      for (size_t i = 0; i < n; ++i) h[i] = gyre::cpu::floatToBf16(float(i % 3));
      std::memcpy(a.data(), b.data(), bytes);
    }
    const double sec = bestSeconds(repeats, [&] {
      gyre::cpu::reduce(c.type, gyre::RedOp::sum, a.data(), nullptr, a.data(), b.data(), n, 0);
    });
    const double gbs = 3.0 * double(bytes) / sec / 1e9;
    std::printf("  %-22s %10.2f %10.2f\n", c.name, gbs, gbs / plainGBs);
  }
  return 0;
}
