// CPU reduction and copy kernels. Each picks the widest instruction set the CPU has
// (AVX2 + F16C, else baseline x86-64) once, at first use.
#pragma once

#include <cstddef>

#include "gyre/types.h"

namespace gyre::cpu {

// Which destinations get streaming (non-temporal) stores, whose lines go to memory rather than
// into this CPU's cache: for a slot that a CPU far from this one reads next, which then pulls it
// from memory instead of from this CPU's cache (docs/perf/run_to_run.md). Both kernels end with the
// streamed stores ordered before any later store (a publish).
struct Stores {
  bool dst = false;
  bool dst2 = false;
};

// dst[i] = a[i] op b[i] for i < n; when dst2 is not null it receives the same values.
// When avgDivisor > 0 the result is then divided by it (the last step of RedOp::avg);
// otherwise avg reduces like sum. Integers wrap on overflow and divide truncating.
// dst and dst2 may be exactly a or b, never a partial overlap.
void reduce(DataType type, RedOp op, void* dst, void* dst2, const void* a, const void* b, size_t n,
            int avgDivisor, Stores stores = {});

// dst = src (and dst2 = src when dst2 is not null); a no-op copy where dst == src.
void copy(void* dst, void* dst2, const void* src, size_t bytes, Stores stores = {});

// dst[i] = src[i] * *factor for i < n (one element of `type`), as RedOp::prod multiplies;
// dst may be exactly src.
void scale(DataType type, void* dst, const void* src, const void* factor, size_t n);

// The instruction set the kernels use on this CPU, for logs and benchmarks.
const char* isaName();

}  // namespace gyre::cpu
