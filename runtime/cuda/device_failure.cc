#include "runtime/cuda/device_failure.h"

#include <cstddef>
#include <cstring>
#include <sstream>

#include "link/link.h"

namespace gyre {

Status deviceFailureStatus(const DeviceFailure& f, const std::string& who,
                           std::chrono::milliseconds timeout) {
  const std::string what = who + ": " + describeOp(f.call);
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
      return {Code::invalid_usage, who + ": ranks disagree: this rank is in " + describeOp(f.call) +
                                       " but " + peer + " sent data for " + describeOp(f.seen) +
                                       " (" + std::to_string(f.seen.bytes) + " bytes where " +
                                       std::to_string(f.wantedBytes) + " were expected)"};
    default:
      return {Code::internal, what + ": the kernel's algorithm named a peer it has no link to, " +
                                  "or too many (failure code " + std::to_string(f.code) + ")"};
  }
}

}  // namespace gyre
