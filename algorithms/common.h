// Helpers for algorithm headers. C++17 and nvcc-clean: algorithms compile for host and CUDA.
#pragma once

#include <cstddef>

#if defined(__CUDACC__)
#define GYRE_HD __host__ __device__
#else
#define GYRE_HD
#endif
// Kept out of line on the device: executors' per-slot work, called from many places of every
// algorithm, would otherwise be inlined at each and blow up compile time and code size.
#if defined(__CUDA_ARCH__)
#define GYRE_OUTLINE __noinline__
#else
#define GYRE_OUTLINE
#endif

namespace gyre::algo {

// A binomial tree of 65536 ranks has 16 children at its root.
constexpr int kMaxTreeChildren = 16;

GYRE_HD inline size_t divUp(size_t a, size_t b) {
  return (a + b - 1) / b;
}
GYRE_HD inline size_t min_(size_t a, size_t b) {
  return a < b ? a : b;
}
GYRE_HD inline int mod(int a, int n) {
  return ((a % n) + n) % n;
}

}  // namespace gyre::algo
