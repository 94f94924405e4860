// Pinned host memory that stream-ordered calls on CUDA buffers are staged through
// (Communicator::enqueueOnStream, docs/cuda.md), and the mapped words that release the
// streams waiting on host work. One per communicator, made on first use.
#pragma once

#include <cuda_runtime_api.h>

#include <atomic>
#include <chrono>
#include <cstddef>
#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "kernels/cuda/host_wait.h"

namespace gyre {

// "cudaErrorX (what it means)", for messages.
std::string cudaText(cudaError_t e);

// Polls `event` (CUDA events have no timed wait) until it completes, `deadline` passes or
// `abort` is set: cudaSuccess, the error the event's work ended with, or cudaErrorNotReady when
// cut short. Yields for the first 200 µs, then sleeps 20 µs between looks.
cudaError_t pollEvent(cudaEvent_t event, std::chrono::steady_clock::time_point deadline,
                      const std::atomic<bool>* abort = nullptr);

class CudaStaging {
 public:
  explicit CudaStaging(std::string who);
  // Waits (bounded) for the streams to finish with the staging memory, then frees it.
  ~CudaStaging();
  CudaStaging(const CudaStaging&) = delete;
  CudaStaging& operator=(const CudaStaging&) = delete;

  struct Block {
    std::byte* data = nullptr;
    size_t capacity = 0;
    cudaEvent_t released = nullptr;  // recorded on the stream after its last copy out
    bool used = false;               // `released` has been recorded at least once
    uint64_t lastUse = 0;            // the acquire that took it last
  };
  // A block of at least `bytes` that no stream still uses. With kMaxInFlight blocks that fit
  // in use, or past kSoftLimit pinned bytes, waits (until `timeout`) for the oldest of them
  // instead of pinning more (the worker runs one call at a time: deeper queues gain nothing,
  // and pinning costs about 0.6 ms per MiB); with none in use that fits, pins more. Blocks are kept
  // for reuse and freed only at destruction: freeing pinned memory synchronizes the device, which
  // could wait on a stream that waits on this very thread.
  Block& acquire(size_t bytes, std::chrono::milliseconds timeout);
  static constexpr size_t kSoftLimit = size_t(512) << 20;
  static constexpr size_t kMaxInFlight = 4;
  static constexpr size_t kMinBlock = size_t(64) << 10;

  // The mapped release words: `host` for the host's stores, `device` for the kernels.
  cuda::HostSignal* host() const { return signal_; }
  cuda::HostSignal* device() const { return deviceSignal_; }
  uint64_t nextTicket() { return ++tickets_; }
  // Enqueues on `stream` a wait until the host releases `ticket` (or fails): a stream memory
  // operation (cuStreamWaitValue64, waiting in the GPU's front end, no SM and no time slice
  // held) where the device has them, else the one-thread kernel of host_wait.h, which also
  // gives up after `limitNs`. GYRE_CUDA_WAIT=kernel|memop forces one (tests).
  cudaError_t enqueueWait(cudaStream_t stream, uint64_t ticket, uint64_t limitNs);
  const char* waitKind() const { return waitValue64_ ? "memop" : "kernel"; }
  // What `released` becomes when a call fails: past every ticket, in the wrap-safe order the
  // stream operation compares in.
  static constexpr uint64_t kReleaseAll = uint64_t(1) << 62;

  // Pinned bytes held (for diagnostics and the memory report).
  size_t pinnedBytes() const;

 private:
  std::string who_;
  cuda::HostSignal* signal_ = nullptr;
  cuda::HostSignal* deviceSignal_ = nullptr;
  uint64_t tickets_ = 0;
  uint64_t acquires_ = 0;
  void* waitValue64_ = nullptr;  // cuStreamWaitValue64, when the device supports it
  std::vector<std::unique_ptr<Block>> blocks_;
};

}  // namespace gyre
