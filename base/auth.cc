#include "base/auth.h"

#include <openssl/crypto.h>
#include <openssl/evp.h>
#include <openssl/hmac.h>
#include <openssl/rand.h>

#include "base/status.h"

namespace gyre::auth {

Nonce randomNonce() {
  Nonce n;
  if (RAND_bytes(n.data(), int(n.size())) != 1) {
    fail(Code::system_error, "no random bytes from the system for an authentication nonce");
  }
  return n;
}

std::string randomHex(size_t bytes) {
  std::string raw(bytes, '\0');
  if (RAND_bytes(reinterpret_cast<unsigned char*>(raw.data()), int(bytes)) != 1) {
    fail(Code::system_error, "no random bytes from the system");
  }
  static const char* digits = "0123456789abcdef";
  std::string hex;
  for (unsigned char c : raw) {
    hex += digits[c >> 4];
    hex += digits[c & 15];
  }
  return hex;
}

std::string jobKey(std::string_view secret, std::string_view jobId) {
  if (!secret.empty()) return std::string(secret);
  return "gyre-job-without-secret:" + std::string(jobId);
}

Mac mac(const std::string& key, std::string_view label, std::string_view a, std::string_view b,
        std::string_view c) {
  if (key.empty()) fail(Code::internal, "authentication with an empty key (see auth::jobKey)");
  std::string message;
  message.reserve(label.size() + a.size() + b.size() + c.size() + 4);
  // Length-prefix each part so no two different inputs concatenate to the same bytes.
  for (std::string_view part : {label, a, b, c}) {
    const uint32_t n = uint32_t(part.size());
    message.append(reinterpret_cast<const char*>(&n), 4);
    message.append(part);
  }
  Mac out{};
  unsigned int length = 0;
  if (!HMAC(EVP_sha256(), reinterpret_cast<const unsigned char*>(key.data()), int(key.size()),
            reinterpret_cast<const unsigned char*>(message.data()), message.size(), out.data(),
            &length) ||
      length != out.size()) {
    fail(Code::internal, "HMAC-SHA256 failed");
  }
  return out;
}

bool equal(const Mac& x, const Mac& y) {
  return CRYPTO_memcmp(x.data(), y.data(), x.size()) == 0;
}

}  // namespace gyre::auth
