// Challenge-response authentication with a job's shared secret: HMAC-SHA256 from libcrypto.
// A leaf, like status.h: the store and the transports use it. Both sides always run the same
// exchange, so a side with a secret never accepts one without.
#pragma once

#include <array>
#include <cstdint>
#include <string>
#include <string_view>

namespace gyre::auth {

using Nonce = std::array<uint8_t, 16>;
using Mac = std::array<uint8_t, 32>;

Nonce randomNonce();  // throws Failure(system_error) if the system has no randomness
std::string randomHex(size_t bytes);

// The HMAC key of a job: its secret or, for a job that has none, a key made from the job id
// alone. That key is public, so such a job is not authenticated (the runtime warns once); it
// still keeps jobs apart, and the empty key is never used.
std::string jobKey(std::string_view secret, std::string_view jobId);

// HMAC-SHA256(key, label | parts...); throws Failure(internal) for an empty key.
Mac mac(const std::string& key, std::string_view label, std::string_view a, std::string_view b = {},
        std::string_view c = {});

bool equal(const Mac& x, const Mac& y);  // constant time

inline std::string_view view(const Nonce& n) {
  return {reinterpret_cast<const char*>(n.data()), n.size()};
}

}  // namespace gyre::auth
