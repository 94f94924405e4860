// Whether a buffer is CUDA device memory, asked of the CUDA driver without linking it: a
// process that has not loaded libcuda cannot hold device memory, so until it has, the
// answer is "no" at the cost of a clock read (the loaded libraries are looked at again at most
// every 100 ms). Collectives refuse device buffers with a clear error instead of touching
// them from the CPU.
#pragma once

namespace gyre {

// True for memory only a GPU can address (cudaMalloc); false for host memory, pinned host
// memory and managed memory (which the CPU may touch), and whenever the driver cannot tell.
bool isCudaDeviceMemory(const void* p);

}  // namespace gyre
