// The rendezvous request parser, as the server runs it on every frame body, and the reply
// parsing the client does.
#include <cstddef>
#include <cstdint>

#include "runtime/store/protocol.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  const std::string_view body(reinterpret_cast<const char*>(data), size);
  try {
    const auto request = gyre::store::parseRequest(body);
    // What parsed must respect the limits the server relies on.
    if (request.key.size() > gyre::store::kMaxKeyBytes) __builtin_trap();
    if (request.keys.size() > gyre::store::kMaxWaitKeys) __builtin_trap();
  } catch (const gyre::store::ProtocolError&) {
  }
  try {  // a get reply, an add reply
    gyre::store::Reader in(body);
    in.u8();
    in.str(gyre::store::kMaxValueBytes);
    in.end();
  } catch (const gyre::store::ProtocolError&) {
  }
  return 0;
}
