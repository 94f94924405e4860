// Whether a buffer is CUDA device memory, asked of the CUDA driver without linking it: a
// process that has not loaded libcuda cannot hold device memory. Host calls ask
// cudaDriverLoaded first, which answers "no" at the cost of a clock read (the loaded libraries
// are looked at again at most every 100 ms); the other questions look at once, so every rank
// that asks them sees the driver as soon as it is loaded. The C API sends calls on device
// buffers to the stream-ordered form (docs/cuda.md) instead of touching them from the CPU.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

namespace gyre {

// True for memory only a GPU can address (cudaMalloc); false for host memory, pinned host
// memory and managed memory (which the CPU may touch), and whenever the driver cannot tell.
// Looks for the driver at once until it is found.
bool isCudaDeviceMemory(const void* p);
// Whether this process has loaded the CUDA driver, looked at most every 100 ms while it has not
// (a held-back look answers "no"): the cheap gate of a host call, which then need not ask
// isCudaDeviceMemory of each of its buffers.
bool cudaDriverLoaded();
// The same, looked at once. Once found, the driver is never looked for again.
bool findCudaDriver();

// For GPUDirect RDMA: a dma-buf file descriptor (the caller closes it) for the pages of the
// device allocation holding [p, p + bytes), with p at `offset` in it; -1 and the reason in
// `whyNot` when the driver cannot give one.
int cudaDmabufOf(const void* p, size_t bytes, uint64_t& offset, std::string& whyNot);

}  // namespace gyre
