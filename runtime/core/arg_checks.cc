#include "runtime/core/arg_checks.h"

#include <cstdint>

#include <string>

#include "base/status.h"

namespace gyre {

namespace {

[[noreturn, gnu::cold, gnu::noinline]] void failArgument(int rank, const char* what,
                                                         const std::string& why) {
  fail(Code::invalid_argument, "rank " + std::to_string(rank) + ": " + what + ": " + why);
}

}  // namespace

void failUnknown(int rank, const char* what, const char* kind, int value) {
  failArgument(rank, what, std::string("unknown ") + kind + " " + std::to_string(value));
}

void failOutside(int rank, const char* what, const char* role, int root, int nranks) {
  failArgument(rank, what,
               std::string(role) + " " + std::to_string(root) + " is outside [0, " +
                   std::to_string(nranks) + ")");
}

void failTooLarge(int rank, const char* what, size_t count) {
  failArgument(rank, what, "count " + std::to_string(count) + " is too large");
}

}  // namespace gyre
