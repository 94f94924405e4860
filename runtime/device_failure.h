// A collective kernel's failure record (transport/cuda_ipc/device_link.h) as the status that
// poisons the communicator: names the rank, the call, the peer and what went wrong. Host
// code only, built with or without CUDA.
#pragma once

#include <chrono>
#include <string>

#include "runtime/status.h"
#include "transport/cuda_ipc/device_link.h"

namespace gyre {

// "all_reduce #3 (count 4096, float, sum)"
std::string describeDeviceOp(const DeviceSlotMeta& m);

// Ok when f.code is 0; `who` is "rank R", `timeout` the communicator's.
Status deviceFailureStatus(const DeviceFailure& f, const std::string& who,
                           std::chrono::milliseconds timeout);

}  // namespace gyre
