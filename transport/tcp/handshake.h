// The first bytes on every data-plane tcp connection; see docs/protocol.md.
#pragma once

#include <cstdint>
#include <cstring>
#include <string>

namespace gyre::wire {

inline constexpr char kHelloMagic[4] = {'G', 'Y', 'R', 'D'};
inline constexpr char kAckMagic[4] = {'G', 'Y', 'R', 'A'};
inline constexpr uint16_t kProtocolVersion = 1;

struct Hello {
  char magic[4];
  uint16_t version;
  uint16_t reserved;
  char jobId[32];
  int32_t fromRank;
  int32_t toRank;
  int32_t channel;
  int32_t nranks;
  uint32_t nSlots;
  uint32_t slotBytes;
};
static_assert(sizeof(Hello) == 64, "wire format");

struct Ack {
  char magic[4];
  uint32_t status;  // 0 = accepted
};
static_assert(sizeof(Ack) == 8, "wire format");

inline void copyJobId(char (&dst)[32], const std::string& jobId) {
  std::memset(dst, 0, sizeof dst);
  std::memcpy(dst, jobId.data(), std::min(jobId.size(), sizeof dst));
}

// Empty when acceptable for a receiver with these parameters, otherwise why not.
std::string checkHello(const Hello& h, const std::string& jobId, int selfRank, int nranks,
                       uint32_t nSlots, uint32_t slotBytes);

}  // namespace gyre::wire
