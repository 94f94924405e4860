// The stream-side wait of kernels/cuda/host_wait.h: one thread polling mapped host memory,
// sleeping between looks so that it costs the GPU next to nothing.
#include "kernels/cuda/host_wait.h"

namespace gyre::cuda {

namespace {

__device__ __forceinline__ uint64_t globalNanoseconds() {
  uint64_t t;
  asm volatile("mov.u64 %0, %%globaltimer;" : "=l"(t));
  return t;
}

__global__ void waitForHostKernel(HostSignal* signal, uint64_t ticket, uint64_t limitNs) {
  const volatile HostSignal* s = signal;
  const uint64_t start = globalNanoseconds();
  while (s->released < ticket && s->failed == 0) {
    if (globalNanoseconds() - start > limitNs) {
      reinterpret_cast<volatile HostSignal*>(signal)->timedOut = ticket;
      __threadfence_system();
      return;
    }
    __nanosleep(1000);
  }
}

}  // namespace

cudaError_t waitForHost(HostSignal* signal, uint64_t ticket, uint64_t limitNs,
                        cudaStream_t stream) {
  waitForHostKernel<<<1, 1, 0, stream>>>(signal, ticket, limitNs);
  return cudaGetLastError();
}

cudaError_t loadWaitForHost() {
  cudaFuncAttributes attributes;
  return cudaFuncGetAttributes(&attributes, waitForHostKernel);
}

}  // namespace gyre::cuda
