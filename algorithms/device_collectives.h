// The collective kernel over cuda_ipc links: one launch per collective, one thread block per
// channel, each running algorithms/device_call.h with DevicePrims. One instantiation per
// (type, op); copy-only collectives share the sum one. C++17: included by host code.
#pragma once

#include <cuda_runtime_api.h>

#include "algorithms/device_call.h"

namespace gyre::cuda {

constexpr int kDeviceThreads = 512;  // per block (channel)

// Enqueues `call` on `stream` (grid: call.plan.channels blocks). Returns the launch's error;
// failures inside the kernel land in call.failures.
cudaError_t launchDeviceCall(const DeviceCall& call, cudaStream_t stream);

// Loads every instantiation now (lazy module loading would load one at its first launch,
// which may wait for the whole device while another rank's kernel spins on it).
cudaError_t loadDeviceCalls();

}  // namespace gyre::cuda
