// Ranks as threads through the C API: one communicator per rank from one unique id, and OK(),
// which fails the test with gyre's last error.
#pragma once

#include <doctest/doctest.h>

#include <vector>

#include "gyre/gyre.h"
#include "tests/harness/thread_ranks.h"

#define OK(call) REQUIRE_MESSAGE((call) == gyreSuccess, gyreGetLastError(nullptr))

namespace gyre::test {

inline std::vector<gyreComm_t> initComms(int n, const gyreConfig_t* config = nullptr) {
  gyreUniqueId id;
  REQUIRE(gyreGetUniqueId(&id) == gyreSuccess);
  std::vector<gyreComm_t> comms(n);
  onThreads(n, [&](int r) {
    REQUIRE(gyreCommInitRankConfig(&comms[r], n, id, r, config) == gyreSuccess);
  });
  return comms;
}

}  // namespace gyre::test
