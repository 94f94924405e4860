// The argument checks every entry point shares (the C API before it enqueues a
// stream-ordered call, the communicator before it runs one): one wording, one place.
// `rank` is the calling rank (messages start "rank R: what: ..."); each throws
// Failure(invalid_argument) naming the call.
#pragma once

#include <cstddef>
#include <cstdint>

#include "gyre/types.h"

namespace gyre {

// The messages, out of line: the checks that pass on every call keep no frame for them.
[[noreturn, gnu::cold, gnu::noinline]] void failUnknown(int rank, const char* what,
                                                        const char* kind, int value);
[[noreturn, gnu::cold, gnu::noinline]] void failOutside(int rank, const char* what,
                                                        const char* role, int root, int nranks);
[[noreturn, gnu::cold, gnu::noinline]] void failTooLarge(int rank, const char* what, size_t count);

// Inline: a tiny call's path feels every call's frame (docs/perf/small_calls.md).

// Type and op are known enumerators.
inline void checkTypeAndOp(int rank, const char* what, DataType type, RedOp op) {
  if (static_cast<int>(type) >= kNumDataTypes) {
    failUnknown(rank, what, "data type", static_cast<int>(type));
  }
  if (static_cast<int>(op) >= kNumRedOps) {
    failUnknown(rank, what, "reduction op", static_cast<int>(op));
  }
}

// `root` names a rank of [0, nranks); `role` says which argument it was ("root", "peer").
inline void checkRank(int rank, const char* what, int root, int nranks, const char* role = "root") {
  if (root < 0 || root >= nranks) failOutside(rank, what, role, root, nranks);
}

// count × element size × blocks, refused past PTRDIFF_MAX (the largest possible buffer).
inline size_t checkedBytes(int rank, const char* what, size_t count, DataType type,
                           size_t blocks = 1) {
  const size_t es = dataTypeSize(type);
  // No buffer can be larger than PTRDIFF_MAX bytes: a count past that is a caller's bug (or
  // a negative number cast to size_t), never memory to read. Checked multiplications: the
  // divisions they replace cost tens of cycles on every call.
  size_t bytes = 0;
  if (__builtin_mul_overflow(count, es, &bytes) ||
      __builtin_mul_overflow(bytes, blocks > 1 ? blocks : size_t(1), &bytes) ||
      bytes > size_t(PTRDIFF_MAX)) {
    failTooLarge(rank, what, count);
  }
  return blocks ? bytes : 0;
}

}  // namespace gyre
