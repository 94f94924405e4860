#include "runtime/core/agreement.h"

#include <sstream>

namespace gyre {

Agreement Agreement::of(const CommConfig& config) {
  Agreement a;
  a.nranks = config.nranks;
  a.nSlots = config.nSlots;
  a.slotBytes = config.slotBytes;
  a.algorithm = config.algorithm.empty() ? "auto" : config.algorithm;
  a.channels = config.channels;
  a.netGbits = std::to_string(config.netGbits);
  a.slotStores = slotStoresName(config.slotStores);
  return a;
}

std::string Agreement::encode() const {
  return "agree.nranks=" + std::to_string(nranks) + "\nagree.slots=" + std::to_string(nSlots) +
         "\nagree.slotBytes=" + std::to_string(slotBytes) + "\nagree.algorithm=" + algorithm +
         "\nagree.channels=" + std::to_string(channels) + "\nagree.netGbits=" + netGbits +
         "\nagree.slotStores=" + slotStores + "\n";
}

Agreement Agreement::decode(const std::string& text) {
  Agreement a;
  int found = 0;
  std::istringstream lines(text);
  std::string line;
  try {
    while (std::getline(lines, line)) {
      const auto eq = line.find('=');
      if (line.rfind("agree.", 0) != 0 || eq == std::string::npos) continue;
      const std::string key = line.substr(6, eq - 6), value = line.substr(eq + 1);
      if (key == "nranks")
        a.nranks = std::stoi(value);
      else if (key == "slots")
        a.nSlots = uint32_t(std::stoul(value));
      else if (key == "slotBytes")
        a.slotBytes = size_t(std::stoull(value));
      else if (key == "algorithm")
        a.algorithm = value;
      else if (key == "channels")
        a.channels = std::stoi(value);
      else if (key == "netGbits")
        a.netGbits = value;
      else if (key == "slotStores")
        a.slotStores = value;
      else
        continue;
      ++found;
    }
  } catch (const std::exception&) {
    found = 0;  // a number that is not one
  }
  if (found != 7) a.nranks = -1;
  return a;
}

std::string Agreement::differenceFrom(const Agreement& theirs, int r,
                                      const std::string& who) const {
  const std::string them = "rank " + std::to_string(r);
  if (theirs.nranks != nranks) {
    if (theirs.nranks < 0) return them + " runs another gyre version";
    return them + " says the communicator has " + std::to_string(theirs.nranks) + " ranks, " + who +
           " says " + std::to_string(nranks) +
           " (nranks / WORLD_SIZE must be the same on every rank)";
  }
  if (theirs.nSlots != nSlots || theirs.slotBytes != slotBytes) {
    return them + " has " + std::to_string(theirs.nSlots) + " slots of " +
           std::to_string(theirs.slotBytes) + " bytes per link, " + who + " has " +
           std::to_string(nSlots) + " of " + std::to_string(slotBytes) +
           " (GYRE_NSLOTS, GYRE_SLOT_BYTES or the config's slots must be the same on every rank)";
  }
  if (theirs.algorithm != algorithm) {
    return them + " has algorithm " + theirs.algorithm + ", " + who + " has " + algorithm +
           " (GYRE_ALGO or the config's algorithm must be the same on every rank)";
  }
  if (theirs.channels != channels) {
    return them + " has GYRE_CHANNELS=" + std::to_string(theirs.channels) + ", " + who + " has " +
           std::to_string(channels) + " (0: the tuner's choice; it must be the same " +
           "on every rank)";
  }
  if (theirs.netGbits != netGbits) {
    return them + " prices the network at " + theirs.netGbits + " Gbit/s, " + who + " at " +
           netGbits + " (GYRE_NET_GBITS must be the same on every rank)";
  }
  if (theirs.slotStores != slotStores) {
    return them + " has GYRE_SLOT_STORES=" + theirs.slotStores + ", " + who + " has " + slotStores +
           " (it prices the slots: it must be the same on every rank)";
  }
  return "";
}

}  // namespace gyre
