// Built with -mavx2 -mf16c -mfma; only called when the CPU reports those features.
#define GYRE_CPU_ISA avx2
#include "kernels/cpu/reduce_impl.h"

namespace gyre::cpu::avx2 {
void reduceEntry(DataType type, RedOp op, void* d, void* d2, const void* a, const void* b, size_t n,
                 int div) {
  reduceImpl(type, op, d, d2, a, b, n, div);
}
}  // namespace gyre::cpu::avx2
