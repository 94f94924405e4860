// DevicePrims: the primitives inside a CUDA kernel, one thread block per channel. The slot
// protocol is algorithms/slot_prims.h (shared with the host-run tests); this file gives it
// the block's environment: barriers, system-scope acquire/release on the counters (they may
// lie in another GPU's memory, mapped by CUDA IPC), the device clock for deadlines, the
// host's abort word, and block-wide element kernels with 16-byte packs (elementwise.cuh, the
// same bits as the CPU kernels). C++17.
#pragma once

#include <cstdint>

#include "algorithms/slot_prims.h"
#include "kernels/cuda/elementwise.cuh"

namespace gyre::cuda {

// Block-wide d = a op b (and d2 = d), divided by `div` when kDivide. Packs where all pointers
// are 16-byte aligned (slots always are; user buffers at slot-sized offsets usually are),
// elements otherwise.
template <class T, class Op, bool kDivide>
__device__ __forceinline__ void blockCombine(typename Elem<T>::S* d, typename Elem<T>::S* d2,
                                             const typename Elem<T>::S* a,
                                             const typename Elem<T>::S* b, size_t n,
                                             typename Elem<T>::C div) {
  using S = typename Elem<T>::S;
  constexpr size_t K = Pack<S>::kCount;
  const uintptr_t mis = (reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(d2) |
                         reinterpret_cast<uintptr_t>(a) | reinterpret_cast<uintptr_t>(b)) &
                        15;
  const size_t packs = mis == 0 ? n / K : 0;
  const uint4* va = reinterpret_cast<const uint4*>(a);
  const uint4* vb = reinterpret_cast<const uint4*>(b);
  uint4* vd = reinterpret_cast<uint4*>(d);
  uint4* vd2 = reinterpret_cast<uint4*>(d2);
  for (size_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const uint4 r = combinePack<T, Op, kDivide>(va[p], vb[p], div);
    vd[p] = r;
    if (vd2) vd2[p] = r;
  }
  for (size_t i = packs * K + threadIdx.x; i < n; i += blockDim.x) {
    const S r = combine<T, Op, kDivide>(a[i], b[i], div);
    d[i] = r;
    if (d2) d2[i] = r;
  }
}

__device__ __forceinline__ void blockCopy(unsigned char* d, unsigned char* d2,
                                          const unsigned char* s, size_t bytes) {
  const uintptr_t mis = (reinterpret_cast<uintptr_t>(d) | reinterpret_cast<uintptr_t>(d2) |
                         reinterpret_cast<uintptr_t>(s)) &
                        15;
  const size_t packs = mis == 0 ? bytes / 16 : 0;
  const uint4* vs = reinterpret_cast<const uint4*>(s);
  uint4* vd = reinterpret_cast<uint4*>(d);
  uint4* vd2 = reinterpret_cast<uint4*>(d2);
  for (size_t p = threadIdx.x; p < packs; p += blockDim.x) {
    const uint4 v = vs[p];
    vd[p] = v;
    if (vd2) vd2[p] = v;
  }
  for (size_t i = packs * 16 + threadIdx.x; i < bytes; i += blockDim.x) {
    const unsigned char v = s[i];
    d[i] = v;
    if (d2) d2[i] = v;
  }
}

// The Env of SlotPrims for one thread block. T: the element tag of elementwise.cuh (F16, BF16
// or a built-in type); Op: Sum, Prod, Min or Max (avg is Sum with a divisor).
template <class T, class Op>
struct BlockEnv {
  using S = typename Elem<T>::S;
  using C = typename Elem<T>::C;
  DeviceFailure* failure;  // this block's, in mapped host memory
  const DeviceFailure* allFailures;
  int channels;
  const DeviceControl* control;

  __device__ bool leader() const { return threadIdx.x == 0; }
  __device__ bool syncAny(bool pred) const { return __syncthreads_or(pred) != 0; }
  __device__ void sync() const { __syncthreads(); }
  __device__ uint64_t load(const uint64_t* p) const {
    uint64_t v;
    asm volatile("ld.acquire.sys.global.u64 %0, [%1];" : "=l"(v) : "l"(p) : "memory");
    return v;
  }
  __device__ void store(uint64_t* p, uint64_t v) const {
    asm volatile("st.release.sys.global.u64 [%0], %1;" ::"l"(p), "l"(v) : "memory");
  }
  // Slot data may go to another GPU: make each thread's writes visible system-wide before the
  // barrier after which the leader publishes them.
  __device__ void fence() const { __threadfence_system(); }
  __device__ uint64_t nowNs() const {
    uint64_t t;
    asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
    return t;
  }
  // The host's abort word, or another channel of this call that already failed.
  __device__ bool abortRaised() const {
    if (*reinterpret_cast<const volatile uint32_t*>(&control->abort) != 0) return true;
    for (int c = 0; c < channels; ++c) {
      if (*reinterpret_cast<const volatile uint32_t*>(&allFailures[c].code) != 0) return true;
    }
    return false;
  }
  __device__ void pause() const { __nanosleep(64); }
  __device__ size_t elemSize() const { return sizeof(S); }
  __device__ void reduce(void* dst, void* dst2, const void* a, const void* b, size_t n,
                         int divisor) const {
    if (divisor > 0) {
      blockCombine<T, Op, true>(static_cast<S*>(dst), static_cast<S*>(dst2),
                                static_cast<const S*>(a), static_cast<const S*>(b), n, C(divisor));
    } else {
      blockCombine<T, Op, false>(static_cast<S*>(dst), static_cast<S*>(dst2),
                                 static_cast<const S*>(a), static_cast<const S*>(b), n, C(1));
    }
  }
  __device__ void copy(void* dst, void* dst2, const void* src, size_t bytes) const {
    blockCopy(static_cast<unsigned char*>(dst), static_cast<unsigned char*>(dst2),
              static_cast<const unsigned char*>(src), bytes);
  }
  __device__ static void copyMeta(volatile SlotMeta& to, const SlotMeta& from) {
    to.bytes = from.bytes;
    to.coll = from.coll;
    to.dtype = from.dtype;
    to.op = from.op;
    to.root = from.root;
    to.seq = from.seq;
    to.count = from.count;
  }
  // Leader only. Fields first, the code last: the host reads the code, then the rest.
  __device__ void fail(const DeviceFailure& f) const {
    volatile DeviceFailure* out = failure;
    if (out->code != 0) return;
    out->peer = f.peer;
    out->channel = f.channel;
    out->waitKind = f.waitKind;
    out->wantedBytes = f.wantedBytes;
    copyMeta(out->seen, f.seen);
    copyMeta(out->call, f.call);
    __threadfence_system();
    out->code = f.code;
    __threadfence_system();
  }
};

template <class T, class Op>
using DevicePrims = algo::SlotPrims<BlockEnv<T, Op>>;

}  // namespace gyre::cuda
