// A prefetch for a line another core writes: issued a few calls ahead of the read, the line's
// transfer overlaps the work in between instead of stalling the read. (None for writing: a
// PREFETCHW of a rank's own next posts, measured as an instruction that really runs, left tiny
// calls as fast or slower, close and far: docs/perf/small_calls.md.)
#pragma once

namespace gyre {

inline void prefetchForRead(const void* p) {
  __builtin_prefetch(p, 0);
}

}  // namespace gyre
