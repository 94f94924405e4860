// Input patterns whose collective results are exact in every data type (small integers,
// powers of two for prod, multiples of n for avg), so #wrong compares bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gyre/types.h"

namespace gyre::bench {

// The value rank `rank` contributes at element i.
double patternValue(RedOp op, int rank, int nranks, size_t i);
// The reduction of patternValue over all ranks at element i.
double reducedValue(RedOp op, int nranks, size_t i);

void storeValue(DataType type, void* base, size_t i, double v);
// Number of elements of `actual` that differ bit for bit from `expected`.
size_t countMismatches(DataType type, const void* actual, const void* expected, size_t count);

}  // namespace gyre::bench
