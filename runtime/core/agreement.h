// What every rank of a communicator must agree on, checked from the bootstrap's all-gather so
// that every rank, not only the one a handshake or a call would refuse, says what differed.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "runtime/core/config.h"

namespace gyre {

struct Agreement {
  int nranks = 0;  // -1: a rank of another gyre version
  uint32_t nSlots = 0;
  size_t slotBytes = 0;
  // What picks a call's algorithm: ranks that differ here run different plans of one call.
  std::string algorithm;   // GYRE_ALGO, "auto" when unset
  int channels = 0;        // GYRE_CHANNELS
  std::string netGbits;    // GYRE_NET_GBITS, as text: only ever compared
  std::string slotStores;  // GYRE_SLOT_STORES: it prices the slots where the CPUs sit far apart

  static Agreement of(const CommConfig& config);
  std::string encode() const;  // lines PeerInfo::decode skips
  static Agreement decode(const std::string& text);
  // Where rank `r`'s agreement differs from this rank's (`who`), what differs and which
  // setting to make equal; "" where they agree.
  std::string differenceFrom(const Agreement& theirs, int r, const std::string& who) const;
};

}  // namespace gyre
