// The reference reduction the tests compare against, written independently of the kernels:
// integers wrap (two's complement), floats use the plain operators; avg reduces like sum.
#pragma once

#include <algorithm>
#include <type_traits>

#include "gyre/types.h"

namespace gyre::test {

template <class T>
T refOp(RedOp op, T a, T b) {
  if constexpr (std::is_integral_v<T>) {
    using U = std::make_unsigned_t<T>;
    switch (op) {
      case RedOp::sum:
      case RedOp::avg:
        return T(U(a) + U(b));
      case RedOp::prod:
        return T(U(a) * U(b));
      case RedOp::min:
        return std::min(a, b);
      case RedOp::max:
        return std::max(a, b);
    }
  } else {
    switch (op) {
      case RedOp::sum:
      case RedOp::avg:
        return a + b;
      case RedOp::prod:
        return a * b;
      case RedOp::min:
        return b < a ? b : a;
      case RedOp::max:
        return a < b ? b : a;
    }
  }
  return a;
}

}  // namespace gyre::test
