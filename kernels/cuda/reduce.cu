// CUDA reduction and copy kernels: one instantiation per (type, op, divide), launched on the
// caller's stream. Each thread handles 16-byte packs (four in flight per loop turn, so enough
// loads are outstanding to cover memory latency), then the unaligned head and tail elements.
#include <algorithm>
#include <atomic>

#include "kernels/cuda/elementwise.cuh"
#include "kernels/cuda/reduce.h"

namespace gyre::cuda {

namespace {

constexpr int kThreads = 256;
constexpr int kUnroll = 4;

template <class T, class Op, bool kDivide>
__global__ void __launch_bounds__(kThreads)
    elementwiseKernel(typename Elem<T>::S* d, typename Elem<T>::S* d2, const typename Elem<T>::S* a,
                      const typename Elem<T>::S* b, size_t head, size_t packs, size_t n,
                      typename Elem<T>::C div) {
  using S = typename Elem<T>::S;
  constexpr bool kCopy = std::is_same_v<Op, Copy>;
  constexpr size_t K = Pack<S>::kCount;
  const size_t stride = size_t(gridDim.x) * blockDim.x;
  const size_t t = size_t(blockIdx.x) * blockDim.x + threadIdx.x;

  const uint4* va = reinterpret_cast<const uint4*>(a + head);
  const uint4* vb = reinterpret_cast<const uint4*>(b + head);
  uint4* vd = reinterpret_cast<uint4*>(d + head);
  uint4* vd2 = d2 ? reinterpret_cast<uint4*>(d2 + head) : nullptr;
  size_t p = t;
  for (; p + (kUnroll - 1) * stride < packs; p += kUnroll * stride) {
    uint4 x[kUnroll], y[kUnroll];
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      x[k] = va[p + k * stride];
      if constexpr (!kCopy) y[k] = vb[p + k * stride];
    }
#pragma unroll
    for (int k = 0; k < kUnroll; ++k) {
      uint4 r = x[k];
      if constexpr (!kCopy) r = combinePack<T, Op, kDivide>(x[k], y[k], div);
      vd[p + k * stride] = r;
      if (vd2) vd2[p + k * stride] = r;
    }
  }
  for (; p < packs; p += stride) {
    uint4 r = va[p];
    if constexpr (!kCopy) r = combinePack<T, Op, kDivide>(r, vb[p], div);
    vd[p] = r;
    if (vd2) vd2[p] = r;
  }

