// The CUDA kernels against the device's own copy bandwidth, in one run:
//   gyre-cuda-kernel-bench [MiB per buffer, default 256] [iterations, default 20]
// Bandwidth counts bytes read plus bytes written (a copy moves 2 x size, a reduce 3 x size);
// each figure is the median over the iterations, timed with CUDA events after a warm-up.
// Inputs are random values (never zeros); the buffers are far larger than the L2 cache.
#include <cuda_runtime_api.h>

#include <algorithm>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <functional>
#include <random>
#include <vector>

#include "gyre/types.h"
#include "kernels/cpu/half.h"
#include "kernels/cuda/reduce.h"

namespace {

void check(cudaError_t status, const char* what) {
  if (status != cudaSuccess) {
    std::fprintf(stderr, "gyre-cuda-kernel-bench: %s: %s\n", what, cudaGetErrorString(status));
    std::exit(1);
  }
}

// Median time in microseconds of `iters` runs of `body` on `stream`, after 3 untimed ones.
double medianUs(cudaStream_t stream, int iters, const std::function<cudaError_t()>& body) {
  cudaEvent_t start, stop;
  check(cudaEventCreate(&start), "cudaEventCreate");
  check(cudaEventCreate(&stop), "cudaEventCreate");
  for (int i = 0; i < 3; ++i) check(body(), "warm-up launch");
  std::vector<double> times;
  for (int i = 0; i < iters; ++i) {
    check(cudaEventRecord(start, stream), "cudaEventRecord");
    check(body(), "launch");
    check(cudaEventRecord(stop, stream), "cudaEventRecord");
    check(cudaEventSynchronize(stop), "cudaEventSynchronize");
    float ms = 0;
    check(cudaEventElapsedTime(&ms, start, stop), "cudaEventElapsedTime");
    times.push_back(double(ms) * 1000.0);
  }
  cudaEventDestroy(start);
  cudaEventDestroy(stop);
  std::sort(times.begin(), times.end());
  return times[times.size() / 2];
}

// Random values of `type` in [-1, 1] filling `bytes`.
std::vector<unsigned char> randomBytes(gyre::DataType type, size_t bytes, std::mt19937& rng) {
  std::vector<unsigned char> out(bytes);
  std::uniform_real_distribution<float> real(-1.0f, 1.0f);
  const size_t es = gyre::dataTypeSize(type);
  for (size_t i = 0; i + es <= bytes; i += es) {
    const float x = real(rng);
    if (type == gyre::DataType::f16 || type == gyre::DataType::bf16) {
      const uint16_t h =
          type == gyre::DataType::f16 ? gyre::cpu::floatToHalf(x) : gyre::cpu::floatToBf16(x);
      std::memcpy(&out[i], &h, 2);
    } else {
      std::memcpy(&out[i], &x, 4);
    }
  }
  return out;
}

}  // namespace

int main(int argc, char** argv) {
  const size_t mib = argc > 1 ? std::strtoull(argv[1], nullptr, 10) : 256;
  const int iters = argc > 2 ? std::atoi(argv[2]) : 20;
  if (mib == 0 || iters <= 0) {
    std::fprintf(stderr, "usage: gyre-cuda-kernel-bench [MiB per buffer] [iterations]\n");
    return 2;
  }
  int devices = 0;
  if (cudaGetDeviceCount(&devices) != cudaSuccess || devices == 0) {
    std::fprintf(stderr, "gyre-cuda-kernel-bench: no CUDA device\n");
    return 2;
  }
  const size_t bytes = mib << 20;
  cudaDeviceProp prop{};
  check(cudaGetDeviceProperties(&prop, 0), "cudaGetDeviceProperties");
  cudaStream_t stream;
  check(cudaStreamCreateWithFlags(&stream, cudaStreamNonBlocking), "cudaStreamCreate");
  void *a, *b, *d, *d2;
  for (void** p : {&a, &b, &d, &d2}) check(cudaMalloc(p, bytes), "cudaMalloc");
  std::mt19937 rng(12345);

  std::printf("# gyre-cuda-kernel-bench: %s (sm_%d%d, %d SMs), %zu MiB per buffer, median of %d\n",
              prop.name, prop.major, prop.minor, prop.multiProcessorCount, mib, iters);
  std::printf("# %-22s %12s %11s %9s %12s\n", "kernel", "moved (MiB)", "time (us)", "GB/s",
              "of D2D copy");
  const double copyUs = medianUs(stream, iters, [&] {
    return cudaMemcpyAsync(d, a, bytes, cudaMemcpyDeviceToDevice, stream);
  });
  const double copyGBs = 2.0 * double(bytes) / copyUs / 1e3;
  auto row = [&](const char* name, double moved, double us) {
    const double gbs = moved / us / 1e3;
    std::printf("  %-22s %12.0f %11.1f %9.1f %11.1f%%\n", name, moved / (1 << 20), us, gbs,
                100.0 * gbs / copyGBs);
  };
  row("cudaMemcpy D2D", 2.0 * double(bytes), copyUs);
  row("gyre copy, 2 outputs", 3.0 * double(bytes),
      medianUs(stream, iters, [&] { return gyre::cuda::copy(d, d2, a, bytes, stream); }));

  struct Case {
    const char* name;
    gyre::DataType type;
    gyre::RedOp op;
  };
  const Case cases[] = {{"reduce f32 sum", gyre::DataType::f32, gyre::RedOp::sum},
                        {"reduce bf16 sum", gyre::DataType::bf16, gyre::RedOp::sum},
                        {"reduce f16 sum", gyre::DataType::f16, gyre::RedOp::sum},
                        {"reduce f32 max", gyre::DataType::f32, gyre::RedOp::max},
                        {"reduce bf16 avg", gyre::DataType::bf16, gyre::RedOp::avg}};
  for (const Case& c : cases) {
    const auto hostA = randomBytes(c.type, bytes, rng), hostB = randomBytes(c.type, bytes, rng);
    check(cudaMemcpy(a, hostA.data(), bytes, cudaMemcpyHostToDevice), "upload");
    check(cudaMemcpy(b, hostB.data(), bytes, cudaMemcpyHostToDevice), "upload");
    const size_t n = bytes / gyre::dataTypeSize(c.type);
    const int divisor = c.op == gyre::RedOp::avg ? 4 : 0;
    row(c.name, 3.0 * double(bytes), medianUs(stream, iters, [&] {
          return gyre::cuda::reduce(c.type, c.op, d, nullptr, a, b, n, divisor, stream);
        }));
  }
  for (void* p : {a, b, d, d2}) cudaFree(p);
  cudaStreamDestroy(stream);
  return 0;
}
