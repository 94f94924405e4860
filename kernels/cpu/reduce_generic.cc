#define GYRE_CPU_ISA generic
#include "kernels/cpu/reduce_impl.h"

namespace gyre::cpu::generic {
void reduceEntry(DataType type, RedOp op, void* d, void* d2, const void* a, const void* b, size_t n,
                 int div) {
  reduceImpl(type, op, d, d2, a, b, n, div);
}
}  // namespace gyre::cpu::generic
