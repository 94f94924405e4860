// Whether a buffer is CUDA device memory, asked of the CUDA driver without linking it: a
// process that has not loaded libcuda cannot hold device memory, so until it has, the
// answer is "no" at the cost of a clock read (the loaded libraries are looked at again at most
// every 100 ms). The C API sends calls on device buffers to the stream-ordered form
// (docs/cuda.md) instead of touching them from the CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gyre {

// True for memory only a GPU can address (cudaMalloc); false for host memory, pinned host
// memory and managed memory (which the CPU may touch), and whenever the driver cannot tell.
bool isCudaDeviceMemory(const void* p);
// Whether this process has loaded the CUDA driver (the same look, at most every 100 ms): a call
// that asks this once need not ask isCudaDeviceMemory of each of its buffers while it is false.
bool cudaDriverLoaded();
// The same without the 100 ms wait: for a caller that knows CUDA is in use (it holds a stream)
// and whose answer every rank must share. Once found, the driver is never looked for again.
bool findCudaDriver();

// For GPUDirect RDMA: a dma-buf file descriptor (the caller closes it) for the pages of the
// device allocation holding [p, p + bytes), with p at `offset` in it; -1 and the reason in
// `whyNot` when the driver cannot give one.
int cudaDmabufOf(const void* p, size_t bytes, uint64_t& offset, std::string& whyNot);

}  // namespace gyre
