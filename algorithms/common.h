// Helpers for algorithm headers. C++17 and nvcc-clean: algorithms compile for host and CUDA.
#pragma once

#include <cstddef>

#include "base/hd.h"

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
