#include "runtime/core/arg_checks.h"

#include <algorithm>
#include <cstdint>

#include <string>

#include "base/status.h"

namespace gyre {

namespace {

// The messages, out of line: the checks that pass on every call keep no frame for them.
[[noreturn, gnu::cold, gnu::noinline]] void failArgument(int rank, const char* what,
                                                         const std::string& why) {
  fail(Code::invalid_argument, "rank " + std::to_string(rank) + ": " + what + ": " + why);
}

[[noreturn, gnu::cold, gnu::noinline]] void failUnknown(int rank, const char* what,
                                                        const char* kind, int value) {
  failArgument(rank, what, std::string("unknown ") + kind + " " + std::to_string(value));
}

[[noreturn, gnu::cold, gnu::noinline]] void failOutside(int rank, const char* what,
                                                        const char* role, int root, int nranks) {
  failArgument(rank, what,
               std::string(role) + " " + std::to_string(root) + " is outside [0, " +
                   std::to_string(nranks) + ")");
}

[[noreturn, gnu::cold, gnu::noinline]] void failTooLarge(int rank, const char* what, size_t count) {
  failArgument(rank, what, "count " + std::to_string(count) + " is too large");
}

}  // namespace

void checkTypeAndOp(int rank, const char* what, DataType type, RedOp op) {
  if (static_cast<int>(type) >= kNumDataTypes) {
    failUnknown(rank, what, "data type", static_cast<int>(type));
  }
  if (static_cast<int>(op) >= kNumRedOps) {
    failUnknown(rank, what, "reduction op", static_cast<int>(op));
  }
}

void checkRank(int rank, const char* what, int root, int nranks, const char* role) {
  if (root < 0 || root >= nranks) failOutside(rank, what, role, root, nranks);
}

size_t checkedBytes(int rank, const char* what, size_t count, DataType type, size_t blocks) {
  const size_t es = dataTypeSize(type);
  // No buffer can be larger than PTRDIFF_MAX bytes: a count past that is a caller's bug (or
  // a negative number cast to size_t), never memory to read. Checked multiplications: the
  // divisions they replace cost tens of cycles on every call.
  size_t bytes = 0;
  if (__builtin_mul_overflow(count, es, &bytes) ||
      __builtin_mul_overflow(bytes, std::max<size_t>(1, blocks), &bytes) ||
      bytes > size_t(PTRDIFF_MAX)) {
    failTooLarge(rank, what, count);
  }
  return blocks ? bytes : 0;
}

}  // namespace gyre
