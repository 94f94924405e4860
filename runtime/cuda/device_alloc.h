// CUDA device memory for applications (gyreMemAlloc, gyreMemFree) and the device a communicator
// belongs to (gyreCommCuDevice). Every build has them; one without CUDA fails with a message
// that says so.
#pragma once

#include <cstddef>
#include <string>

namespace gyre {

// The calling thread's current CUDA device, or -1 where this build has no CUDA or the process
// has not loaded the CUDA driver: a process that never touched CUDA does not start it here.
int currentCudaDevice();

// `bytes` of device memory on the calling thread's current device (cudaMalloc: every gyre
// call takes it, and peers on this host reach it through CUDA IPC). Throws Failure naming
// `who` and the CUDA error.
void* allocateDeviceMemory(size_t bytes, const std::string& who);
// Frees what allocateDeviceMemory returned; nullptr is a no-op.
void freeDeviceMemory(void* p, const std::string& who);

}  // namespace gyre
