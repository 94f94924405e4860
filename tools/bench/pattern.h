// Input patterns whose collective results are exact in every data type (small integers,
// powers of two for prod, multiples of n for avg), so #wrong compares bit for bit.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>

#include "gyre/types.h"

namespace gyre::bench {

// The value rank `rank` contributes at element i.
double patternValue(RedOp op, int rank, int nranks, size_t i);
// The reduction of patternValue over all ranks at element i.
double reducedValue(RedOp op, int nranks, size_t i);

// patternValue and reducedValue repeat in i with this period (for fixed op and n).
size_t patternPeriod(RedOp op, int nranks);

void storeValue(DataType type, void* base, size_t i, double v);

// Fills count elements with value(i), computing one stretch that is a multiple of `period`
// and copying it forward (value must repeat with that period).
template <class Fn>
void fillPeriodic(DataType type, void* base, size_t count, size_t period, Fn value);
// Number of elements of `actual` that differ bit for bit from `expected`.
size_t countMismatches(DataType type, const void* actual, const void* expected, size_t count);

template <class Fn>
void fillPeriodic(DataType type, void* base, size_t count, size_t period, Fn value) {
  const size_t es = dataTypeSize(type);
  size_t stretch = period;
  while (stretch * es < 4096) stretch += period;
  const size_t first = stretch < count ? stretch : count;
  for (size_t i = 0; i < first; ++i) storeValue(type, base, i, value(i));
  auto* bytes = static_cast<unsigned char*>(base);
  for (size_t done = first; done < count;) {
    const size_t n = (done < count - done ? done : count - done) / stretch * stretch;
    const size_t take = n ? n : count - done;  // a final partial stretch
    std::memcpy(bytes + done * es, bytes, take * es);
    done += take;
  }
}

}  // namespace gyre::bench
