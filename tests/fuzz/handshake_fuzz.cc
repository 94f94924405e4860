// The data-plane handshake checks an acceptor runs on a stranger's first bytes, and the
// connector's check of a challenge.
#include <cstddef>
#include <cstdint>
#include <cstring>

#include "base/auth.h"
#include "transport/tcp/handshake.h"

using namespace gyre;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < sizeof(wire::Hello)) return 0;
  wire::Hello hello;
  std::memcpy(&hello, data, sizeof hello);
  const std::string why = wire::checkHello(hello, "fuzz-job", 1, 4, 8, 131072);
  if (why.empty()) {
    // Accepted fields must be the ones the acceptor then trusts.
    if (hello.toRank != 1 || hello.fromRank < 0 || hello.fromRank >= 4 || hello.fromRank == 1) {
      __builtin_trap();
    }
  }
  if (size >= sizeof(wire::Hello) + sizeof(wire::Challenge)) {
    wire::Challenge c;
    std::memcpy(&c, data + sizeof(wire::Hello), sizeof c);
    auth::Mac given;
    std::memcpy(given.data(), c.mac, given.size());
    const auto expected = auth::mac("secret", "gyre-accept", wire::bytesOf(&hello, sizeof hello),
                                    wire::bytesOf(c.nonce, 16));
    (void)auth::equal(given, expected);
  }
  return 0;
}
