// Ranks as threads through the C API: one communicator per rank from one unique id, OK(),
// which fails the test with gyre's last error, and refused(), which checks a call's error.
#pragma once

#include <doctest/doctest.h>

#include <string>
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

// A call that failed with `want` and a message (gyreGetLastError) containing `text`.
inline void refused(gyreResult_t got, gyreResult_t want, const std::string& text) {
  const std::string message = gyreGetLastError(nullptr);
  CHECK_MESSAGE(got == want, message);
  CHECK_MESSAGE(message.find(text) != std::string::npos, message);
}
