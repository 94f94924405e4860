#include "runtime/device_failure.h"

#include <cstddef>
#include <cstring>
#include <sstream>

#include "transport/link.h"

namespace gyre {

// The device header is the host one, field for field (device_link.h cannot include link.h).
static_assert(sizeof(DeviceSlotMeta) == sizeof(SlotMeta) &&
                  offsetof(DeviceSlotMeta, root) == offsetof(SlotMeta, root) &&
                  offsetof(DeviceSlotMeta, seq) == offsetof(SlotMeta, seq) &&
                  offsetof(DeviceSlotMeta, count) == offsetof(SlotMeta, count),
              "DeviceSlotMeta and SlotMeta differ");

std::string describeDeviceOp(const DeviceSlotMeta& m) {
  SlotMeta s;
  std::memcpy(static_cast<void*>(&s), &m, sizeof s);
  return describeOp(s);
}

Status deviceFailureStatus(const DeviceFailure& f, const std::string& who,
                           std::chrono::milliseconds timeout) {
  const std::string what = who + ": " + describeDeviceOp(f.call);
  const std::string peer = "rank " + std::to_string(f.peer);
  switch (DeviceFailureCode(f.code)) {
    case DeviceFailureCode::none:
      return {};
    case DeviceFailureCode::timeout: {
      std::ostringstream secs;
      secs << std::chrono::duration<double>(timeout).count();
      return {Code::timeout,
              what + " timed out after " + secs.str() + " s in the kernel waiting for " +
                  (f.waitKind == uint32_t(DeviceWaitKind::data_from) ? "data from "
                                                                     : "buffer space at ") +
                  peer + " over cuda_ipc (channel " + std::to_string(f.channel) + ")"};
    }
    case DeviceFailureCode::aborted:
      return {Code::aborted, what + " aborted by gyreCommAbort"};
    case DeviceFailureCode::mismatch:
      return {Code::invalid_usage, who + ": ranks disagree: this rank is in " +
                                       describeDeviceOp(f.call) + " but " + peer +
                                       " sent data for " + describeDeviceOp(f.seen) + " (" +
                                       std::to_string(f.seen.bytes) + " bytes where " +
                                       std::to_string(f.wantedBytes) + " were expected)"};
    default:
      return {Code::internal, what + ": the kernel's algorithm named a peer it has no link to, " +
                                  "or too many (failure code " + std::to_string(f.code) + ")"};
  }
}

}  // namespace gyre
