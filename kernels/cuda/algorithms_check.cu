// Compiles the algorithm headers for the device with a minimal device-side Prims, so a
// change that breaks nvcc (C++20 in a shared header, a host-only call) fails the build.
#include "algorithms/prims.h"

namespace {

struct CountingPrims {
  unsigned long long calls = 0;
  __device__ void send(size_t, size_t) { ++calls; }
  __device__ void recv(size_t, size_t) { ++calls; }
  __device__ void copySend(size_t, size_t, size_t) { ++calls; }
  __device__ void recvCopySend(size_t, size_t) { ++calls; }
  __device__ void recvReduceSend(size_t, size_t) { ++calls; }
  __device__ void recvReduceCopy(size_t, size_t, size_t, bool) { ++calls; }
  __device__ void recvReduceCopySend(size_t, size_t, size_t, bool) { ++calls; }
  __device__ void localCopy(size_t, size_t, size_t) { ++calls; }
  __device__ void sendMarker() { ++calls; }
  __device__ void recvMarker() { ++calls; }
};

}  // namespace

__global__ void gyreAlgorithmsCompileCheck(unsigned long long* out, int rank, int n, size_t count) {
  CountingPrims p;
  gyre::algo::ringAllReduce(p, rank, n, count, 1024);
  gyre::algo::ringAllGather(p, rank, n, count, 1024);
  gyre::algo::ringReduceScatter(p, rank, n, count, 1024);
  gyre::algo::ringBroadcast(p, rank, n, 0, count, 1024);
  *out = p.calls;
}
