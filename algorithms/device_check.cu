// Compiles the algorithm headers for the device with a minimal device-side Prims, so a
// change that breaks nvcc (C++20 in a shared header, a host-only call) fails the build.
#include "algorithms/prims.h"

namespace {

struct CountingPrims {
  unsigned long long calls = 0;
  __device__ void setPeers(const int*, int, const int*, int) { ++calls; }
  __device__ void useOutputAsInput() { ++calls; }
  __device__ void send(size_t, size_t) { ++calls; }
  __device__ void recv(size_t, size_t) { ++calls; }
  __device__ void recvSend(size_t) { ++calls; }
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

__global__ void gyreAlgorithmsCompileCheck(unsigned long long* out, int rank, int n, size_t count,
                                           const size_t* counts, const size_t* offsets) {
  namespace a = gyre::algo;
  CountingPrims p;
  a::ringAllReduce(p, rank, n, count, 1024);
  a::ringAllGather(p, rank, n, count, 1024);
  a::ringAllGatherBlocks(p, rank, n, a::VarBlocks{counts, offsets}, 1024);
  a::ringReduceScatter(p, rank, n, count, 1024, count + 1);
  a::ringAllGatherBlocks(p, rank, n, a::StridedBlocks{count, count + 1}, 1024);
  a::ringBroadcast(p, rank, n, 0, count, 1024);
  a::ringReduce(p, rank, n, 0, count);
  a::ringGather(p, rank, n, 0, count);
  a::ringScatter(p, rank, n, 0, count);
  a::flatGather(p, rank, n, 0, count);
  a::flatScatter(p, rank, n, 0, count);
  a::binomialReduce(p, rank, n, 0, count);
  a::binomialBroadcast(p, rank, n, 0, count);
  a::doubleTreeAllReduce(p, rank, n, count, 1024);
  a::doublingAllReduce(p, rank, n, count, 1024, 3);
  a::doublingAllGather(p, rank, n, count, 1024, 3);
  a::disseminationBarrier(p, rank, n);
  a::pairwiseAllToAll(p, rank, n, a::EqualExchange{count}, 1024);
  a::pairwiseAllToAll(p, rank, n, a::VarExchange{counts, offsets, counts, offsets}, 1024);
  a::sendTo(p, (rank + 1) % n, count);
  a::recvFrom(p, (rank + n - 1) % n, count);
  *out = p.calls;
}