  // Elements outside the packs: [0, head) and [head + packs * K, n).
  const size_t tailStart = head + packs * K;
  const size_t scalars = head + (n - tailStart);
  for (size_t s = t; s < scalars; s += stride) {
    const size_t i = s < head ? s : tailStart + (s - head);
    S r = a[i];
    if constexpr (!kCopy) r = combine<T, Op, kDivide>(r, b[i], div);
    d[i] = r;
    if (d2) d2[i] = r;
  }
}

int multiprocessors() {
  static std::atomic<int> cached[64] = {};
  int device = 0;
  if (cudaGetDevice(&device) != cudaSuccess) return 1;
  const int slot = device & 63;
  int count = cached[slot].load(std::memory_order_relaxed);
  if (count == 0) {
    if (cudaDeviceGetAttribute(&count, cudaDevAttrMultiProcessorCount, device) != cudaSuccess ||
        count <= 0) {
      count = 1;
    }
    cached[slot].store(count, std::memory_order_relaxed);
  }
  return count;
}

template <class T, class Op, bool kDivide>
cudaError_t launch(void* dst, void* dst2, const void* a, const void* b, size_t n,
                   typename Elem<T>::C div, cudaStream_t stream) {
  using S = typename Elem<T>::S;
  constexpr size_t K = Pack<S>::kCount;
  if (n == 0) return cudaSuccess;
  // Vector packs only where every pointer sits at the same offset from a 16-byte boundary.
  const auto offset = [](const void* p) { return reinterpret_cast<uintptr_t>(p) % 16; };
  const uintptr_t mis = offset(a);
  size_t head = 0, packs = 0;
  if (offset(b) == mis && offset(dst) == mis && (!dst2 || offset(dst2) == mis) &&
      mis % sizeof(S) == 0) {
    head = std::min(n, ((16 - mis) % 16) / sizeof(S));
    packs = (n - head) / K;
  }
  const size_t scalars = n - packs * K;
  const size_t work = std::max((packs + kUnroll - 1) / kUnroll, scalars);
  const size_t wanted = (work + kThreads - 1) / kThreads;
  const unsigned blocks = unsigned(std::clamp<size_t>(wanted, 1, size_t(multiprocessors()) * 8));
  elementwiseKernel<T, Op, kDivide><<<blocks, kThreads, 0, stream>>>(
      static_cast<S*>(dst), static_cast<S*>(dst2), static_cast<const S*>(a),
      static_cast<const S*>(b), head, packs, n, div);
  return cudaGetLastError();
}

template <class T>
cudaError_t reduceAs(RedOp op, void* dst, void* dst2, const void* a, const void* b, size_t n,
                     int avgDivisor, cudaStream_t stream) {
  using C = typename Elem<T>::C;
  switch (op) {
    case RedOp::sum:
      return launch<T, Sum, false>(dst, dst2, a, b, n, C(1), stream);
    case RedOp::avg:
      if (avgDivisor > 0) return launch<T, Sum, true>(dst, dst2, a, b, n, C(avgDivisor), stream);
      return launch<T, Sum, false>(dst, dst2, a, b, n, C(1), stream);
    case RedOp::prod:
      return launch<T, Prod, false>(dst, dst2, a, b, n, C(1), stream);
    case RedOp::min:
      return launch<T, Min, false>(dst, dst2, a, b, n, C(1), stream);
    case RedOp::max:
      return launch<T, Max, false>(dst, dst2, a, b, n, C(1), stream);
  }
  return cudaErrorInvalidValue;
}

}  // namespace

cudaError_t reduce(DataType type, RedOp op, void* dst, void* dst2, const void* a, const void* b,
                   size_t n, int avgDivisor, cudaStream_t stream) {
  switch (type) {
    case DataType::i8:
      return reduceAs<int8_t>(op, dst, dst2, a, b, n, avgDivisor, stream);
    case DataType::u8:
      return reduceAs<uint8_t>(op, dst, dst2, a, b, n, avgDivisor, stream);
    case DataType::i32:
      return reduceAs<int32_t>(op, dst, dst2, a, b, n, avgDivisor, stream);
    case DataType::u32:
      return reduceAs<uint32_t>(op, dst, dst2, a, b, n, avgDivisor, stream);
    case DataType::i64:
      return reduceAs<int64_t>(op, dst, dst2, a, b, n, avgDivisor, stream);
    case DataType::u64:
      return reduceAs<uint64_t>(op, dst, dst2, a, b, n, avgDivisor, stream);
    case DataType::f16:
      return reduceAs<F16>(op, dst, dst2, a, b, n, avgDivisor, stream);
    case DataType::bf16:
      return reduceAs<BF16>(op, dst, dst2, a, b, n, avgDivisor, stream);
    case DataType::f32:
      return reduceAs<float>(op, dst, dst2, a, b, n, avgDivisor, stream);
    case DataType::f64:
      return reduceAs<double>(op, dst, dst2, a, b, n, avgDivisor, stream);
  }
  return cudaErrorInvalidValue;
}

cudaError_t copy(void* dst, void* dst2, const void* src, size_t bytes, cudaStream_t stream) {
  if (bytes == 0) return cudaSuccess;
  if (!dst2) {
    if (dst == src) return cudaSuccess;
    return cudaMemcpyAsync(dst, src, bytes, cudaMemcpyDefault, stream);
  }
  return launch<uint8_t, Copy, false>(dst, dst2, src, src, bytes, uint8_t(1), stream);
}

}  // namespace gyre::cuda
