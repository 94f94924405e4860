// How a stream-ordered call runs as one kernel over cuda_ipc links (docs/cuda.md): the
// DeviceCall for it (links, failure words and sequence number are filled in at launch), or
// nothing where it must be staged. A pure function of the call and the configuration, so
// every rank makes the same choice of channels. Host code, built with or without CUDA.
#pragma once

#include <optional>
#include <vector>

#include "algorithms/device_call.h"
#include "runtime/core/communicator.h"
#include "runtime/core/plan.h"

namespace gyre {

// buffers[0] is the call's sendbuff and buffers[1] its recvbuff (either may be null). Overlaps
// other than the collective's in-place form give nothing (the staged call reports them). The
// plan is the host's (runtime/core/plan) over the device links' `shape`.
std::optional<DeviceCall> planKernelCall(const KernelCall& k,
                                         const std::vector<StagedBuffer>& buffers, int rank,
                                         const PlanShape& shape);

}  // namespace gyre
