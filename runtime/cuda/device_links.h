// Stream-ordered collectives as one kernel over cuda_ipc links (docs/cuda.md § CUDA IPC): the
// communicator's device links, set up by a collective of their own on the first eligible call,
// and the launches over them. Built only with CUDA.
#pragma once

#include <cuda_runtime_api.h>

#include <memory>
#include <string>
#include <vector>

#include "algorithms/device_call.h"
#include "base/status.h"
#include "runtime/core/config.h"
#include "transport/cuda_ipc/ipc_memory.h"

namespace gyre {

class Communicator;
struct PeerInfo;

class DeviceLinks {
 public:
  static constexpr int kMaxChannels = 32;

  // Collective: every rank calls it at the same call. Returns null (and says why at INFO, or
  // as a warning where a rank failed) unless every rank mapped every peer's region.
  static std::unique_ptr<DeviceLinks> setUp(Communicator& comm, const std::vector<PeerInfo>& peers,
                                            const CommConfig& config);
  // Waits (bounded) for the last kernel, then unmaps and frees.
  ~DeviceLinks();

  // The caller checks failure() first (enqueueOnStream polls it into the poison).
  // Enqueues `call` (its links, failures, control, seq and timeout are filled in here) on
  // `stream`, after every earlier kernel of this communicator whatever its stream. While the
  // stream is `capturing` into a CUDA graph the kernel becomes a node of it, ordered by the
  // graph alone: replays must then be issued in the same order on every rank.
  Status launch(DeviceCall call, cudaStream_t stream, const std::string& who, bool capturing);
  // A kernel's failure, as a status naming the rank, the call and the peer; ok if none.
  Status failure(const std::string& who) const;
  void raiseAbort();
  int channels() const { return layout_.channels; }
  size_t deviceBytes() const { return layout_.regionBytes() + tableBytes_; }

 private:
  DeviceLinks() = default;

  int rank_ = 0;
  DeviceLinkLayout layout_{};
  std::chrono::milliseconds timeout_{0};
  IpcRegion region_;
  std::vector<std::unique_ptr<IpcMapping>> mappings_;  // by rank; null for self
  DeviceLink* table_ = nullptr;                        // device: send then recv
  size_t tableBytes_ = 0;
  DeviceFailure* failuresHost_ = nullptr;  // mapped pinned memory, kMaxChannels
  DeviceFailure* failuresDevice_ = nullptr;
  DeviceControl* controlHost_ = nullptr;
  DeviceControl* controlDevice_ = nullptr;
  cudaEvent_t lastKernel_ = nullptr;
  cudaStream_t lastStream_ = nullptr;
  bool launched_ = false;
  uint64_t seq_ = 0;
};

}  // namespace gyre
