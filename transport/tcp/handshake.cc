#include "transport/tcp/handshake.h"

namespace gyre::wire {

std::string checkHello(const Hello& h, const std::string& jobId, int selfRank, int nranks,
                       uint32_t nSlots, uint32_t slotBytes) {
  if (std::memcmp(h.magic, kHelloMagic, 4) != 0) return "bad magic (not a gyre peer)";
  if (h.version != kProtocolVersion) {
    return "protocol version " + std::to_string(h.version) + ", expected " +
           std::to_string(kProtocolVersion);
  }
  if (h.flags != 0 && h.flags != kFlagShmOffer && h.flags != kFlagRdmaOffer)
    return "unknown flags " + std::to_string(h.flags);
  char expected[32];
  copyJobId(expected, jobId);
  if (std::memcmp(h.jobId, expected, sizeof expected) != 0) return "different job id";
  if (h.toRank != selfRank) return "addressed to rank " + std::to_string(h.toRank);
  if (h.nranks != nranks) return "world size " + std::to_string(h.nranks);
  if (h.fromRank < 0 || h.fromRank >= nranks || h.fromRank == selfRank) {
    return "bad sender rank " + std::to_string(h.fromRank);
  }
  if (h.channel < 0 || h.channel > 1024) return "bad channel " + std::to_string(h.channel);
  if (h.nSlots != nSlots || h.slotBytes != slotBytes) {
    return "slot geometry " + std::to_string(h.nSlots) + "x" + std::to_string(h.slotBytes) +
           " differs from ours " + std::to_string(nSlots) + "x" + std::to_string(slotBytes);
  }
  return {};
}

}  // namespace gyre::wire
