// CUDA reduction and copy kernels: the device twins of kernels/cpu/reduce.h, enqueued on the
// caller's stream. One kernel per (type, op), 16-byte vector loads and stores wherever the
// pointers share their alignment, element by element for unaligned heads and tails.
// C++17: included by host code built with or without nvcc.
#pragma once

#include <cuda_runtime_api.h>

#include <cstddef>

#include "gyre/types.h"

namespace gyre::cuda {

// dst[i] = a[i] op b[i] for i < n, and dst2[i] too when dst2 is not null; with avgDivisor > 0
// the result is then divided by it (the last step of RedOp::avg), otherwise avg reduces like
// sum. Integers wrap and divide truncating. dst and dst2 may be exactly a or b, never a partial
// overlap. All pointers are device (or managed) memory of the current device. Returns the
// launch's error; the work itself completes in stream order.
cudaError_t reduce(DataType type, RedOp op, void* dst, void* dst2, const void* a, const void* b,
                   size_t n, int avgDivisor, cudaStream_t stream);

// dst = src (and dst2 = src when dst2 is not null), `bytes` long, in stream order.
cudaError_t copy(void* dst, void* dst2, const void* src, size_t bytes, cudaStream_t stream);

}  // namespace gyre::cuda
