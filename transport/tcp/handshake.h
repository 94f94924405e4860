// The first bytes on every data-plane tcp connection; see docs/protocol.md.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace gyre::wire {

inline constexpr char kHelloMagic[4] = {'G', 'Y', 'R', 'D'};
inline constexpr char kChallengeMagic[4] = {'G', 'Y', 'R', 'C'};
inline constexpr char kProofMagic[4] = {'G', 'Y', 'R', 'P'};
inline constexpr char kAckMagic[4] = {'G', 'Y', 'R', 'A'};
inline constexpr uint16_t kProtocolVersion = 3;
// Hello.flags: after the Ack the dialler offers a shared-memory segment (docs/protocol.md).
inline constexpr uint16_t kFlagShmOffer = 1;
// Hello.flags: after the Ack the two sides exchange rdma queue pair addresses.
inline constexpr uint16_t kFlagRdmaOffer = 2;

struct Hello {
  char magic[4];
  uint16_t version;
  uint16_t flags;
  char jobId[32];
  int32_t fromRank;
  int32_t toRank;
  int32_t channel;
  int32_t nranks;
  uint32_t nSlots;
  uint32_t slotBytes;
  uint8_t nonce[16];
};
static_assert(sizeof(Hello) == 80, "wire format");

// Acceptor -> connector: its nonce and proof that it knows the secret.
struct Challenge {
  char magic[4];
  uint32_t reserved;
  uint8_t nonce[16];
  uint8_t mac[32];  // HMAC(secret, "gyre-accept", Hello, nonce)
};
static_assert(sizeof(Challenge) == 56, "wire format");

// Connector -> acceptor: proof that it knows the secret too.
struct Proof {
  char magic[4];
  uint32_t reserved;
  uint8_t mac[32];  // HMAC(secret, "gyre-connect", Hello, Challenge.nonce)
};
static_assert(sizeof(Proof) == 40, "wire format");

struct Ack {
  char magic[4];
  uint32_t status;  // 0 = accepted
};
static_assert(sizeof(Ack) == 8, "wire format");

inline void copyJobId(char (&dst)[32], const std::string& jobId) {
  std::memset(dst, 0, sizeof dst);
  std::memcpy(dst, jobId.data(), std::min(jobId.size(), sizeof dst));
}

inline std::string_view bytesOf(const void* p, size_t n) {
  return {static_cast<const char*>(p), n};
}

// Empty when acceptable for a receiver with these parameters, otherwise why not.
std::string checkHello(const Hello& h, const std::string& jobId, int selfRank, int nranks,
                       uint32_t nSlots, uint32_t slotBytes);

}  // namespace gyre::wire
