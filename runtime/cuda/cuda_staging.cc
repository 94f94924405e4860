#include "runtime/cuda/cuda_staging.h"

#include <cuda.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <thread>

#include "base/log.h"
#include "base/status.h"

namespace gyre {

std::string cudaText(cudaError_t e) {
  return std::string(cudaGetErrorName(e)) + " (" + cudaGetErrorString(e) + ")";
}

cudaError_t pollEvent(cudaEvent_t event, std::chrono::steady_clock::time_point deadline,
                      const std::atomic<bool>* abort) {
  const auto start = std::chrono::steady_clock::now();
  while (true) {
    const cudaError_t e = cudaEventQuery(event);
    if (e != cudaErrorNotReady) return e;
    const auto now = std::chrono::steady_clock::now();
    if (now > deadline || (abort && abort->load())) return cudaErrorNotReady;
    if (now - start < std::chrono::microseconds(200)) {
      std::this_thread::yield();
    } else {
      std::this_thread::sleep_for(std::chrono::microseconds(20));
    }
  }
}

CudaStaging::CudaStaging(std::string who) : who_(std::move(who)) {
  if (cudaError_t e = cuda::loadWaitForHost(); e != cudaSuccess) {
    fail(Code::system_error, who_ + ": loading the stream-wait kernel: " + cudaText(e));
  }
  void* p = nullptr;
  if (cudaError_t e =
          cudaHostAlloc(&p, sizeof(cuda::HostSignal), cudaHostAllocMapped | cudaHostAllocPortable);
      e != cudaSuccess) {
    fail(Code::system_error, who_ + ": pinning memory for stream-ordered calls: " + cudaText(e));
  }
  std::memset(p, 0, sizeof(cuda::HostSignal));
  signal_ = static_cast<cuda::HostSignal*>(p);
  void* device = nullptr;
  if (cudaError_t e = cudaHostGetDevicePointer(&device, p, 0); e != cudaSuccess) {
    cudaFreeHost(p);
    fail(Code::system_error,
         who_ + ": mapping pinned memory for the device (stream-ordered calls): " + cudaText(e));
  }
  deviceSignal_ = static_cast<cuda::HostSignal*>(device);

  // Stream memory operations through the driver's entry points (no link against libcuda).
  const char* forced = std::getenv("GYRE_CUDA_WAIT");
  const std::string wait = forced ? forced : "";
  if (wait != "kernel") {
    void* getAttribute = nullptr;
    void* waitValue = nullptr;
    cudaDriverEntryPointQueryResult found{};
    int device = 0, supported = 0;
    if (cudaGetDevice(&device) == cudaSuccess &&
        cudaGetDriverEntryPointByVersion("cuDeviceGetAttribute", &getAttribute, 12000,
                                         cudaEnableDefault, &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess &&
        reinterpret_cast<CUresult (*)(int*, CUdevice_attribute, CUdevice)>(getAttribute)(
            &supported, CU_DEVICE_ATTRIBUTE_CAN_USE_64_BIT_STREAM_MEM_OPS, device) ==
            CUDA_SUCCESS &&
        supported &&
        cudaGetDriverEntryPointByVersion("cuStreamWaitValue64", &waitValue, 12000,
                                         cudaEnableDefault, &found) == cudaSuccess &&
        found == cudaDriverEntryPointSuccess) {
      waitValue64_ = waitValue;
    } else if (wait == "memop") {
      fail(Code::system_error, who_ +
                                   ": GYRE_CUDA_WAIT=memop, but the device has no 64-bit "
                                   "stream memory operations");
    }
  }
}

cudaError_t CudaStaging::enqueueWait(cudaStream_t stream, uint64_t ticket, uint64_t limitNs) {
  if (!waitValue64_) return cuda::waitForHost(deviceSignal_, ticket, limitNs, stream);
  using WaitValue64 = CUresult (*)(CUstream, CUdeviceptr, cuuint64_t, unsigned int);
  const CUresult r = reinterpret_cast<WaitValue64>(waitValue64_)(
      reinterpret_cast<CUstream>(stream), reinterpret_cast<CUdeviceptr>(&deviceSignal_->released),
      ticket, CU_STREAM_WAIT_VALUE_GEQ);
  return r == CUDA_SUCCESS ? cudaSuccess : cudaErrorUnknown;
}

CudaStaging::~CudaStaging() {
  // Streams let go of their blocks once the worker has released them (or after their own
  // deadline); memory a copy may still reach is left allocated rather than freed under it.
  const auto deadline = std::chrono::steady_clock::now() + std::chrono::seconds(30);
  bool allDone = true;
  for (auto& b : blocks_) {
    if (b->used && pollEvent(b->released, deadline) != cudaSuccess) {
      allDone = false;
      GYRE_LOG(warn, who_ + ": destroy: a CUDA stream still uses " + std::to_string(b->capacity) +
                         " B of staging; leaving it allocated");
      continue;
    }
    cudaEventDestroy(b->released);
    cudaFreeHost(b->data);
  }
  if (allDone) cudaFreeHost(signal_);
}

CudaStaging::Block& CudaStaging::acquire(size_t bytes, std::chrono::milliseconds timeout) {
  ++acquires_;
  Block* freeFit = nullptr;  // the smallest free block that fits
  Block* oldestBusy = nullptr;
  size_t busyFitting = 0;
  for (auto& b : blocks_) {
    if (b->capacity < bytes) continue;
    if (!b->used || cudaEventQuery(b->released) == cudaSuccess) {
      if (!freeFit || b->capacity < freeFit->capacity) freeFit = b.get();
    } else {
      ++busyFitting;
      if (!oldestBusy || b->lastUse < oldestBusy->lastUse) oldestBusy = b.get();
    }
  }
  if (!freeFit && oldestBusy && (busyFitting >= kMaxInFlight || pinnedBytes() >= kSoftLimit)) {
    // Earlier calls of this rank finish without this thread (peers, streams and the worker
    // move them), so waiting here cannot deadlock.
    if (pollEvent(oldestBusy->released, std::chrono::steady_clock::now() + timeout) !=
        cudaSuccess) {
      fail(Code::timeout, who_ + ": no pinned staging came free within " +
                              std::to_string(timeout.count()) +
                              " ms (an earlier stream-ordered "
                              "call has not finished)");
    }
    freeFit = oldestBusy;
  }
  if (freeFit) {
    freeFit->lastUse = acquires_;
    return *freeFit;
  }
  // Powers of two, so that growing sizes reuse blocks.
  size_t capacity = kMinBlock;
  while (capacity < bytes) capacity *= 2;
  auto block = std::make_unique<Block>();
  void* p = nullptr;
  if (cudaError_t e = cudaHostAlloc(&p, capacity, cudaHostAllocPortable); e != cudaSuccess) {
    fail(Code::system_error, who_ + ": pinning " + std::to_string(capacity) +
                                 " B of staging for a stream-ordered call: " + cudaText(e));
  }
  block->data = static_cast<std::byte*>(p);
  block->capacity = capacity;
  block->lastUse = acquires_;
  if (cudaError_t e = cudaEventCreateWithFlags(&block->released, cudaEventDisableTiming);
      e != cudaSuccess) {
    cudaFreeHost(p);
    fail(Code::system_error, who_ + ": creating an event: " + cudaText(e));
  }
  blocks_.push_back(std::move(block));
  return *blocks_.back();
}

size_t CudaStaging::pinnedBytes() const {
  size_t total = 0;
  for (const auto& b : blocks_) total += b->capacity;
  return total;
}

}  // namespace gyre
