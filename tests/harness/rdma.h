// Whether this machine can run the rdma tests: empty when it has a usable device, else why
// not (the tests then skip, saying so).
#pragma once

#include <string>

#ifdef GYRE_HAVE_IBVERBS
#include "transport/rdma/verbs.h"
#endif

namespace gyre::test {

inline std::string rdmaMissing() {
#ifdef GYRE_HAVE_IBVERBS
  std::string why;
  return openRdmaDevice("", -1, why) ? std::string() : why;
#else
  return "gyre was built without libibverbs";
#endif
}

}  // namespace gyre::test
