// gyre-kernel-bench: the CPU reduction kernels against this machine's memory limits,
// measured in the same run: memcpy, and a plain `a += b` float loop (what the peer kit's
// membw calls the in-place reduce). GB/s counts 3 streams (read a, read b, write a), as
// membw does; the 16-bit kernels count their 2-byte elements. Then 32 KiB copies at each
// distance of destination past source (modulo 4 KiB): memcpy and process_vm_readv, whose
// `rep movsb` stalls at 1-63 bytes on some CPUs, against the paths gyre takes where it does
// (vector loops; the kernel's copy through a bounce buffer), and gyre's verdict for this CPU.
//   build/tools/gyre-kernel-bench [MiB] [repeats]
#include <algorithm>
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <vector>

#include <sys/uio.h>
#include <unistd.h>

#include "base/copy_bytes.h"
#include "kernels/cpu/half.h"
#include "kernels/cpu/reduce.h"
#include "link/mailbox.h"

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

// Microseconds per 32 KiB copy at each distance, the best of `repeats` rounds of 200 copies.
void copyDistances(int repeats) {
  constexpr size_t kBytes = 32 << 10, kPage = 4096;
  std::vector<unsigned char> arena(2 * (kBytes + 2 * kPage));
  auto* src = reinterpret_cast<unsigned char*>(
      (reinterpret_cast<uintptr_t>(arena.data()) + kPage - 1) & ~uintptr_t(kPage - 1));
  unsigned char* dstPage = src + kBytes + kPage;
  const int self = int(getpid());
  std::printf("# 32 KiB copies, microseconds, by bytes of destination past source (mod 4 KiB)\n");
  std::printf("# %-9s %10s %10s %16s %10s\n", "distance", "memcpy", "vectors", "process_vm_readv",
              "bounced");
  for (size_t distance : {0, 8, 16, 24, 32, 48, 64}) {
    unsigned char* dst = dstPage + distance;
    auto perCopy = [&](auto copy) {
      return bestSeconds(repeats,
                         [&] {
                           for (int i = 0; i < 200; ++i) {
                             copy();
                             asm volatile("" ::: "memory");
                           }
                         }) /
             200 * 1e6;
    };
    const double plain = perCopy([&] { std::memcpy(dst, src, kBytes); });
    const double kernel = perCopy([&] {
      iovec mine{dst, kBytes}, theirs{src, kBytes};
      if (process_vm_readv(self, &mine, 1, &theirs, 1, 0) != ssize_t(kBytes)) std::abort();
    });
    const double vectors = perCopy([&] { gyre::copyVectors(dst, src, kBytes, true); });
    gyre::overrideKernelCopyStall(true);  // readPeerMemory's bounce at 1-31 bytes
    const double bounced = perCopy([&] {
      if (!gyre::readPeerMemory(self, dst, reinterpret_cast<uint64_t>(src), kBytes).empty())
        std::abort();
    });
    gyre::overrideKernelCopyStall(std::nullopt);
    std::printf("  %-9zu %10.2f %10.2f %16.2f %10.2f\n", distance, plain, vectors, kernel, bounced);
  }
  const auto said = [](bool stalls) { return stalls ? "stalls" : "does not stall"; };
  std::printf(
      "# gyre's verdict here: memcpy %s, process_vm_readv %s at 1-63 bytes (where one\n"
      "# stalls, copies at those distances take the vectors or the bounce)\n",
      said(gyre::stringCopyStallsNearby()), said(gyre::kernelCopyStallsNearby()));
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
  copyDistances(repeats);
  return 0;
}
