// A collective kernel's failure record (link/device_link.h) as the status that
// poisons the communicator: names the rank, the call, the peer and what went wrong. Host
// code only, built with or without CUDA.
#pragma once

#include <chrono>
#include <string>

#include "base/status.h"
#include "link/device_link.h"
#include "link/link.h"

namespace gyre {

// Ok when f.code is 0; `who` is "rank R", `timeout` the communicator's.
Status deviceFailureStatus(const DeviceFailure& f, const std::string& who,
                           std::chrono::milliseconds timeout);

}  // namespace gyre
