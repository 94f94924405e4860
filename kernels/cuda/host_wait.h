// A stream waiting for the host: a one-thread kernel that holds back the work queued after it
// on its stream until a host thread releases it through pinned, device-mapped memory, or gives
// up at a deadline. It is how a call enqueued on a CUDA stream waits for work that the host
// does (the staged collectives) without blocking the thread that enqueued it.
// C++17: included by host code built with or without nvcc.
#pragma once

#include <cuda_runtime_api.h>

#include <cstdint>

namespace gyre::cuda {

// Host-written, device-read words, in memory from cudaHostAlloc(cudaHostAllocMapped).
struct HostSignal {
  uint64_t released;  // the highest ticket the host has finished, in ticket order
  uint64_t failed;    // non-zero once any ticket failed: every waiter lets go
  uint64_t timedOut;  // written by a waiter that gave up at its deadline: its ticket
  uint64_t padding[5];
};

// Enqueues on `stream` a wait until signal->released >= ticket or signal->failed != 0, or
// until `limitNs` nanoseconds passed since the wait began (then signal->timedOut = ticket).
// `signal` is the device's address of the mapped memory. Returns the launch's error.
cudaError_t waitForHost(HostSignal* signal, uint64_t ticket, uint64_t limitNs, cudaStream_t stream);

// Loads the wait's kernel now. With lazy module loading (CUDA's default) the first launch of a
// kernel may wait for the whole device, and so for a stream that is waiting on the host: load
// it before any stream waits.
cudaError_t loadWaitForHost();

}  // namespace gyre::cuda
