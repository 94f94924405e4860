// The argument checks every entry point shares (the C API before it enqueues a
// stream-ordered call, the communicator before it runs one): one wording, one place.
// `rank` is the calling rank (messages start "rank R: what: ..."); each throws
// Failure(invalid_argument) naming the call.
#pragma once

#include <cstddef>

#include "gyre/types.h"

namespace gyre {

// Type and op are known enumerators.
void checkTypeAndOp(int rank, const char* what, DataType type, RedOp op);
// `root` names a rank of [0, nranks); `role` says which argument it was ("root", "peer").
void checkRank(int rank, const char* what, int root, int nranks, const char* role = "root");
// count × element size × blocks, refused past PTRDIFF_MAX (the largest possible buffer).
size_t checkedBytes(int rank, const char* what, size_t count, DataType type, size_t blocks = 1);

}  // namespace gyre
