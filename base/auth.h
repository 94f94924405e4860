// Challenge-response authentication with a job's shared secret: HMAC-SHA256 from libcrypto.
// A leaf, like status.h: the store and the transports use it. An empty secret is a valid
// (empty) key, so both sides always run the same exchange and a side with a secret never
// accepts one without.
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

// HMAC-SHA256(secret, label | parts...).
Mac mac(const std::string& secret, std::string_view label, std::string_view a,
        std::string_view b = {}, std::string_view c = {});

bool equal(const Mac& x, const Mac& y);  // constant time

inline std::string_view view(const Nonce& n) {
  return {reinterpret_cast<const char*>(n.data()), n.size()};
}

}  // namespace gyre::auth
